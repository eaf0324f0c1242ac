# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""References a broken rack cannot pull down: the product reference and the site baseline beside the median.

Each case starts from a real capture (the GB200 2-tray run, the 2x H200 runs) or the generated 72-GPU rack drawn
from the real GB200 range, and edits it to the fault: a GPU that lost one NVLink of 18 runs every pair it takes
part in at 17/18 of the healthy figure, whichever end it is.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_rule import judge
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    ONE_LOST_LINK_OF_18,
    RULE_BASELINE,
    RULE_MEDIAN,
    RULE_PRODUCT,
    Baseline,
    Thresholds,
    driver_branch,
    product_reference,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import check_nvbandwidth

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from nvbandwidth_emitter import (  # noqa: E402
    GENERATED_RACK_TRAYS,
    MN_READ,
    READ_DESCRIPTION,
    Matrix,
    Testcase,
    emit_generated_rack,
    emit_run,
    generated_rack_rows,
)
from test_bandwidth_rule import GB200, GB200_FILE, NODES, fixture, matrix_of, off_diagonal, real_gb200_rows  # noqa: E402

RACK_NODES = [f"gb200-r0-t{tray}" for tray in range(GENERATED_RACK_TRAYS)]
GB200_REFERENCE = 821.41
D2D_READ = "device_to_device_memcpy_read_ce"


def lose_a_link(rows: list, gpus, factor: float = ONE_LOST_LINK_OF_18) -> list:
    """Every pair with a degraded GPU at either end runs at ``factor`` of its healthy figure (2 decimals)."""
    gpus = set(gpus)
    return [
        [
            v if r == c or v is None or (r not in gpus and c not in gpus) else round(v * factor, 2)
            for c, v in enumerate(row)
        ]
        for r, row in enumerate(rows)
    ]


def emit_gb200(rows: list, driver: str = "580.95.05") -> str:
    return emit_run(
        [Testcase(MN_READ, [Matrix(MN_READ, READ_DESCRIPTION, rows)])],
        hosts=["nvbandwidth-test-worker-0", "nvbandwidth-test-worker-1"],
        version="v0.7",
        driver=driver,
    )


def two_trays(rows: list, **kwargs):
    return check_nvbandwidth(
        emit_gb200(rows), testcase=MN_READ, gpu_product=GB200, nodes=NODES, gpus_per_node=4, **kwargs
    ).to_result()


def rack(rows: list, **kwargs):
    return check_nvbandwidth(
        emit_generated_rack(rows), testcase=MN_READ, gpu_product=GB200, nodes=RACK_NODES, gpus_per_node=4, **kwargs
    ).to_result()


# ------------------------------------------------------------------ the faults the median alone lets pass


def test_three_of_eight_gpus_one_link_down_fail_against_the_product_reference():
    rows = lose_a_link(real_gb200_rows(), [1, 4, 6])
    # 36 of 56 pairs touch a degraded GPU: the median is now the degraded level, and the median alone passes it.
    assert statistics.median(off_diagonal(rows)) < 0.97 * GB200_REFERENCE
    assert judge(rows, Thresholds(), GB200, 4, NODES).passed is True
    result = two_trays(rows)
    assert result["passed"] is False
    assert result["reference"]["kind"] == RULE_PRODUCT and result["reference"]["gbps"] == GB200_REFERENCE
    assert [g["gpu"] for g in result["low_gpus"]] == [1, 4, 6]
    assert {p["rule"] for p in result["failing_pairs"]} == {RULE_PRODUCT}
    assert len(result["failing_pairs"]) == 36
    assert result["failed_nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert (
        "held against the product reference 821.41 GB/s (GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05"
        in (result["summary"])
    )
    assert "GPU 4 on gb200-r0-t1: its 14 pairs average" in result["summary"]


