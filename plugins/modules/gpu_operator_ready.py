#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_operator_ready
short_description: Wait until the NVIDIA GPU Operator's ClusterPolicy, pods and GPU nodes are ready
version_added: 0.2.0
description:
  - Reads the ClusterPolicies (C(nvidia.com/v1)) until the one the GPU Operator reconciles (O(name), else the
    oldest) has C(status.state=ready), the state the operator sets only when every enabled operand is ready.
  - The operator creates its operand DaemonSets after the Helm release is installed, so ready pods and
    C(nvidia.com/gpu) capacity do not show that the rollout is done; a C(dcgmExporter.serviceMonitor) without
    the Prometheus Operator's CRD, for one, keeps the state C(notReady) for ever.
  - On timeout it fails naming the state, the conditions (the C(Error) condition names the operator's states
    that are not ready) and the states seen while waiting.
  - Then, each with its own O(wait_timeout), it waits until every pod of O(pods_namespace) is Ready (or
    Succeeded) and every node of O(gpu_node_selector) reports C(nvidia.com/gpu) capacity, and fails naming
    the pods or nodes that are not. One module process does the three waits of the role.
  - A read that fails for a transient reason (429, a 5xx, no answer) is read again until the wait's deadline.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  name:
    description: The ClusterPolicy; empty for the one the operator reconciles (the oldest).
    type: str
    default: ""
  wait_timeout:
    description: Seconds to wait for C(ready).
    type: int
    default: 900
  wait_sleep:
    description: Seconds between two reads.
    type: int
    default: 5
  pods_namespace:
    description: The namespace of the operator and its operands, whose pods must all be Ready; empty to skip.
    type: str
    default: ""
    version_added: 0.3.0
  gpu_node_selector:
    description: Label selector of the GPU nodes, each of which must report C(nvidia.com/gpu) capacity; empty to skip.
    type: str
    default: ""
    version_added: 0.3.0
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Wait for the GPU Operator's operands
  gpu_fabric.mnnvl.gpu_operator_ready:
    wait_timeout: 900
    pods_namespace: gpu-operator
    gpu_node_selector: feature.node.kubernetes.io/pci-10de.present=true
"""

RETURN = r"""
ready:
  description: Whether the ClusterPolicy reached C(ready).
  returned: always
  type: bool
name:
  description: The ClusterPolicy judged.
  returned: always
  type: str
  sample: cluster-policy
state:
  description: Its C(status.state) (C(ready), C(notReady), C(ignored); empty before the operator wrote one).
  returned: always
  type: str
  sample: ready
conditions:
  description: Its conditions, each C(Type=Status (Reason) message).
  returned: always
  type: list
  elements: str
summary:
  description: One line with the name, state and conditions.
  returned: always
  type: str
gpus_per_node:
  description: C(nvidia.com/gpu) capacity of each GPU node (empty when O(gpu_node_selector) is).
  returned: always
  type: dict
  sample: {"gb200-r0-t0": 4, "gb200-r0-t1": 4}
pods:
  description: How many pods of O(pods_namespace) were read (0 when it is empty).
  returned: always
  type: int
msg:
  description: The GPU nodes and their GPUs, one line.
  returned: success
  type: str
  sample: "2 GPU nodes: gb200-r0-t0=4, gb200-r0-t1=4"
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout_runner import (
    GpuOperatorWait,
    NotReady,
    cluster_lister,
    gpu_operator_ready,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        name=dict(type="str", default=""),
        wait_timeout=dict(type="int", default=900),
        wait_sleep=dict(type="int", default=5),
        pods_namespace=dict(type="str", default=""),
        gpu_node_selector=dict(type="str", default=""),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    wait = GpuOperatorWait.from_params(module.params)
    try:
        result = gpu_operator_ready(lambda: cluster_lister(get_api_client(module=module)), wait)
    except NotReady as exc:
        module.fail_json(msg=exc.message, **exc.result)
    except CoreException as exc:
        module.fail_from_exception(exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
