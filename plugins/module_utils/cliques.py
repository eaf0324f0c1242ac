# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Group Kubernetes nodes by their NVLink clique and check the grouping against expectations.

GPU Feature Discovery labels every node whose GPUs are fabric-attached with
``nvidia.com/gpu.clique=<clusterUUID>.<cliqueId>`` (one NVLink partition, e.g. one GB200 NVL72 rack);
it sets no label when the fabric is not ``Completed``/``Success`` or the GPUs disagree. A GPU node
without the label therefore cannot join a multi-node NVLink workload, and nodes of one rack with
different values are split across partitions.

Nodes are plain dicts shaped like Kubernetes Node objects (``metadata.name``, ``metadata.labels``,
``status.capacity``), as ``kubernetes.core.k8s_info`` returns them in ``resources`` or as the
kubernetes client's ``to_dict()`` gives them. Pure functions, standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

CLIQUE_LABEL = "nvidia.com/gpu.clique"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_RESOURCE = "nvidia.com/gpu"
UNLABELLED_KEY = "_unlabelled"

# <ClusterUUID>.<CliqueId>: a canonical UUID and a decimal clique id, e.g.
# 69a19a31-f41c-45a5-8245-579b6bce5bdd.32766
_CLIQUE_VALUE_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.\d+$")


@dataclass
class CliqueGrouping:
    """Nodes sorted into cliques.

    ``groups``: clique value -> sorted node names. ``unlabelled_gpu_nodes``: GPU nodes (label
    ``nvidia.com/gpu.present=true`` or ``nvidia.com/gpu`` capacity above 0) without a clique label.
    ``non_gpu_nodes``: the other nodes (control plane, CPU workers). ``malformed``: node name -> a
    clique value that is not ``<uuid>.<integer>`` (such nodes are still grouped under that value).
    """

    groups: Dict[str, List[str]] = field(default_factory=dict)
    unlabelled_gpu_nodes: List[str] = field(default_factory=list)
    non_gpu_nodes: List[str] = field(default_factory=list)
    malformed: Dict[str, str] = field(default_factory=dict)

    def clique_of(self) -> Dict[str, str]:
        """node name -> clique value, for labelled nodes."""
        return {node: clique for clique, nodes in self.groups.items() for node in nodes}

    def to_dict(self) -> Dict[str, Any]:
        return {
            "groups": {clique: list(nodes) for clique, nodes in self.groups.items()},
            "unlabelled_gpu_nodes": list(self.unlabelled_gpu_nodes),
            "non_gpu_nodes": list(self.non_gpu_nodes),
            "malformed": dict(self.malformed),
        }


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def node_name(node: Mapping[str, Any]) -> str:
    """The node's ``metadata.name``; a node without one is refused (it cannot be a Node object)."""
    name = _get(node, "metadata", "name")
    if not name or not isinstance(name, str):
        raise ValueError(f"not a Kubernetes Node object (no metadata.name): {str(node)[:120]!r}")
    return name


def node_labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The node's ``metadata.labels`` (empty when absent); labels that are no mapping are refused."""
    labels = _get(node, "metadata", "labels")
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise ValueError(
            f"node {node_name(node)} is not a Kubernetes Node object: metadata.labels is "
            f"{type(labels).__name__}, not a mapping"
        )
    return labels


def gpu_count(node: Mapping[str, Any]) -> int:
    """``nvidia.com/gpu`` from ``status.capacity`` (else ``allocatable``), 0 when absent or unreadable."""
    for source in ("capacity", "allocatable"):
        value = _get(node, "status", source, GPU_RESOURCE)
        if value is None:
            continue
        try:
            return int(str(value))
        except ValueError:
            return 0
    return 0


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """A GPU node: label ``nvidia.com/gpu.present=true``, ``nvidia.com/gpu`` capacity, or a clique label."""
    labels = node_labels(node)
    if str(labels.get(GPU_PRESENT_LABEL, "")).lower() == "true":
        return True
    if labels.get(CLIQUE_LABEL):
        return True
    return gpu_count(node) > 0


# The nodes whose metadata cannot tell whether they hold GPUs: without nvidia.com/gpu.present=true only
# their nvidia.com/gpu capacity can (GPU Feature Discovery sets the label on every GPU node it runs on).
NEEDS_STATUS_SELECTOR = f"{GPU_PRESENT_LABEL}!=true"


