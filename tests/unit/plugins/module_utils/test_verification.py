# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verification core: racks, usable trays and their reasons, the clique judge, names, records.

Trays are copies of a GB200 tray Node as the Kubernetes 1.34 API server returned it
(``tests/fixtures/k8s/gb200-tray-node.json``), renamed and changed per case.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.cliques import CliquesCheck, judge_cliques
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import (
    OUTCOME_INCOMPLETE,
    incomplete_record,
    record_for,
    superseded,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import (
    GPU_NODE_TOLERATIONS,
    UNASSIGNED_RACK,
    Scope,
    clique_short_name,
    coverage_note,
    declared_plans,
    gpus_in_use,
    group_racks,
    parse_nodes_per_clique,
    plan_fleet,
    pod_gpu_request,
    rack_namespace,
    rack_of,
    tolerates,
    unusable_reason,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import pod_tolerations

TRAY = json.loads((Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "gb200-tray-node.json").read_text())
CLIQUE = TRAY["metadata"]["labels"]["nvidia.com/gpu.clique"]
RACK_LABEL = "gpu-fabric.sim/rack"


def tray(rack: int, index: int, clique: str | None = None, gpus: int = 4, **changes) -> dict:
    node = copy.deepcopy(TRAY)
    name = f"gb200-r{rack}-t{index}"
    node["metadata"]["name"] = name
    labels = node["metadata"]["labels"]
    labels["kubernetes.io/hostname"] = name
    labels[RACK_LABEL] = f"rack{rack}"
    labels["nvidia.com/gpu.clique"] = clique or f"{CLIQUE.split('.')[0][:-1]}{rack}.32766"
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    node["status"]["capacity"]["nvidia.com/gpu"] = str(gpus)
    for path, value in changes.items():
        if path == "unschedulable":
            node["spec"]["unschedulable"] = value
        elif path == "taints":
            node["spec"]["taints"] = value
        elif path == "ready":
            node["status"]["conditions"] = [
                dict(c, status=value, reason="KubeletNotReady") if c["type"] == "Ready" else c
                for c in node["status"]["conditions"]
            ]
        elif path == "no_clique":
            labels.pop("nvidia.com/gpu.clique")
    return node


def fleet(racks: int = 2, trays: int = 4) -> list:
    return [tray(r, t) for r in range(racks) for t in range(trays)]


def gpu_pod(node: str, gpus: int, phase: str = "Running", name: str = "train-0", namespace: str = "team-a") -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def test_the_fixture_is_a_ready_gb200_tray():
    assert TRAY["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert unusable_reason(TRAY, 4) is None


@pytest.mark.parametrize(
    ("racks", "label", "expected"),
    [
        ({"bay-7": ["gb200-r0-t1"]}, RACK_LABEL, "bay-7"),  # the inventory wins
        ({}, RACK_LABEL, "rack0"),
        ({}, "", clique_short_name(CLIQUE)),
    ],
)
def test_the_rack_of_a_tray(racks, label, expected):
    assert rack_of(tray(0, 1, clique=CLIQUE), racks, label) == expected


def test_a_clique_names_its_rack_when_nothing_else_does():
    assert clique_short_name("69a19a31-f41c-45a5-8245-579b6bce5bdd.32766") == "clique-69a19a31-32766"
    assert rack_of(tray(0, 0, no_clique=True) | {"metadata": {"name": "x", "labels": {}}}) == UNASSIGNED_RACK


def test_the_whole_fleet_is_planned_by_default():
    plan = plan_fleet(fleet(3, 18), [], Scope(rack_label=RACK_LABEL))
    assert [r.name for r in plan.racks] == ["rack0", "rack1", "rack2"]
    assert plan.gpu_nodes == 54
    assert all(len(r.nodes) == 18 and not r.skipped and r.gpus_per_tray == 4 for r in plan.racks)
    assert plan.racks[1].nodes[0] == "gb200-r1-t0"
    assert plan.racks[1].gpu_product == "NVIDIA-GB200"
    assert plan.racks[1].clique.endswith("1.32766")


def test_unusable_trays_are_skipped_with_their_reason():
    nodes = fleet(1, 6)
    nodes[1] = tray(0, 1, unschedulable=True)
    nodes[2] = tray(0, 2, ready="False")
    nodes[3] = tray(0, 3, gpus=3)
    nodes[4] = tray(0, 4, taints=[{"key": "maintenance", "value": "disk", "effect": "NoSchedule"}])
    pods = [gpu_pod("gb200-r0-t5", 4), gpu_pod("gb200-r0-t0", 4, phase="Succeeded")]
    (rack,) = plan_fleet(nodes, pods, Scope(rack_label=RACK_LABEL)).racks
    assert rack.nodes == ["gb200-r0-t0"]
    assert {s["node"]: s["reason"] for s in rack.skipped} == {
        "gb200-r0-t1": "cordoned",
        "gb200-r0-t2": "NotReady (KubeletNotReady)",
        "gb200-r0-t3": "3 of 4 nvidia.com/gpu allocatable",
        "gb200-r0-t4": "tainted maintenance=disk:NoSchedule",
        "gb200-r0-t5": "GPUs in use: 4 of 4 nvidia.com/gpu held by team-a/train-0 (4)",
    }
    assert rack.incomplete


def test_the_unverified_taint_of_a_failed_tray_does_not_skip_it():
    taint = [{"key": "gpu-fabric.nvidia.com/unverified", "value": "true", "effect": "NoSchedule"}]
    assert unusable_reason(tray(0, 0, taints=taint), 4) is None


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def test_a_tray_with_the_gpu_taint_is_used_when_the_pods_tolerate_it():
    nodes = [tray(0, t, taints=[GPU_TAINT]) for t in range(2)]
    tolerations = pod_tolerations(GPU_NODE_TOLERATIONS)
    (rack,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL, tolerations=tolerations)).racks
    assert rack.nodes == ["gb200-r0-t0", "gb200-r0-t1"] and rack.skipped == []
    (rack,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    assert rack.nodes == []
    assert rack.skipped[0]["reason"] == "tainted nvidia.com/gpu=present:NoSchedule"


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, dict(GPU_TAINT, effect="NoExecute"), True),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"operator": "Exists"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}, GPU_TAINT, False),
        ({"key": "dedicated", "operator": "Exists"}, GPU_TAINT, False),
    ],
)
def test_tolerations_match_taints_as_the_scheduler_does(toleration, taint, tolerated):
    assert tolerates(toleration, taint) is tolerated


