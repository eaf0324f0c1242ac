# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""nvbandwidth parsing and verdicts on real captures (H200, GB200) and emitter-built bad cases."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import (
    Thresholds,
    check_nvbandwidth,
    parse_nvbandwidth,
    parse_to_dict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_json import detect_format, parse_json
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import Device, gpu_product_of
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_text import parse_text

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the emitter helper sits beside this file, whatever pytest's import mode
    sys.path.insert(0, str(HERE))

from nvbandwidth_emitter import (  # noqa: E402
    READ_DESCRIPTION,
    Matrix,
    Testcase,
    emit_run,
    uniform_peer_matrix,
)

NVBW = HERE.parents[2] / "fixtures" / "nvbandwidth"
MN = "multinode_device_to_device_memcpy_read_ce"
D2D = "device_to_device_memcpy_read_ce"
BIDIR = "device_to_device_bidirectional_memcpy_read_ce"
HELD = (
    "held against the product reference 821.41 GB/s "
    "(GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05, the guide's run: 820.35-822.16 GB/s)"
)


def fixture(name: str) -> str:
    return (NVBW / name).read_text()


@pytest.fixture
def gb200() -> str:
    return fixture("gb200-2node-multinode_device_to_device_memcpy_read_ce.txt")


def brief(pairs: list) -> list:
    """(src, dst, gbps, rule) of each failing pair."""
    return [(p["src"], p["dst"], p["gbps"], p["rule"]) for p in pairs]


def gb200_rows(text: str) -> list:
    lines = text.splitlines()
    start = lines.index(READ_DESCRIPTION) + 2
    return [[None if t == "N/A" else float(t) for t in line.split()[1:]] for line in lines[start : start + 8]]


# ------------------------------------------------------------------ real captures


def test_h200_text_read_cells_and_sum():
    output = parse_text(fixture("h200x2-device_to_device_memcpy_read_ce.txt"))
    testcase = output.testcases[D2D]
    matrix = testcase.matrix_named()
    assert testcase.status == "Passed"
    assert matrix.rows == [[None, 393.76], [393.58, None]]
    assert matrix.reported_sum == 787.35
    assert matrix.unit == "GB/s"
    assert output.version == "v0.8"
    assert output.driver_version == "580.159.04"
    assert output.cuda_version == 13000
    assert [(d.device, d.name, d.pci_bus_id, d.host) for d in output.devices] == [
        (0, "NVIDIA H200", "00000000:00:06", "vm"),
        (1, "NVIDIA H200", "00000000:00:07", "vm"),
    ]


def test_h200_json_string_cells_become_floats_and_na_null():
    content = fixture("h200x2-device_to_device_memcpy_read_ce.json")
    assert detect_format(content) == "json"
    output = parse_json(content)
    matrix = output.testcases[D2D].matrix_named()
    assert matrix.rows == [[None, 393.763], [393.745, None]]
    assert matrix.reported_sum == pytest.approx(787.507469139)
    assert output.format == "json"
    assert [d.host for d in output.devices] == ["vm", "vm"]


def test_h200_write_text_and_json_agree_on_shape():
    text = parse_nvbandwidth(fixture("h200x2-device_to_device_memcpy_write_ce.txt"))
    js = parse_nvbandwidth(fixture("h200x2-device_to_device_memcpy_write_ce.json"))
    name = "device_to_device_memcpy_write_ce"
    assert text.testcases[name].matrix_named().rows == [[None, 396.20], [396.25, None]]
    assert js.testcases[name].matrix_named().rows == [[None, 396.105], [396.16, None]]
    assert text.testcases[name].matrix_named().description == "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"
    assert js.testcases[name].matrix_named().description == text.testcases[name].matrix_named().description


def test_gb200_two_node_matrix(gb200):
    verdict = check_nvbandwidth(gb200)
    result = verdict.to_result()
    assert result["testcase"] == MN
    assert result["shape"] == [8, 8]
    assert result["gpus"] == 8
    assert result["matrix"][0][3] == 821.92
    assert result["matrix"][6][0] == 820.35
    assert result["matrix"][3][3] is None
    assert result["sum"] == 45997.93
    assert result["min"] == 820.35
    assert result["max"] == 822.16
    assert result["measured_cells"] == 56
    assert result["mean"] == pytest.approx(45997.93 / 56, abs=0.001)
    hosts = [d["host"] for d in result["devices"]]
    assert hosts == ["nvbandwidth-test-worker-0"] * 4 + ["nvbandwidth-test-worker-1"] * 4
    assert [d["device"] for d in result["devices"]] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert result["passed"] is True
    assert result["errors"] == [] and result["violations"] == []


def test_gb200_passes_85_percent_of_nvlink5_peak(gb200):
    verdict = check_nvbandwidth(gb200, testcase=MN, thresholds=Thresholds(min_fraction_of_peak=0.85, peak_gbps=900))
    assert verdict.threshold_gbps == pytest.approx(765.0)
    assert verdict.passed
    assert verdict.failing_pairs == []


def test_gb200_threshold_between_values_lists_exactly_the_slower_pairs(gb200):
    verdict = check_nvbandwidth(gb200, thresholds=Thresholds(min_gbps=820.6, expected_gpus=8))
    assert not verdict.passed
    assert verdict.errors == []
    assert brief(verdict.failing_pairs) == [
        (2, 0, 820.59, "floor"),
        (3, 0, 820.51, "floor"),
        (5, 0, 820.51, "floor"),
        (6, 0, 820.35, "floor"),
        (7, 0, 820.59, "floor"),
    ]
    # Without nodes, the hosts of the output's Process lines name the GPUs' nodes.
    assert verdict.failing_pairs[1] == {
        "src": 3,
        "dst": 0,
        "gbps": 820.51,
        "src_node": "nvbandwidth-test-worker-0",
        "dst_node": "nvbandwidth-test-worker-0",
        "fraction_of_median": 0.9989,
        "rule": "floor",
        "reference_gbps": 821.41,  # no product given: the one the Process lines name, NVIDIA GB200 on driver 580
        "threshold_gbps": round(0.97 * 821.41, 4),
        "low_gpu": None,
    }
    assert verdict.summary.startswith(
        f"5 of 56 GPU pairs below the threshold, {HELD}: 2->0 820.59 GB/s (nvbandwidth-test-worker-0 -> "
        "nvbandwidth-test-worker-0), below the floor 820.60; "
    )
    assert verdict.judgement.reference["kind"] == "product"
    assert verdict.violations[0] == "GPU 2 -> GPU 0: 820.59 GB/s is below the threshold 820.6"


