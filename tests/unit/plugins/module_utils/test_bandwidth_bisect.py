# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fast mode: ``multinode_bisect_write_ce``, each GPU writing to the GPU half a rack away, all at once.

nvbandwidth prints it as an N x 1 matrix under the description "Bisect benchmarking, simultaneous write CE
BW" (no unit), each row labelled "<i>-><peer>" with padded ids (multinode_testcases.cpp, inline_common.h).
No machine here runs it: the cells are the real GB200 capture's, cycled over a 72-GPU rack, in the layout of
nvbandwidth's own emitter (nvbandwidth_emitter.py). A GPU that lost one NVLink of 18 slows both rows it is
part of: the one it writes in and the one that writes to it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_cells import BISECT_TESTCASE, row_pairs
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    ONE_LOST_LINK_OF_18,
    RULE_BASELINE,
    RULE_PRODUCT,
    Baseline,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import check_nvbandwidth, parse_nvbandwidth
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_sections import heatmap_view

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from nvbandwidth_emitter import Matrix, Testcase, emit_run, padded_process_id  # noqa: E402
from test_bandwidth_rule import GB200, off_diagonal, real_gb200_rows  # noqa: E402

DESCRIPTION = "Bisect benchmarking, simultaneous write CE BW"
TRAYS = 18
WORLD = TRAYS * 4
NODES = [f"gb200-r0-t{tray}" for tray in range(TRAYS)]
HOSTS = [f"nvbandwidth-rack0-worker-{tray}" for tray in range(TRAYS)]


