# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""cluster_preflight's judge: each problem's message, their order, the warning and what later roles get."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cluster_preflight import (
    ClusterState,
    NodeInfo,
    Policy,
    dra_api_version,
    failure_message,
    is_refused,
    node_info,
    openshift,
    problems,
    refused_warning,
    schedulable_control_plane,
    semver,
    summary,
)


def groups(*group_versions):
    """An APIGroupList (GET /apis) serving ``group_versions``."""
    by_group = {}
    for group_version in group_versions:
        by_group.setdefault(group_version.split("/")[0], []).append({"groupVersion": group_version})
    return {"kind": "APIGroupList", "groups": [{"name": g, "versions": v} for g, v in by_group.items()]}


DRA_V1 = groups("apps/v1", "resource.k8s.io/v1", "resource.k8s.io/v1beta2")
NODES = (
    NodeInfo("cp-0", "v1.34.4", control_plane=True),
    NodeInfo("gb200-r0-t0", "v1.34.4"),
    NodeInfo("gb200-r0-t1", "v1.34.4"),
)


def healthy(**changes):
    fields = dict(
        reachable=True,
        server_version="v1.34.4",
        served=DRA_V1,
        nodes=NODES,
        helm_ok=True,
        helm_version="v3.19.0+g3d8990f",
    )
    fields.update(changes)
    return ClusterState(**fields)


def test_a_healthy_cluster_has_no_problem_and_a_summary():
    state = healthy()
    assert problems(state, Policy()) == []
    assert summary(state) == (
        "Kubernetes v1.34.4, 3 nodes, resource.k8s.io/v1 served, v3.19.0+g3d8990f; OpenShift not detected"
    )
    assert dra_api_version(state) == "resource.k8s.io/v1"
    assert openshift(state) is False
    assert refused_warning(state, Policy()) == ""


def test_an_unreachable_api_is_one_problem_and_helm_still_counts():
    reason = "cannot reach the Kubernetes API at https://10.0.0.1:6443 for 10 s: connection refused"
    state = ClusterState(reachable=False, unreachable_reason=reason, helm_error="boom")
    found = problems(state, Policy(helm_binary="/opt/helm"))
    assert found == [
        f"{reason}; check that the API server runs and that the kubeconfig (gpu_fabric_kubeconfig, "
        "K8S_AUTH_KUBECONFIG) or the host options point at it, then run it again",
        "Helm is not usable: `/opt/helm version` failed (boom); the cluster stage needs Helm 3.17.0 or later on the"
        " controller: install Helm (https://helm.sh/docs/intro/install/; the collection's execution environment"
        " carries it) or set gpu_fabric_helm_binary to its path",
    ]
    assert dra_api_version(state) == "" and openshift(state) is False
    assert failure_message(found).startswith("Cluster preflight found 2 problem(s): cannot reach the Kubernetes API")
    assert " | Helm is not usable" in failure_message(found)


def test_a_helm_older_than_the_floor_is_named_with_what_to_do():
    found = problems(healthy(helm_version="v3.14.4+g81c902a"), Policy())
    assert found == [
        "Helm is v3.14.4+g81c902a (`helm`), older than 3.17.0, which the cluster stage needs (--take-ownership of an"
        " existing GPU Operator); install Helm (https://helm.sh/docs/intro/install/; the collection's execution"
        " environment carries it) or set gpu_fabric_helm_binary to its path"
    ]
    assert problems(healthy(helm_version="v3.17.0+g301108e"), Policy()) == []
    assert problems(healthy(helm_version="v4.0.1+g4b7e1b8"), Policy()) == []


