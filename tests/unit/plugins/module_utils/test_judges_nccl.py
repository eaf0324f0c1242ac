# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The NCCL judge with the module's defaults: the floor from the published GB200 NVL72 figure, held at 4 GiB and
more, nccl-tests' own verdict, and the fleet rule on the judged figure."""

from __future__ import annotations

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.judges import (
    judge_fleet_busbw,
    judge_nccl_log,
    nccl_threshold,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan

from tests.conftest import FIXTURES

NCCL = (FIXTURES / "nccl" / "gb200-2node-all_reduce_perf-mnnvl.txt").read_text()
# fabric_verify's nccl defaults
DEFAULTS = {
    "binary": "all_reduce_perf",
    "require_mnnvl": True,
    "min_busbw_gbps": 0,
    "min_fraction_of_reference": 0.9,
    "min_fraction_of_peak": 0.6,
    "peak_gbps": 0,
    "peak_gbps_by_product": [],
}
REFERENCE = "0.9 x 834.57 GB/s, GB200 NVL72 all_reduce_perf over 72 GPUs, coreweave/nccl-tests#43, at 4 GiB and more"


def plan(trays: int, product: str = "NVIDIA-GB200") -> RackPlan:
    nodes = [f"gb200-r1-t{i}" for i in range(trays)]
    return RackPlan("rack1", ["c.1"], nodes, nodes, [], 4, product)


def test_the_default_floor_on_gb200_is_the_published_nvl72_figure():
    assert nccl_threshold(DEFAULTS, "NVIDIA-GB200") == (751.11, REFERENCE, 4 << 30)
    # no published figure for another product or benchmark: the fraction of the NVLink peak, at the same sizes
    assert nccl_threshold(DEFAULTS, "NVIDIA-H200") == (270.0, "0.6 x 450.00 GB/s NVLink peak of NVIDIA-H200", 4 << 30)
    assert nccl_threshold(DEFAULTS, "NVIDIA-GB200", "all_gather_perf")[0] == 540.0
    assert nccl_threshold(dict(DEFAULTS, min_fraction_of_reference=0), "NVIDIA-GB200")[0] == 540.0
    assert nccl_threshold(dict(DEFAULTS, min_busbw_gbps=800), "NVIDIA-GB200") == (800.0, "800.00 GB/s", 4 << 30)


def test_a_healthy_run_passes_on_its_large_message_rows_and_says_so():
    verdict = judge_nccl_log(NCCL, plan(2), DEFAULTS)
    assert verdict["passed"] is True, verdict["summary"]
    assert verdict["summary"] == (
        "all_reduce_perf over 8 GPUs: bus bandwidth 798.64 GB/s or more at 4 GiB and more, at or above 751.11 GB/s "
        f"({REFERENCE}; average 787.80 GB/s, best size 805.64 GB/s); MNNVL on 8 of 8 ranks"
    )
    details = verdict["details"]
    assert (details["threshold_gbps"], details["judged_min_bytes"], details["judged_busbw_gbps"]) == (
        751.11,
        4 << 30,
        798.64,
    )


def test_a_slow_large_message_row_fails_naming_the_reference_though_the_average_is_fine():
    # 8 GiB in-place at 16/18 of its figure; the average stays 776.6 GB/s (above the floor): only the rows show it
    text = NCCL.replace("   18659  460.36  805.64      0", "   20992  409.21  716.12      0")
    text = text.replace("787.804 ", "776.614 ")
    verdict = judge_nccl_log(text, plan(2), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"] == (
        f"all_reduce_perf over 8 GPUs: bus bandwidth below the floor 751.11 GB/s ({REFERENCE}) at 1 of 4 "
        "measurements of 4 GiB and more: 8 GiB in-place 716.12 GB/s; the NVLink fabric is slower than a healthy rack "
        "(run nvbandwidth to find the GPU or tray)"
    )


def test_nccl_tests_failed_verdict_fails_the_rack():
    text = NCCL.replace("# Avg bus bandwidth    : 787.804 ", "# Avg bus bandwidth    : 787.804 FAILED")
    verdict = judge_nccl_log(text, plan(2), DEFAULTS)
    assert verdict["passed"] is False
    assert "nccl-tests judged its own run FAILED" in verdict["summary"]


def test_an_escaped_error_line_fails_the_rack():
    verdict = judge_nccl_log(NCCL + "\x1b]0;launcher\x07\x1b[31mERROR: worker 1 lost\x1b[0m\n", plan(2), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"] == "all_reduce_perf over 8 GPUs: the test reported a failure: ERROR: worker 1 lost"


def without_rank(text: str, rank: int) -> str:
    """The real 2-tray run as one without ``rank`` prints it: no ``# Rank`` line, no INIT line of that rank."""
    return "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith(f"#  Rank {rank:2d} ") and f" rank {rank} nRanks" not in line
    )


def test_a_tray_with_fewer_ranks_than_its_gpus_fails_naming_the_tray_before_the_figures():
    verdict = judge_nccl_log(without_rank(NCCL, 6), plan(2), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"] == (
        "the nccl-tests output shows 7 of the 8 GPUs planned, no figure is judged: gb200-r1-t1: GPU 2 (rank 6) not "
        "in the nccl-tests output (no '# Rank' line names it): a GPU off the bus or a rank that never started"
    )
    assert verdict["failed_nodes"] == ["gb200-r1-t1"]
    assert list(verdict["node_problems"]) == ["gb200-r1-t1"]
    assert verdict["details"]["violations"][1].startswith("7 ranks took part, 8 were expected")


def test_a_tray_with_no_rank_is_named():
    verdict = judge_nccl_log(NCCL, plan(3), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["node_problems"] == {
        "gb200-r1-t2": "none of its 4 GPUs is in the nccl-tests output (ranks 8 to 11: no '# Rank' line names it)"
    }
    assert verdict["summary"].startswith("the nccl-tests output shows 8 of the 12 GPUs planned, no figure is judged: ")


def test_the_ranks_tray_follows_the_worker_its_host_names():
    # worker 1 (nccl-test-worker-1) ran on t0: its missing rank is t0's
    verdict = judge_nccl_log(without_rank(NCCL, 6), plan(2), DEFAULTS, ["gb200-r1-t1", "gb200-r1-t0"])
    assert verdict["failed_nodes"] == ["gb200-r1-t0"]


def test_a_log_without_rank_lines_is_no_evidence_and_blames_no_tray():
    text = "\n".join(line for line in NCCL.splitlines() if not line.startswith("#  Rank"))
    verdict = judge_nccl_log(text, plan(2), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"] == (
        "all_reduce_perf over 8 GPUs: the all_reduce_perf output lists no rank (no '#  Rank N ... on <host> device D' "
        "line under '# Using devices'): it does not show which of the 8 planned GPUs ran; read the launcher's log"
    )
    assert verdict.get("failed_nodes", []) == []


def record(rack: str, judged: float, average: float) -> dict:
    return {
        "rack": rack,
        "passed": True,
        "outcome": "passed",
        "summary": f"rack {rack}: ok",
        "details": {"judged_busbw_gbps": judged, "judged_min_bytes": 4 << 30, "avg_busbw_gbps": average},
    }


def test_the_fleet_rule_compares_the_judged_figure_not_the_average():
    # rack2's large messages are 0.9 of its peers' while its average (mostly small sizes) looks like theirs
    measured = [record("rack0", 835.0, 745.0), record("rack1", 838.0, 746.0), record("rack2", 751.5, 744.0)]
    records = judge_fleet_busbw(measured, 0.95)
    assert [r["rack"] for r in records if not r["passed"]] == ["rack2"]
    assert records[2]["summary"] == (
        "rack rack2: ok; bus bandwidth at 4 GiB and more 751.50 GB/s is 0.900 of the fleet's median 835.00 GB/s "
        "(below 0.95): this rack is slower than its peers"
    )
