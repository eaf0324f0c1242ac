# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The bandwidth rule (floor + median rule) on the real GB200 and H200 outputs and on a generated 72-GPU rack."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_rule import judge
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    DEFAULT_MIN_FRACTION_OF_MEDIAN,
    DEFAULT_MIN_FRACTION_OF_PEAK,
    ONE_LOST_LINK_OF_18,
    Thresholds,
    nvlink_peak_gbps,
    pair_floor,
    peak_table_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import (
    check_nvbandwidth,
    parse_nvbandwidth,
)

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the emitter helper sits beside this file, whatever pytest's import mode
    sys.path.insert(0, str(HERE))

from nvbandwidth_emitter import (  # noqa: E402
    GENERATED_RACK_FIXTURE,
    GENERATED_RACK_GPUS_PER_TRAY,
    GENERATED_RACK_SEED,
    GENERATED_RACK_TRAYS,
    MN_READ,
    READ_DESCRIPTION,
    REAL_GB200_RANGE,
    Matrix,
    Testcase,
    emit_generated_rack,
    emit_run,
    generated_rack_hosts,
    generated_rack_rows,
)

NVBW = HERE.parents[2] / "fixtures" / "nvbandwidth"
GB200_FILE = "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt"
GB200 = "NVIDIA-GB200"
GB200_580 = "GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05, the guide's run: 820.35-822.16 GB/s"
NODES = ["gb200-r0-t0", "gb200-r0-t1"]
RACK_NODES = [f"gb200-r0-t{tray}" for tray in range(GENERATED_RACK_TRAYS)]


def fixture(name: str) -> str:
    return (NVBW / name).read_text()


def matrix_of(content: str, testcase: str = MN_READ):
    return parse_nvbandwidth(content).testcases[testcase].matrix_named()


def real_gb200_rows() -> list:
    return [list(row) for row in matrix_of(fixture(GB200_FILE)).rows]


def gb200_hosts() -> list:
    return ["nvbandwidth-test-worker-0", "nvbandwidth-test-worker-1"]


def emit_gb200(rows: list) -> str:
    """The real capture with other cells: the same header and layout, the SUM of the new cells."""
    return emit_run([Testcase(MN_READ, [Matrix(MN_READ, READ_DESCRIPTION, rows)])], hosts=gb200_hosts(), version="v0.7")


def scale_gpu(rows: list, gpu: int, factor: float) -> list:
    """``gpu``'s whole row and column times ``factor`` (2 decimals, as nvbandwidth prints): a GPU with lost links."""
    scaled = [list(row) for row in rows]
    for other in range(len(rows)):
        if other != gpu:
            scaled[gpu][other] = round(rows[gpu][other] * factor, 2)
            scaled[other][gpu] = round(rows[other][gpu] * factor, 2)
    return scaled


def off_diagonal(rows: list) -> list:
    return [v for r, row in enumerate(rows) for c, v in enumerate(row) if r != c and v is not None]


# ------------------------------------------------------------------ peak table and floor


@pytest.mark.parametrize(
    ("product", "peak"),
    [
        ("NVIDIA-GB200", 900.0),
        ("NVIDIA-GB300", 900.0),
        ("NVIDIA-B200", 900.0),
        ("NVIDIA-B300", 900.0),
        ("NVIDIA-H100-80GB-HBM3", 450.0),
        ("NVIDIA-H200", 450.0),
        ("NVIDIA-GH200-480GB", 450.0),
        ("NVIDIA-A100-SXM4-80GB", None),
        ("", None),
        (None, None),
    ],
)
def test_peak_by_product(product, peak):
    assert nvlink_peak_gbps(product) == peak


def test_peak_table_override_and_empty_table_means_built_in():
    table = [{"match": "^NVIDIA-A100", "peak_gbps": 300}, {"match": "GB200", "peak_gbps": 1000}]
    assert nvlink_peak_gbps("NVIDIA-A100-SXM4-80GB", table) == 300.0
    assert nvlink_peak_gbps("NVIDIA-GB200", table) == 1000.0
    assert nvlink_peak_gbps("NVIDIA-H200", table) is None  # the table replaces the built-in one
    assert nvlink_peak_gbps("NVIDIA-H200", []) == 450.0


