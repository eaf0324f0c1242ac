#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: dra_driver_ready
short_description: Wait until the NVIDIA DRA driver serves ComputeDomains on every GPU node
version_added: 0.3.0
description:
  - Reads the GPU nodes (O(gpu_node_selector)), then waits until the driver's controller pod is Ready, a
    Ready kubelet-plugin pod runs on every GPU node, the O(device_classes) exist and every GPU node has a
    ResourceSlice of O(resource_slice_driver), in that order, in one module process.
  - Each failure names what is missing (the pods and their phases, the nodes, the DeviceClasses) and where
    to look.
  - A read that fails for a transient reason (429, a 5xx, no answer) is read again until the wait's deadline.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  namespace:
    description: The driver's namespace.
    type: str
    required: true
  gpu_node_selector:
    description: Label selector of the GPU nodes.
    type: str
    required: true
  dra_api_version:
    description: The DRA API the cluster serves (C(resource.k8s.io/v1), C(v1beta2) or C(v1beta1)).
    type: str
    required: true
  device_classes:
    description: The DeviceClasses the chart creates.
    type: list
    elements: str
    default: []
  resource_slice_driver:
    description: The driver name of the ResourceSlices each GPU node must have.
    type: str
    default: compute-domain.nvidia.com
  chart:
    description: The chart and version, for the messages.
    type: str
    default: nvidia-dra-driver-gpu
  release_name:
    description: The Helm release, for the messages.
    type: str
    default: nvidia-dra-driver-gpu
  wait_timeout:
    description: Seconds to wait for the controller and for the kubelet plugins.
    type: int
    default: 600
  slice_timeout:
    description: Seconds to wait for the ResourceSlices once the plugins are Ready.
    type: int
    default: 60
  wait_sleep:
    description: Seconds between two reads.
    type: int
    default: 5
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Wait for the DRA driver
  gpu_fabric.mnnvl.dra_driver_ready:
    namespace: nvidia-dra-driver-gpu
    gpu_node_selector: feature.node.kubernetes.io/pci-10de.present=true
    dra_api_version: resource.k8s.io/v1
    device_classes: [compute-domain-daemon.nvidia.com, compute-domain-default-channel.nvidia.com]
"""

RETURN = r"""
gpu_nodes:
  description: The GPU nodes, in name order.
  returned: always
  type: list
  elements: str
msg:
  description: One line with what is ready.
  returned: success
  type: str
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout_runner import (
    DraDriverWait,
    NotReady,
    cluster_lister,
    dra_driver_ready,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        namespace=dict(type="str", required=True),
        gpu_node_selector=dict(type="str", required=True),
        dra_api_version=dict(type="str", required=True),
        device_classes=dict(type="list", elements="str", default=[]),
        resource_slice_driver=dict(type="str", default="compute-domain.nvidia.com"),
        chart=dict(type="str", default="nvidia-dra-driver-gpu"),
        release_name=dict(type="str", default="nvidia-dra-driver-gpu"),
        wait_timeout=dict(type="int", default=600),
        slice_timeout=dict(type="int", default=60),
        wait_sleep=dict(type="int", default=5),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    wait = DraDriverWait.from_params(module.params)
    try:
        result = dra_driver_ready(lambda: cluster_lister(get_api_client(module=module)), wait)
    except NotReady as exc:
        module.fail_json(msg=exc.message, **exc.result)
    except CoreException as exc:
        module.fail_from_exception(exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
