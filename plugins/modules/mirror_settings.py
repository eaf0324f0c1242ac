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
  - Changes nothing; reads nothing from the cluster.
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
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.mirror import (
    chart_source,
    dra_driver_values,
    gpu_operator_values,
    mirror_image,
    mirror_manifest,
    mirror_url,
)

try:
    import yaml
except ImportError:  # reported when a manifest is given
    yaml = None


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec=dict(
            registry=dict(type="str", default=""),
            image_overrides=dict(type="dict", default={}),
            pull_secrets=dict(type="list", elements="str", default=[], no_log=False),
            download_mirror=dict(type="str", default=""),
            images=dict(type="dict", default={}),
            urls=dict(type="dict", default={}),
            charts=dict(type="dict", default={}),
            manifest=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )


def main() -> None:
    module = build_module()
    p = module.params
    prefix, overrides, secrets = p["registry"], p["image_overrides"], p["pull_secrets"]
    objects = []
    if p["manifest"]:
        if yaml is None:
            module.fail_json(msg=missing_required_lib("PyYAML"))
        try:
            objects = mirror_manifest(yaml.safe_load_all(p["manifest"]), prefix, overrides, secrets)
        except yaml.YAMLError as exc:
            module.fail_json(msg=f"the manifest is not YAML: {str(exc).splitlines()[0]}")
    module.exit_json(
        changed=False,
        gpu_operator_values=gpu_operator_values(prefix, overrides, secrets),
        dra_driver_values=dra_driver_values(prefix, overrides, secrets),
        images={k: mirror_image(str(v or ""), prefix, overrides) for k, v in p["images"].items()},
        urls={k: mirror_url(str(v or ""), p["download_mirror"]) for k, v in p["urls"].items()},
        charts={
            k: chart_source(
                str(v.get("chart", "")),
                str(v.get("repo_url", "")),
                str(v.get("repo_name", "")),
                bool(v.get("authenticated", False)),
            )
            for k, v in p["charts"].items()
        },
        manifest_objects=objects,
    )


if __name__ == "__main__":
    main()
