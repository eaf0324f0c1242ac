#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_operator_install_info
short_description: Tell whether the NVIDIA GPU Operator was installed by OLM or is left to Helm
version_added: 0.3.0
description:
  - Reads the OLM Subscriptions (C(operators.coreos.com/v1alpha1), every namespace) and the ClusterPolicies
    (C(nvidia.com/v1)); a kind the cluster does not serve counts as none.
  - A Subscription for a GPU Operator package (O(packages)) and a ClusterPolicy - V(olm), the operator belongs to
    OLM (OpenShift's OperatorHub install) and must not be installed again with Helm.
  - A Subscription without a ClusterPolicy - V(olm_without_policy); no Subscription - V(helm).
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  packages:
    description: OLM package names of the GPU Operator.
    type: list
    elements: str
    default: [gpu-operator-certified, gpu-operator]
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Find out who installed the GPU Operator
  gpu_fabric.mnnvl.gpu_operator_install_info:
  register: install

- name: Install the chart unless OLM owns the operator
  kubernetes.core.helm:
    name: gpu-operator
    chart_ref: gpu-operator
    release_namespace: gpu-operator
  when: not install.managed_by_olm
"""

RETURN = r"""
owner:
  description: V(helm), V(olm) or V(olm_without_policy).
  returned: always
  type: str
  sample: olm
managed_by_olm:
  description: Whether a Subscription for the GPU Operator exists (the role then installs no Helm release).
  returned: always
  type: bool
message:
  description: One line saying who installed the operator, naming the Subscription and CSV.
  returned: always
  type: str
  sample: "GPU Operator installed by OLM (Subscription nvidia-gpu-operator/gpu-operator-certified, CSV
    gpu-operator-certified.v25.10.0); ClusterPolicy gpu-cluster-policy; the Helm release is not installed"
subscription:
  description: The Subscription (namespace, name, package, csv), or null.
  returned: always
  type: dict
cluster_policies:
  description: Names of the ClusterPolicies.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    api_error_text,
    list_served,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.olm import (
    CLUSTER_POLICY_API_VERSION,
    SUBSCRIPTION_API_VERSION,
    operator_install,
)
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = dict(AUTH_ARG_SPEC)
    argument_spec.update(packages=dict(type="list", elements="str", default=["gpu-operator-certified", "gpu-operator"]))
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    try:
        client = get_api_client(module=module)
        subscriptions = list_served(client, SUBSCRIPTION_API_VERSION, "Subscription")
        policies = list_served(client, CLUSTER_POLICY_API_VERSION, "ClusterPolicy")
    except CoreException as exc:
        module.fail_from_exception(exc)
    except DynamicApiError as exc:
        module.fail_json(msg=f"cannot list Subscriptions and ClusterPolicies: {api_error_text(exc)}")
    install = operator_install(subscriptions, policies, module.params["packages"])
    module.exit_json(changed=False, **install.to_dict())


if __name__ == "__main__":
    main()
