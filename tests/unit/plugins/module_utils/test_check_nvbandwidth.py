# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nvbandwidth check's judge on one rack's launcher log: the real 2-tray GB200 run, a generated 18-tray rack,
and the bad cases."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.nvbandwidth import judge_nvbandwidth_log
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
GB200 = (FIXTURES / "nvbandwidth" / "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt").read_text()
RACK72 = (FIXTURES / "nvbandwidth" / "generated-gb200-18node-multinode_device_to_device_memcpy_read_ce.txt").read_text()
DEFAULTS = {"testcase": "multinode_device_to_device_memcpy_read_ce", "min_fraction_of_peak": 0.85, "min_gbps": 0}


def plan(trays: int, rack: int = 1) -> RackPlan:
    nodes = [f"gb200-r{rack}-t{i}" for i in range(trays)]
    return RackPlan(f"rack{rack}", ["c.1"], nodes, nodes, [], 4, "NVIDIA-GB200")


def with_cell(text: str, row: int, column: int, value: str) -> str:
    """The text matrix with one cell replaced (right-aligned in 10 characters) and its SUM line to match."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("memcpy CE")) + 2
    line = lines[start + row]
    width = len(line) - 10 * (len(line) // 10)
    offset = width + 10 * column
    old = float(line[offset : offset + 10])
    lines[start + row] = line[:offset] + f"{value:>10}" + line[offset + 10 :]
    at = next(i for i, line in enumerate(lines) if line.startswith("SUM "))
    key, total = lines[at].split()[1:]
    lines[at] = f"SUM {key} {float(total) - old + float(value):.2f}"
    return "\n".join(lines) + "\n"


def test_the_real_two_tray_run_passes():
    verdict = judge_nvbandwidth_log(GB200, plan(2, rack=0), DEFAULTS)
    assert verdict["passed"] is True
    assert verdict["summary"].startswith("56 of 56 GPU pairs at or above 765.00 GB/s and 0.97 of the product reference")
    details = verdict["details"]
    assert (details["sum"], details["min"], details["threshold_gbps"]) == (45997.93, 820.35, 765.0)
    assert len(details["matrix"]) == 8 and details["matrix"][0][3] == 821.92


def test_a_healthy_72_gpu_rack_passes():
    verdict = judge_nvbandwidth_log(RACK72, plan(18), DEFAULTS)
    assert verdict["passed"] is True, verdict["summary"]
    assert verdict["summary"].startswith("5112 of 5112 GPU pairs at or above 765.00 GB/s")
    assert len(verdict["details"]["matrix"]) == 72
    assert verdict["failed_nodes"] == []


def test_one_lost_link_on_a_72_gpu_rack_fails_naming_the_pair_and_its_trays():
    verdict = judge_nvbandwidth_log(with_cell(RACK72, 9, 70, "775.00"), plan(18), DEFAULTS)
    assert verdict["passed"] is False
    assert "9->70 775.00 GB/s (gb200-r1-t2 -> gb200-r1-t17)" in verdict["summary"]
    assert verdict["failed_nodes"] == ["gb200-r1-t17", "gb200-r1-t2"]
    (pair,) = verdict["details"]["failing_pairs"]
    assert (pair["rule"], pair["src_node"]) == ("product", "gb200-r1-t2")


def without_gpu(text: str, gpu: int) -> str:
    """The real 2-tray output as a run without rank ``gpu`` prints it: no Process line, no row or column, the SUM
    of what is left."""
    lines = text.splitlines()
    lines = [line for line in lines if not re.match(rf"Process\s+{gpu} ", line)]
    start = next(i for i, line in enumerate(lines) if line.startswith("memcpy CE")) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    offset = 2 + 10 * gpu
    matrix = [line[:offset] + line[offset + 10 :] for i, line in enumerate(lines[start:end]) if i != gpu + 1]
    total = sum(float(cell) for line in matrix[1:] for cell in line.split()[1:] if cell != "N/A")
    at = next(i for i, line in enumerate(lines) if line.startswith("SUM "))
    lines[at] = f"SUM {lines[at].split()[1]} {total:.2f}"
    return "\n".join(lines[:start] + matrix + lines[end:]) + "\n"


def test_a_run_with_fewer_ranks_than_the_rack_names_the_trays_without_a_gpu_and_judges_no_pair():
    verdict = judge_nvbandwidth_log(GB200, plan(18), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"].startswith(
        "the nvbandwidth output shows 8 of the 72 GPUs planned, no figure is judged: gb200-r1-t2: none of its 4 "
        "GPUs is in the nvbandwidth output (ranks 8 to 11: no Process line names it; not in the matrix); "
    )
    assert verdict["failed_nodes"] == sorted(f"gb200-r1-t{i}" for i in range(2, 18))
    assert verdict["details"]["failing_pairs"] == []


def test_a_gpu_missing_from_a_tray_fails_naming_the_tray_and_the_gpu():
    verdict = judge_nvbandwidth_log(without_gpu(GB200, 7), plan(2, rack=0), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"] == (
        "the nvbandwidth output shows 7 of the 8 GPUs planned, no figure is judged: gb200-r0-t1: GPU 3 (rank 7) not "
        "in the nvbandwidth output (no Process line names it; not in the matrix): a GPU off the bus or a rank that "
        "never started"
    )
    assert verdict["failed_nodes"] == ["gb200-r0-t1"]
    assert list(verdict["node_problems"]) == ["gb200-r0-t1"]
    assert verdict["details"]["expected_gpus"] == 8


def test_a_rank_on_another_device_leaves_its_gpu_without_evidence():
    # tray 1 lost GPU 3 from the bus: its fourth rank landed on device 0 again; the matrix is whole
    verdict = judge_nvbandwidth_log(
        GB200.replace(
            "Process 7 (nvbandwidth-test-worker-1): device 3", "Process 7 (nvbandwidth-test-worker-1): device 0"
        ),
        plan(2, rack=0),
        DEFAULTS,
    )
    assert verdict["passed"] is False
    assert verdict["node_problems"] == {
        "gb200-r0-t1": "GPU 3 (rank 7) not in the nvbandwidth output (no Process line names it; not in the matrix): a "
        "GPU off the bus or a rank that never started"
    }


def test_the_tray_of_a_rank_follows_its_worker_not_the_order_of_the_trays():
    # worker 0 ran on t1, worker 1 on t0 (rank_nodes): the GPU missing from worker 1 is t0's
    verdict = judge_nvbandwidth_log(without_gpu(GB200, 7), plan(2, rack=0), DEFAULTS, ["gb200-r0-t1", "gb200-r0-t0"])
    assert verdict["failed_nodes"] == ["gb200-r0-t0"]


def test_an_aborted_run_is_not_judged():
    aborted = (FIXTURES / "nvbandwidth" / "invented-multinode-cuda-error.txt").read_text()
    verdict = judge_nvbandwidth_log(aborted, plan(2), DEFAULTS)
    assert verdict["passed"] is False
    assert verdict["summary"].startswith("the nvbandwidth output does not show a completed run: ")
    assert re.search(r"CUDA_ERROR|MPI_ABORT", verdict["summary"])


def test_a_sites_peak_table_is_used_before_the_built_in_one():
    # The table once referred to a name that did not exist and turned every rack's result into an error.
    site = {**DEFAULTS, "peak_gbps_by_product": [{"match": "GB200", "peak_gbps": 1000.0}]}
    verdict = judge_nvbandwidth_log(GB200, plan(2, rack=0), site)
    assert verdict["details"]["peak_gbps"] == 1000.0 and verdict["details"]["threshold_gbps"] == 850.0
    assert verdict["passed"] is False  # 0.85 x 1000 is above the healthy 821 GB/s
    other = {**DEFAULTS, "peak_gbps_by_product": [{"match": "GB300", "peak_gbps": 1000.0}]}
    assert judge_nvbandwidth_log(GB200, plan(2, rack=0), other)["details"]["peak_gbps"] == 900.0


def test_the_racks_baseline_from_the_history_holds_the_pairs():
    healthy = judge_nvbandwidth_log(GB200, plan(2, rack=0), DEFAULTS)
    assert healthy["details"]["driver_version"] == "580.95.05"  # kept with the record, read back by the baseline
    record = {
        "run_id": "r1",
        "source": "last passing run r1",
        "median_gbps": 850.0,  # a rack that once ran faster than the product's figure
        "matrix": healthy["details"]["matrix"],
        "rank_nodes": healthy["details"]["rank_nodes"],
    }
    verdict = judge_nvbandwidth_log(GB200, plan(2, rack=0), {**DEFAULTS, "baseline": record})
    assert verdict["passed"] is True  # per pair, each is held against its own figure of that run
    assert [r["kind"] for r in verdict["details"]["references"]] == ["product", "baseline", "median"]
    slower = with_cell(GB200, 1, 2, "790.00")
    failed = judge_nvbandwidth_log(slower, plan(2, rack=0), {**DEFAULTS, "baseline": record})
    assert failed["passed"] is False
    (pair,) = failed["details"]["failing_pairs"]
    assert (pair["src"], pair["dst"], pair["rule"]) == (1, 2, "baseline")


def test_a_sites_product_reference_is_named_in_the_failure():
    site = {
        **DEFAULTS,
        "product_references": [
            {"match": "GB200", "testcase": "read_ce$", "gbps": 860.0, "source": "rack acceptance 2026-11"}
        ],
    }
    verdict = judge_nvbandwidth_log(GB200, plan(2, rack=0), site)
    assert verdict["passed"] is False
    assert "held against the product reference 860.00 GB/s (rack acceptance 2026-11)" in verdict["summary"]