def test_bad_peak_table_is_refused():
    problems = peak_table_problems(
        [{"match": "GB200"}, {"match": "(", "peak_gbps": 900}, {"match": "x", "peak_gbps": 0}]
    )
    assert [p.split(" (")[0] for p in problems] == ["peak table entry 0", "peak table entry 1", "peak table entry 2"]
    with pytest.raises(ValueError, match="peak table entry 0"):
        nvlink_peak_gbps("NVIDIA-GB200", [{"match": "GB200"}])


def test_floor_from_the_product():
    floor = pair_floor(Thresholds(), GB200)
    assert (floor.gbps, floor.peak_gbps, floor.source) == (765.0, 900.0, "product")
    assert floor.explanation == "0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200"
    h200 = pair_floor(Thresholds(), "NVIDIA-H200")
    assert (h200.gbps, h200.explanation) == (382.5, "0.85 x 450.00 GB/s NVLink peak of NVIDIA-H200")


def test_min_gbps_above_zero_wins_over_the_fraction_of_the_peak():
    # The role's rule, now the only one: min_gbps > 0 replaces the fraction, even when it is lower.
    floor = pair_floor(Thresholds(min_gbps=500, min_fraction_of_peak=0.9125, peak_gbps=900), GB200)
    assert (floor.gbps, floor.source, floor.explanation) == (500.0, "min_gbps", "min_gbps 500.00 GB/s")
    assert pair_floor(Thresholds(min_gbps=0), GB200).gbps == 765.0  # 0 means unset, as in the role


def test_peak_override_and_no_floor():
    override = pair_floor(Thresholds(peak_gbps=1000), GB200)
    assert (override.gbps, override.explanation) == (
        850.0,
        "0.85 x 1000.00 GB/s NVLink peak of NVIDIA-GB200 (peak_gbps)",
    )
    assert pair_floor(Thresholds(min_fraction_of_peak=0.9125, peak_gbps=900)).gbps == 821.25
    unknown = pair_floor(Thresholds(), "NVIDIA-A100-SXM4-80GB")
    assert (unknown.gbps, unknown.peak_unknown) == (None, True)
    assert unknown.explanation == "no NVLink peak is known for GPU product 'NVIDIA-A100-SXM4-80GB'"
    nothing = pair_floor(Thresholds())
    assert (nothing.gbps, nothing.peak_unknown) == (None, False)
    assert pair_floor(Thresholds(min_fraction_of_peak=0), GB200).gbps is None


def test_thresholds_defaults_and_problems():
    thresholds = Thresholds()
    assert (thresholds.min_fraction_of_peak, thresholds.min_fraction_of_median) == (0.85, 0.97)
    assert (DEFAULT_MIN_FRACTION_OF_PEAK, DEFAULT_MIN_FRACTION_OF_MEDIAN) == (0.85, 0.97)
    assert Thresholds(min_fraction_of_median=97, peak_gbps=-1).problems() == [
        "min_fraction_of_median is 97; it must be from 0 to 1 (e.g. 0.85; 0 turns the rule off)",
        "peak_gbps is -1; it must be a positive GB/s value (GB200: 900)",
    ]
    with pytest.raises(ValueError, match="min_fraction_of_median is 97"):
        judge([[None, 1.0], [1.0, None]], Thresholds(min_fraction_of_median=97))


# ------------------------------------------------------------------ the default, derived from the real runs