def test_twenty_two_of_seventy_two_gpus_one_link_down_fail_and_name_each_gpu():
    degraded = list(range(0, 72, 10)) + list(range(3, 72, 5))[:15]
    assert len(set(degraded)) == 22
    rows = lose_a_link(generated_rack_rows(), degraded)
    result = rack(rows)
    assert result["passed"] is False
    assert sorted(g["gpu"] for g in result["low_gpus"]) == sorted(set(degraded))
    assert all(g["fraction_of_reference"] == pytest.approx(ONE_LOST_LINK_OF_18, abs=0.002) for g in result["low_gpus"])
    assert {p["rule"] for p in result["failing_pairs"]} == {RULE_PRODUCT}
    # The trays of the degraded GPUs, and only those, are blamed.
    assert result["failed_nodes"] == sorted({RACK_NODES[g // 4] for g in degraded})


def test_every_gpu_one_link_down_fails_as_a_fault_of_the_whole_domain():
    rows = lose_a_link(generated_rack_rows(), range(72))
    values = off_diagonal(rows)
    assert min(values) > 765  # above the floor
    assert judge(rows, Thresholds(), GB200, 4, RACK_NODES).passed is True  # and at its own median
    result = rack(rows)
    assert result["passed"] is False
    assert len(result["low_gpus"]) == 72 and len(result["failing_pairs"]) == 5112
    assert result["violations"][0] == (
        "every one of the 72 GPUs is below 0.97 x the product reference 821.41 GB/s (GB200 NVL72, 2 trays x 4 GPUs, "
        "driver 580.95.05, the guide's run: 820.35-822.16 GB/s) on each of its pairs: a fault of the whole NVLink "
        "domain (a switch tray, the fabric manager, a driver or clock setting), not of one GPU"
    )
    assert result["failed_nodes"] == sorted(RACK_NODES)


def test_one_whole_row_low_fails_as_its_pairs():
    rows = real_gb200_rows()
    rows[2] = [v if c == 2 else round(v * ONE_LOST_LINK_OF_18, 2) for c, v in enumerate(rows[2])]
    result = two_trays(rows)
    assert result["passed"] is False
    # GPU 2 is slow as a source only: its column is healthy, so it is not a "low GPU", and each pair is named.
    assert result["low_gpus"] == []
    assert sorted((p["src"], p["dst"]) for p in result["failing_pairs"]) == [(2, c) for c in range(8) if c != 2]
    assert result["violations"][0].startswith("GPU 2 -> GPU 0: ")
    assert result["violations"][0].endswith(
        "of the product reference 821.41 GB/s (GB200 NVL72, 2 trays x 4 GPUs, driver 580.95.05, the guide's run: "
        "820.35-822.16 GB/s), below 0.97 x that (796.77)"
    )


def test_one_whole_column_low_on_the_rack_fails_as_its_pairs():
    rows = generated_rack_rows()
    for r in range(72):
        if r != 30:
            rows[r][30] = round(rows[r][30] * ONE_LOST_LINK_OF_18, 2)
    result = rack(rows)
    assert result["passed"] is False
    assert sorted((p["src"], p["dst"]) for p in result["failing_pairs"]) == [(r, 30) for r in range(72) if r != 30]


def test_half_the_links_of_every_gpu_down_with_a_lowered_floor_fails():
    rows = lose_a_link(real_gb200_rows(), range(8), factor=0.5)
    lowered = Thresholds(min_fraction_of_peak=0.4)  # 360 GB/s: a site that lowered the floor for another product
    assert judge(rows, lowered, GB200, 4, NODES).passed is True  # floor and median alone pass it
    result = check_nvbandwidth(
        emit_gb200(rows), testcase=MN_READ, thresholds=lowered, gpu_product=GB200, nodes=NODES, gpus_per_node=4
    ).to_result()
    assert result["passed"] is False
    assert result["threshold_gbps"] == 360.0
    assert len(result["low_gpus"]) == 8
    assert result["violations"][0].startswith("every one of the 8 GPUs is below 0.97 x the product reference 821.41")


# ------------------------------------------------------------------ the healthy captures still pass


def test_the_real_gb200_capture_passes_against_its_own_reference():
    result = two_trays(real_gb200_rows())
    assert result["passed"] is True, result["summary"]
    assert result["summary"].startswith("56 of 56 GPU pairs at or above 765.00 GB/s and 0.97 of the product reference")
    assert [r["kind"] for r in result["references"]] == [RULE_PRODUCT, RULE_MEDIAN]
    assert result["warnings"] == []


@pytest.mark.parametrize(
    ("name", "testcase", "reference"),
    [
        ("h200x2-device_to_device_memcpy_read_ce.txt", D2D_READ, 393.67),
        ("h200x2-device_to_device_memcpy_read_ce.json", D2D_READ, 393.67),
        ("h200x2-device_to_device_memcpy_write_ce.txt", "device_to_device_memcpy_write_ce", 396.22),
        ("h200x2-device_to_device_memcpy_write_ce.json", "device_to_device_memcpy_write_ce", 396.22),
    ],
)
def test_the_real_h200_captures_pass_against_their_reference(name, testcase, reference):
    result = check_nvbandwidth(fixture(name), testcase=testcase, gpu_product="NVIDIA-H200").to_result()
    assert result["passed"] is True, result["summary"]
    # The run's median is a hair above the figure (393.754 in the JSON run): the stricter of the two holds.
    assert {"kind": RULE_PRODUCT, "gbps": reference} in [
        {k: r[k] for k in ("kind", "gbps")} for r in result["references"]
    ]


def test_a_healthy_run_on_driver_570_passes_against_the_570_figure():
    rows = [[None if r == c else 797.95 + 0.1 * ((r + c) % 3) for c in range(8)] for r in range(8)]
    result = check_nvbandwidth(
        emit_gb200(rows, driver="570.124.06"), testcase=MN_READ, gpu_product=GB200, nodes=NODES, gpus_per_node=4
    ).to_result()
    assert result["passed"] is True, result["summary"]
    assert (result["references"][0]["kind"], result["references"][0]["gbps"]) == (RULE_PRODUCT, 797.95)
    # One lost link on that driver still fails.
    degraded = lose_a_link(rows, [3])
    result = check_nvbandwidth(
        emit_gb200(degraded, driver="570.124.06"), testcase=MN_READ, gpu_product=GB200, nodes=NODES, gpus_per_node=4
    ).to_result()
    assert result["passed"] is False and [g["gpu"] for g in result["low_gpus"]] == [3]


# ------------------------------------------------------------------ choosing the product reference


@pytest.mark.parametrize(
    ("driver", "gbps", "noted"),
    [
        ("580.95.05", 821.41, False),
        ("570.158.01", 797.95, False),
        ("595.10.01", 821.41, True),  # a newer branch: the newest figure below it
        ("575.51.03", 797.95, True),
        ("535.247.01", 797.95, True),  # older than every figure: the lowest
        (None, 797.95, True),  # unknown driver: the lowest, never a false failure
    ],
)
def test_the_driver_branch_picks_the_figure(driver, gbps, noted):
    reference, note = product_reference(GB200, MN_READ, driver)
    assert reference.gbps == gbps and reference.kind == RULE_PRODUCT
    assert (note is not None) is noted


def test_no_reference_for_other_products_and_testcases():
    assert product_reference("NVIDIA-GB300", MN_READ, "580.95.05") == (None, None)
    assert product_reference(GB200, "device_to_device_memcpy_write_ce", "580.95.05") == (None, None)
    assert product_reference("NVIDIA-H200-NVL", D2D_READ, "580.95.05") == (None, None)  # PCIe cards, bridges
    assert product_reference(GB200, None, "580.95.05") == (None, None)


def test_the_site_table_is_tried_first_and_a_bad_one_is_refused():
    site = [{"match": "GB200", "testcase": MN_READ, "gbps": 830.0, "source": "rack A acceptance, 2026-11"}]
    reference, note = product_reference(GB200, MN_READ, "580.95.05", site)
    assert (reference.gbps, reference.source, note) == (830.0, "rack A acceptance, 2026-11", None)
    with pytest.raises(ValueError, match=r"product reference entry 0 .* gbps 0 is not above 0"):
        product_reference(GB200, MN_READ, "580.95.05", [{"match": "GB200", "testcase": MN_READ, "gbps": 0}])


def test_driver_branch():
    assert [driver_branch(v) for v in ("580.95.05", "570", " 595.1 ", "", None, "N/A")] == [
        580,
        570,
        595,
        None,
        None,
        None,
    ]


# ------------------------------------------------------------------ the site baseline and the median alone


def test_a_product_without_a_figure_is_held_against_its_median_and_says_so():
    rows = lose_a_link(real_gb200_rows(), range(8))
    result = check_nvbandwidth(emit_gb200(rows), testcase=MN_READ, gpu_product="NVIDIA-GB300").to_result()
    assert result["passed"] is True  # nothing it could be held against...
    assert [r["kind"] for r in result["references"]] == [RULE_MEDIAN]
    assert any(
        w.startswith("held against the run's median alone: no product reference (NVIDIA-GB300,")
        for w in (result["warnings"])
    )


def test_the_pinned_run_holds_a_rack_whose_every_gpu_lost_a_link():
    healthy = real_gb200_rows()
    baseline = Baseline.from_record(
        {
            "run_id": "20261201T0300Z",
            "source": "pinned run 20261201T0300Z",
            "median_gbps": statistics.median(off_diagonal(healthy)),
            "matrix": healthy,
            "rank_nodes": NODES,
            "driver_version": "580.95.05",
        }
    )
    rows = lose_a_link(healthy, range(8))
    result = check_nvbandwidth(
        emit_gb200(rows), testcase=MN_READ, gpu_product="NVIDIA-GB300", nodes=NODES, gpus_per_node=4, baseline=baseline
    ).to_result()
    assert result["passed"] is False
    assert result["reference"]["kind"] == RULE_BASELINE
    assert {p["rule"] for p in result["failing_pairs"]} == {RULE_BASELINE}
    # Per pair: each pair is held against its own figure of that run.
    pair = next(p for p in result["failing_pairs"] if (p["src"], p["dst"]) == (0, 5))
    assert pair["reference_gbps"] == healthy[0][5]
    assert result["warnings"] == [
        "no product reference (NVIDIA-GB300, multinode_device_to_device_memcpy_read_ce, driver 580.95.05): this run "
        "is held against the site baseline and its median, and sets no baseline for later runs (add the product to "
        "product_references)"
    ]
    # The same run passes against itself.
    same = check_nvbandwidth(
        emit_gb200(healthy),
        testcase=MN_READ,
        gpu_product="NVIDIA-GB300",
        nodes=NODES,
        gpus_per_node=4,
        baseline=baseline,
    ).to_result()
    assert same["passed"] is True, same["summary"]


def test_a_baseline_of_other_trays_is_used_by_its_median_only():
    healthy = real_gb200_rows()
    baseline = Baseline(median_gbps=821.41, source="pinned run r1", matrix=healthy, nodes=["other-t0", "other-t1"])
    judgement = judge(
        healthy, Thresholds(), "NVIDIA-GB300", 4, NODES, testcase=MN_READ, driver_version="580.95.05", baseline=baseline
    )
    assert judgement.passed is True
    assert judgement.reference == {"kind": RULE_BASELINE, "gbps": 821.41, "source": "pinned run r1"}


def test_a_baseline_of_another_driver_branch_is_not_used_and_the_record_says_why():
    rows = lose_a_link(real_gb200_rows(), range(8))
    baseline = Baseline(median_gbps=821.41, source="last passing run r7", driver_version="570.124.06")
    judgement = judge(
        rows, Thresholds(), "NVIDIA-GB300", 4, NODES, testcase=MN_READ, driver_version="580.95.05", baseline=baseline
    )
    assert [r["kind"] for r in judgement.references] == [RULE_MEDIAN]
    assert judgement.warnings[0] == (
        "the site baseline (last passing run r7) was measured on driver branch 570, this run on 580: it is not used "
        "until a run on this branch passes"
    )


@pytest.mark.parametrize("record", [None, {}, {"source": "run r1"}, "821"])
def test_a_baseline_record_without_a_median_is_no_baseline(record):
    assert Baseline.from_record(record) is None


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"median_gbps": "n/a"}, "median_gbps 'n/a' is not a number"),
        ({"median_gbps": 0}, "median_gbps 0 is not above 0"),
        ({"median_gbps": float("nan")}, "median_gbps nan is not a finite number"),
        ({"median_gbps": float("inf")}, "median_gbps inf is not a finite number"),
        ({"median_gbps": True}, "median_gbps True is a boolean, not a number"),
        (
            {"median_gbps": 821.0, "matrix": [[None, float("nan")], [False, None]]},
            "matrix row 0 column 1 nan is not a finite number; matrix row 1 column 0 False is a boolean, not a number",
        ),
    ],
)
def test_a_baseline_whose_figures_are_no_numbers_is_refused_naming_the_entry(record, why):
    with pytest.raises(ValueError) as refused:
        Baseline.from_record({**record, "source": "pinned run r1"})
    assert str(refused.value) == f"the site baseline (pinned run r1): {why}"
    with pytest.raises(ValueError, match="the site baseline"):
        Baseline(median_gbps=record["median_gbps"], source="given", matrix=record.get("matrix"))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True, "fast", -821.41, 0])