def test_min_gbps_above_zero_wins_over_the_fraction_of_peak(gb200):
    # One rule for the module and the roles: min_gbps > 0 replaces the fraction of the peak, even a stricter one.
    verdict = check_nvbandwidth(gb200, thresholds=Thresholds(min_gbps=500, min_fraction_of_peak=0.9125, peak_gbps=900))
    assert verdict.threshold_gbps == 500.0
    assert verdict.to_result()["threshold_explanation"] == "min_gbps 500.00 GB/s"
    assert verdict.passed
    fraction = check_nvbandwidth(gb200, thresholds=Thresholds(min_fraction_of_peak=0.9125, peak_gbps=900))
    assert fraction.threshold_gbps == 821.25
    assert {(p["src"], p["dst"]) for p in fraction.failing_pairs} >= {(1, 5), (2, 5), (6, 5)}
    assert all(p["gbps"] < 821.25 and p["rule"] == "floor" for p in fraction.failing_pairs)


def test_h200_pair_below_threshold():
    verdict = check_nvbandwidth(fixture("h200x2-device_to_device_memcpy_read_ce.txt"), thresholds=Thresholds(393.7))
    assert verdict.failing_pairs == [
        {
            "src": 1,
            "dst": 0,
            "gbps": 393.58,
            "src_node": "vm",
            "dst_node": "vm",
            "fraction_of_median": 0.9998,
            "rule": "floor",
            "reference_gbps": 393.67,
            "threshold_gbps": round(0.97 * 393.67, 4),
            "low_gpu": None,
        }
    ]


def test_degraded_cell_with_consistent_sum_fails_only_that_pair(gb200):
    degraded = gb200.replace(" 0       N/A    822.16    821.69    821.92", " 0       N/A    822.16    821.69    410.50")
    degraded = degraded.replace("45997.93", f"{45997.93 - 821.92 + 410.50:.2f}")
    verdict = check_nvbandwidth(degraded, thresholds=Thresholds(min_fraction_of_peak=0.85, peak_gbps=900))
    assert verdict.errors == []
    assert brief(verdict.failing_pairs) == [(0, 3, 410.5, "floor")]
    assert verdict.violations == ["GPU 0 -> GPU 3: 410.5 GB/s is below the threshold 765"]
    assert verdict.to_result()["min"] == 410.5


def test_cell_changed_without_its_sum_is_reported_as_damaged(gb200):
    damaged = gb200.replace(" 0       N/A    822.16    821.69    821.92", " 0       N/A    822.16    821.69    410.50")
    verdict = check_nvbandwidth(damaged)
    assert not verdict.passed
    assert verdict.errors == [
        f"matrix {MN} is inconsistent: its cells add up to 45586.49 but the SUM line says 45997.93; "
        "rows are missing or damaged"
    ]


def test_min_sum_and_expected_gpus(gb200):
    verdict = check_nvbandwidth(gb200, thresholds=Thresholds(min_sum_gbps=46000, expected_gpus=16))
    assert verdict.violations == [
        "the matrix covers 8 GPUs (8x8), expected 16: "
        "check the MPI rank count (-np), slots per worker and GPUs per node",
        f"SUM {MN} 45997.93 is below min_sum_gbps 46000",
    ]
    assert verdict.failing_pairs == []


# ------------------------------------------------------------------ the emitter is faithful


def test_emitter_reproduces_the_real_gb200_capture(gb200):
    testcase = Testcase(MN, [Matrix(MN, READ_DESCRIPTION, gb200_rows(gb200), reported_sum=45997.93)])
    emitted = emit_run([testcase], hosts=["nvbandwidth-test-worker-0", "nvbandwidth-test-worker-1"], version="v0.7")
    assert emitted == gb200


# ------------------------------------------------------------------ layouts


def test_72_gpu_matrix_one_line_per_row_and_a_degraded_link():
    hosts = [f"gb200-rack1-tray{n:02d}" for n in range(18)]
    rows = uniform_peer_matrix(72, 820.0)
    rows[17][54] = 402.17
    content = emit_run([Testcase(MN, [Matrix(MN, READ_DESCRIPTION, rows)])], hosts=hosts)
    header = next(line for line in content.splitlines() if line.startswith("           0"))
    assert len(header) == 2 + 72 * 10  # no wrapping: all 72 columns on one line
    assert "Process  0 (gb200-rack1-tray00): device 0" in content  # rank ids padded to 2 digits
    verdict = check_nvbandwidth(content, testcase=MN, thresholds=Thresholds(min_gbps=765, expected_gpus=72))
    result = verdict.to_result()
    assert result["shape"] == [72, 72]
    assert result["measured_cells"] == 72 * 71
    assert result["failing_pairs"] == [
        {
            "src": 17,
            "dst": 54,
            "gbps": 402.17,
            "src_node": "gb200-rack1-tray04",
            "dst_node": "gb200-rack1-tray13",
            "fraction_of_median": round(402.17 / result["median_gbps"], 4),
            "rule": "floor",
            "reference_gbps": 821.41,  # the product reference of the GB200 the Process lines name
            "threshold_gbps": round(0.97 * 821.41, 4),
            "low_gpu": None,
        }
    ]
    assert result["median_gbps"] == 820.0
    assert result["matrix"][71][70] == rows[71][70]
    assert len(result["devices"]) == 72
    assert result["devices"][71] == {
        "index": 71,
        "device": 3,
        "name": "NVIDIA GB200",
        "pci_bus_id": "00000019:01:00",
        "host": "gb200-rack1-tray17",
    }
    expected_sum = round(sum(v for row in rows for v in row if v is not None), 2)
    assert result["sum"] == expected_sum