def test_the_default_median_fraction_lies_between_a_lost_link_and_the_real_runs():
    lowest_over_median = []
    for name in (
        GB200_FILE,
        "h200x2-device_to_device_memcpy_read_ce.txt",
        "h200x2-device_to_device_memcpy_read_ce.json",
        "h200x2-device_to_device_memcpy_write_ce.txt",
        "h200x2-device_to_device_memcpy_write_ce.json",
    ):
        output = parse_nvbandwidth(fixture(name))
        testcase = next(iter(output.testcases.values()))
        values = off_diagonal(testcase.matrix_named().rows)
        lowest_over_median.append(min(values) / statistics.median(values))
    assert lowest_over_median[0] == pytest.approx(820.35 / 821.41)  # GB200: 0.9987
    assert min(lowest_over_median) == pytest.approx(0.99871, abs=1e-5)  # the widest spread of all real runs
    lost_link = ONE_LOST_LINK_OF_18
    assert round(lost_link, 5) == 0.94444
    # 0.97 leaves a healthy pair 3 % of room (20x the widest real spread) and a lost link 2.6 points below it.
    healthy_room = 1 - DEFAULT_MIN_FRACTION_OF_MEDIAN
    assert healthy_room > 20 * (1 - min(lowest_over_median))
    margin = DEFAULT_MIN_FRACTION_OF_MEDIAN - lost_link
    assert round(margin, 4) == 0.0256
    # ...while the floor alone lets a lost link pass: 17/18 of the real GB200 median is above 765.
    lost_link_gbps = lost_link * 821.41
    assert round(lost_link_gbps, 2) == 775.78
    assert lost_link_gbps > pair_floor(Thresholds(), GB200).gbps


# ------------------------------------------------------------------ the real GB200 run (2 trays x 4 GPUs)


def test_real_gb200_passes_the_default_rule():
    result = judge(matrix_of(fixture(GB200_FILE)), Thresholds(), GB200, 4, NODES).to_dict()
    assert result["passed"] is True
    assert result["summary"] == (
        "56 of 56 GPU pairs at or above 765.00 GB/s and 0.97 of the median 821.41 (min 820.35, SUM 45997.93)"
    )
    assert result["threshold_gbps"] == 765.0
    assert result["threshold_explanation"] == "0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200"
    assert result["median_gbps"] == 821.41
    assert result["median_threshold_gbps"] == pytest.approx(0.97 * 821.41, abs=1e-4)
    assert (result["pairs"], result["measured_pairs"], result["min"], result["max"]) == (56, 56, 820.35, 822.16)
    assert result["failing_pairs"] == [] and result["low_gpus"] == [] and result["failed_nodes"] == []
    assert result["violations"] == [] and result["node_problems"] == {}


def test_real_gb200_with_one_pair_at_775_fails_naming_the_pair():
    rows = real_gb200_rows()
    rows[0][5] = 775.00  # was 821.30
    content = emit_gb200(rows)
    assert f"SUM {MN_READ} {45997.91 - 821.30 + 775.00:.2f}" in content
    judgement = judge(matrix_of(content), Thresholds(), GB200, 4, NODES)
    assert judgement.passed is False
    assert judgement.median_gbps == 821.41  # one pair does not move the median
    assert judgement.failing_pairs == [
        {
            "src": 0,
            "dst": 5,
            "gbps": 775.0,
            "src_node": "gb200-r0-t0",
            "dst_node": "gb200-r0-t1",
            "fraction_of_median": round(775.0 / 821.41, 4),
            "rule": "median",
            "reference_gbps": 821.41,
            "threshold_gbps": round(0.97 * 821.41, 4),
            "low_gpu": None,
        }
    ]
    assert judgement.failing_pairs[0]["fraction_of_median"] == 0.9435
    assert judgement.low_gpus == []
    assert judgement.failed_nodes == ["gb200-r0-t0", "gb200-r0-t1"]
    assert judgement.summary == (
        "1 of 56 GPU pairs below the threshold: 0->5 775.00 GB/s (gb200-r0-t0 -> gb200-r0-t1), "
        "0.943 of the median 821.41"
    )
    assert judgement.violations == [
        "GPU 0 -> GPU 5: 775 GB/s is 0.943 of the median 821.41, below 0.97 x the median (796.77)"
    ]
    assert judgement.node_problems == {
        "gb200-r0-t0": "pair 0->5 775.00 GB/s (gb200-r0-t0 -> gb200-r0-t1), 0.943 of the median 821.41",
        "gb200-r0-t1": "pair 0->5 775.00 GB/s (gb200-r0-t0 -> gb200-r0-t1), 0.943 of the median 821.41",
    }
    # The old rule alone (the floor) passes it: this is the issue.
    assert judge(matrix_of(content), Thresholds(min_fraction_of_median=0), GB200, 4, NODES).passed is True