def test_a_check_without_gpus_ignores_gpu_holders():
    (rack,) = plan_fleet(fleet(1, 2), [gpu_pod("gb200-r0-t0", 4)], Scope(rack_label=RACK_LABEL), uses_gpus=False).racks
    assert rack.nodes == ["gb200-r0-t0", "gb200-r0-t1"]


def test_pod_gpus_follow_the_schedulers_rule():
    pod = gpu_pod("n", 2)
    pod["spec"]["containers"].append({"name": "d", "resources": {"requests": {"nvidia.com/gpu": "1"}}})
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]
    assert pod_gpu_request(pod) == 4
    assert gpus_in_use([pod, gpu_pod("n", 1, phase="Failed")]) == {"n": [("team-a/train-0", 4)]}


def test_scope_narrows_racks_and_trays():
    nodes = fleet(3, 4)
    plan = plan_fleet(
        nodes,
        [],
        Scope(
            rack_label=RACK_LABEL,
            cliques=["rack2", nodes[4]["metadata"]["labels"]["nvidia.com/gpu.clique"]],
            nodes_per_clique=2,
        ),
    )
    assert [(r.name, r.nodes) for r in plan.racks] == [
        ("rack1", ["gb200-r1-t0", "gb200-r1-t1"]),
        ("rack2", ["gb200-r2-t0", "gb200-r2-t1"]),
    ]
    assert plan.racks[0].skipped[0] == {
        "node": "gb200-r1-t2",
        "reason": "not selected (gpu_fabric_verify_nodes_per_clique is 2)",
    }
    assert plan.unknown_selections == []


def test_unknown_selections_are_reported():
    plan = plan_fleet(fleet(1, 2), [], Scope(rack_label=RACK_LABEL, cliques=["rack9"], node_names=["gb200-r5-t0"]))
    assert plan.unknown_selections == ["rack9", "gb200-r5-t0"]


