# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet: a fault on one rack fails that rack only, trays that cannot be used are skipped with their reason,
a rack left with one tray is incomplete, the verdict can be written back to the trays.

The simulated fleet has 2 racks x 18 trays in the integration run (tests/integration/conftest.py). The rack is
shared: each test switches its faults on, runs, and clears them at once.
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, faults, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

FAST = {"verify_imex_channel_timeout": 60, "verify_nvbandwidth_timeout": 90}
VERIFIED = "gpu-fabric.nvidia.com/verified"
TAINT = "gpu-fabric.nvidia.com/unverified"


@contextlib.contextmanager
def cordoned(sim_rack: SimRack, *nodes: str):
    try:
        for node in nodes:
            sim_rack.kubectl("cordon", node)
        yield
    finally:
        for node in nodes:
            sim_rack.kubectl("uncordon", node, check=False)


def test_a_lost_link_on_rack1_fails_rack1_only_naming_the_pair_and_its_trays(cluster_stage: SimRack, tmp_path):
    with faults(cluster_stage, ("degraded-link", {"rack": 1, "src": 0, "dst": 5, "gbps": 775})):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    records = run.records()["nvbandwidth"]
    assert records["rack0"]["passed"] is True
    rack1 = records["rack1"]
    assert rack1["passed"] is False
    # one NVLink of 18 lost: above the 765 GB/s floor, below 0.97 of the rack's median
    assert rack1["summary"].startswith("rack rack1: 1 of ")
    first, second = rack1["details"]["rank_nodes"][:2]  # the trays of workers 0 and 1
    assert sorted(rack1["details"]["rank_nodes"]) == sorted(rack1["nodes"])
    assert f"0->5 775.00 GB/s ({first} -> {second})" in rack1["summary"]
    (pair,) = rack1["details"]["failing_pairs"]
    # the strictest reference failed it: the product's figure (821.41), the rack's baseline or its median
    assert pair["rule"] in ("product", "baseline", "median")
    assert (pair["src_node"], pair["dst_node"]) == (first, second)
    assert sorted(rack1["failed_nodes"]) == sorted([first, second])
    assert "rack1" in run.output and "775.00" in run.output
    report = run.report()
    assert report["passed"] is False
    assert report["racks"]["rack0"]["checks"]["nvbandwidth"] == "passed"
    assert report["racks"]["rack1"]["checks"]["nvbandwidth"] == "failed"
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def matrix_gpu(record: dict, rack_gpu: int) -> int:
    """The matrix index of the rack's GPU ``rack_gpu`` (tray rack_gpu // 4 of the rack in order, its GPU rack_gpu % 4):
    the rank of the worker the scheduler put on that tray, times 4, plus the GPU."""
    tray = f"gb200-r{record['rack'][-1]}-t{rack_gpu // 4}"
    return record["details"]["rank_nodes"].index(tray) * 4 + rack_gpu % 4


def test_a_gpu_with_lost_links_is_named(cluster_stage: SimRack, tmp_path):
    with faults(cluster_stage, ("degraded-gpu", {"rack": 0, "gpu": 5, "factor": 0.944})):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    rack0 = run.record("nvbandwidth", "rack0")
    assert rack0["passed"] is False
    # gpu=5 is tray 1's GPU 1: the matrix names it by the rank of the worker the scheduler put on that tray
    low = matrix_gpu(rack0, 5)
    assert f"GPU {low} on gb200-r0-t1" in rack0["summary"]
    assert rack0["failed_nodes"] == ["gb200-r0-t1"]
    assert [gpu["gpu"] for gpu in rack0["details"]["low_gpus"]] == [low]
    assert run.record("nvbandwidth", "rack1")["passed"] is True


def test_many_gpus_that_lost_a_link_at_once_fail_against_the_product_reference(cluster_stage: SimRack, tmp_path):
    # 22 of 72 GPUs one NVLink down: most pairs touch one of them, so the rack's median is the degraded level
    with faults(cluster_stage, ("degraded-gpu", {"rack": 0, "gpu": "0-21", "factor": 0.944})):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=FAST)

    assert run.process.returncode != 0
    rack0 = run.record("nvbandwidth", "rack0")
    assert rack0["passed"] is False
    details = rack0["details"]
    assert details["median_gbps"] < 0.97 * 821.41  # the median alone would have passed every pair
    assert details["reference"]["kind"] == "product" and details["reference"]["gbps"] == 821.41
    assert sorted(gpu["gpu"] for gpu in details["low_gpus"]) == sorted(matrix_gpu(rack0, gpu) for gpu in range(22))
    assert "held against the product reference 821.41 GB/s" in rack0["summary"]
    assert sorted(rack0["failed_nodes"]) == sorted({f"gb200-r0-t{gpu // 4}" for gpu in range(22)})
    assert run.record("nvbandwidth", "rack1")["passed"] is True