def test_real_gb200_with_one_gpu_at_0944_names_the_gpu_and_its_node():
    rows = scale_gpu(real_gb200_rows(), 5, 0.944)
    judgement = judge(matrix_of(emit_gb200(rows)), Thresholds(), GB200, 4, NODES)
    gpu_cells = [rows[5][c] for c in range(8) if c != 5] + [rows[r][5] for r in range(8) if r != 5]
    median = statistics.median(off_diagonal(rows))
    assert median == 821.335  # 14 of 56 pairs low: the median moves by 0.075 GB/s only
    assert judgement.passed is False
    assert judgement.low_gpus == [
        {
            "gpu": 5,
            "node": "gb200-r0-t1",
            "pairs": 14,
            "mean_gbps": round(statistics.mean(gpu_cells), 3),
            "median_gbps": round(statistics.median(gpu_cells), 3),
            "min_gbps": min(gpu_cells),
            "fraction_of_median": round(statistics.mean(gpu_cells) / median, 4),
            "fraction_of_reference": round(statistics.mean(gpu_cells) / median, 4),
        }
    ]
    assert judgement.low_gpus[0]["mean_gbps"] == 775.299
    assert judgement.low_gpus[0]["fraction_of_median"] == 0.9439
    assert judgement.summary == (
        "14 of 56 GPU pairs below the threshold: GPU 5 on gb200-r0-t1: its 14 pairs average 775.30 GB/s, "
        "0.944 of the median 821.34: a GPU with lost NVLinks"
    )
    assert judgement.violations == [
        "GPU 5 on gb200-r0-t1: its 14 pairs average 775.30 GB/s, 0.944 of the median 821.34: a GPU with lost NVLinks"
    ]
    # Every pair of GPU 5 is listed (for the heatmap), each explained by the GPU; only its node is blamed.
    assert sorted((p["src"], p["dst"]) for p in judgement.failing_pairs) == sorted(
        [(5, c) for c in range(8) if c != 5] + [(r, 5) for r in range(8) if r != 5]
    )
    assert {p["low_gpu"] for p in judgement.failing_pairs} == {5}
    assert {p["rule"] for p in judgement.failing_pairs} == {"median"}
    assert judgement.failed_nodes == ["gb200-r0-t1"]
    assert list(judgement.node_problems) == ["gb200-r0-t1"]


def test_a_pair_below_the_floor_and_a_pair_not_measured():
    rows = real_gb200_rows()
    rows[0][5] = 402.11
    rows[6][2] = None
    judgement = judge(rows, Thresholds(), GB200, 4, NODES)
    assert [(p["src"], p["dst"], p["gbps"], p["rule"]) for p in judgement.failing_pairs] == [
        (0, 5, 402.11, "floor"),
        (6, 2, None, "not_measured"),
    ]
    assert judgement.failing_pairs[1]["fraction_of_median"] is None
    assert judgement.summary == (
        "2 of 56 GPU pairs below the threshold: 0->5 402.11 GB/s (gb200-r0-t0 -> gb200-r0-t1), below the floor 765.00; "
        "6->2 not measured (N/A) (gb200-r0-t1 -> gb200-r0-t0)"
    )
    assert judgement.violations == [
        "GPU 0 -> GPU 5: 402.11 GB/s is below the threshold 765",
        "GPU 6 -> GPU 2: not measured (N/A), the pair has no peer access over NVLink",
    ]
    assert (judgement.pairs, judgement.measured_pairs) == (56, 55)