def test_every_problem_is_reported_in_order():
    state = healthy(
        server_version="v1.31.9",
        served=groups("apps/v1"),
        nodes=(NodeInfo("cp-0", "v1.31.9"), NodeInfo("gb200-r0-t3", "v1.34.1"), NodeInfo("odd", "")),
        helm_ok=False,
        helm_error="[Errno 2] No such file or directory: 'helm'",
    )
    found = problems(
        state, Policy(), extra=["gpu_operator_value (did you mean gpu_operator_values?) is not a variable"]
    )
    assert [problem.split(" ")[0:3] for problem in found] == [
        ["the", "API", "server"],
        ["kubelets", "older", "than"],
        ["kubelet", "1.34.0/1.34.1", "is"],
        ["the", "API", "server"],
        ["gpu_operator_value", "(did", "you"],
        ["Helm", "is", "not"],
    ]
    assert found[0] == (
        "the API server runs v1.31.9, older than 1.32.0 required by the NVIDIA DRA driver 25.8.0; upgrade the control "
        "plane"
    )
    assert found[1] == "kubelets older than 1.32.0: cp-0 (v1.31.9), odd (); upgrade these nodes"
    assert found[2] == (
        "kubelet 1.34.0/1.34.1 is refused (DRA gRPC deadlock after 30 idle minutes, kubernetes#133920, fixed in "
        "1.34.2) on: gb200-r0-t3 (v1.34.1); upgrade these kubelets to 1.34.2 or later, or set "
        "cluster_preflight_allow_refused_kubelet=true"
    )
    assert found[3].startswith("the API server v1.31.9 serves no DRA API (resource.k8s.io/v1, ")
    assert all("\n" not in problem and "  " not in problem for problem in found)


def test_a_refused_kubelet_that_is_allowed_is_a_warning_naming_the_nodes():
    state = healthy(nodes=(*NODES, NodeInfo("gb200-r0-t3", "v1.34.0"), NodeInfo("gb200-r0-t4", "v1.34.1+k3s1")))
    policy = Policy(allow_refused_kubelet=True)
    assert problems(state, policy) == []
    assert refused_warning(state, policy) == (
        "Proceeding on nodes with refused kubelets (gb200-r0-t3, gb200-r0-t4) because "
        "cluster_preflight_allow_refused_kubelet is true; DRA claims on them can hang after 30 idle minutes."
    )
    assert len(problems(state, Policy())) == 1


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        *[("v1.34.1", True), ("1.34.0", True), ("v1.34.1+k3s1", True), ("v1.34.1-eks-113cf36", True)],
        *[("v1.34.10", False), ("v1.34.2", False), ("v1.34.1.1", False), ("v11.34.1", False), ("", False)],
    ],
)
def test_which_kubelet_versions_are_refused(version, refused):
    assert is_refused(version, ("1.34.0", "1.34.1")) is refused


def test_a_required_dra_version_that_is_not_served_names_the_one_that_is():
    found = problems(healthy(served=groups("resource.k8s.io/v1beta2")), Policy(dra_api_version="resource.k8s.io/v1"))
    assert len(found) == 1
    assert found[0].startswith("the API server v1.34.4 serves resource.k8s.io/v1beta2 but not resource.k8s.io/v1")


def test_nodes_that_could_not_be_listed_are_a_problem():
    found = problems(healthy(nodes=(), nodes_error="403 Forbidden: nodes is forbidden"), Policy())
    assert found == ["cannot list nodes: 403 Forbidden: nodes is forbidden"]


def test_openshift_and_the_schedulable_control_plane():
    served = groups("resource.k8s.io/v1", "security.openshift.io/v1", "config.openshift.io/v1")
    state = healthy(
        served=served,
        nodes=(NodeInfo("cp-0", "v1.34.4", control_plane=True), NodeInfo("cp-1", "v1.34.4", True, schedulable=False)),
    )
    assert openshift(state) is True
    assert summary(state).endswith("; OpenShift detected (security.openshift.io and config.openshift.io served)")
    assert schedulable_control_plane(state) == ["cp-0"]


def test_node_info_reads_a_node_as_the_api_server_sends_it():
    node = {
        "metadata": {"name": "cp-0", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"unschedulable": True},
        "status": {"nodeInfo": {"kubeletVersion": "v1.34.4"}},
    }
    assert node_info(node) == NodeInfo("cp-0", "v1.34.4", control_plane=True, schedulable=False)
    assert node_info({"metadata": {"name": "bare"}}) == NodeInfo("bare", "", control_plane=False, schedulable=True)


def test_semver_and_a_floor_that_is_not_a_version():
    assert semver("v1.34.2-eks-1") == "1.34.2" and semver("v1.34") == ""
    with pytest.raises(ValueError):
        problems(healthy(), Policy(min_kubernetes_version="latest"))
