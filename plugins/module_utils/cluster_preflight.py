# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The cluster preflight's judge: what the cluster stage needs of a Kubernetes cluster, from what was read.

``cluster_preflight`` (the module) reads the API server's version and served API groups, the nodes
and ``helm version`` once; everything here is a pure function of those reads and the role's
options, so every message is unit-tested and the role holds no Jinja logic. Every problem is
reported together, in the order a person fixes them: reach the API, the control plane's version,
the nodes, the kubelets, DRA, the collection's variables, Helm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.api_unreachable import unreachable_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dra import dra_problem, served_dra_version
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.openshift import is_openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.versions import version_at_least

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
REFUSED_REASON = "DRA gRPC deadlock after 30 idle minutes, kubernetes#133920, fixed in 1.34.2"
_SEMVER = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


@dataclass(frozen=True)
class NodeInfo:
    name: str
    kubelet_version: str
    control_plane: bool = False
    schedulable: bool = True


@dataclass(frozen=True)
class ClusterState:
    """What the module read. ``served`` is the APIGroupList (``GET /apis``) or group/version strings."""

    reachable: bool
    unreachable_reason: str = ""
    server_version: str = ""
    served: Any = ()
    nodes: Tuple[NodeInfo, ...] = ()
    nodes_error: str = ""
    helm_ok: bool = False
    helm_version: str = ""
    helm_error: str = ""


@dataclass(frozen=True)
class Policy:
    min_kubernetes_version: str = "1.32.0"
    refused_kubelet_versions: Tuple[str, ...] = ("1.34.0", "1.34.1")
    allow_refused_kubelet: bool = False
    dra_api_version: str = ""
    helm_binary: str = "helm"
    # helm install/upgrade --take-ownership (adopting a GPU Operator installed without Helm) came in 3.17
    min_helm_version: str = "3.17.0"


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """A Node (a dict as the API server sends it) -> what the preflight needs of it."""
    metadata = node.get("metadata") or {}
    node_status = node.get("status") or {}
    return NodeInfo(
        name=str(metadata.get("name") or ""),
        kubelet_version=str((node_status.get("nodeInfo") or {}).get("kubeletVersion") or ""),
        control_plane=CONTROL_PLANE_LABEL in (metadata.get("labels") or {}),
        schedulable=not bool((node.get("spec") or {}).get("unschedulable")),
    )


def semver(text: str) -> str:
    """The first major.minor.patch in ``text`` (``v1.34.2-eks-1`` -> ``1.34.2``), or ""."""
    found = _SEMVER.search(text or "")
    return found.group(0) if found else ""


def is_refused(kubelet_version: str, refused: Sequence[str]) -> bool:
    """Whether a kubelet version is one of ``refused`` (``v1.34.1`` and ``1.34.1+k3s1`` are; ``1.34.10`` is not)."""
    return any(re.match(rf"^v?{re.escape(version)}([^0-9.]|$)", kubelet_version) for version in refused)


def refused_nodes(state: ClusterState, policy: Policy) -> List[NodeInfo]:
    return [node for node in state.nodes if is_refused(node.kubelet_version, policy.refused_kubelet_versions)]


def old_nodes(state: ClusterState, policy: Policy) -> List[NodeInfo]:
    """Nodes whose kubelet is older than the floor, or whose version cannot be read."""
    return [
        node
        for node in state.nodes
        if not semver(node.kubelet_version)
        or not version_at_least(semver(node.kubelet_version), policy.min_kubernetes_version)
    ]


def _named(nodes: Sequence[NodeInfo]) -> str:
    return ", ".join(f"{node.name} ({node.kubelet_version})" for node in nodes)


def problems(state: ClusterState, policy: Policy, extra: Sequence[str] = ()) -> List[str]:
    """Every problem, one line each; ``extra`` (the variable check's) before Helm's.

    Raises ValueError when ``policy.min_kubernetes_version`` is not a version.
    """
    found: List[str] = []
    floor = policy.min_kubernetes_version
    if not state.reachable:
        found.append(unreachable_line(state.unreachable_reason))
    else:
        server = semver(state.server_version)
        if not server or not version_at_least(server, floor):
            found.append(
                f"the API server runs {state.server_version or '(version unknown)'}, older than {floor} required by "
                "the NVIDIA DRA driver 25.8.0; upgrade the control plane"
            )
        if state.nodes_error:
            found.append(f"cannot list nodes: {state.nodes_error}")
    old = old_nodes(state, policy)
    if old:
        found.append(f"kubelets older than {floor}: {_named(old)}; upgrade these nodes")
    refused = refused_nodes(state, policy)
    if refused and not policy.allow_refused_kubelet:
        found.append(
            f"kubelet {'/'.join(policy.refused_kubelet_versions)} is refused ({REFUSED_REASON}) on: {_named(refused)}; "
            "upgrade these kubelets to 1.34.2 or later, or set cluster_preflight_allow_refused_kubelet=true"
        )
    if state.reachable:
        dra = dra_problem(state.served, state.server_version, policy.dra_api_version)
        if dra:
            found.append(dra)
    found.extend(str(problem) for problem in extra)
    found.extend(helm_problems(state, policy))
    return [" ".join(problem.split()) for problem in found]


def helm_problems(state: ClusterState, policy: Policy) -> List[str]:
    """Helm missing, failing or older than the floor, with where to get it; [] when it will do."""
    install = (
        "install Helm (https://helm.sh/docs/intro/install/; the collection's execution environment carries it) "
        "or set gpu_fabric_helm_binary to its path"
    )
    if not state.helm_ok:
        return [
            f"Helm is not usable: `{policy.helm_binary} version` failed ({state.helm_error}); the cluster stage needs "
            f"Helm {policy.min_helm_version} or later on the controller: {install}"
        ]
    found = semver(state.helm_version)
    if found and not version_at_least(found, policy.min_helm_version):
        return [
            f"Helm is {state.helm_version} (`{policy.helm_binary}`), older than {policy.min_helm_version}, which the "
            f"cluster stage needs (--take-ownership of an existing GPU Operator); {install}"
        ]
    return []


def failure_message(found: Sequence[str]) -> str:
    return f"Cluster preflight found {len(found)} problem(s): " + " | ".join(found)


def openshift(state: ClusterState) -> bool:
    return state.reachable and is_openshift(state.served)


def dra_api_version(state: ClusterState) -> str:
    """The newest DRA group/version served (``resource.k8s.io/v1``), or "" (unreachable, or none served)."""
    return (served_dra_version(state.served) or "") if state.reachable else ""


def schedulable_control_plane(state: ClusterState) -> List[str]:
    """The control-plane nodes that take pods: where the DRA driver's controller can run."""
    return [node.name for node in state.nodes if node.control_plane and node.schedulable]


def refused_warning(state: ClusterState, policy: Policy) -> str:
    """The warning for refused kubelets that the options allow, or ""."""
    refused = refused_nodes(state, policy)
    if not refused or not policy.allow_refused_kubelet:
        return ""
    return (
        f"Proceeding on nodes with refused kubelets ({', '.join(node.name for node in refused)}) because "
        "cluster_preflight_allow_refused_kubelet is true; DRA claims on them can hang after 30 idle minutes."
    )


def summary(state: ClusterState) -> str:
    """The one line the role prints for a cluster that passed."""
    detected = "detected (security.openshift.io and config.openshift.io served)" if openshift(state) else "not detected"
    return (
        f"Kubernetes {state.server_version}, {len(state.nodes)} nodes, {dra_api_version(state) or 'no DRA API'} "
        f"served, {state.helm_version}; OpenShift {detected}"
    )