def read_nodes_for_grouping(
    list_nodes: Callable[[Optional[str], bool], List[Dict[str, Any]]], label_selector: Optional[str] = None
) -> List[Dict[str, Any]]:
    """Every node the grouping needs, reading whole Node objects only where the labels are not enough.

    ``list_nodes(selector, metadata_only)`` lists the nodes matching ``selector``: with
    ``metadata_only`` as ``PartialObjectMetadata`` (names and labels, no status), otherwise whole.
    The GPU nodes of a fleet carry ``nvidia.com/gpu.present=true``, so their status (conditions,
    images, node info: most of a Node's bytes) is never read; the others (control plane, CPU
    workers, a GPU node GPU Feature Discovery has not labelled) are read whole, so that their
    ``nvidia.com/gpu`` capacity still counts. A node created between the two lists is kept.
    """
    nodes = list_nodes(label_selector, True)
    selector = ",".join(part for part in (label_selector, NEEDS_STATUS_SELECTOR) if part)
    whole = {node_name(node): node for node in list_nodes(selector, False)}
    merged = [whole.pop(node_name(node), node) for node in nodes]
    return merged + list(whole.values())


def clique_label(node: Mapping[str, Any], label: str = CLIQUE_LABEL) -> Optional[str]:
    """The node's clique value, or None when the label is absent or empty."""
    value = node_labels(node).get(label)
    return str(value) if value else None


def is_valid_clique_value(value: str) -> bool:
    """Whether ``value`` reads ``<clusterUUID>.<cliqueId>`` as GPU Feature Discovery writes it."""
    return bool(_CLIQUE_VALUE_RE.fullmatch(value))


def group_nodes_by_clique(nodes: Sequence[Mapping[str, Any]], label: str = CLIQUE_LABEL) -> CliqueGrouping:
    """Sort ``nodes`` into cliques by their ``label`` value (default ``nvidia.com/gpu.clique``).

    Returns a :class:`CliqueGrouping` whose groups and lists hold node names, sorted. Raises
    ``ValueError`` for an element that is not a Node object (no ``metadata.name``).
    """
    grouping = CliqueGrouping()
    for node in nodes:
        name = node_name(node)
        value = clique_label(node, label)
        if value is not None:
            grouping.groups.setdefault(value, []).append(name)
            if not is_valid_clique_value(value):
                grouping.malformed[name] = value
        elif is_gpu_node(node):
            grouping.unlabelled_gpu_nodes.append(name)
        else:
            grouping.non_gpu_nodes.append(name)
    grouping.groups = {clique: sorted(members) for clique, members in sorted(grouping.groups.items())}
    grouping.unlabelled_gpu_nodes.sort()
    grouping.non_gpu_nodes.sort()
    return grouping


def unlabelled_message(node: str) -> str:
    """What a GPU node without a clique label means, and what to check."""
    return (
        f"GPU node {node} has no {CLIQUE_LABEL} label: its GPUs are not fabric-attached or GPU Feature Discovery "
        "has not labelled it; check 'nvidia-smi -q' Fabric State/Status (Completed/Success) and the GFD pod"
    )


def _shown(value: str) -> str:
    """A label value as a message shows it: quoted when it holds a newline or another unprintable character."""
    return value if value.isprintable() else repr(value)


