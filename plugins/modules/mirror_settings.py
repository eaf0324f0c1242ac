#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mirror_settings
short_description: Point the images and downloads of the GPU stack at a site's mirror
version_added: 0.2.0
description:
  - Computes, from one registry prefix (O(registry)) and per-image overrides, the chart values that make the GPU
    Operator v25.10.0 (every operand and its NFD subchart) and the DRA driver 25.8.0 pull from the mirror, the
    mirrored form of other images (O(images)) and of an install manifest (O(manifest)), and the downloads
    (O(urls)) at a file mirror (O(download_mirror)).
  - The public registry host is replaced by O(registry) and the path kept
    (C(nvcr.io/nvidia/gpu-operator) becomes C(<registry>/nvidia/gpu-operator)); an override keyed by the public
    image without its tag wins.
  - Changes nothing; reads nothing from the cluster or the host. It runs on the controller, in the task's own
    process (an action plugin), so a role pays no module process for it, on a tray or for the cluster.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  registry:
    description: Registry prefix of the mirror (C(registry.example.com/mirror)); empty - images stay public.
    type: str
    default: ""
  image_overrides:
    description: Public image without tag -> mirrored image without tag, for images the prefix does not fit.
    type: dict
    default: {}
  pull_secrets:
    description: Names of the image pull Secrets the pods use (in their namespaces).
    type: list
    elements: str
    default: []
  download_mirror:
    description: Base URL of a file mirror keeping host and path (C(https://files.example.com/mirror)); empty - none.
    type: str
    default: ""
  images:
    description: Name -> image reference, returned mirrored in RV(images).
    type: dict
    default: {}
  urls:
    description: Name -> download URL, returned at the file mirror in RV(urls).
    type: dict
    default: {}
  charts:
    description: >-
      Name -> C({chart: <chart name>, repo_url: <HTTP or oci:// repository>, repo_name: <name for Helm>,
      authenticated: <bool>}); returned as RV(charts).
    type: dict
    default: {}
  gpu_operator_chart_version:
    description: >-
      The GPU Operator chart version whose image components RV(gpu_operator_values) moves (v26.7.0 has no
      C(operator.initContainer) nor C(kataManager) and adds C(kataSandboxDevicePlugin) and C(draDriver));
      empty - v25.10.0's.
    type: str
    default: ""
    version_added: 0.4.0
  dra_driver_image:
    description: >-
      The image the DRA driver chart pulls (its C(image.repository)) - V(nvcr.io/nvidia/k8s-dra-driver-gpu) for chart
      C(nvidia-dra-driver-gpu) 25.8.0, V(registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu) for
      C(dra-driver-nvidia-gpu) 0.4.
    type: str
    default: nvcr.io/nvidia/k8s-dra-driver-gpu
    version_added: 0.4.0
  manifest:
    description: An install manifest (multi-document YAML) whose pod templates are mirrored into RV(manifest_objects).
    type: str
    default: ""
requirements:
  - PyYAML >= 3.11 (for O(manifest))
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Compute the mirrored settings
  gpu_fabric.mnnvl.mirror_settings:
    registry: registry.example.com/mirror
    pull_secrets: [mirror-pull]
    images:
      nvbandwidth: ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163
  register: mirror

- name: Install the GPU Operator from the mirror
  kubernetes.core.helm:
    name: gpu-operator
    chart_ref: oci://registry.example.com/mirror/charts/gpu-operator
    release_namespace: gpu-operator
    values: "{{ mirror.gpu_operator_values }}"
"""

RETURN = r"""
gpu_operator_values:
  description: GPU Operator chart values (repository, image, imagePullSecrets of each component); empty without mirror.
  returned: always
  type: dict
dra_driver_values:
  description: DRA driver chart values (image.repository, imagePullSecrets); empty without mirror.
  returned: always
  type: dict
images:
  description: O(images), each at the mirror.
  returned: always
  type: dict
urls:
  description: O(urls), each at the file mirror.
  returned: always
  type: dict
charts:
  description: >-
    O(charts), each as C(chart_ref), C(chart_repo_url) (empty for none), C(registry_host) (an OCI registry to log in
    to, else empty) and C(repo_name) (a repository to add with its credentials, else empty).
  returned: always
  type: dict
manifest_objects:
  description: The objects of O(manifest), their pod templates' images at the mirror and the pull secrets added.
  returned: always
  type: list
  elements: dict
manifest_namespaces:
  description: The Namespace objects of RV(manifest_objects), to apply before the others.
  returned: always
  type: list
  elements: dict
manifest_namespaced:
  description: The other objects of RV(manifest_objects), in their order.
  returned: always
  type: list
  elements: dict
"""

import copy

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.mirror import SETTINGS_SPEC, settings


def build_module() -> AnsibleModule:
    return AnsibleModule(argument_spec=copy.deepcopy(SETTINGS_SPEC), supports_check_mode=True)


def main() -> None:
    """What runs where the action plugin of the same name does not (a direct module call, a test)."""
    module = build_module()
    try:
        module.exit_json(**settings(module.params))
    except ValueError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
