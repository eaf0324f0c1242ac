#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_preflight
short_description: Check a Kubernetes cluster before the GPU stack is installed, and report every problem at once
version_added: 0.3.0
description:
  - Reads, in one module process, what the cluster stage needs of a cluster - the API server's version (C(GET /version))
    and served API groups (C(GET /apis)), every node's kubelet version, C(helm version --short) - and judges them
    against the options.
  - Every problem is reported at once, in one line, with what to do about it; problems found elsewhere (the variable
    check of M(gpu_fabric.mnnvl.variable_check)) are passed in O(extra_problems) and reported with them.
  - An API server that cannot be reached is one of the problems, not a module failure of its own; a read that fails
    transiently (429, 5xx, no answer) is tried again for up to O(api_patience) seconds first.
  - Returns what later roles of the cluster stage need (the served DRA API version, whether the cluster is OpenShift,
    the schedulable control-plane nodes), so they need not read the cluster again.
  - Changes nothing; runs the same in check mode (Helm's version is read in check mode too).
  - The C(gpu_fabric.mnnvl.cluster_preflight) role calls it with its variables.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  min_kubernetes_version:
    description: Oldest API server and kubelet accepted.
    type: str
    default: 1.32.0
  refused_kubelet_versions:
    description: Kubelet versions refused (1.34.0 and 1.34.1 deadlock DRA plugins after 30 idle minutes).
    type: list
    elements: str
    default: [1.34.0, 1.34.1]
  allow_refused_kubelet:
    description: Turn the refusal of O(refused_kubelet_versions) into the RV(warning).
    type: bool
    default: false
  dra_api_version:
    description: The DRA group/version the cluster must serve (V(resource.k8s.io/v1)); empty accepts any of v1, v1beta2
      and v1beta1.
    type: str
    default: ""
  helm_binary:
    description: The Helm binary (a name on C(PATH) or a path) whose C(version --short) must succeed.
    type: str
    default: helm
  api_patience:
    description: Seconds a read that fails transiently is tried again before it counts as a problem.
    type: float
    default: 10
  extra_problems:
    description: Problems found before this check, reported before Helm's.
    type: list
    elements: str
    default: []
  fail_on_problems:
    description: Fail when a problem is found; with V(false) the problems are only returned.
    type: bool
    default: true
requirements:
  - kubernetes >= 24.2.0 (Python)
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Check the cluster before anything is installed
  gpu_fabric.mnnvl.cluster_preflight:
    min_kubernetes_version: "1.33.0"
    helm_binary: /usr/local/bin/helm
  register: cluster

- name: Use what it found
  ansible.builtin.debug:
    msg: "{{ cluster.summary }}; the DRA driver's controller can run on {{ cluster.schedulable_control_plane }}"
"""

RETURN = r"""
problems:
  description: Every problem found, one line each.
  returned: always
  type: list
  elements: str
reachable:
  description: Whether the API server answered.
  returned: always
  type: bool
server_version:
  description: The API server's C(gitVersion); empty when it was not reached.
  returned: always
  type: str
  sample: v1.34.4
dra_api_version:
  description: The newest DRA group/version the cluster serves; empty when it serves none.
  returned: always
  type: str
  sample: resource.k8s.io/v1
openshift:
  description: Whether the cluster serves both C(security.openshift.io) and C(config.openshift.io).
  returned: always
  type: bool
node_count:
  description: How many nodes the cluster has.
  returned: always
  type: int
refused_nodes:
  description: The nodes whose kubelet runs one of O(refused_kubelet_versions).
  returned: always
  type: list
  elements: str
schedulable_control_plane:
  description: The nodes labelled C(node-role.kubernetes.io/control-plane) that are not cordoned.
  returned: always
  type: list
  elements: str
helm_version:
  description: What C(helm version --short) printed; empty when it failed.
  returned: always
  type: str
  sample: v3.19.0+g3d8990f
warning:
  description: The warning for refused kubelets that O(allow_refused_kubelet) lets pass; empty otherwise.
  returned: always
  type: str
summary:
  description: One line on the cluster, for a report.
  returned: always
  type: str
  sample: Kubernetes v1.34.4, 5 nodes, resource.k8s.io/v1 served, v3.19.0+g3d8990f; OpenShift not detected
"""

import time
from typing import Any, Dict, List, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cluster_preflight import (
    ClusterState,
    Policy,
    dra_api_version,
    failure_message,
    node_info,
    openshift,
    problems,
    refused_nodes,
    refused_warning,
    schedulable_control_plane,
    summary,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    Urllib3Error,
    api_error_text,
    api_failure_text,
    api_retry,
    auth_argument_spec,
    json_page,
    list_all,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        min_kubernetes_version=dict(type="str", default="1.32.0"),
        refused_kubelet_versions=dict(type="list", elements="str", default=["1.34.0", "1.34.1"]),
        allow_refused_kubelet=dict(type="bool", default=False),
        dra_api_version=dict(type="str", default=""),
        helm_binary=dict(type="str", default="helm"),
        api_patience=dict(type="float", default=10.0),
        extra_problems=dict(type="list", elements="str", default=[]),
        fail_on_problems=dict(type="bool", default=True),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def read_helm(module: AnsibleK8SModule, binary: str) -> Tuple[bool, str, str]:
    """(usable, version, why not) of ``<binary> version --short``."""
    try:
        # AnsibleK8SModule wraps the AnsibleModule that runs commands
        rc, out, err = module._module.run_command([binary, "version", "--short"], handle_exceptions=False)
    except OSError as exc:  # not found, not executable
        return False, "", str(exc)
    if rc != 0:
        return False, "", " ".join((err or out or f"exit status {rc}").split())
    return True, out.strip(), ""


def read_cluster(module: AnsibleK8SModule, patience: float) -> Dict[str, Any]:
    """The API server's version, served groups and nodes, as ClusterState's fields."""
    started = time.monotonic()
    try:
        client = get_api_client(module=module)
    except CoreException as exc:  # no usable kubeconfig
        return dict(reachable=False, unreachable_reason=f"the kubeconfig does not load: {api_error_text(exc)}")
    except (
        DynamicApiError,
        Urllib3Error,
        ConnectionError,
        TimeoutError,
    ) as exc:  # the client's discovery on creation got no answer
        return dict(reachable=False, unreachable_reason=api_failure_text(exc, time.monotonic() - started))

    def read(path: str) -> Dict[str, Any]:  # the JSON body: /version has no kind for the client's model objects
        return json_page(api_retry(lambda: client.client.request("get", path, serialize=False), patience, 1.0))

    try:
        version = read("/version")
        served = read("/apis")
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:
        return dict(reachable=False, unreachable_reason=api_failure_text(exc, time.monotonic() - started))
    fields: Dict[str, Any] = dict(reachable=True, server_version=str(version.get("gitVersion") or ""), served=served)
    try:
        nodes: List[Dict[str, Any]] = api_retry(lambda: list_all(client, "v1", "Node"), patience, 1.0)
        fields["nodes"] = tuple(node_info(node) for node in nodes)
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:
        fields["nodes_error"] = api_failure_text(exc, time.monotonic() - started)
    return fields


def main() -> None:
    module = build_module()
    params = module.params
    helm_ok, helm_version, helm_error = read_helm(module, params["helm_binary"])
    state = ClusterState(
        helm_ok=helm_ok,
        helm_version=helm_version,
        helm_error=helm_error,
        **read_cluster(module, params["api_patience"]),
    )
    policy = Policy(
        min_kubernetes_version=params["min_kubernetes_version"],
        refused_kubelet_versions=tuple(params["refused_kubelet_versions"]),
        allow_refused_kubelet=params["allow_refused_kubelet"],
        dra_api_version=params["dra_api_version"],
        helm_binary=params["helm_binary"],
    )
    try:
        found = problems(state, policy, params["extra_problems"])
    except ValueError as exc:  # a version option that is not a version
        module.fail_json(msg=f"cluster_preflight: {exc}")
    result = dict(
        changed=False,
        problems=found,
        reachable=state.reachable,
        server_version=state.server_version,
        dra_api_version=dra_api_version(state),
        openshift=openshift(state),
        node_count=len(state.nodes),
        refused_nodes=[node.name for node in refused_nodes(state, policy)],
        schedulable_control_plane=schedulable_control_plane(state),
        helm_version=state.helm_version,
        warning=refused_warning(state, policy),
        summary=summary(state),
    )
    if found and params["fail_on_problems"]:
        module.fail_json(msg=failure_message(found), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