def test_a_split_rack_runs_in_its_largest_clique():
    nodes = fleet(1, 4)
    nodes[3] = tray(0, 3, clique=CLIQUE)
    (rack,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    assert rack.clique is None and len(rack.cliques) == 2
    assert rack.nodes == ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]
    assert rack.skipped[0]["node"] == "gb200-r0-t3"
    assert rack.skipped[0]["reason"].startswith("in another clique of the rack than ")


@pytest.mark.parametrize(("value", "expected"), [("all", None), ("", None), (None, None), ("18", 18), (3, 3)])
def test_nodes_per_clique(value, expected):
    assert parse_nodes_per_clique(value) == expected


@pytest.mark.parametrize("value", ["some", "1", "0"])
def test_nodes_per_clique_refuses_what_cannot_run(value):
    with pytest.raises(ValueError, match="gpu_fabric_verify_nodes_per_clique"):
        parse_nodes_per_clique(value)


def test_names_are_dns_labels_that_never_collide():
    assert rack_namespace("gpu-fabric-verify", "imex_channel", "rack1") == "gpu-fabric-verify-imex-channel-rack1"
    long_a = rack_namespace("gpu-fabric-verify", "nvbandwidth", "clique-69a19a31-32766-and-a-very-long-suffix-a")
    long_b = rack_namespace("gpu-fabric-verify", "nvbandwidth", "clique-69a19a31-32766-and-a-very-long-suffix-b")
    assert len(long_a) <= 63 and len(long_b) <= 63 and long_a != long_b