def test_a_reference_or_peak_that_is_no_figure_is_refused_before_judging(bad):
    references = [{"match": "GB200", "testcase": MN_READ, "gbps": bad, "source": "site"}]
    with pytest.raises(ValueError, match=r"^product reference entry 0 .*: gbps "):
        judge(real_gb200_rows(), Thresholds(), GB200, 4, NODES, testcase=MN_READ, product_references=references)
    with pytest.raises(ValueError, match=r"^peak table entry 0 .*: peak_gbps "):
        judge(real_gb200_rows(), Thresholds(), GB200, 4, NODES, peak_table=[{"match": "GB200", "peak_gbps": bad}])
    branch = [{"match": "GB200", "testcase": MN_READ, "gbps": 830.0, "driver_branch": bad}]
    with pytest.raises(ValueError, match=r"^product reference entry 0 .*driver_branch"):
        judge(real_gb200_rows(), Thresholds(), GB200, 4, NODES, testcase=MN_READ, product_references=branch)


@pytest.mark.parametrize("name", ["min_gbps", "min_sum_gbps", "peak_gbps", "min_fraction_of_median"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True])
def test_a_threshold_that_is_no_number_is_refused(name, bad):
    with pytest.raises(ValueError, match=f"{name} is {bad!r}; it must be"):
        judge(real_gb200_rows(), Thresholds(**{name: bad}), GB200, 4, NODES, testcase=MN_READ)


