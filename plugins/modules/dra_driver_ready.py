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

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    Urllib3Error,
    auth_argument_spec,
    list_all,
    natural_key,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_verdict import error_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import (
    CONTROLLER_SELECTOR,
    PLUGIN_SELECTOR,
    WaitTimeout,
    controller_message,
    device_class_message,
    dra_summary,
    is_ready,
    missing,
    plugin_message,
    poll,
    ready_pod_nodes,
    slice_message,
    slice_nodes,
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
    p = module.params
    namespace, timeout, sleep = p["namespace"], p["wait_timeout"], p["wait_sleep"]
    nodes: list = []
    try:
        client = get_api_client(module=module)

        def pods(selector: str):
            return lambda: list_all(client, "v1", "Pod", namespace=namespace, label_selector=selector)

        found = poll(
            lambda: list_all(client, "v1", "Node", label_selector=p["gpu_node_selector"]),
            lambda _: True,
            timeout,
            sleep,
        )
        nodes = sorted((node["metadata"]["name"] for node in found), key=natural_key)
        try:
            poll(pods(CONTROLLER_SELECTOR), lambda found: any(is_ready(pod) for pod in found), timeout, sleep)
        except WaitTimeout as exc:
            module.fail_json(msg=controller_message(namespace, timeout, exc.last), gpu_nodes=nodes)
        try:
            poll(pods(PLUGIN_SELECTOR), lambda found: not missing(nodes, ready_pod_nodes(found)), timeout, sleep)
        except WaitTimeout as exc:
            module.fail_json(
                msg=plugin_message(namespace, timeout, missing(nodes, ready_pod_nodes(exc.last))), gpu_nodes=nodes
            )
        classes = poll(lambda: list_all(client, p["dra_api_version"], "DeviceClass"), lambda _: True, timeout, sleep)
        absent = missing(p["device_classes"], (item["metadata"]["name"] for item in classes))
        if absent:
            module.fail_json(
                msg=device_class_message(absent, p["chart"], namespace, p["release_name"]), gpu_nodes=nodes
            )
        driver = p["resource_slice_driver"]
        try:
            poll(
                lambda: list_all(client, p["dra_api_version"], "ResourceSlice"),
                lambda found: not missing(nodes, slice_nodes(found, driver)),
                p["slice_timeout"],
                sleep,
            )
        except WaitTimeout as exc:
            module.fail_json(
                msg=slice_message(driver, missing(nodes, slice_nodes(exc.last, driver)), namespace), gpu_nodes=nodes
            )
    except CoreException as exc:
        module.fail_from_exception(exc)
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:  # refused, or no answer in time
        module.fail_json(msg=f"cannot read the DRA driver's rollout: {error_line(exc)}", gpu_nodes=nodes)
    module.exit_json(
        changed=False,
        gpu_nodes=nodes,
        msg=dra_summary(p["chart"], nodes, p["device_classes"], p["dra_api_version"]),
    )


if __name__ == "__main__":
    main()