def test_plain_rows_without_nodes_and_no_threshold():
    rows = real_gb200_rows()
    result = judge(rows, Thresholds(min_fraction_of_peak=None, min_fraction_of_median=None)).to_dict()
    assert result["passed"] is True
    assert result["summary"] == "56 of 56 GPU pairs measured, no threshold set (min 820.35, SUM 45997.91)"
    rows[0][5] = 775.0
    failing = judge(rows).to_dict()
    assert failing["failing_pairs"][0]["src_node"] is None
    assert failing["summary"] == "1 of 56 GPU pairs below the threshold: 0->5 775.00 GB/s, 0.943 of the median 821.41"
    assert failing["failed_nodes"] == []


def test_unknown_product_fails_and_says_what_to_set():
    judgement = judge(real_gb200_rows(), Thresholds(), "NVIDIA-A100-SXM4-80GB", 4, NODES)
    assert judgement.passed is False
    assert judgement.threshold_gbps is None
    assert judgement.median_threshold_gbps == pytest.approx(796.7677)
    assert judgement.summary == (
        "no NVLink peak is known for GPU product 'NVIDIA-A100-SXM4-80GB' (label nvidia.com/gpu.product), so 0.85 x "
        "the peak cannot be worked out: set min_gbps, or peak_gbps, or add the product to the peak table"
    )
    assert judge(real_gb200_rows(), Thresholds(min_gbps=700), "NVIDIA-A100-SXM4-80GB").passed is True
    assert judge(real_gb200_rows(), Thresholds(), "").passed is False  # no product label at all


def test_min_sum():
    matrix = matrix_of(fixture(GB200_FILE))
    judgement = judge(matrix, Thresholds(min_sum_gbps=46000), GB200, 4, NODES)
    assert judgement.violations == [f"SUM {MN_READ} 45997.93 is below min_sum_gbps 46000"]
    assert judgement.summary == f"SUM {MN_READ} 45997.93 is below min_sum_gbps 46000"
    assert judgement.failed_nodes == []


def test_a_uniformly_slower_rack_is_left_to_the_floor():
    # A fault that slows every GPU alike (e.g. 17/18 everywhere) moves the median with it: only the floor sees it,
    # and 17/18 of ~821 GB/s is above 765. An absolute floor from the rack's own baseline catches it.
    rows = [[None if v is None else round(v * ONE_LOST_LINK_OF_18, 2) for v in row] for row in real_gb200_rows()]
    assert judge(rows, Thresholds(), GB200, 4, NODES).passed is True
    baseline = judge(rows, Thresholds(min_gbps=round(0.97 * 821.41, 2)), GB200, 4, NODES)
    assert baseline.threshold_gbps == 796.77
    assert len(baseline.failing_pairs) == 56
    assert baseline.low_gpus == []  # no GPU stands out from the median: the pairs fail the floor, one by one
    assert baseline.summary.startswith(
        "56 of 56 GPU pairs below the threshold: 0->1 776.48 GB/s (gb200-r0-t0 -> gb200-r0-t0), "
        "below the floor 796.77; "
    )
    assert baseline.summary.endswith("; and 51 more")


# ------------------------------------------------------------------ the real H200 runs


@pytest.mark.parametrize(
    ("name", "testcase", "median", "summary"),
    [
        (
            "h200x2-device_to_device_memcpy_read_ce.txt",
            "device_to_device_memcpy_read_ce",
            393.67,
            "2 of 2 GPU pairs at or above 382.50 GB/s and 0.97 of the median 393.67 (min 393.58, SUM 787.35)",
        ),
        (
            "h200x2-device_to_device_memcpy_read_ce.json",
            "device_to_device_memcpy_read_ce",
            393.754,
            "2 of 2 GPU pairs at or above 382.50 GB/s and 0.97 of the median 393.75 (min 393.75, SUM 787.51)",
        ),
        (
            "h200x2-device_to_device_memcpy_write_ce.txt",
            "device_to_device_memcpy_write_ce",
            396.225,
            "2 of 2 GPU pairs at or above 382.50 GB/s and 0.97 of the median 396.23 (min 396.20, SUM 792.45)",
        ),
    ],
)
def test_real_h200_passes_the_default_rule(name, testcase, median, summary):
    judgement = judge(matrix_of(fixture(name), testcase), Thresholds(), "NVIDIA-H200", 2, ["h200-vm"])
    assert judgement.passed is True
    assert judgement.threshold_gbps == 382.5
    assert judgement.median_gbps == median
    assert judgement.summary == summary