def peer(gpu: int, world: int = WORLD) -> int:
    return (gpu + world // 2) % world


def healthy_column(world: int = WORLD) -> list:
    cells = off_diagonal(real_gb200_rows())
    return [[cells[gpu % len(cells)]] for gpu in range(world)]


def lose_a_link(column: list, gpus) -> list:
    """Each row whose writer or target lost a link runs at 17/18 of its figure."""
    gpus = set(gpus)
    world = len(column)
    return [
        [round(row[0] * ONE_LOST_LINK_OF_18, 2) if gpu in gpus or peer(gpu, world) in gpus else row[0]]
        for gpu, row in enumerate(column)
    ]


def emit_bisect(column: list) -> str:
    world = len(column)
    labels = [f"{padded_process_id(g, world)}->{padded_process_id(peer(g, world), world)}" for g in range(world)]
    matrix = Matrix(BISECT_TESTCASE, DESCRIPTION, column, row_labels=labels)
    return emit_run([Testcase(BISECT_TESTCASE, [matrix])], hosts=HOSTS[: world // 4], version="v0.7")


def judged(column: list, **kwargs) -> dict:
    world = len(column)
    return check_nvbandwidth(
        emit_bisect(column),
        testcase=BISECT_TESTCASE,
        gpu_product=GB200,
        nodes=NODES[: world // 4],
        gpus_per_node=4,
        **kwargs,
    ).to_result()


def test_the_bisect_output_is_read_as_72_rows_of_gpu_pairs_in_gb_per_s():
    content = emit_bisect(healthy_column())
    assert f"Running {BISECT_TESTCASE}.\n{DESCRIPTION}\n" in content
    assert "\n 0->36    " in content and "\n36-> 0    " in content  # labels padded as getPaddedProcessId does
    matrix = parse_nvbandwidth(content).testcases[BISECT_TESTCASE].matrix_named()
    assert matrix.shape == (72, 1)
    assert matrix.unit == "GB/s" and matrix.description == DESCRIPTION
    assert matrix.row_labels[:2] == ["0->36", "1->37"] and matrix.row_labels[36] == "36-> 0"
    assert row_pairs(matrix, matrix.rows, BISECT_TESTCASE)[36] == (36, 0)


def test_a_healthy_rack_passes_and_says_it_is_held_against_its_median_alone():
    result = judged(healthy_column())
    assert result["passed"] is True, result["summary"]
    assert result["gpus"] == 72 and result["measured_cells"] == 72
    assert result["summary"].startswith("72 of 72 GPU pairs at or above 765.00 GB/s and 0.97 of the median")
    (warning,) = result["warnings"]
    assert "held against the run's median alone" in warning and BISECT_TESTCASE in warning


def test_one_gpu_that_lost_a_link_fails_its_pair_naming_both_ends_and_both_trays():
    result = judged(lose_a_link(healthy_column(), [41]))
    assert result["passed"] is False
    # GPU 41 (tray 10) writes in row 41 (41->5) and GPU 5 (tray 1) writes to it in row 5 (5->41): bisect pairs
    # the two both ways, so the same two rows are low whichever of them lost the link, and both are named.
    assert sorted((p["src"], p["dst"]) for p in result["failing_pairs"]) == [(5, 41), (41, 5)]
    assert {p["rule"] for p in result["failing_pairs"]} == {"median"}
    assert result["low_gpus"] == []
    assert result["failed_nodes"] == ["gb200-r0-t1", "gb200-r0-t10"]
    assert result["summary"].startswith("2 of 72 GPU pairs below the threshold: 5->41 775.89 GB/s (gb200-r0-t1 -> ")
    assert "; 41->5 776.12 GB/s (gb200-r0-t10 -> gb200-r0-t1), 0.945 of the median" in result["summary"]


def test_a_slow_route_between_two_gpus_names_both_ends_and_both_trays():
    column = healthy_column()
    column[3] = [775.0]  # 3->39 only: neither GPU is low elsewhere
    result = judged(column)
    assert result["passed"] is False
    (pair,) = result["failing_pairs"]
    assert (pair["src"], pair["dst"], pair["src_node"], pair["dst_node"]) == (3, 39, "gb200-r0-t0", "gb200-r0-t9")
    assert "3->39 775.00 GB/s (gb200-r0-t0 -> gb200-r0-t9)" in result["summary"]
    assert result["violations"] == [
        f"GPU 3 -> GPU 39: 775 GB/s is {775 / result['median_gbps']:.3f} of the median {result['median_gbps']:.2f}, "
        f"below 0.97 x the median ({0.97 * result['median_gbps']:.2f})"
    ]
    assert result["failed_nodes"] == ["gb200-r0-t0", "gb200-r0-t9"]


def test_every_gpu_one_link_down_is_caught_by_the_site_baseline_not_by_the_median():
    healthy = judged(healthy_column())
    baseline = Baseline.from_record(
        {"median_gbps": healthy["median_gbps"], "matrix": healthy["matrix"], "rank_nodes": NODES, "run_id": "r1"}
    )
    degraded = lose_a_link(healthy_column(), range(WORLD))
    assert judged(degraded)["passed"] is True  # the run's median moved with every GPU: the fast mode's limit
    result = judged(degraded, baseline=baseline)
    assert result["passed"] is False
    assert result["reference"]["kind"] == RULE_BASELINE
    assert {p["rule"] for p in result["failing_pairs"]} == {RULE_BASELINE}
    assert len(result["failing_pairs"]) == 72
    assert result["violations"][0].startswith("every one of the 72 GPUs is below 0.97 x the site baseline")
    # each row is held against its own figure of the baseline run, named by its GPU pair
    assert "pair 0->36" not in result["summary"]


def test_a_site_reference_for_the_bisect_testcase_is_used():
    site = [{"match": "GB200", "testcase": BISECT_TESTCASE, "gbps": 821.0, "source": "site bisect run 2026-11"}]
    result = judged(lose_a_link(healthy_column(), range(WORLD)), product_references=site)
    assert result["passed"] is False
    assert result["reference"] == {"kind": RULE_PRODUCT, "gbps": 821.0, "source": "site bisect run 2026-11"}
    assert result["warnings"] == []
    assert "held against the product reference 821.00 GB/s (site bisect run 2026-11)" in result["summary"]


def test_json_output_has_no_row_labels_and_the_pairs_follow_from_the_testcase():
    column = lose_a_link(healthy_column(8), [6])
    document = {
        "nvbandwidth": {
            "version": "v0.7",
            "Driver Version": "580.95.05",
            "testcases": [
                {
                    "name": BISECT_TESTCASE,
                    "status": "Passed",
                    "bandwidth_description": DESCRIPTION,
                    "bandwidth_matrix": [[f"{row[0]:.2f}"] for row in column],
                    "sum": round(sum(row[0] for row in column), 2),
                }
            ],
        }
    }
    result = check_nvbandwidth(
        json.dumps(document), testcase=BISECT_TESTCASE, gpu_product=GB200, nodes=NODES[:2], gpus_per_node=4
    ).to_result()
    assert result["unit"] == "GB/s"
    assert sorted((p["src"], p["dst"]) for p in result["failing_pairs"]) == [(2, 6), (6, 2)]
    assert result["failed_nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]


def test_the_heatmap_shows_each_row_as_its_pair_and_outlines_the_failing_one():
    result = judged(lose_a_link(healthy_column(8), [6]))
    record = {
        "nodes": NODES[:2],
        "details": {
            "matrix": result["matrix"],
            "row_pairs": [[g, peer(g, 8)] for g in range(8)],
            "failing_pairs": result["failing_pairs"],
            "threshold_gbps": result["threshold_gbps"],
            "gpus_per_node": 4,
            "rank_nodes": NODES[:2],
        },
    }
    view = heatmap_view(record)
    assert [row["label"] for row in view["rows"]] == ["0->4", "1->5", "2->6", "3->7", "4->0", "5->1", "6->2", "7->3"]
    outlined = [row["label"] for row in view["rows"] if row["cells"][0]["css"] == "cell-fail"]
    assert outlined == ["2->6", "6->2"]
    assert view["rows"][6]["cells"][0]["title"].startswith("GPU 6 -> GPU 2 (gb200-r0-t1 -> gb200-r0-t0): ")
    assert view["caption"].startswith("Bisect: each GPU writes to the GPU half a rack away")