@pytest.mark.parametrize("gpus", [2, 3, 8, 16, 36, 72])
def test_sizes_2_to_72(gpus):
    rows = uniform_peer_matrix(gpus, 395.0)
    content = emit_run(
        [Testcase(D2D, [Matrix(D2D, READ_DESCRIPTION, rows)])], single_node_gpus=gpus, gpu_name="NVIDIA H200"
    )
    result = check_nvbandwidth(content, thresholds=Thresholds(expected_gpus=gpus)).to_result()
    assert result["passed"]
    assert result["matrix"] == rows
    assert len(result["devices"]) == gpus


def test_host_to_device_one_row_matrix():
    name = "host_to_device_memcpy_ce"
    rows = [[55.31, 55.29, 12.04, 55.30]]
    testcase = Testcase(name, [Matrix(name, "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", rows)])
    content = emit_run([testcase], single_node_gpus=4)
    verdict = check_nvbandwidth(content, thresholds=Thresholds(min_gbps=50, expected_gpus=4))
    result = verdict.to_result()
    assert result["shape"] == [1, 4]
    assert result["gpus"] == 4
    assert [(p["src"], p["dst"], p["gbps"], p["src_node"], p["dst_node"]) for p in result["failing_pairs"]] == [
        (0, 2, 12.04, None, "gpu-host")  # the row is the CPU
    ]
    assert result["min_fraction_of_median"] is None  # the median rule judges GPU pairs only
    assert (
        result["summary"]
        == "1 of 4 cells below the threshold: CPU -> GPU 2 12.04 GB/s (gpu-host), below the floor 50.00"
    )
    assert verdict.violations == ["CPU -> GPU 2: 12.04 GB/s is below the threshold 50"]


def test_bisect_row_labels_with_spaces():
    # multinode_bisect_write_ce labels its rows "<rank>-><peer>" with padded ids, e.g. "40-> 4".
    name = "multinode_bisect_write_ce"
    world = 12
    labels = [f"{i:>2}->{(i + world // 2) % world:>2}" for i in range(world)]
    rows = [[790.0 + i] for i in range(world)]
    # the real description names no unit (multinode_testcases.cpp); the cells are GB/s
    matrix = Matrix(name, "Bisect benchmarking, simultaneous write CE BW", rows, row_labels=labels)
    content = emit_run([Testcase(name, [matrix])], hosts=["a", "b", "c"])
    assert " 6-> 0    796.00" in content
    result = check_nvbandwidth(content).to_result()
    assert result["row_labels"][6] == "6-> 0"
    assert result["unit"] == "GB/s"
    assert result["row_pairs"][6] == [6, 0]
    assert result["matrix"] == rows
    assert result["sum"] == pytest.approx(sum(r[0] for r in rows))


def test_bidirectional_text_three_matrices_total_by_default():
    content = fixture("invented-h200x2-bidirectional_read_ce.txt")
    output = parse_text(content)
    testcase = output.testcases[BIDIR]
    assert testcase.parts() == ["read1", "read2", "total"]
    total = check_nvbandwidth(content).to_result()
    assert total["matrix_key"] == BIDIR + "_total"
    assert total["matrix"] == [[None, 744.85], [744.73, None]]
    assert total["sum"] == 1489.58
    read2 = check_nvbandwidth(content, part="read2", thresholds=Thresholds(min_gbps=372.4)).to_result()
    assert read2["matrix"] == [[None, 372.44], [372.35, None]]
    assert brief(read2["failing_pairs"]) == [(1, 0, 372.35, "floor")]
    missing = check_nvbandwidth(content, part="write1")
    assert missing.errors == [f"testcase {BIDIR} has no 'write1' matrix (it has: read1, read2, total)"]


def test_bidirectional_json_3n_rows_split_into_three_blocks():
    content = fixture("invented-h200x2-bidirectional_read_ce.json")
    assert len(json.loads(content)["nvbandwidth"]["testcases"][0]["bandwidth_matrix"]) == 6
    output = parse_json(content)
    testcase = output.testcases[BIDIR]
    assert [m.key for m in testcase.matrices] == [BIDIR + "_read1", BIDIR + "_read2", BIDIR + "_total"]
    assert testcase.matrices[0].rows == [[None, 372.41], [372.38, None]]
    assert testcase.matrices[0].description == "memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)"
    result = check_nvbandwidth(content, thresholds=Thresholds(expected_gpus=2)).to_result()
    assert result["matrix"] == [[None, 744.85], [744.73, None]]
    assert result["sum"] == pytest.approx(1489.58)
    assert result["gpus"] == 2
    assert result["passed"]


def test_several_testcases_need_a_name():
    write = "device_to_device_memcpy_write_ce"
    rows_r = [[None, 393.76], [393.58, None]]
    rows_w = [[None, 396.2], [396.25, None]]
    content = emit_run(
        [
            Testcase(D2D, [Matrix(D2D, READ_DESCRIPTION, rows_r)]),
            Testcase(write, [Matrix(write, "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", rows_w)]),
        ],
        single_node_gpus=2,
    )
    ambiguous = check_nvbandwidth(content)
    assert ambiguous.errors == [
        f"the output holds several testcases ({D2D}, {write}); set testcase to the one to judge"
    ]
    chosen = check_nvbandwidth(content, testcase=write).to_result()
    assert chosen["matrix"] == rows_w
    assert chosen["testcases"] == [D2D, write]
    assert chosen["passed"]