# ------------------------------------------------------------------ a generated 72-GPU rack (18 trays x 4 GPUs)


@pytest.fixture(scope="module")
def rack() -> str:
    return fixture(GENERATED_RACK_FIXTURE)


def test_generated_rack_fixture_is_what_the_generator_writes(rack):
    assert rack == emit_generated_rack()  # python tests/unit/plugins/module_utils/nvbandwidth_emitter.py rewrites it
    assert GENERATED_RACK_SEED == 20260105
    values = off_diagonal(generated_rack_rows())
    assert len(values) == 72 * 71
    assert REAL_GB200_RANGE[0] <= min(values) and max(values) <= REAL_GB200_RANGE[1]


def _layout(text: str) -> dict:
    lines = text.splitlines()
    running = next(i for i, line in enumerate(lines) if line.startswith("Running "))
    first_process = next(i for i, line in enumerate(lines) if line.startswith("Process "))
    header = lines[running + 2]
    gpus = len(header.split())
    rows = lines[running + 3 : running + 3 + gpus]
    return {
        "preamble": lines[:first_process],
        "process": lines[first_process : running - 1],
        "running_and_description": lines[running : running + 2],
        "header": header,
        "gpus": gpus,
        "rows": rows,
        "after_rows": lines[running + 3 + gpus :],
    }


