#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_operator_ready
short_description: Wait until the NVIDIA GPU Operator's ClusterPolicy is ready
version_added: 0.2.0
description:
  - Reads the ClusterPolicies (C(nvidia.com/v1)) until the one the GPU Operator reconciles (O(name), else the
    oldest) has C(status.state=ready), the state the operator sets only when every enabled operand is ready.
  - The operator creates its operand DaemonSets after the Helm release is installed, so ready pods and
    C(nvidia.com/gpu) capacity do not show that the rollout is done; a C(dcgmExporter.serviceMonitor) without
    the Prometheus Operator's CRD, for one, keeps the state C(notReady) for ever.
  - On timeout it fails naming the state, the conditions (the C(Error) condition names the operator's states
    that are not ready) and the states seen while waiting.
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
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cluster_policy import PolicyTimeout, wait_ready
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    ResourceNotFoundError,
    api_error_text,
    list_all,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.olm import CLUSTER_POLICY_API_VERSION
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = dict(AUTH_ARG_SPEC)
    argument_spec.update(
        name=dict(type="str", default=""),
        wait_timeout=dict(type="int", default=900),
        wait_sleep=dict(type="int", default=5),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    params = module.params
    try:
        client = get_api_client(module=module)

        def policies() -> list:
            try:
                return list_all(client, CLUSTER_POLICY_API_VERSION, "ClusterPolicy")
            except ResourceNotFoundError:  # the CRD is not installed (yet)
                return []

        readiness = wait_ready(policies, params["wait_timeout"], params["name"], params["wait_sleep"])
    except PolicyTimeout as exc:
        module.fail_json(msg=exc.message, changed=False, **exc.readiness.to_dict())
    except CoreException as exc:
        module.fail_from_exception(exc)
    except DynamicApiError as exc:
        module.fail_json(msg=f"cannot read the ClusterPolicies: {api_error_text(exc)}")
    module.exit_json(changed=False, **readiness.to_dict())


if __name__ == "__main__":
    main()