TWO_TRAYS = {**FAST, "gpu_fabric_verify_nodes_per_clique": 2}  # 8 GPUs a rack: the guide's 2 x 4 run


def test_three_of_eight_gpus_and_a_whole_row_low_fail_against_the_product_reference(cluster_stage: SimRack, tmp_path):
    # rack0: 3 of 8 GPUs one NVLink down, so that 36 of 56 pairs are low and the median moves with them;
    # rack1: GPU 5 reads slowly from every other GPU (its row), its column healthy
    with faults(
        cluster_stage,
        ("degraded-gpu", {"rack": 0, "gpu": "1,4,6", "factor": 0.944}),
        ("degraded-link", {"rack": 1, "src": 5, "dst": "all", "gbps": 776}),
    ):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=TWO_TRAYS)

    assert run.process.returncode != 0
    rack0 = run.record("nvbandwidth", "rack0")["details"]
    assert rack0["median_gbps"] < 0.97 * 821.41  # the median alone would have passed
    assert rack0["reference"] == {"kind": "product", "gbps": 821.41, "source": rack0["reference"]["source"]}
    record0 = run.record("nvbandwidth", "rack0")
    assert [gpu["gpu"] for gpu in rack0["low_gpus"]] == sorted(matrix_gpu(record0, gpu) for gpu in (1, 4, 6))
    assert len(rack0["failing_pairs"]) == 36
    rack1 = run.record("nvbandwidth", "rack1")
    assert rack1["passed"] is False
    assert sorted((p["src"], p["dst"]) for p in rack1["details"]["failing_pairs"]) == [
        (5, d) for d in range(8) if d != 5
    ]
    assert {p["rule"] for p in rack1["details"]["failing_pairs"]} == {"product"}
    assert rack1["details"]["low_gpus"] == []  # its column is healthy: a row, not a GPU that lost links
    assert "held against the product reference 821.41 GB/s" in rack1["summary"]


def test_every_gpu_one_link_down_and_half_the_links_down_with_a_lowered_floor_fail(cluster_stage: SimRack, tmp_path):
    # rack0: every GPU lost one NVLink of 18 (a bad NVLink switch tray): 776 GB/s everywhere, above the floor
    with faults(cluster_stage, ("degraded-gpu", {"rack": 0, "gpu": "all", "factor": 0.944})):
        every = run_verify(cluster_stage, tmp_path / "every", "--tags", "nvbandwidth", extra_vars=TWO_TRAYS)
    # rack0: half the links of every GPU down, and a site that lowered the floor to 0.4 of the peak
    lowered = {**TWO_TRAYS, "verify_nvbandwidth_min_fraction_of_peak": 0.4}
    with faults(cluster_stage, ("degraded-gpu", {"rack": 0, "gpu": "all", "factor": 0.5})):
        half = run_verify(cluster_stage, tmp_path / "half", "--tags", "nvbandwidth", extra_vars=lowered)

    for run, level in ((every, 0.944), (half, 0.5)):
        assert run.process.returncode != 0
        rack0 = run.record("nvbandwidth", "rack0")
        details = rack0["details"]
        assert rack0["passed"] is False
        assert details["median_gbps"] == pytest.approx(level * 821.41, rel=0.01)  # the median moved with them
        assert details["min"] > details["threshold_gbps"]  # and every pair is above the floor
        assert details["violations"][0].startswith(
            "every one of the 8 GPUs is below 0.97 x the product reference 821.41 GB/s"
        )
        assert len(details["low_gpus"]) == 8
        assert sorted(rack0["failed_nodes"]) == sorted(rack0["nodes"])
        assert run.record("nvbandwidth", "rack1")["passed"] is True