def test_generated_rack_has_the_layout_of_the_real_gb200_capture(rack):
    real, generated = _layout(fixture(GB200_FILE)), _layout(rack)
    assert (real["gpus"], generated["gpus"]) == (8, 72)
    assert generated["preamble"] == real["preamble"]  # version, MPI, CUDA and driver lines
    assert generated["running_and_description"] == real["running_and_description"]
    for layout in (real, generated):
        n = layout["gpus"]
        # the row-label indent (2) then every column label right-aligned in 10 characters
        assert layout["header"] == "  " + "".join(f"{c:>10}" for c in range(n))
        assert len(layout["header"]) == 2 + 10 * n
        for r, line in enumerate(layout["rows"]):
            assert len(line) == 2 + 10 * n
            assert line[:2] == f"{r:>2}"
            cells = [line[2 + 10 * c : 12 + 10 * c] for c in range(n)]
            assert cells[r] == "       N/A"
            assert all(re.fullmatch(r" {4}\d{3}\.\d\d", cell) for c, cell in enumerate(cells) if c != r)
        assert layout["after_rows"][0] == ""
        assert re.fullmatch(rf"SUM {MN_READ} \d+\.\d\d", layout["after_rows"][1])
    assert generated["after_rows"][2:] == real["after_rows"][2:]  # the NOTE lines
    # Process lines: the same text per rank, the rank padded to 2 digits as nvbandwidth pads 72 ranks.
    pattern = re.compile(r"Process +(\d+) \((nvbandwidth-test-worker-\d+)\): device (\d): NVIDIA GB200 \((\S+)\)")
    real_by_device = {m.group(3): m.group(4) for m in map(pattern.fullmatch, real["process"])}
    assert len(generated["process"]) == 72
    for rank, line in enumerate(generated["process"]):
        match = pattern.fullmatch(line)
        assert match and int(match.group(1)) == rank and line.startswith(f"Process {rank:>2} (")
        assert match.group(2) == generated_rack_hosts()[rank // GENERATED_RACK_GPUS_PER_TRAY]
        assert match.group(4) == real_by_device[match.group(3)]
    total = sum(off_diagonal(generated_rack_rows()))
    assert generated["after_rows"][1] == f"SUM {MN_READ} {total:.2f}"


def test_generated_rack_healthy_passes(rack):
    values = off_diagonal(generated_rack_rows())
    verdict = check_nvbandwidth(rack, testcase=MN_READ, gpu_product=GB200, nodes=RACK_NODES, gpus_per_node=4)
    result = verdict.to_result()
    assert result["errors"] == [] and result["passed"] is True
    assert result["shape"] == [72, 72] and result["measured_cells"] == 5112
    assert result["median_gbps"] == round(statistics.median(values), 4) == 821.26
    assert result["summary"] == (
        f"5112 of 5112 GPU pairs at or above 765.00 GB/s and 0.97 of the product reference 821.41 "
        f"(min {min(values):.2f}, SUM {sum(values):.2f})"
    )
    assert result["summary"].endswith("(min 820.35, SUM 4198305.72)")
    assert result["failing_pairs"] == [] and result["low_gpus"] == [] and result["failed_nodes"] == []


def test_generated_rack_one_pair_at_17_of_18_fails():
    rows = generated_rack_rows()
    was = rows[3][60]
    rows[3][60] = round(was * ONE_LOST_LINK_OF_18, 2)
    verdict = check_nvbandwidth(emit_generated_rack(rows), gpu_product=GB200, nodes=RACK_NODES, gpus_per_node=4)
    median = statistics.median(off_diagonal(rows))
    assert verdict.errors == []
    assert verdict.failing_pairs == [
        {
            "src": 3,
            "dst": 60,
            "gbps": rows[3][60],
            "src_node": "gb200-r0-t0",
            "dst_node": "gb200-r0-t15",
            "fraction_of_median": round(rows[3][60] / median, 4),
            "rule": "product",
            "reference_gbps": 821.41,
            "threshold_gbps": round(0.97 * 821.41, 4),
            "low_gpu": None,
        }
    ]
    assert verdict.summary == (
        f"1 of 5112 GPU pairs below the threshold, held against the product reference 821.41 GB/s ({GB200_580}): "
        f"3->60 {rows[3][60]:.2f} GB/s (gb200-r0-t0 -> gb200-r0-t15), {rows[3][60] / 821.41:.3f} of the product "
        "reference 821.41"
    )
    assert verdict.judgement.failed_nodes == ["gb200-r0-t0", "gb200-r0-t15"]
    assert rows[3][60] > 765  # the floor alone would pass it


def test_generated_rack_one_gpu_at_17_of_18_fails_naming_it():
    rows = scale_gpu(generated_rack_rows(), 41, ONE_LOST_LINK_OF_18)
    verdict = check_nvbandwidth(emit_generated_rack(rows), gpu_product=GB200, nodes=RACK_NODES, gpus_per_node=4)
    result = verdict.to_result()
    cells = [rows[41][c] for c in range(72) if c != 41] + [rows[r][41] for r in range(72) if r != 41]
    median = statistics.median(off_diagonal(rows))
    assert result["passed"] is False
    assert len(result["failing_pairs"]) == 142
    assert [(g["gpu"], g["node"], g["pairs"]) for g in result["low_gpus"]] == [(41, "gb200-r0-t10", 142)]
    assert result["low_gpus"][0]["mean_gbps"] == round(statistics.mean(cells), 3)
    assert result["low_gpus"][0]["fraction_of_median"] == pytest.approx(ONE_LOST_LINK_OF_18, abs=0.001)
    assert result["failed_nodes"] == ["gb200-r0-t10"]
    assert result["summary"] == (
        f"142 of 5112 GPU pairs below the threshold, held against the product reference 821.41 GB/s ({GB200_580}): "
        f"GPU 41 on gb200-r0-t10: its 142 pairs average {statistics.mean(cells):.2f} GB/s, "
        f"{statistics.mean(cells) / 821.41:.3f} of the product reference 821.41: a GPU with lost NVLinks"
    )
    assert result["violations"] == [result["summary"].split(f"({GB200_580}): ")[1]]
    assert median < 821.41  # the median moved with GPU 41; the product reference did not


def test_generated_rack_many_findings_are_cut_after_five():
    rows = scale_gpu(generated_rack_rows(), 41, ONE_LOST_LINK_OF_18)
    for src, dst in [(0, 4), (8, 12), (16, 20), (24, 28), (32, 36), (44, 48)]:
        rows[src][dst] = 700.0
    judgement = judge(rows, Thresholds(), GB200, GENERATED_RACK_GPUS_PER_TRAY, RACK_NODES)
    assert len(judgement.failing_pairs) == 148
    assert [g["gpu"] for g in judgement.low_gpus] == [41]
    assert judgement.summary.startswith("148 of 5112 GPU pairs below the threshold: GPU 41 on gb200-r0-t10: ")
    assert judgement.summary.count("below the floor 765.00") == 4
    assert judgement.summary.endswith(
        "; 24->28 700.00 GB/s (gb200-r0-t6 -> gb200-r0-t7), below the floor 765.00; and 2 more"
    )
    assert len(judgement.violations) == 7
    assert judgement.failed_nodes == sorted(
        ["gb200-r0-t10"] + [f"gb200-r0-t{t}" for t in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12)]
    )


