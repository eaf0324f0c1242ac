#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_operator_install_info
short_description: Tell whether the NVIDIA GPU Operator was installed by OLM or is left to Helm
version_added: 0.2.0
description:
  - Reads the OLM Subscriptions (C(operators.coreos.com/v1alpha1), every namespace) and the ClusterPolicies
    (C(nvidia.com/v1)); a kind the cluster does not serve counts as none.
  - A Subscription for a GPU Operator package (O(packages)) and a ClusterPolicy - V(olm), the operator belongs to
    OLM (OpenShift's OperatorHub install) and must not be installed again with Helm.
  - A Subscription without a ClusterPolicy - V(olm_without_policy); no Subscription - V(helm).
  - With O(release_name), also tells whether a GPU Operator that this collection did not install is there
    (RV(existing)) - another Helm release owns the ClusterPolicy (its C(meta.helm.sh/release-*) annotations), a
    ClusterPolicy without a release, or values the site set on the collection's release that an upgrade would
    replace; and what to do about it (O(on_existing)). Read from the Helm release Secrets; nothing changes.
  - Also tells whether the Prometheus Operator's C(monitoring.coreos.com/v1) C(ServiceMonitor) is served (the
    GPU Operator's C(dcgmExporter.serviceMonitor) needs it).
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
  release_name:
    description: The collection's release name; empty - RV(existing) is not computed.
    type: str
    default: ""
  release_namespace:
    description: The collection's release namespace.
    type: str
    default: gpu-operator
  wanted_values:
    description: The values the collection installs the chart with.
    type: dict
    default: {}
  on_existing:
    description:
      - What to do about a GPU Operator that this collection did not install.
      - V(fail) - say what was found and change nothing; V(adopt) - manage the found release (its values kept
        under the collection's) or take over an unmanaged one; V(skip) - leave it, skip the role.
    type: str
    choices: [fail, adopt, skip]
    default: fail
  service_monitor:
    description:
      - The wanted C(dcgmExporter.serviceMonitor.enabled), returned as RV(service_monitor_enabled) - V(auto) is
        true only when C(monitoring.coreos.com/v1) C(ServiceMonitor) is served.
    type: str
    choices: [auto, "true", "false"]
    default: auto
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
existing:
  description: >-
    With O(release_name): C(kind) (V(none), V(ours), V(foreign_release), V(unmanaged), V(site_values)), C(action)
    (V(install), V(adopt), V(skip), V(fail)), C(release_name) and C(release_namespace) to install or upgrade,
    C(values) (the collection's, with the adopted release's under them), C(take_ownership), C(site_values)
    (dotted keys an upgrade would replace) and C(message) (one line).
  returned: when O(release_name) is set
  type: dict
  sample:
    kind: foreign_release
    action: fail
    message: "the GPU Operator is already installed by Helm release nvidia/gpu-op (ClusterPolicy cluster-policy), not by
      this collection's gpu-operator/gpu-operator; set gpu_operator_on_existing to adopt (manage it, its values kept
      under the collection's), skip (leave it, skip the role) or fail. Nothing was changed."
service_monitor_served:
  description: Whether the API server serves C(monitoring.coreos.com/v1) C(ServiceMonitor).
  returned: always
  type: bool
service_monitor_enabled:
  description: >-
    The C(dcgmExporter.serviceMonitor.enabled) to install - the one O(wanted_values) sets, where that is a
    boolean, else from O(service_monitor).
  returned: always
  type: bool
effective_values:
  description: >-
    O(wanted_values) with a C(dcgmExporter.serviceMonitor.enabled) of V(auto), V(true) or V(false) (a string)
    made the boolean to install.
  returned: always
  type: dict
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cluster_policy import (
    SERVICE_MONITOR_GROUP_VERSION,
    resolve_service_monitor,
    service_monitor_wanted,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.existing_install import (
    decide,
    helm_release_values,
    latest_deployed,
    owning_release,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    api_error_text,
    auth_argument_spec,
    first_served_resource,
    list_served,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.olm import (
    CLUSTER_POLICY_API_VERSION,
    SUBSCRIPTION_API_VERSION,
    operator_install,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        packages=dict(type="list", elements="str", default=["gpu-operator-certified", "gpu-operator"]),
        release_name=dict(type="str", default=""),
        release_namespace=dict(type="str", default="gpu-operator"),
        wanted_values=dict(type="dict", default={}),
        on_existing=dict(type="str", choices=["fail", "adopt", "skip"], default="fail"),
        service_monitor=dict(type="str", choices=["auto", "true", "false"], default="auto"),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    try:
        client = get_api_client(module=module)
        subscriptions = list_served(client, SUBSCRIPTION_API_VERSION, "Subscription")
        policies = list_served(client, CLUSTER_POLICY_API_VERSION, "ClusterPolicy")
        monitors = first_served_resource(client, "ServiceMonitor", [SERVICE_MONITOR_GROUP_VERSION]) is not None
    except CoreException as exc:
        module.fail_from_exception(exc)
    except DynamicApiError as exc:
        module.fail_json(msg=f"cannot list Subscriptions and ClusterPolicies: {api_error_text(exc)}")
    install = operator_install(subscriptions, policies, module.params["packages"])
    result = install.to_dict()
    params = module.params
    try:
        wanted = resolve_service_monitor(params["wanted_values"], monitors)
        enabled = service_monitor_wanted(params["service_monitor"], monitors)
    except ValueError as exc:
        module.fail_json(msg=f"gpu_operator_service_monitor: {exc}")
    enabled = ((wanted.get("dcgmExporter") or {}).get("serviceMonitor") or {}).get("enabled", enabled)
    result.update(service_monitor_served=monitors, service_monitor_enabled=enabled, effective_values=wanted)
    if params["release_name"] and not result["managed_by_olm"]:
        try:
            ours = release_values(client, params["release_name"], params["release_namespace"])
            owners = sorted(
                {o for o in map(owning_release, policies) if o}
                - {(params["release_name"], params["release_namespace"])}
            )
            found = release_values(client, *owners[0]) if owners else None
        except DynamicApiError as exc:
            module.fail_json(msg=f"cannot read the Helm release Secrets: {api_error_text(exc)}")
        existing = decide(
            policies,
            params["release_name"],
            params["release_namespace"],
            ours,
            wanted,
            params["on_existing"],
            found,
        )
        result["existing"] = existing.to_dict()
    module.exit_json(changed=False, **result)


def release_values(client, name: str, namespace: str):
    """The user-supplied values of the deployed revision of a Helm release, or None when it has none."""
    secrets = list_served(client, "v1", "Secret", label_selector=f"owner=helm,name={name}", namespace=namespace)
    secret = latest_deployed(secrets)
    return None if secret is None else helm_release_values(secret)


if __name__ == "__main__":
    main()