def test_the_fast_bisect_mode_fails_the_pair_of_a_gpu_that_lost_a_link_and_misses_other_routes(
    cluster_stage: SimRack, tmp_path
):
    bisect = {**FAST, "verify_nvbandwidth_testcase": "multinode_bisect_write_ce"}
    with faults(
        cluster_stage,
        ("degraded-gpu", {"rack": 0, "gpu": 5, "factor": 0.944}),
        ("degraded-link", {"rack": 1, "src": 0, "dst": 5, "gbps": 700}),  # a route bisect does not measure
    ):
        run = run_verify(cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars=bisect)

    assert run.process.returncode != 0
    rack0 = run.record("nvbandwidth", "rack0")
    details = rack0["details"]
    assert details["testcase"] == "multinode_bisect_write_ce"
    assert len(details["matrix"]) == 72 and {len(row) for row in details["matrix"]} == {1}
    assert details["row_pairs"][5] == [5, 41] and details["row_pairs"][41] == [41, 5]  # GPU i with GPU i + 36
    # the faulted GPU (tray 1's GPU 1, at the rank of the worker the scheduler put on tray 1) writes to its bisect
    # partner and the partner to it: both rows low, both GPUs' trays named
    low = matrix_gpu(rack0, 5)
    partner = (low + 36) % 72
    assert sorted((p["src"], p["dst"]) for p in details["failing_pairs"]) == sorted([(low, partner), (partner, low)])
    assert sorted(rack0["failed_nodes"]) == sorted(
        {details["rank_nodes"][low // 4], details["rank_nodes"][partner // 4]}
    )
    assert any("held against the run's median alone" in w for w in details["warnings"])  # the first bisect run
    expected = details["expected_run"]
    assert expected["pairs"] == 72 and expected["steps"] == 1
    rack1 = run.record("nvbandwidth", "rack1")
    assert rack1["passed"] is True  # 0->5 is not a bisect pair: only the full pairwise mode sees it
    html = (tmp_path / "report" / "report.html").read_text()
    assert f"{low}-&gt;{partner}" in html or f"{low}->{partner}" in html


def test_two_runs_started_at_once_both_complete_into_one_intact_history(cluster_stage: SimRack, tmp_path):
    # one run measures rack0, the other rack1, into the same report directory, each with a run id of its own
    report = tmp_path / "report"

    def run(rack: str, run_id: str):
        variables = {**TWO_TRAYS, "gpu_fabric_verify_cliques": [rack], "gpu_fabric_verify_run_id": run_id}
        return run_verify(cluster_stage, report, "--tags", "nvbandwidth", extra_vars=variables)

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(lambda args: run(*args), [("rack0", "at-once-0"), ("rack1", "at-once-1")])

    for done in (first, second):
        assert done.process.returncode == 0, done.output[-3000:]
    index = json.loads((report / "runs" / "index.json").read_text())
    assert sorted((e["run_id"], sorted(e["verdicts"].items())) for e in index["runs"]) == [
        ("at-once-0", [("nvbandwidth/rack0", "passed")]),
        ("at-once-1", [("nvbandwidth/rack1", "passed")]),
    ]
    for rack, run_id in (("rack0", "at-once-0"), ("rack1", "at-once-1")):
        record = json.loads((report / "runs" / run_id / "nvbandwidth" / f"{rack}.json").read_text())
        assert (record["run_id"], record["rack"], record["passed"]) == (run_id, rack, True)
        assert len(record["details"]["matrix"]) == 8


def test_two_runs_are_kept_and_a_pinned_run_is_the_next_runs_baseline(cluster_stage: SimRack, tmp_path):
    report = tmp_path / "report"
    first = run_verify(cluster_stage, report, "--tags", "nvbandwidth", extra_vars=FAST)
    assert first.process.returncode == 0, first.output[-3000:]
    index = json.loads((report / "runs" / "index.json").read_text())
    (first_id,) = [run["run_id"] for run in index["runs"]]
    assert first.record("nvbandwidth", "rack0")["details"]["driver_version"] == "580.95.05"

    pinned = {**FAST, "gpu_fabric_verify_baseline_run": first_id}
    with faults(cluster_stage, ("degraded-link", {"rack": 0, "src": 0, "dst": 5, "gbps": 775})):
        second = run_verify(cluster_stage, report, "--tags", "nvbandwidth", extra_vars=pinned)

    assert second.process.returncode != 0
    index = json.loads((report / "runs" / "index.json").read_text())
    pinned_by_run = {run["run_id"]: run["pinned"] for run in index["runs"]}
    assert len(pinned_by_run) == 2 and pinned_by_run[first_id] is True
    assert sorted(pinned_by_run.values()) == [False, True]
    for run in index["runs"]:  # both runs' records are kept
        assert (report / "runs" / run["run_id"] / "nvbandwidth" / "rack0.json").is_file()
    rack0 = second.record("nvbandwidth", "rack0")
    baseline = next(r for r in rack0["details"]["references"] if r["kind"] == "baseline")
    assert baseline["source"] == f"pinned run {first_id}"
    # each pair held against its own figure of the pinned run: the lost link fails, nothing else does
    (pair,) = rack0["details"]["failing_pairs"]
    assert (pair["src"], pair["dst"], pair["gbps"]) == (0, 5, 775.0)
    assert second.record("nvbandwidth", "rack1")["passed"] is True


def test_unusable_trays_are_skipped_with_their_reason_and_a_missing_gpu_fails_the_cliques(cluster_stage, tmp_path):
    with (
        faults(
            cluster_stage,
            ("missing-gpu", {"node": "gb200-r1-t3"}),
            ("busy-node", {"node": "gb200-r0-t2"}),
        ),
        cordoned(cluster_stage, "gb200-r0-t7"),
    ):
        run = run_verify(cluster_stage, tmp_path / "report", extra_vars=FAST)

    assert run.process.returncode != 0
    records = run.records()
    cliques = records["cliques"]["rack1"]
    assert cliques["passed"] is False
    assert cliques["failed_nodes"] == ["gb200-r1-t3"]
    assert "gb200-r1-t3 has 3 allocatable nvidia.com/gpu, expected 4" in cliques["summary"]
    assert records["cliques"]["rack0"]["passed"] is True

    rack0 = records["nvbandwidth"]["rack0"]
    assert rack0["passed"] is True
    skipped = {s["node"]: s["reason"] for s in rack0["trays"]["skipped"]}
    assert skipped == {
        "gb200-r0-t2": "GPUs in use: 4 of 4 nvidia.com/gpu held by gpu-fabric-sim-busy/busy-gb200-r0-t2 (4)",
        "gb200-r0-t7": "cordoned",
    }
    assert "gb200-r0-t2" not in rack0["nodes"] and len(rack0["nodes"]) == len(gpu_trays(cluster_stage)["rack0"]) - 2
    rack1 = records["nvbandwidth"]["rack1"]
    assert {s["node"]: s["reason"] for s in rack1["trays"]["skipped"]} == {
        "gb200-r1-t3": "3 of 4 nvidia.com/gpu allocatable"
    }
    # the IMEX pods need no GPU: the busy tray still gets its channel checked, the cordoned one does not
    imex0 = records["imex_channel"]["rack0"]
    assert "gb200-r0-t2" in imex0["nodes"] and "gb200-r0-t7" not in imex0["nodes"]

    coverage = run.report()["coverage"]
    reasons = {entry["node"]: entry["reason"] for entry in coverage["skipped"]}
    assert "cordoned" in reasons["gb200-r0-t7"]
    # a tray counts once, by its own verdict: the cliques check failed it, so it is failed, not skipped, although
    # nvbandwidth skipped it (its record keeps the reason, above)
    assert "gb200-r1-t3" in coverage["failed"] and "gb200-r1-t3" not in reasons
    assert verification_objects(cluster_stage, run.prefix) == ZERO


def test_a_rack_left_with_one_tray_is_incomplete(cluster_stage: SimRack, tmp_path):
    rack1 = gpu_trays(cluster_stage)["rack1"]
    with cordoned(cluster_stage, *rack1[1:]):
        failed = run_verify(cluster_stage, tmp_path / "a", "--tags", "nvbandwidth", extra_vars=FAST)
        allowed = run_verify(
            cluster_stage,
            tmp_path / "b",
            "--tags",
            "nvbandwidth",
            extra_vars={**FAST, "gpu_fabric_verify_allow_incomplete": True},
        )

    assert failed.process.returncode != 0
    record = failed.record("nvbandwidth", "rack1")
    assert record["outcome"] == "incomplete" and record["passed"] is False
    assert record["summary"].startswith(
        f"rack rack1: 1 usable tray of {len(rack1)}; the nvbandwidth check needs at least 2"
    )
    assert failed.record("nvbandwidth", "rack0")["passed"] is True
    assert allowed.process.returncode == 0, allowed.output[-3000:]
    assert allowed.record("nvbandwidth", "rack1")["outcome"] == "incomplete"
    assert allowed.record("nvbandwidth", "rack1")["passed"] is True


def test_the_scope_narrows_to_racks_and_trays(cluster_stage: SimRack, tmp_path):
    run = run_verify(
        cluster_stage,
        tmp_path / "report",
        "--tags",
        "nvbandwidth",
        extra_vars={**FAST, "gpu_fabric_verify_cliques": ["rack1"], "gpu_fabric_verify_nodes_per_clique": 2},
    )

    assert run.process.returncode == 0, run.output[-3000:]
    records = run.records()["nvbandwidth"]
    assert sorted(records) == ["rack1"]
    assert records["rack1"]["nodes"] == ["gb200-r1-t0", "gb200-r1-t1"]
    assert len(records["rack1"]["details"]["matrix"]) == 8


def test_an_unknown_rack_is_refused_before_anything_runs(cluster_stage: SimRack, tmp_path):
    run = run_verify(
        cluster_stage, tmp_path / "report", "--tags", "nvbandwidth", extra_vars={"gpu_fabric_verify_cliques": ["rack9"]}
    )
    assert run.process.returncode != 0
    assert "rack9 matches no rack, clique or GPU tray of the cluster" in run.output


def node_state(sim_rack: SimRack, name: str) -> tuple[str | None, list[str]]:
    node = sim_rack.get_json("node", name)
    taints = [t["key"] for t in node["spec"].get("taints") or []]
    return node["metadata"].get("labels", {}).get(VERIFIED), taints


def test_the_verdict_is_written_to_the_trays_and_a_fixed_tray_is_untainted(cluster_stage: SimRack, tmp_path):
    label = {
        "gpu_fabric_verify_label_nodes": True,
        "gpu_fabric_verify_taint_failed": True,
        "gpu_fabric_verify_required_checks": ["nvbandwidth"],  # these runs are --tags nvbandwidth
        **FAST,
    }
    try:
        with faults(cluster_stage, ("degraded-link", {"rack": 1, "src": 4, "dst": 9, "gbps": 400})):
            broken = run_verify(cluster_stage, tmp_path / "a", "--tags", "nvbandwidth", extra_vars=label)
        assert broken.process.returncode != 0
        # GPU 4 is worker 1's, GPU 9 worker 2's: the trays the scheduler put them on are blamed
        record = broken.record("nvbandwidth", "rack1")
        blamed = record["details"]["rank_nodes"][1:3]
        assert sorted(record["failed_nodes"]) == sorted(blamed)
        for node in blamed:
            assert node_state(cluster_stage, node) == ("failed", [TAINT])
        healthy = next(node for node in record["nodes"] if node not in blamed)
        assert node_state(cluster_stage, healthy) == ("passed", [])
        assert node_state(cluster_stage, "gb200-r0-t1") == ("passed", [])
        annotation = json.loads(
            cluster_stage.get_json("node", blamed[0])["metadata"]["annotations"]["gpu-fabric.nvidia.com/verification"]
        )
        assert annotation["verdict"] == "failed" and "4->9 400.00 GB/s" in annotation["summary"]

        # the checks tolerate the taint, so the fixed trays are measured again, pass and lose it
        fixed = run_verify(cluster_stage, tmp_path / "b", "--tags", "nvbandwidth", extra_vars=label)
        assert fixed.process.returncode == 0, fixed.output[-3000:]
        assert sorted(fixed.record("nvbandwidth", "rack1")["nodes"]) == sorted(record["nodes"])
        for node in blamed:
            assert node_state(cluster_stage, node) == ("passed", [])
    finally:
        for node in gpu_trays(cluster_stage)["rack1"] + gpu_trays(cluster_stage)["rack0"]:
            cluster_stage.kubectl("label", "node", node, f"{VERIFIED}-", check=False)
            cluster_stage.kubectl("annotate", "node", node, "gpu-fabric.nvidia.com/verification-", check=False)
            cluster_stage.kubectl("taint", "node", node, f"{TAINT}-", check=False)