def test_gpus_per_node_follows_from_the_nodes_when_not_given():
    rows = real_gb200_rows()
    rows[0][5] = 775.0
    judgement = judge(rows, Thresholds(), GB200, None, NODES)  # 8 GPUs on 2 trays: 4 each
    assert (judgement.failing_pairs[0]["src_node"], judgement.failing_pairs[0]["dst_node"]) == tuple(NODES)
    assert judgement.failed_nodes == NODES
    uneven = judge(rows, Thresholds(), GB200, 0, [*NODES, "gb200-r0-t2"])  # 8 GPUs on 3 trays: one GPU each
    assert (uneven.failing_pairs[0]["src_node"], uneven.failing_pairs[0]["dst_node"]) == ("gb200-r0-t0", None)
    assert uneven.summary == (
        "1 of 56 GPU pairs below the threshold: 0->5 775.00 GB/s (gb200-r0-t0), 0.943 of the median 821.41"
    )


class HostToDevice:
    """A 1-row host<->device matrix (invented): the CPU as the row, one GPU per column."""

    rows = [[None, 50.0, 52.0]]
    description = "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
    key = "host_to_device_memcpy_ce"
    reported_sum = None


def test_a_cell_not_measured_outside_a_peer_matrix_is_no_pair():
    judgement = judge(HostToDevice(), Thresholds(), GB200, 1, ["a", "b", "c"])
    assert [(p["src"], p["dst"], p["rule"], p["src_node"], p["dst_node"]) for p in judgement.failing_pairs] == [
        (0, 1, "floor", None, "b"),
        (0, 2, "floor", None, "c"),
    ]
    assert (judgement.pairs, judgement.measured_pairs, judgement.min_fraction_of_median) == (2, 2, None)
    assert judgement.violations == [
        "CPU -> GPU 1: 50 GB/s is below the threshold 765",
        "CPU -> GPU 2: 52 GB/s is below the threshold 765",
    ]
    assert judgement.summary == (
        "2 of 2 cells below the threshold: CPU -> GPU 1 50.00 GB/s (b), below the floor 765.00; "
        "CPU -> GPU 2 52.00 GB/s (c), below the floor 765.00"
    )


def test_a_matrix_with_no_cell_measured():
    judgement = judge([[None, None], [None, None]], Thresholds(), GB200, 1, ["a", "b"])
    assert [p["rule"] for p in judgement.failing_pairs] == ["not_measured", "not_measured"]
    assert (judgement.median_gbps, judgement.sum_gbps, judgement.min_gbps) == (None, None, None)
    assert judgement.violations[-1] == "no GPU pair was measured: every cell is N/A"
    assert judgement.summary == (
        "2 of 2 GPU pairs below the threshold: 0->1 not measured (N/A) (a -> b); 1->0 not measured (N/A) (b -> a); "
        "no GPU pair was measured: every cell is N/A"
    )