def test_launcher_log_noise_and_kubectl_prefixes(gb200):
    noisy_lines = [
        "Warning: Permanently added 'nvbandwidth-test-worker-0.nvbandwidth-test.default.svc' (ED25519) to known hosts.",
        "[nvbandwidth-test-worker-0:00025] MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/././.]",
    ]
    for line in gb200.splitlines():
        noisy_lines.append(line)
        if line.startswith(" 3 "):
            noisy_lines.append("[nvbandwidth-test-worker-1:00031] MCW rank 5 bound to socket 0[core 1[hwt 0]]: [./B/.]")
    prefixed = "\n".join(
        f"[pod/nvbandwidth-test-launcher-x7k2p/mpi-launcher] 2026-01-05T08:31:{n % 60:02d}.123456789Z {line}"
        for n, line in enumerate(noisy_lines)
    )
    for content in ("\r\n".join(noisy_lines), prefixed):
        result = check_nvbandwidth(content, thresholds=Thresholds(min_gbps=765)).to_result()
        assert result["passed"], result["errors"]
        assert result["sum"] == 45997.93
        assert result["matrix"] == gb200_rows(gb200)


def test_json_inside_a_log():
    document = fixture("h200x2-device_to_device_memcpy_read_ce.json")
    content = 'Defaulted container "mpi-launcher"\n' + document + "done\n"
    result = check_nvbandwidth(content).to_result()
    assert result["format"] == "json"
    assert result["matrix"] == [[None, 393.763], [393.745, None]]


def test_parse_to_dict_shape():
    parsed = parse_to_dict(fixture("h200x2-device_to_device_memcpy_read_ce.json"))
    assert parsed == {
        D2D: {
            "name": D2D,
            "status": "Passed",
            "message": "",
            "description": READ_DESCRIPTION,
            "unit": "GB/s",
            "matrix": [[None, 393.763], [393.745, None]],
            "sum": pytest.approx(787.507469139),
            "min": 393.745,
            "max": 393.763,
            "mean": pytest.approx(393.754),
        }
    }


# ------------------------------------------------------------------ the test did not really run


def test_unknown_testcase_text_always_errors():
    content = fixture("invented-unknown-testcase.txt")
    verdict = check_nvbandwidth(content)
    assert verdict.errors == [
        "testcase no_such_test is unknown to this nvbandwidth (it printed: ERROR: Testcase no_such_test not found!); "
        "use a name from 'nvbandwidth -l' (multinode testcases need a build with -DMULTINODE=1)"
    ]
    asked = check_nvbandwidth(content, testcase=MN)
    assert asked.errors == [f"testcase {MN} did not run: it is not in the output (found: no_such_test)"]


def test_unknown_testcase_json_always_errors():
    content = fixture("invented-unknown-testcase.json")
    verdict = check_nvbandwidth(content, testcase="no_such_test")
    assert verdict.errors[0].startswith("testcase no_such_test is unknown to this nvbandwidth;")
    assert parse_to_dict(content)["no_such_test"]["status"] == "ERROR"


def test_misspelled_name_is_flagged_as_unknown(gb200):
    verdict = check_nvbandwidth(gb200, testcase="multinode_device_to_device_memcpy_read")
    assert verdict.errors == [
        "testcase multinode_device_to_device_memcpy_read did not run: it is not in the output "
        f"(found: {MN}); 'multinode_device_to_device_memcpy_read' is not an nvbandwidth v0.8 testcase name "
        "(nvbandwidth -l lists them)"
    ]


def test_waived_multinode_testcase():
    verdict = check_nvbandwidth(fixture("invented-multinode-waived.txt"), testcase=MN)
    assert len(verdict.errors) == 1
    assert "did not run: it is not in the output (found: none)" in verdict.errors[0]
    assert "1 'Waived:' line(s)" in verdict.errors[0]
    unnamed = check_nvbandwidth(fixture("invented-multinode-waived.txt"))
    assert unnamed.errors[0].startswith("no testcase ran")


def test_waived_json_status():
    document = json.loads(fixture("h200x2-device_to_device_memcpy_read_ce.json"))
    document["nvbandwidth"]["testcases"] = [{"name": MN, "status": "Waived"}]
    verdict = check_nvbandwidth(json.dumps(document))
    assert verdict.errors[0].startswith(f"testcase {MN} was waived, not run")


def test_cuda_error_aborts():
    verdict = check_nvbandwidth(fixture("invented-multinode-cuda-error.txt"), testcase=MN)
    assert verdict.errors[0].startswith("nvbandwidth reported an error: [CUDA_ERROR_NOT_PERMITTED] operation not")
    assert any(e.startswith("nvbandwidth reported an error: MPI_ABORT was invoked") for e in verdict.errors)
    assert f"testcase {MN} started but printed no matrix" in verdict.errors[-1]


def test_truncated_output():
    verdict = check_nvbandwidth(fixture("invented-gb200-truncated.txt"), thresholds=Thresholds(min_gbps=1))
    assert verdict.errors == [
        f"testcase {MN} has no SUM line for {MN}: the output is truncated (status Incomplete); the run did not finish"
    ]
    assert verdict.to_result()["shape"] == [5, 8]


def test_cut_after_description():
    content = fixture("gb200-2node-multinode_device_to_device_memcpy_read_ce.txt").split(READ_DESCRIPTION)[0]
    verdict = check_nvbandwidth(content + READ_DESCRIPTION + "\n")
    assert verdict.errors == [
        f"testcase {MN} has no matrix for {MN}: the output is truncated (status Incomplete); the run did not finish"
    ]