def check_clique_expectations(
    grouping: CliqueGrouping,
    expected_cliques: Optional[Union[int, Sequence[str]]] = None,
    nodes_per_clique: Optional[int] = None,
    racks: Optional[Mapping[str, Sequence[str]]] = None,
) -> List[str]:
    """Every way ``grouping`` misses the expectations, one actionable line each (empty: all met).

    Always checked: every GPU node carries a clique label, and every clique value reads
    ``<clusterUUID>.<cliqueId>``. ``expected_cliques``: the number of cliques, or the exact list of
    clique values. ``nodes_per_clique``: the node count of every clique (18 for a full GB200 NVL72
    rack of compute trays). ``racks``: rack name -> node names that must share one clique (one
    NVLink domain per rack); each node must exist and be labelled.
    """
    violations: List[str] = [unlabelled_message(node) for node in grouping.unlabelled_gpu_nodes]
    for node, value in sorted(grouping.malformed.items()):
        violations.append(
            f"node {node} has {CLIQUE_LABEL}={_shown(value)}, expected <clusterUUID>.<cliqueId> "
            "(e.g. 69a19a31-f41c-45a5-8245-579b6bce5bdd.32766); the label was not set by GPU Feature Discovery"
        )

    found = sorted(grouping.groups)
    if isinstance(expected_cliques, int) and not isinstance(expected_cliques, bool):
        if len(found) != expected_cliques:
            violations.append(
                f"found {len(found)} clique(s) ({', '.join(map(_shown, found)) or 'none'}), expected {expected_cliques}"
            )
    elif expected_cliques is not None:
        expected = sorted(str(value) for value in expected_cliques)
        missing = [value for value in expected if value not in grouping.groups]
        extra = [value for value in found if value not in expected]
        for value in missing:
            violations.append(f"expected clique {_shown(value)} has no node")
        for value in extra:
            members = ", ".join(grouping.groups[value])
            violations.append(f"clique {_shown(value)} (nodes {members}) is not among the expected cliques")

    if nodes_per_clique is not None:
        for value, members in grouping.groups.items():
            if len(members) != nodes_per_clique:
                violations.append(
                    f"clique {_shown(value)} has {len(members)} node(s) ({', '.join(members)}), "
                    f"expected {nodes_per_clique}"
                )

    if racks:
        clique_of = grouping.clique_of()
        unlabelled = set(grouping.unlabelled_gpu_nodes)
        non_gpu = set(grouping.non_gpu_nodes)
        for rack, members in racks.items():
            values: Dict[str, List[str]] = {}
            for node in members:
                if node in clique_of:
                    values.setdefault(clique_of[node], []).append(node)
                elif node in unlabelled:
                    violations.append(f"rack {rack}: node {node} has no {CLIQUE_LABEL} label")
                elif node in non_gpu:
                    violations.append(f"rack {rack}: node {node} is not a GPU node (no nvidia.com/gpu capacity)")
                else:
                    violations.append(f"rack {rack}: node {node} is not in the cluster")
            if len(values) > 1:
                split = "; ".join(
                    f"{_shown(value)}: {', '.join(sorted(nodes))}" for value, nodes in sorted(values.items())
                )
                violations.append(
                    f"rack {rack} spans {len(values)} cliques ({split}); the nodes of one rack must share one "
                    "NVLink clique: check the NVLink switch trays and each node's fabric state"
                )
    return violations


def _clique_shown(value: str) -> str:
    """A clique as the rack check shows it: ``''`` for a host without one."""
    return _shown(value) if value else "''"


def rack_clique_conflicts(
    host: str,
    rack: str,
    clique: str,
    peers: Mapping[str, Sequence[str]],
    rack_var: str = "gpu_fabric_rack",
) -> Tuple[Dict[str, str], str]:
    """The hosts of ``host``'s rack in another NVLink clique than ``host``, and the one-line failure message.

    ``peers``: host name -> (rack, clique) of the hosts checked so far (``host`` itself is skipped; a clique is
    ``''`` for a host whose GPUs are in none). Hosts of other racks are ignored, and a host without a rack
    (``rack`` empty) has no peers to compare with. Returns ({peer: its clique}, in the order of ``peers``, and
    the message); the message is ``''`` when there is no conflict. ``rack_var`` is the host variable that
    names a host's rack, which the message tells to fix when the rack is wrong.
    """
    if not rack:
        return {}, ""
    conflicts: Dict[str, str] = {}
    for peer, (peer_rack, peer_clique) in peers.items():
        # Hosts in no clique do not share one: two of them are no NVLink domain, whatever their rack.
        if peer != host and peer_rack == rack and (peer_clique != clique or not clique):
            conflicts[peer] = peer_clique
    if not conflicts:
        return {}, ""
    if not clique and not any(conflicts.values()):
        return conflicts, (
            f"Hosts of rack {rack} are in no NVLink clique: {host}, {', '.join(conflicts)} have GPUs without a "
            "clique ID, so they share no NVLink domain: check the trays' fabric (nvidia-smi -q, Fabric section) and "
            f"the NVLink partition on the switch trays, or fix {rack_var}."
        )
    listed = ", ".join(f"{peer} in {_clique_shown(value)}" for peer, value in conflicts.items())
    message = (
        f"Hosts of rack {rack} are in different NVLink cliques: {host} is in '{_shown(clique)}' and {listed}. "
        "An NVL72 rack is one NVLink domain: check the trays' fabric (nvidia-smi -q, Fabric section) and the "
        f"NVLink switch trays, or fix {rack_var}."
    )
    return conflicts, message