def test_a_nan_cell_of_plain_rows_is_refused():
    rows = real_gb200_rows()
    rows[0][1] = float("nan")
    with pytest.raises(ValueError, match=r"cells that are no bandwidth .*: row 0 column 1: nan"):
        judge(rows, Thresholds(), GB200, 4, NODES, testcase=MN_READ)


def test_the_strictest_reference_wins_per_pair():
    rows = real_gb200_rows()
    # A baseline above the product figure: the baseline is the stricter one and names the failing pair.
    baseline = Baseline(median_gbps=850.0, source="pinned run r2")
    judgement = judge(
        rows, Thresholds(), GB200, 4, NODES, testcase=MN_READ, driver_version="580.95.05", baseline=baseline
    )
    assert judgement.passed is False
    assert judgement.reference["kind"] == RULE_BASELINE
    assert judgement.median_threshold_gbps == round(0.97 * 850.0, 4)
    # The fraction set to 0 turns every reference off; the floor stays.
    off = judge(rows, Thresholds(min_fraction_of_median=0), GB200, 4, NODES, testcase=MN_READ, baseline=baseline)
    assert off.passed is True and off.references == []


def test_the_file_the_tests_start_from_is_the_real_capture():
    assert matrix_of(fixture(GB200_FILE)).rows == real_gb200_rows()
