# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The MPIJob checks' judges on one rack's launcher log: the real nccl-tests run, the fleet's NCCL rule, and the bad
cases (the nvbandwidth judge is the check's own: ``test_check_nvbandwidth``)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.judges import (
    judge_fleet_busbw,
    judge_nccl_log,
    nccl_threshold,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
NCCL = (FIXTURES / "nccl" / "gb200-2node-all_reduce_perf-mnnvl.txt").read_text()
NCCL_WITHOUT_INIT_LINES = (FIXTURES / "nccl" / "gb200-2node-all_reduce_perf.txt").read_text()


def plan(trays: int, rack: int = 1) -> RackPlan:
    nodes = [f"gb200-r{rack}-t{i}" for i in range(trays)]
    return RackPlan(f"rack{rack}", ["c.1"], nodes, nodes, [], 4, "NVIDIA-GB200")


def test_nccl_threshold_follows_the_product_peak():
    assert nccl_threshold({"min_fraction_of_peak": 0.6}, "NVIDIA-GB200") == (
        540.0,
        "0.6 x 900.00 GB/s NVLink peak of NVIDIA-GB200",
        4 << 30,
    )
    assert nccl_threshold({"min_busbw_gbps": 600}, "NVIDIA-GB200") == (600.0, "600.00 GB/s", 4 << 30)
    assert nccl_threshold({"min_fraction_of_peak": 0.6}, "Tesla-T4")[0] is None


def test_the_real_nccl_run_passes_and_a_missing_product_fails():
    verdict = judge_nccl_log(NCCL, plan(2), {"binary": "all_reduce_perf", "min_fraction_of_peak": 0.6})
    assert verdict["passed"] is True, verdict["summary"]
    assert verdict["summary"].startswith("all_reduce_perf over 8 GPUs: bus bandwidth 798.64 GB/s or more at 4 GiB ")
    assert verdict["details"]["threshold_gbps"] == 540.0
    # the threshold's source and the transport, stated in the summary
    assert "540.00 GB/s (0.6 x 900.00 GB/s NVLink peak of NVIDIA-GB200;" in verdict["summary"]
    assert verdict["summary"].endswith("; MNNVL on 8 of 8 ranks")
    silent = judge_nccl_log(NCCL_WITHOUT_INIT_LINES, plan(2), {"min_fraction_of_peak": 0.6})
    assert silent["passed"] is False
    assert "does not show that NCCL used multi-node NVLink" in silent["summary"]
    assert judge_nccl_log(NCCL_WITHOUT_INIT_LINES, plan(2), {"min_fraction_of_peak": 0.6, "require_mnnvl": False})[
        "passed"
    ]
    unknown = RackPlan("rack1", ["c.1"], ["a", "b"], ["a", "b"], [], 4, "")
    assert judge_nccl_log(NCCL, unknown, {"min_fraction_of_peak": 0.6})["passed"] is False


def nccl_record(rack: str, busbw: float) -> dict:
    return {
        "rack": rack,
        "passed": True,
        "outcome": "passed",
        "summary": f"rack {rack}: ok",
        "details": {"avg_busbw_gbps": busbw, "violations": []},
    }


def test_a_rack_far_below_the_fleets_nccl_median_is_named():
    # four healthy racks around 700 GB/s and one whose GPUs each lost a link of 18 (about 17/18 of that)
    measured = [nccl_record(f"rack{i}", v) for i, v in enumerate([701.2, 699.8, 700.5, 661.0, 702.1])]
    records = judge_fleet_busbw(measured, 0.97)
    assert [r["rack"] for r in records if not r["passed"]] == ["rack3"]
    assert all(r["passed"] for r in measured), "the rule makes new records; the finished ones stay as they are"
    low = records[3]
    assert (low["passed"], low["outcome"], low["verdict"]) == (False, "failed", "failed")
    assert low["summary"] == (
        "rack rack3: ok; average bus bandwidth 661.00 GB/s is 0.944 of the fleet's median 700.50 GB/s (below 0.97): "
        "this rack is slower than its peers"
    )
    assert all(r["passed"] for r in records if r["rack"] != "rack3")
    assert records[0]["details"]["fleet_median_busbw_gbps"] == 700.5


def test_the_fleet_rule_needs_three_racks_and_can_be_off():
    two = [nccl_record("a", 700), nccl_record("b", 300)]
    assert judge_fleet_busbw(two, 0.9) == two
    three = [nccl_record(r, v) for r, v in [("a", 700), ("b", 700), ("c", 300)]]
    assert judge_fleet_busbw(three, 0) == three