def test_latency_testcase_is_not_bandwidth():
    verdict = check_nvbandwidth(fixture("invented-latency.txt"))
    assert verdict.errors == [
        "testcase host_device_latency_sm reports ns ('memory latency SM CPU(row) <-> GPU(column) (ns)'), not "
        "bandwidth in GB/s: latency testcases cannot be judged against GB/s thresholds; run a *_memcpy_* testcase"
    ]
    assert verdict.to_result()["matrix"] == [[712.45, 709.88]]


def test_error_line_after_running():
    verdict = check_nvbandwidth(fixture("invented-testcase-error.txt"), testcase=D2D)
    assert verdict.errors == [
        f"testcase {D2D} failed inside nvbandwidth: Error: Unable to enable peer access between device 0 and device 1"
    ]


def test_unmeasured_pair_is_a_violation():
    rows = [[None, 393.76, None], [393.58, None, 393.6], [393.5, 393.4, None]]
    content = emit_run(
        [Testcase(D2D, [Matrix(D2D, READ_DESCRIPTION, rows)])], single_node_gpus=3, gpu_name="NVIDIA H200"
    )
    verdict = check_nvbandwidth(content)
    assert verdict.errors == []
    assert brief(verdict.failing_pairs) == [(0, 2, None, "not_measured")]
    assert verdict.violations == ["GPU 0 -> GPU 2: not measured (N/A), the pair has no peer access over NVLink"]


def test_all_cells_na_means_nothing_ran():
    rows = [[None, None], [None, None]]
    content = emit_run([Testcase(D2D, [Matrix(D2D, READ_DESCRIPTION, rows)])], single_node_gpus=2)
    verdict = check_nvbandwidth(content)
    assert verdict.errors == [f"testcase {D2D} measured nothing: every cell is N/A (no peer access between the GPUs)"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "the nvbandwidth output is empty"),
        ("   \n", "the nvbandwidth output is empty"),
        ('Error from server (NotFound): pods "x" not found\n', "no testcase ran"),
    ],
)
def test_no_output(content, expected):
    verdict = check_nvbandwidth(content)
    assert verdict.errors[0].startswith(expected)
    assert not verdict.passed


def test_json_asked_for_text():
    verdict = check_nvbandwidth(fixture("h200x2-device_to_device_memcpy_read_ce.txt"), output_format="json")
    assert verdict.errors == [
        'no {"nvbandwidth": ...} JSON document found: the content is not nvbandwidth -j output; use format=text or auto'
    ]


def test_usage_text_from_unknown_option():
    # nvbandwidth prints its usage on stdout and exits 1 for an unknown option, even with -j.
    usage = "unrecognised option '--bogus'\nnvbandwidth CLI:\n  -h [ --help ]  Produce help message\n"
    verdict = check_nvbandwidth(usage)
    assert verdict.errors[0].startswith("no testcase ran")


# ------------------------------------------------------------------ the bandwidth rule through check_nvbandwidth


def test_default_rule_with_product_and_nodes(gb200):
    result = check_nvbandwidth(
        gb200, testcase=MN, gpu_product="NVIDIA-GB200", nodes=["gb200-r0-t0", "gb200-r0-t1"], gpus_per_node=4
    ).to_result()
    assert result["passed"] is True
    assert result["summary"] == (
        "56 of 56 GPU pairs at or above 765.00 GB/s and 0.97 of the product reference 821.41 (min 820.35, SUM 45997.93)"
    )
    assert (result["threshold_gbps"], result["peak_gbps"], result["min_fraction_of_peak"]) == (765.0, 900.0, 0.85)
    assert (result["median_gbps"], result["min_fraction_of_median"]) == (821.41, 0.97)
    assert result["median_threshold_gbps"] == round(0.97 * 821.41, 4)
    assert result["gpu_product"] == "NVIDIA-GB200"
    assert result["low_gpus"] == [] and result["failed_nodes"] == []


def test_median_rule_applies_without_any_threshold(gb200):
    # A GPU with a lost link of 18 (its row and column at 0.944) fails even with no floor at all.
    rows = gb200_rows(gb200)
    for other in range(8):
        if other != 2:
            rows[2][other] = round(rows[2][other] * 0.944, 2)
            rows[other][2] = round(rows[other][2] * 0.944, 2)
    content = emit_run(
        [Testcase(MN, [Matrix(MN, READ_DESCRIPTION, rows)])],
        hosts=["nvbandwidth-test-worker-0", "nvbandwidth-test-worker-1"],
        version="v0.7",
    )
    verdict = check_nvbandwidth(content)
    result = verdict.to_result()
    assert verdict.errors == []
    assert result["threshold_gbps"] is None
    assert [(g["gpu"], g["node"], g["pairs"]) for g in result["low_gpus"]] == [(2, "nvbandwidth-test-worker-0", 14)]
    assert result["failed_nodes"] == ["nvbandwidth-test-worker-0"]
    assert len(result["failing_pairs"]) == 14
    # no gpu_product: the product the Process lines name (NVIDIA GB200) gives the reference
    assert result["violations"] == [
        "GPU 2 on nvbandwidth-test-worker-0: its 14 pairs average 775.40 GB/s, 0.944 of the product reference "
        "821.41: a GPU with lost NVLinks"
    ]
    assert result["summary"] == f"14 of 56 GPU pairs below the threshold, {HELD}: " + result["violations"][0]


def test_summary_of_a_run_that_did_not_complete():
    verdict = check_nvbandwidth(fixture("invented-gb200-truncated.txt"), gpu_product="NVIDIA-GB200")
    assert verdict.errors == [
        f"testcase {MN} has no SUM line for {MN}: the output is truncated (status Incomplete); the run did not finish"
    ]
    result = verdict.to_result()
    assert result["summary"] == "the nvbandwidth output does not show a completed run: " + verdict.errors[0]
    assert result["median_gbps"] is None and result["low_gpus"] == [] and result["threshold_gbps"] is None