def test_the_clique_judge_names_the_tray_with_a_missing_gpu():
    nodes = fleet(1, 4)
    nodes[3] = tray(0, 3, gpus=3)
    (plan,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    passed, summary, problems, details = judge_cliques(nodes, plan, gpus_per_tray=4, trays_per_clique=4)
    assert not passed
    assert summary.startswith("rack rack0: 1 problem: gb200-r0-t3 has 3 allocatable nvidia.com/gpu, expected 4")
    assert list(problems) == ["gb200-r0-t3"]
    assert details["gpus"]["gb200-r0-t3"] == 3


def test_the_clique_judge_counts_the_trays_and_finds_the_split():
    nodes = fleet(1, 3)
    nodes[2] = tray(0, 2, clique=CLIQUE)
    (plan,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    passed, summary, problems, _details = judge_cliques(nodes, plan, gpus_per_tray=4, trays_per_clique=18)
    assert not passed
    assert "rack rack0 spans 2 cliques" in summary
    assert "rack rack0 has 3 GPU trays, expected 18 (gpu_fabric_trays_per_clique)" in summary
    assert list(problems) == ["gb200-r0-t2"]


def test_the_clique_judge_names_an_unlabelled_tray():
    nodes = [*fleet(1, 2), tray(0, 2, no_clique=True)]
    (plan,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    passed, summary, problems, details = judge_cliques(nodes, plan, 4, 0)
    assert not passed and list(problems) == ["gb200-r0-t2"]
    assert "GPU node gb200-r0-t2 has no nvidia.com/gpu.clique label" in summary
    assert details["unlabelled_nodes"] == ["gb200-r0-t2"]
    assert {"node": "gb200-r0-t2", "reason": "no nvidia.com/gpu.clique label"} in plan.skipped


def test_a_healthy_rack_passes_the_clique_judge():
    nodes = fleet(1, 18)
    (plan,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    passed, summary, problems, _details = judge_cliques(nodes, plan, 4, 18)
    assert passed and problems == {}
    assert summary == f"rack rack0: 18 GPU trays in one clique ({plan.clique}), 4 GPUs each"


def test_records_are_one_line_and_follow_the_outcome():
    (plan,) = plan_fleet(fleet(1, 2), [], Scope(rack_label=RACK_LABEL)).racks
    record = record_for("nvbandwidth", plan, "failed", "rack rack0:\n  1 pair\tlow", {}, ["gb200-r0-t1"], run_id="r1")
    assert record["summary"] == "rack rack0: 1 pair low"
    assert (record["rack"], record["passed"], record["run_id"], record["failed_nodes"]) == (
        "rack0",
        False,
        "r1",
        ["gb200-r0-t1"],
    )
    assert record["trays"] == {"expected": 0, "found": ["gb200-r0-t0", "gb200-r0-t1"], "skipped": []}


def test_an_incomplete_rack_fails_unless_allowed():
    nodes = fleet(1, 2)
    nodes[1] = tray(0, 1, unschedulable=True)
    (plan,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    record = incomplete_record("nvbandwidth", plan, "", allow_incomplete=False)
    assert record["outcome"] == OUTCOME_INCOMPLETE and not record["passed"]
    assert record["summary"] == (
        "rack rack0: 1 usable tray of 2; the nvbandwidth check needs at least 2 (skipped gb200-r0-t1: cordoned); "
        "free or uncordon trays, or set gpu_fabric_verify_allow_incomplete: true"
    )
    assert incomplete_record("nvbandwidth", plan, "", allow_incomplete=True)["passed"]


def h100_node(name: str) -> dict:
    """A GPU node without multi-node NVLink: GFD's product label, no clique label."""
    node = tray(0, 0)
    node["metadata"]["name"] = name
    labels = node["metadata"]["labels"]
    labels.pop("nvidia.com/gpu.clique", None)
    labels.pop(RACK_LABEL, None)
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    return node


def test_a_gpu_node_without_multi_node_nvlink_is_no_rack_and_no_violation():
    nodes = [*fleet(1, 2), h100_node("h100-0")]
    grouped = group_racks(nodes, Scope(rack_label=RACK_LABEL))
    assert sorted(grouped) == ["rack0"]
    assert [n["metadata"]["name"] for n in grouped["rack0"]] == ["gb200-r0-t0", "gb200-r0-t1"]
    (rack,) = plan_fleet(nodes, [], Scope(rack_label=RACK_LABEL)).racks
    passed, summary, problems, details = judge_cliques(grouped["rack0"], rack, 4, 0)
    assert passed, summary
    assert problems == {} and details["unlabelled_nodes"] == []
    # an MNNVL product without its clique label is still a finding, and so is a node without a product label
    gb200 = h100_node("gb200-unlabelled")
    gb200["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-GB200"
    unknown = h100_node("no-product")
    del unknown["metadata"]["labels"]["nvidia.com/gpu.product"]
    grouped = group_racks([*nodes, gb200, unknown], Scope(rack_label=RACK_LABEL))
    assert sorted(n["metadata"]["name"] for n in grouped[UNASSIGNED_RACK]) == ["gb200-unlabelled", "no-product"]
    assert "h100-0" not in str(grouped)
    # a site that lists H100 among its NVLink products gets it back as a finding
    grouped = group_racks(nodes, Scope(rack_label=RACK_LABEL, mnnvl_products=["GB200", "H100"]))
    assert [n["metadata"]["name"] for n in grouped[UNASSIGNED_RACK]] == ["h100-0"]


def test_inventory_names_match_nodes_by_short_host_name():
    nodes = fleet(1, 2)
    for node in nodes:
        node["metadata"]["labels"].pop(RACK_LABEL, None)
    fqdn = {"rack-a": ["GB200-R0-T0.example.com", "gb200-r0-t1.example.com"]}
    grouped = group_racks(nodes, Scope(racks=fqdn))
    assert {rack: [n["metadata"]["name"] for n in members] for rack, members in grouped.items()} == {
        "rack-a": ["gb200-r0-t0", "gb200-r0-t1"]
    }
    fqdn_node = copy.deepcopy(nodes[0])
    fqdn_node["metadata"]["name"] = "gb200-r0-t0.cluster.local"
    assert rack_of(fqdn_node, {"rack-a": ["gb200-r0-t0"]}) == "rack-a"
    assert rack_of(nodes[0], {"rack-a": ["gb200-r0-t9.example.com"]}) != "rack-a"


def _ran(started: str, finished: str) -> dict:
    return {"started": started, "finished": finished}


def test_a_record_of_a_run_that_ended_before_this_one_started_is_superseded():
    this_run = [_ran("2026-12-06T01:02:48.691242Z", "2026-12-06T01:02:57.877385Z")]
    earlier = _ran("2026-12-05T23:00:00.000001Z", "2026-12-05T23:00:09Z")
    overlapping = _ran("2026-12-06T01:02:48.502641Z", "2026-12-06T01:02:57.766568Z")  # started at once
    assert superseded(earlier, this_run) is True
    # two runs at once, each on its own rack: neither removes the other's record, or its report loses it
    assert superseded(overlapping, this_run) is False
    assert superseded(_ran("x", "not a time"), this_run) is True  # an unreadable record is an old one
    assert superseded(None, this_run) is True
    assert superseded(overlapping, []) is True  # no time of this run to compare: as before, removed


# -- the fleet as declared (gpu_fabric_racks) ----------------------------------------------------------


def inventory_fleet(racks: int, trays: int) -> list:
    """Trays of a site that names its racks in gpu_fabric_racks only (no rack label)."""
    nodes = fleet(racks, trays)
    for node in nodes:
        node["metadata"]["labels"].pop(RACK_LABEL, None)
    return nodes


def declared(racks: int, trays: int) -> dict:
    return {f"rack{r}": [f"gb200-r{r}-t{t}" for t in range(trays)] for r in range(racks)}


NO_NODE = "declared in gpu_fabric_racks, no Node of that name in the cluster"


def test_declared_racks_the_cluster_does_not_show_are_planned_absent_with_every_tray_missing():
    plan = plan_fleet(inventory_fleet(1, 2), [], Scope(racks=declared(4, 2), trays_per_clique=2))
    assert [(r.name, r.absent, r.incomplete) for r in plan.racks] == [
        ("rack0", False, False),
        ("rack1", True, False),
        ("rack2", True, False),
        ("rack3", True, False),
    ]
    rack3 = plan.racks[3]
    assert rack3.missing == [{"node": "gb200-r3-t0", "reason": NO_NODE}, {"node": "gb200-r3-t1", "reason": NO_NODE}]
    assert rack3.trays() == {
        "expected": 2,
        "found": [],
        "skipped": [],
        "declared": ["gb200-r3-t0", "gb200-r3-t1"],
        "missing": rack3.missing,
        "undeclared": [],
    }
    assert plan.unknown_selections == []
    # an only-due run: an absent rack is absent, not a rack with nothing due
    only_due = plan_fleet(inventory_fleet(1, 2), [], Scope(racks=declared(2, 2), only_due=True)).racks[1]
    assert (only_due.absent, only_due.nothing_due, only_due.incomplete) == (True, False, False)
    # a run narrowed to other racks does not account for them
    narrowed = plan_fleet(inventory_fleet(1, 2), [], Scope(racks=declared(4, 2), cliques=["rack0"]))
    assert [r.name for r in narrowed.racks] == ["rack0"]


def test_a_declared_tray_without_its_gpu_node_is_missing_with_its_reason():
    nodes = inventory_fleet(1, 4)
    no_gpu = nodes[3]
    no_gpu["metadata"]["labels"] = {"kubernetes.io/hostname": "gb200-r0-t3"}  # GPU Feature Discovery not running
    no_gpu["status"]["capacity"].pop("nvidia.com/gpu")
    no_gpu["status"]["allocatable"].pop("nvidia.com/gpu")
    racks = {"rack0": [f"gb200-r0-t{t}" for t in range(5)]}
    (rack,) = plan_fleet(nodes, [], Scope(racks=racks)).racks
    assert rack.found == ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]
    assert rack.missing == [
        {
            "node": "gb200-r0-t3",
            "reason": "declared in gpu_fabric_racks; its Node gb200-r0-t3 shows no GPU (no nvidia.com/gpu.present "
            "label, no nvidia.com/gpu capacity): check that GPU Feature Discovery and the device plugin run on it",
        },
        {"node": "gb200-r0-t4", "reason": NO_NODE},
    ]
    assert rack.trays()["declared"] == racks["rack0"]
    assert coverage_note(rack) == (
        " (3 of 5 trays; missing gb200-r0-t3 (" + rack.missing[0]["reason"] + "); gb200-r0-t4 (" + NO_NODE + "))"
    )


def test_a_tray_in_a_declared_racks_clique_the_inventory_does_not_list_joins_that_rack_as_undeclared():
    nodes = inventory_fleet(1, 4)
    racks = {"rack0": ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]}
    grouped = group_racks(nodes, Scope(racks=racks))
    assert list(grouped) == ["rack0"]  # not an invented one-tray rack clique-...
    (rack,) = plan_fleet(nodes, [], Scope(racks=racks)).racks
    assert rack.found == rack.nodes == ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t3"]
    assert (rack.undeclared, rack.missing) == (["gb200-r0-t3"], [])
    passed, summary, problems, details = judge_cliques(grouped["rack0"], rack, 4, 4)
    assert passed and problems == {}
    assert summary == (
        f"rack rack0: 4 GPU trays in one clique ({rack.clique}), 4 GPUs each; "
        "gb200-r0-t3 is in rack0's clique but not in gpu_fabric_racks"
    )
    assert details["undeclared"] == ["gb200-r0-t3"]
    # a tray of a clique no declared rack has is still a rack of its own
    other = tray(7, 0)
    other["metadata"]["labels"].pop(RACK_LABEL)
    clique = clique_short_name(other["metadata"]["labels"]["nvidia.com/gpu.clique"])
    assert sorted(group_racks([*nodes, other], Scope(racks=racks))) == [clique, "rack0"]


def test_the_clique_judge_names_the_declared_tray_the_cluster_lacks():
    nodes = inventory_fleet(1, 3)
    racks = {"rack0": [f"gb200-r0-t{t}" for t in range(4)]}
    (rack,) = plan_fleet(nodes, [], Scope(racks=racks, trays_per_clique=4)).racks
    passed, summary, problems, details = judge_cliques(nodes, rack, 4, 4)
    assert not passed
    assert summary == (
        "rack rack0: 1 problem: gb200-r0-t3 of rack rack0 is declared in gpu_fabric_racks, no Node of that name in "
        "the cluster: bring the tray up and join it to the cluster, or correct gpu_fabric_racks"
    )
    assert problems == {}  # no Node to blame: the hardware of the trays found is not at fault
    assert details["missing"] == [{"node": "gb200-r0-t3", "reason": NO_NODE}]
    assert details["unnamed_violations"] == 0
    assert details["missing_problems"] == {"gb200-r0-t3": summary.split(": ", 2)[2]}
    # more trays expected than the inventory names: the count says what the names cannot
    passed, summary, _problems, details = judge_cliques(nodes, rack, 4, 5)
    assert "rack rack0 has 3 GPU trays, expected 5 (gpu_fabric_trays_per_clique)" in summary
    assert details["unnamed_violations"] == 1


def test_the_clique_record_names_a_missing_tray_as_its_problem_without_blaming_it():
    nodes = inventory_fleet(1, 3)
    scope = Scope(racks={"rack0": [f"gb200-r0-t{t}" for t in range(4)]})
    plans = plan_fleet(nodes, [], scope).racks
    (record,) = CliquesCheck(4, 0, "r1").read_racks(nodes, plans, scope)
    assert (record["outcome"], record["failed_nodes"], list(record["node_problems"])) == ("failed", [], ["gb200-r0-t3"])
    assert "missing_problems" not in record["details"]
    # a count that names no tray besides: the record names no tray as its whole problem
    scope = Scope(racks=scope.racks, trays_per_clique=5)
    (record,) = CliquesCheck(4, 5, "r1").read_racks(nodes, plan_fleet(nodes, [], scope).racks, scope)
    assert record["node_problems"] == {}


def test_declared_plans_account_for_each_declared_rack_when_the_cluster_cannot_be_read():
    plans = declared_plans(Scope(racks={"rack10": ["b", "a"], "rack2": ["c"]}, trays_per_clique=18), "not read")
    assert [(p.name, p.found, p.skipped, p.expected_trays) for p in plans] == [
        ("rack2", [], [{"node": "c", "reason": "not read"}], 18),
        ("rack10", [], [{"node": "a", "reason": "not read"}, {"node": "b", "reason": "not read"}], 18),
    ]
    assert declared_plans(Scope(), "not read") == []
    # a run narrowed to a rack or a tray accounts for that one
    racks = {"rack1": ["gb200-r1-t0"], "rack2": ["gb200-r2-t0"]}
    assert [p.name for p in declared_plans(Scope(racks=racks, cliques=["rack2"]), "not read")] == ["rack2"]
    assert [p.name for p in declared_plans(Scope(racks=racks, node_names=["gb200-r1-t0"]), "not read")] == ["rack1"]
