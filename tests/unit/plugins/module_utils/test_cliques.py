# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Clique grouping and expectations, on Node objects built from the GB200 guide's label table."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import (
    CliqueGrouping,
    check_clique_expectations,
    group_nodes_by_clique,
    is_gpu_node,
    rack_clique_conflicts,
    read_nodes_for_grouping,
)

LABELS = Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "gb200-clique-labels.txt"
REAL_CLIQUE = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766"
OTHER_CLIQUE = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1"


def node(name, labels=None, gpus=None):
    """A Node object shaped like kubernetes.core.k8s_info's resources[]."""
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}, "status": {}}
    if gpus is not None:
        obj["status"] = {"capacity": {"cpu": "144", "nvidia.com/gpu": str(gpus)}, "allocatable": {"cpu": "144"}}
    return obj


def guide_nodes():
    """The two GB200 nodes of the guide's table, with the labels GFD and NFD set."""
    rows = [line.split() for line in LABELS.read_text().splitlines()[1:] if line.strip()]
    return [
        node(name, {label: value, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-GB200"}, gpus=4)
        for name, label, value in rows
    ]


def test_guide_nodes_share_the_real_clique():
    grouping = group_nodes_by_clique(guide_nodes())
    assert grouping.groups == {REAL_CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"]}
    assert grouping.unlabelled_gpu_nodes == []
    assert grouping.non_gpu_nodes == []
    assert grouping.malformed == {}
    assert check_clique_expectations(grouping, expected_cliques=1, nodes_per_clique=2) == []


def test_unlabelled_gpu_node_and_control_plane_are_told_apart():
    nodes = [
        *guide_nodes(),
        node("gb200-pod2-f06-node07", {"nvidia.com/gpu.present": "true"}, gpus=4),  # label missing
        node("gpu-by-capacity-only", {}, gpus=8),
        node("control-plane-0", {"node-role.kubernetes.io/control-plane": ""}),
        node("cpu-worker", {}, gpus=0),
    ]
    grouping = group_nodes_by_clique(nodes)
    assert grouping.unlabelled_gpu_nodes == ["gb200-pod2-f06-node07", "gpu-by-capacity-only"]
    assert grouping.non_gpu_nodes == ["control-plane-0", "cpu-worker"]
    violations = check_clique_expectations(grouping)
    assert violations == [
        "GPU node gb200-pod2-f06-node07 has no nvidia.com/gpu.clique label: its GPUs are not fabric-attached or "
        "GPU Feature Discovery has not labelled it; check 'nvidia-smi -q' Fabric State/Status (Completed/Success) "
        "and the GFD pod",
        "GPU node gpu-by-capacity-only has no nvidia.com/gpu.clique label: its GPUs are not fabric-attached or "
        "GPU Feature Discovery has not labelled it; check 'nvidia-smi -q' Fabric State/Status (Completed/Success) "
        "and the GFD pod",
    ]


@pytest.mark.parametrize(
    ("labels", "capacity", "expected"),
    [
        ({"nvidia.com/gpu.present": "true"}, None, True),
        ({"nvidia.com/gpu.present": "false"}, None, False),
        ({}, 4, True),
        ({}, 0, False),
        ({"nvidia.com/gpu.clique": REAL_CLIQUE}, None, True),
        ({}, None, False),
    ],
)
def test_gpu_node_detection(labels, capacity, expected):
    assert is_gpu_node(node("n", labels, capacity)) is expected


def test_two_racks_and_a_rack_split_across_cliques():
    rack_a = [node(f"a{i}", {"nvidia.com/gpu.clique": REAL_CLIQUE}, gpus=4) for i in range(3)]
    rack_b = [node(f"b{i}", {"nvidia.com/gpu.clique": OTHER_CLIQUE}, gpus=4) for i in range(2)]
    rack_b.append(node("b2", {"nvidia.com/gpu.clique": REAL_CLIQUE}, gpus=4))  # cabled into the wrong domain
    grouping = group_nodes_by_clique(rack_a + rack_b)
    assert grouping.groups == {REAL_CLIQUE: ["a0", "a1", "a2", "b2"], OTHER_CLIQUE: ["b0", "b1"]}
    racks = {"rack-a": ["a0", "a1", "a2"], "rack-b": ["b0", "b1", "b2", "b3"]}
    violations = check_clique_expectations(grouping, expected_cliques=2, nodes_per_clique=3, racks=racks)
    assert violations == [
        f"clique {REAL_CLIQUE} has 4 node(s) (a0, a1, a2, b2), expected 3",
        f"clique {OTHER_CLIQUE} has 2 node(s) (b0, b1), expected 3",
        "rack rack-b: node b3 is not in the cluster",
        f"rack rack-b spans 2 cliques ({REAL_CLIQUE}: b2; {OTHER_CLIQUE}: b0, b1); the nodes of one rack must share "
        "one NVLink clique: check the NVLink switch trays and each node's fabric state",
    ]


def test_expected_cliques_as_values():
    grouping = group_nodes_by_clique(guide_nodes())
    assert check_clique_expectations(grouping, expected_cliques=[REAL_CLIQUE]) == []
    assert check_clique_expectations(grouping, expected_cliques=[OTHER_CLIQUE]) == [
        f"expected clique {OTHER_CLIQUE} has no node",
        f"clique {REAL_CLIQUE} (nodes gb200-pod2-f06-node05, gb200-pod2-f06-node06) is not among the expected cliques",
    ]
    assert check_clique_expectations(grouping, expected_cliques=2) == [f"found 1 clique(s) ({REAL_CLIQUE}), expected 2"]


def test_rack_members_unlabelled_or_not_gpu():
    nodes = [*guide_nodes(), node("gb200-pod2-f06-node07", {}, gpus=4), node("login-0", {})]
    grouping = group_nodes_by_clique(nodes)
    racks = {"f06": ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06", "gb200-pod2-f06-node07", "login-0"]}
    violations = check_clique_expectations(grouping, racks=racks)
    assert violations[1:] == [
        "rack f06: node gb200-pod2-f06-node07 has no nvidia.com/gpu.clique label",
        "rack f06: node login-0 is not a GPU node (no nvidia.com/gpu capacity)",
    ]
    assert violations[0].startswith("GPU node gb200-pod2-f06-node07 has no nvidia.com/gpu.clique label")


def test_malformed_clique_value():
    grouping = group_nodes_by_clique([node("x", {"nvidia.com/gpu.clique": "rack1"}, gpus=4)])
    assert grouping.groups == {"rack1": ["x"]}
    assert grouping.malformed == {"x": "rack1"}
    assert check_clique_expectations(grouping) == [
        "node x has nvidia.com/gpu.clique=rack1, expected <clusterUUID>.<cliqueId> "
        "(e.g. 69a19a31-f41c-45a5-8245-579b6bce5bdd.32766); the label was not set by GPU Feature Discovery"
    ]


def test_empty_label_counts_as_unlabelled():
    grouping = group_nodes_by_clique([node("y", {"nvidia.com/gpu.clique": "", "nvidia.com/gpu.present": "true"})])
    assert grouping.groups == {}
    assert grouping.unlabelled_gpu_nodes == ["y"]


def test_not_a_node_is_refused():
    with pytest.raises(ValueError, match=r"no metadata\.name"):
        group_nodes_by_clique([{"kind": "Node", "metadata": {}}])


def test_grouping_to_dict_and_lookup():
    grouping = group_nodes_by_clique(guide_nodes())
    assert isinstance(grouping, CliqueGrouping)
    assert grouping.clique_of() == {"gb200-pod2-f06-node05": REAL_CLIQUE, "gb200-pod2-f06-node06": REAL_CLIQUE}
    assert grouping.to_dict() == {
        "groups": {REAL_CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"]},
        "unlabelled_gpu_nodes": [],
        "non_gpu_nodes": [],
        "malformed": {},
    }


@pytest.mark.parametrize("labels", [["nvidia.com/gpu.clique"], "nvidia.com/gpu.clique", 7])
def test_labels_that_are_no_mapping_are_refused_with_a_value_error(labels):
    broken = node("gb200-pod2-f06-node05", gpus=4)
    broken["metadata"]["labels"] = labels
    with pytest.raises(
        ValueError, match=r"^node gb200-pod2-f06-node05 is not a Kubernetes Node object: metadata\.labels"
    ):
        group_nodes_by_clique([broken])


def test_clique_value_with_a_trailing_newline_is_malformed_and_shown_quoted():
    nodes = guide_nodes()
    nodes[1]["metadata"]["labels"]["nvidia.com/gpu.clique"] = REAL_CLIQUE + "\n"
    grouping = group_nodes_by_clique(nodes)
    assert grouping.malformed == {"gb200-pod2-f06-node06": REAL_CLIQUE + "\n"}
    violations = check_clique_expectations(grouping, expected_cliques=1)
    assert violations[0].startswith(
        f"node gb200-pod2-f06-node06 has nvidia.com/gpu.clique='{REAL_CLIQUE}\\n', expected"
    )
    assert all("\n" not in v for v in violations)


def test_whole_nodes_are_read_only_where_the_labels_do_not_tell():
    gpu = {"metadata": {"name": "gb200-r1-t1", "labels": {"nvidia.com/gpu.present": "true"}}}
    cpu_meta = {"kind": "PartialObjectMetadata", "metadata": {"name": "cpu-1", "labels": {}}}
    cpu_whole = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {"capacity": {"nvidia.com/gpu": "4"}}}
    late = {"metadata": {"name": "late-1", "labels": {}}, "status": {"capacity": {"cpu": "8"}}}
    calls = []

    def list_nodes(selector, metadata_only):
        calls.append((selector, metadata_only))
        return [gpu, cpu_meta] if metadata_only else [cpu_whole, late]

    nodes = read_nodes_for_grouping(list_nodes, "topology.kubernetes.io/zone=a")
    assert calls == [
        ("topology.kubernetes.io/zone=a", True),
        ("topology.kubernetes.io/zone=a,nvidia.com/gpu.present!=true", False),
    ]
    assert nodes == [gpu, cpu_whole, late]
    grouping = group_nodes_by_clique(nodes)
    assert grouping.unlabelled_gpu_nodes == ["cpu-1", "gb200-r1-t1"]
    assert grouping.non_gpu_nodes == ["late-1"]
    read_nodes_for_grouping(list_nodes)
    assert calls[-1] == ("nvidia.com/gpu.present!=true", False)


# The rack check of roles/nvidia_driver: a GB200 NVL72 rack holds 18 compute trays in one NVLink clique.
RACK_A = [f"gb200-r01-t{tray:02d}" for tray in range(1, 19)]
RACK_B = [f"gb200-r02-t{tray:02d}" for tray in range(1, 19)]


def test_rack_of_18_trays_in_one_clique_has_no_conflict():
    peers = {tray: ("r01", REAL_CLIQUE) for tray in RACK_A}
    assert rack_clique_conflicts(RACK_A[0], "r01", REAL_CLIQUE, peers) == ({}, "")


def test_one_tray_of_18_in_another_clique_is_named_with_its_clique():
    split = REAL_CLIQUE.rsplit(".", 1)[0] + ".32767"
    peers = {tray: ("r01", REAL_CLIQUE) for tray in RACK_A}
    peers[RACK_A[17]] = ("r01", split)
    conflicts, message = rack_clique_conflicts(RACK_A[0], "r01", REAL_CLIQUE, peers)
    assert conflicts == {"gb200-r01-t18": split}
    assert message == (
        f"Hosts of rack r01 are in different NVLink cliques: gb200-r01-t01 is in '{REAL_CLIQUE}' and "
        f"gb200-r01-t18 in {split}. An NVL72 rack is one NVLink domain: check the trays' fabric (nvidia-smi -q, "
        "Fabric section) and the NVLink switch trays, or fix gpu_fabric_rack."
    )
    # Seen from the odd tray, the 17 others are in the other clique, in the order given.
    conflicts, message = rack_clique_conflicts(RACK_A[17], "r01", split, peers, rack_var="rack")
    assert list(conflicts) == RACK_A[:17]
    assert message.startswith(f"Hosts of rack r01 are in different NVLink cliques: gb200-r01-t18 is in '{split}' and ")
    assert message.endswith(", or fix rack.")
    assert "\n" not in message


def test_split_rack_lists_every_tray_of_the_other_half():
    split = REAL_CLIQUE.rsplit(".", 1)[0] + ".32767"
    peers = {tray: ("r01", REAL_CLIQUE if index < 9 else split) for index, tray in enumerate(RACK_A)}
    conflicts, message = rack_clique_conflicts(RACK_A[0], "r01", REAL_CLIQUE, peers)
    assert conflicts == {tray: split for tray in RACK_A[9:]}
    assert ", ".join(f"{tray} in {split}" for tray in RACK_A[9:]) + ". An NVL72" in message


def test_tray_without_clique_is_shown_as_empty():
    peers = {RACK_A[0]: ("r01", REAL_CLIQUE), RACK_A[1]: ("r01", "")}
    conflicts, message = rack_clique_conflicts(RACK_A[0], "r01", REAL_CLIQUE, peers)
    assert conflicts == {RACK_A[1]: ""}
    assert f"{RACK_A[1]} in ''. An NVL72" in message
    # and a tray without a clique conflicts with every labelled peer
    conflicts, message = rack_clique_conflicts(RACK_A[1], "r01", "", peers)
    assert conflicts == {RACK_A[0]: REAL_CLIQUE}
    assert f"{RACK_A[1]} is in '' and {RACK_A[0]} in {REAL_CLIQUE}." in message


def test_host_without_rack_has_no_peers():
    peers = {RACK_A[0]: ("", REAL_CLIQUE), RACK_A[1]: ("", OTHER_CLIQUE), RACK_B[0]: ("r02", OTHER_CLIQUE)}
    assert rack_clique_conflicts(RACK_A[0], "", REAL_CLIQUE, peers) == ({}, "")


def test_hosts_of_another_rack_are_ignored():
    peers = {tray: ("r01", REAL_CLIQUE) for tray in RACK_A}
    peers.update({tray: ("r02", OTHER_CLIQUE) for tray in RACK_B})
    peers["gb200-spare"] = ("", OTHER_CLIQUE)  # a tray without rack is nobody's peer
    assert rack_clique_conflicts(RACK_A[3], "r01", REAL_CLIQUE, peers) == ({}, "")
    assert rack_clique_conflicts(RACK_B[3], "r02", OTHER_CLIQUE, peers) == ({}, "")
    # a rack-B tray that joined rack A's clique conflicts with rack B only
    peers[RACK_B[5]] = ("r02", REAL_CLIQUE)
    conflicts, message = rack_clique_conflicts(RACK_B[5], "r02", REAL_CLIQUE, peers)
    assert conflicts == {tray: OTHER_CLIQUE for tray in RACK_B if tray != RACK_B[5]}
    assert "r01" not in message and "Hosts of rack r02 " in message


def test_trays_of_a_rack_all_without_a_clique_conflict():
    peers = {RACK_A[0]: ("r01", ""), RACK_A[1]: ("r01", ""), RACK_B[0]: ("r02", "")}
    conflicts, message = rack_clique_conflicts(RACK_A[0], "r01", "", peers)
    assert conflicts == {RACK_A[1]: ""}
    assert message == (
        f"Hosts of rack r01 are in no NVLink clique: {RACK_A[0]}, {RACK_A[1]} have GPUs without a clique ID, so "
        "they share no NVLink domain: check the trays' fabric (nvidia-smi -q, Fabric section) and the NVLink "
        "partition on the switch trays, or fix gpu_fabric_rack."
    )