def test_summary_names_the_gpu_count_first(gb200):
    verdict = check_nvbandwidth(gb200, thresholds=Thresholds(expected_gpus=16), gpu_product="NVIDIA-GB200")
    assert verdict.summary == (
        "the matrix covers 8 GPUs (8x8), expected 16: check the MPI rank count (-np), slots per worker and GPUs per "
        "node; 56 of 56 GPU pairs at or above 765.00 GB/s and 0.97 of the product reference 821.41 "
        "(min 820.35, SUM 45997.93)"
    )
    assert not verdict.passed


def test_unknown_product_is_a_violation_not_an_error(gb200):
    verdict = check_nvbandwidth(gb200, gpu_product="NVIDIA-A100-SXM4-80GB")
    assert verdict.errors == []
    assert verdict.violations == [
        "no NVLink peak is known for GPU product 'NVIDIA-A100-SXM4-80GB' (label nvidia.com/gpu.product), so 0.85 x "
        "the peak cannot be worked out: set min_gbps, or peak_gbps, or add the product to the peak table"
    ]
    table = [{"match": "A100", "peak_gbps": 300}]
    assert check_nvbandwidth(gb200, gpu_product="NVIDIA-A100-SXM4-80GB", peak_table=table).threshold_gbps == 255.0


# ------------------------------------------------------------------ damaged and cosmetic outputs (found by fuzzing)

H200_READ = "h200x2-device_to_device_memcpy_read_ce.txt"
BIDIR_TEXT = "invented-h200x2-bidirectional_read_ce.txt"
BIDIR_JSON = "invented-h200x2-bidirectional_read_ce.json"
READ1_ROW_1 = " 1    372.38       N/A"


def test_bidirectional_run_cut_after_its_first_matrix_is_incomplete():
    content = fixture(BIDIR_TEXT)
    cut = content[: content.index("memcpy CE GPU(row) <-> GPU(column) Read2")]
    verdict = check_nvbandwidth(cut)
    assert not verdict.passed
    assert verdict.errors == [
        f"testcase {BIDIR} is incomplete: it printed {BIDIR}_read1; nvbandwidth prints {BIDIR}_read1, {BIDIR}_read2, "
        f"{BIDIR}_total (missing: {BIDIR}_read2, {BIDIR}_total); the output is truncated or the run aborted"
    ]
    assert check_nvbandwidth(cut, part="read1").errors == verdict.errors


def test_bidirectional_json_without_its_three_blocks_is_incomplete():
    document = json.loads(fixture(BIDIR_JSON))
    document["nvbandwidth"]["testcases"][0]["bandwidth_matrix"] = [[None, 744.85], [744.73, None]]
    verdict = check_nvbandwidth(json.dumps(document))
    assert not verdict.passed
    assert (
        "its bandwidth_matrix has 2 rows of 2; a bidirectional run appends its three 2x2 matrices" in verdict.errors[0]
    )


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: cuMemCreate failed",
        "MPI_ABORT was invoked on rank 4 in communicator MPI_COMM_WORLD",
        "[CUDA_ERROR_ILLEGAL_ADDRESS] an illegal memory access was encountered in expression cuMemcpyAsync(...)",
        "Waived: ",
        "CUDA error: an illegal memory access was encountered",
    ],
)
def test_error_line_between_matrix_rows_fails(line):
    content = fixture(H200_READ).replace(" 1    393.58", f"{line}\n 1    393.58")
    verdict = check_nvbandwidth(content)
    assert not verdict.passed
    assert verdict.errors[0] == (
        f"nvbandwidth reported an error: {line.strip()} (printed inside the matrix '{READ_DESCRIPTION}')"
    )


def test_generic_cuda_error_line_anywhere_fails():
    content = fixture(H200_READ) + "CUDA error: an illegal memory access was encountered\n"
    assert check_nvbandwidth(content).errors == [
        "nvbandwidth reported an error: CUDA error: an illegal memory access was encountered"
    ]


@pytest.mark.parametrize(
    "token, problem", [("inf", "'inf' is not a finite number"), ("-393.58", "'-393.58' is negative")]
)
def test_cell_that_is_no_bandwidth_fails(token, problem):
    content = fixture(H200_READ).replace("393.58", token.rjust(6))
    verdict = check_nvbandwidth(content)
    assert not verdict.passed
    assert f"matrix {D2D} has cells that are no bandwidth: row 1 column 0: {problem}" in verdict.errors


def test_inf_sum_does_not_widen_the_tolerance():
    content = fixture(H200_READ).replace("787.35", "inf")
    verdict = check_nvbandwidth(content)
    assert not verdict.passed
    assert f"unreadable SUM line: SUM {D2D} inf" in verdict.summary


def test_damaged_read1_of_a_bidirectional_run_fails_although_total_is_fine():
    # Read1 1->0 halved, its SUM kept consistent: Total no longer is Read1 + Read2.
    content = (
        fixture(BIDIR_TEXT).replace(READ1_ROW_1, " 1    186.19       N/A").replace("_read1 744.79", "_read1 558.60")
    )
    verdict = check_nvbandwidth(content)
    assert verdict.errors == [
        f"matrix {BIDIR}_total is not the sum of {BIDIR}_read1 and {BIDIR}_read2 (1->0: 186.19 + 372.35 is not "
        "744.73): the output is damaged"
    ]


def test_link_slow_in_one_direction_fails_the_median_rule_of_both_directions():
    # Read1 1->0 at 0.94 (a lost NVLink in one direction) and Total following: Total stays at 0.975 of its median,
    # above 0.97, so only the rule over both directions sees it.
    slow = round(372.38 * 0.94, 2)
    content = (
        fixture(BIDIR_TEXT)
        .replace(READ1_ROW_1, f" 1    {slow:.2f}       N/A")
        .replace("_read1 744.79", f"_read1 {372.41 + slow:.2f}")
        .replace(" 1    744.73       N/A", f" 1    {slow + 372.35:.2f}       N/A")
        .replace("_total 1489.58", f"_total {744.85 + slow + 372.35:.2f}")
    )
    verdict = check_nvbandwidth(content)
    assert verdict.errors == []
    assert verdict.judgement.passed  # the Total alone passes
    assert verdict.violations == [
        f"{BIDIR}_read1 GPU 1 -> GPU 0: {slow:.2f} GB/s is 0.940 of the median 372.38 of both directions, "
        "below 0.97 x the median (361.21): a link slow in one direction"
    ]
    assert not verdict.passed


def test_sum_line_of_another_testcase_fails():
    content = fixture(H200_READ).replace(f"SUM {D2D} ", "SUM device_to_device_memcpy_write_ce ")
    verdict = check_nvbandwidth(content)
    assert not verdict.passed
    assert verdict.errors == [
        f"testcase {D2D}: its matrix '{READ_DESCRIPTION}' ends in the SUM line of another testcase "
        "('SUM device_to_device_memcpy_write_ce 787.35'): the output of two runs is mixed"
    ]


def h200_json(change) -> str:
    document = json.loads(fixture("h200x2-device_to_device_memcpy_read_ce.json"))
    change(document["nvbandwidth"]["testcases"][0])
    return json.dumps(document)


def test_json_testcase_with_an_error_key_fails():
    verdict = check_nvbandwidth(h200_json(lambda t: t.update(error="CUDA_ERROR_ILLEGAL_ADDRESS")))
    assert verdict.errors == [f"testcase {D2D} failed inside nvbandwidth: Error: CUDA_ERROR_ILLEGAL_ADDRESS"]


def test_json_sum_given_as_a_string_is_checked():
    assert check_nvbandwidth(h200_json(lambda t: t.update(sum="787.507469139"))).passed
    wrong = check_nvbandwidth(h200_json(lambda t: t.update(sum="866.26")))
    assert wrong.errors == [
        f"matrix {D2D} is inconsistent: its cells add up to 787.51 but the SUM line says 866.26; rows are missing or "
        "damaged"
    ]
    unreadable = check_nvbandwidth(h200_json(lambda t: t.update(sum="n/a")))
    assert unreadable.errors[0] == f"testcase {D2D}: its sum is unreadable ('n/a' is not a number)"


@pytest.mark.parametrize(
    "change, error",
    [
        (lambda t: t["bandwidth_matrix"][0].__setitem__(1, ""), "row 0 column 1: '' is not a number"),
        (
            lambda t: t["bandwidth_matrix"][0].__setitem__(1, "393.7 GB/s"),
            "row 0 column 1: '393.7 GB/s' is not a number",
        ),
        (lambda t: t["bandwidth_matrix"][1].__setitem__(0, True), "row 1 column 0: True is not a number"),
        (lambda t: t.update(bandwidth_matrix="N/A"), "its bandwidth_matrix is not a list of rows: 'N/A'"),
        (lambda t: t.update(bandwidth_matrix=[393.7, 393.7]), "its bandwidth_matrix is not a list of rows"),
    ],
)
def test_json_of_the_wrong_shape_fails_cleanly(change, error):
    verdict = check_nvbandwidth(h200_json(change))
    assert not verdict.passed
    assert error in verdict.summary
    assert "\n" not in verdict.summary


@pytest.mark.parametrize("junk", ["Passed", 7, None, ["N/A"]])
def test_json_testcases_entry_that_is_no_object_fails_cleanly(junk):
    document = json.loads(fixture("h200x2-device_to_device_memcpy_read_ce.json"))
    document["nvbandwidth"]["testcases"].append(junk)
    verdict = check_nvbandwidth(json.dumps(document))
    assert verdict.errors == [
        f"nvbandwidth reported an error: testcases entry 1 is not a testcase object: {str(junk)!r}"
    ]


def test_json_whose_testcases_is_no_list_fails_cleanly():
    document = json.loads(fixture("h200x2-device_to_device_memcpy_read_ce.json"))
    document["nvbandwidth"]["testcases"] = {"name": D2D}
    verdict = check_nvbandwidth(json.dumps(document))
    assert verdict.errors[0] == "nvbandwidth reported an error: 'testcases' is dict, not a list of testcase objects"


def cosmetic_variants(content: str) -> dict:
    lines = content.splitlines()
    return {
        "ansi": "\n".join(f"\x1b[1;32m{line}\x1b[0m" for line in lines),
        "crlf": "\r\n".join(lines),
        "timestamps": "\n".join(f"2026-01-05T08:31:{n % 60:02d}.123456789Z {line}" for n, line in enumerate(lines)),
        "timestamps with offset": "\n".join(f"2026-01-05T08:31:07+01:00 {line}" for line in lines),
    }


@pytest.mark.parametrize(
    "name", ["gb200-2node-multinode_device_to_device_memcpy_read_ce.txt", BIDIR_TEXT, BIDIR_JSON, H200_READ]
)
def test_colours_crlf_and_timestamps_are_cosmetic(name):
    content = fixture(name)
    plain = check_nvbandwidth(content, gpu_product="NVIDIA-H200").to_result()
    assert plain["passed"]
    for variant, changed in cosmetic_variants(content).items():
        assert check_nvbandwidth(changed, gpu_product="NVIDIA-H200").to_result() == plain, variant


def test_blank_line_inside_a_matrix_is_cosmetic(gb200):
    plain = check_nvbandwidth(gb200).to_result()
    split = gb200.replace(" 4    820.75", "\n 4    820.75")
    assert check_nvbandwidth(split).to_result() == plain
    assert plain["sum"] == 45997.93 and len(plain["matrix"]) == 8


def test_launcher_line_between_description_and_header_is_cosmetic():
    content = fixture(H200_READ)
    noisy = content.replace(READ_DESCRIPTION + "\n", READ_DESCRIPTION + "\n[worker-0:00025] MCW rank 0 bound\n")
    assert check_nvbandwidth(noisy).to_result() == check_nvbandwidth(content).to_result()


def test_doubled_row_fails(gb200):
    row = next(line for line in gb200.splitlines() if line.startswith(" 3 "))
    verdict = check_nvbandwidth(gb200.replace(row, row + "\n" + row))
    assert (
        f"matrix {MN} has the rows 0, 1, 2, 3, 3, 4, 5, 6, 7, expected 0 to 8 in order: rows are missing or doubled"
        in (verdict.errors)
    )


# ------------------------------------------------------------------ several runs in one input (a retried run)


def _failed_json_run() -> str:
    document = json.loads(fixture("h200x2-device_to_device_memcpy_read_ce.json"))
    testcase = document["nvbandwidth"]["testcases"][0]
    testcase["bandwidth_matrix"][0][1] = "100.00"
    testcase["sum"] = sum(float(c) for row in testcase["bandwidth_matrix"] for c in row if c != "N/A")
    return json.dumps(document, indent=2)


def test_two_json_documents_judge_the_last_run():
    healthy = fixture("h200x2-device_to_device_memcpy_read_ce.json")
    later_failed = check_nvbandwidth(healthy + "\nretrying\n" + _failed_json_run(), testcase=D2D)
    assert not later_failed.passed
    assert [(p["src"], p["dst"], p["gbps"]) for p in later_failed.failing_pairs] == [(0, 1, 100.0)]
    later_passed = check_nvbandwidth(_failed_json_run() + "\n" + healthy, testcase=D2D)
    assert later_passed.passed, later_passed.summary
    assert any("2 nvbandwidth JSON documents" in w for w in later_passed.warnings)


def test_json_document_cut_after_a_complete_one_fails_in_one_line():
    healthy = fixture("h200x2-device_to_device_memcpy_read_ce.json")
    verdict = check_nvbandwidth(healthy + "\n" + healthy[: len(healthy) // 2], testcase=D2D)
    assert not verdict.passed
    assert "the last one is cut off" in verdict.summary
    assert "\n" not in verdict.summary


def test_two_text_runs_judge_the_last_one_as_json_does():
    healthy = fixture("h200x2-device_to_device_memcpy_read_ce.txt")
    failed = healthy.replace(healthy.split("SUM ")[0].splitlines()[-2].split()[-1], "100.00", 1)
    assert not check_nvbandwidth(healthy + failed, testcase=D2D).passed
    verdict = check_nvbandwidth(failed + healthy, testcase=D2D)
    assert verdict.passed, verdict.summary
    assert any("2 nvbandwidth runs" in w for w in verdict.warnings)
    cut_retry = healthy + healthy[: healthy.index("SUM ")]
    assert not check_nvbandwidth(cut_retry, testcase=D2D).passed


def test_blank_lines_between_the_header_and_the_first_row_are_cosmetic():
    healthy = fixture("h200x2-device_to_device_memcpy_read_ce.txt")
    header = "           0         1\n"
    assert header in healthy
    for blanks in (1, 3):
        verdict = check_nvbandwidth(healthy.replace(header, header + "\n" * blanks, 1), testcase=D2D)
        assert verdict.passed, verdict.summary
        assert verdict.to_result()["matrix"] == [[None, 393.76], [393.58, None]]


def test_many_blank_lines_inside_a_matrix_read_in_linear_time():
    import time

    healthy = fixture("h200x2-device_to_device_memcpy_read_ce.txt")
    row = " 0       N/A    393.76\n"
    assert row in healthy
    started = time.monotonic()
    verdict = check_nvbandwidth(healthy.replace(row, row + "\n" * 40000, 1), testcase=D2D)
    assert verdict.passed, verdict.summary
    assert time.monotonic() - started < 2.0  # 65 s when each blank line looked ahead over all the others


@pytest.mark.parametrize(
    ("name", "product", "reference"),
    [
        ("gb200-2node-multinode_device_to_device_memcpy_read_ce.txt", "NVIDIA-GB200", 821.41),
        ("h200x2-device_to_device_memcpy_read_ce.txt", "NVIDIA-H200", 393.67),
        ("h200x2-device_to_device_memcpy_read_ce.json", "NVIDIA-H200", 393.67),
        ("h200x2-device_to_device_memcpy_write_ce.json", "NVIDIA-H200", 396.22),
    ],
)
def test_without_a_product_the_real_outputs_name_theirs_and_its_reference_holds(name, product, reference):
    output = parse_nvbandwidth(fixture(name))
    assert gpu_product_of(output.devices) == (product, None)
    result = check_nvbandwidth(fixture(name), thresholds=Thresholds(min_gbps=300)).to_result()
    assert result["passed"] is True
    assert result["references"][0] == {
        "kind": "product",
        "gbps": reference,
        "source": result["references"][0]["source"],
    }
    assert not any(w.startswith("held against the run's median alone") for w in result["warnings"])


def test_devices_of_several_products_give_no_product_and_say_so():
    devices = [Device(0, 0, "NVIDIA GB200", "0:1"), Device(1, 0, "NVIDIA  H200", "0:2")]
    assert gpu_product_of(devices) == (
        None,
        "the output's device lines name several GPU products (NVIDIA-GB200, NVIDIA-H200): no product reference is "
        "read from them; set gpu_product",
    )
    assert gpu_product_of([]) == (None, None)


def test_a_product_given_wins_over_the_one_the_output_names():
    result = check_nvbandwidth(
        fixture("gb200-2node-multinode_device_to_device_memcpy_read_ce.txt"), gpu_product="NVIDIA-GB300"
    ).to_result()
    assert [r["kind"] for r in result["references"]] == ["median"]
