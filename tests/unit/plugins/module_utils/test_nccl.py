# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nccl import (
    DEFAULT_MIN_FRACTION_OF_REFERENCE,
    NVL72_ALLREDUCE_REFERENCE,
    busbw_reference,
    evaluate_nccl_tests,
    nccl_tests_summary,
    parse_nccl_tests,
    size_text,
    strip_terminal_escapes,
)

from tests.conftest import FIXTURES

NCCL = FIXTURES / "nccl"


def read(name: str) -> str:
    return (NCCL / name).read_text()


def test_parse_clean_run_reads_params_devices_rows_and_footer():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))

    assert result.params == {"nthread": 1, "ngpus": 1, "min_bytes": 1073741824, "max_bytes": 8589934592}
    assert result.ranks == 8
    assert result.devices[5].host == "nccl-test-worker-1"
    assert result.devices[5].device == 1
    assert result.devices[5].bus_id == "0x01"
    assert result.devices[5].name == "NVIDIA GB200"
    assert [row.size_bytes for row in result.rows] == [1073741824, 2147483648, 4294967296, 8589934592]
    first = result.rows[0]
    assert (first.count, first.type, first.redop, first.root) == (268435456, "float", "sum", -1)
    assert first.out_of_place.time_us == 2468.1
    assert first.out_of_place.algbw_gbps == 435.05
    assert first.out_of_place.busbw_gbps == 761.33
    assert first.out_of_place.wrong == 0
    assert first.in_place.busbw_gbps == 760.16
    # %7.0f times above 10 ms carry no decimals
    assert result.rows[-1].out_of_place.time_us == 18664.0
    assert result.out_of_bounds == 0
    assert result.avg_busbw_gbps == 787.804
    assert result.avg_busbw_verdict is None
    assert result.max_busbw_gbps == 805.64
    assert result.failures == []
    assert result.warnings == []


def test_avg_bus_bandwidth_is_the_mean_of_the_printed_busbw_columns():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))
    values = [bw for row in result.rows for bw in (row.out_of_place.busbw_gbps, row.in_place.busbw_gbps)]
    assert round(sum(values) / len(values), 3) == result.avg_busbw_gbps


def test_clean_run_passes_threshold_and_rank_count():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))
    verdict = evaluate_nccl_tests(result, min_busbw_gbps=540.0, expected_ranks=8)
    assert verdict.passed
    assert verdict.violations == []


def test_a_floor_above_the_large_message_rows_fails_naming_each_one():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))
    verdict = evaluate_nccl_tests(result, min_busbw_gbps=800.0)
    assert not verdict.passed
    # the 1 and 2 GiB rows (761-786 GB/s) are below 800 too, but the floor holds for 4 GiB and more only
    assert verdict.violations == [
        "bus bandwidth below the floor 800 GB/s at 2 of 4 measurements of 4 GiB and more: 4 GiB out-of-place 798.86, "
        "4 GiB in-place 798.64 GB/s; the NVLink fabric is slower than a healthy rack (run nvbandwidth to find the GPU "
        "or tray)"
    ]


def test_rank_count_mismatch_is_a_violation():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))
    verdict = evaluate_nccl_tests(result, expected_ranks=16)
    assert not verdict.passed
    assert verdict.violations[0].startswith("8 ranks took part, 16 were expected")


def test_wrong_elements_name_the_size_and_out_of_bounds_count():
    result = parse_nccl_tests(read("bad-wrong-elements.txt"))
    # "%5g" prints 1048576 wrong elements as "1.04858e+06"
    assert result.rows[2].out_of_place.wrong == 1048580
    assert result.rows[2].wrong == 1048580
    assert result.wrong_sizes == [4294967296]
    assert result.out_of_bounds == 1
    verdict = evaluate_nccl_tests(result, min_busbw_gbps=100.0)
    assert not verdict.passed
    assert verdict.violations == [
        "wrong results (#wrong > 0) at 1 message sizes (4294967296 B): data corruption on the fabric or a broken "
        "NCCL transport",
        "1 out-of-bounds values reported by the data check (nccl-tests: FAILED)",
    ]


def test_nccl_failure_cut_short_is_reported_with_its_lines():
    result = parse_nccl_tests(read("bad-nccl-failure.txt"))
    assert len(result.rows) == 1
    assert result.avg_busbw_gbps is None
    assert result.warnings == [
        "nccl-test-worker-1:52:60 [2] NCCL WARN Cuda failure 'an illegal memory access was encountered'"
    ]
    assert [line.split(":")[0] for line in result.failures] == [
        "nccl-test-worker-1",
        ".. nccl-test-worker-1 pid 52",
        "Primary job  terminated normally, but 1 process returned",
    ]
    verdict = evaluate_nccl_tests(result)
    assert not verdict.passed
    assert verdict.violations[0].startswith("the test reported a failure: nccl-test-worker-1: Test NCCL failure")
    assert verdict.violations[-1] == (
        "the '# Avg bus bandwidth' line is missing: the benchmark did not finish (1 sizes measured before it stopped)"
    )


def test_empty_output_fails_as_not_run():
    verdict = evaluate_nccl_tests(parse_nccl_tests(""))
    assert not verdict.passed
    assert verdict.violations[0].startswith("no result row was found in the output")


def test_data_check_off_reads_na_as_unknown_wrong_count():
    # -c 0 prints "N/A" in the #wrong columns (common.cu: PRINT("  %7s  %6.2f  %6.2f  %5s", ..., "N/A"))
    text = read("gb200-2node-all_reduce_perf.txt").replace("      0\n", "    N/A\n").replace("      0   ", "    N/A   ")
    result = parse_nccl_tests(text)
    assert [row.out_of_place.wrong for row in result.rows] == [None, None, None, None]
    assert [row.in_place.wrong for row in result.rows] == [None, None, None, None]
    assert evaluate_nccl_tests(result).passed


def test_cputime_header_and_benchmark_verdict_are_read():
    text = read("gb200-2node-all_reduce_perf.txt").replace("     time   algbw", "  cputime   algbw")
    text = text.replace("# Avg bus bandwidth    : 787.804 ", "# Avg bus bandwidth    : 787.804 OK")
    result = parse_nccl_tests(text)
    assert len(result.rows) == 4
    assert result.rows[0].in_place.time_us == 2471.9
    assert result.avg_busbw_verdict == "OK"


def test_row_with_missing_columns_fails_the_verdict_without_raising():
    text = read("gb200-2node-all_reduce_perf.txt").replace("#wrong     time   algbw   busbw #wrong", "x  y  z  w  v")
    result = parse_nccl_tests(text)
    assert result.rows == []
    assert len(result.damaged_rows) == 4
    assert "lacks the columns" in result.damaged_rows[0]
    verdict = evaluate_nccl_tests(result)
    assert not verdict.passed
    assert verdict.violations[0].startswith("a result line cannot be read, the log is damaged: 1073741824 ")


GOOD_ROW = "  2147483648     536870912     float     sum      -1   4781.3  449.14  786.00" + (
    "      0   4779.0  449.36  786.38      0"
)


@pytest.mark.parametrize(
    "row, problem",
    [
        (GOOD_ROW.replace("786.00", "   N/A"), "'N/A' is not a number"),
        (GOOD_ROW.replace("786.00", "   inf"), "'inf' is not a measurement"),
        (GOOD_ROW.replace("786.00", "-786.0"), "'-786.0' is not a measurement"),
        (GOOD_ROW[: GOOD_ROW.rindex("449.36")], "lacks the columns"),
        (GOOD_ROW[:-1] + "x", "'x' is not a number"),
    ],
)
def test_damaged_row_is_a_violation_not_a_traceback(row, problem):
    text = read("gb200-2node-all_reduce_perf.txt").replace(GOOD_ROW, row)
    summary = nccl_tests_summary(text, min_busbw_gbps=765.0, expected_ranks=8)
    assert summary["passed"] is False
    assert len(summary["rows"]) == 3
    assert problem in summary["violations"][0]


@pytest.mark.parametrize("value", ["inf", "nan", "-787.804", "78x"])
def test_average_that_is_no_measurement_fails(value):
    text = read("gb200-2node-all_reduce_perf.txt").replace("787.804", value)
    summary = nccl_tests_summary(text, min_busbw_gbps=765.0, expected_ranks=8)
    assert summary["passed"] is False
    assert summary["avg_busbw_gbps"] is None
    assert f"# Avg bus bandwidth    : {value}" in summary["violations"][0]


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.replace(GOOD_ROW + "\n", ""),  # a row lost in the log
        lambda t: t.replace(GOOD_ROW, GOOD_ROW + "\n" + GOOD_ROW),  # a row doubled
        lambda t: t.replace("786.38", "  1.00"),  # a cell damaged
        lambda t: t.replace("787.804", "827.194"),  # the average damaged
    ],
)
def test_average_that_disagrees_with_the_rows_fails(change):
    summary = nccl_tests_summary(change(read("gb200-2node-all_reduce_perf.txt")), min_busbw_gbps=765.0)
    assert summary["passed"] is False
    assert any("is not the average of the" in v for v in summary["violations"]), summary["violations"]


def test_the_real_average_agrees_with_its_rows():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))
    # (761.33 + 760.16 + 786.00 + 786.38 + 798.86 + 798.64 + 805.42 + 805.64) / 8
    assert result.rows_average_gbps() == pytest.approx(787.80375)
    assert result.avg_busbw_gbps == 787.804


def test_log_prefixes_colours_and_crlf_are_cosmetic():
    text = read("gb200-2node-all_reduce_perf.txt")
    plain = nccl_tests_summary(text, min_busbw_gbps=765.0, expected_ranks=8)
    prefixed = "\r\n".join(
        f"[pod/nccl-test-launcher-x7k2p/mpi-launcher] 2026-01-05T08:31:{n % 60:02d}.123456789Z \x1b[32m{line}\x1b[0m"
        for n, line in enumerate(text.splitlines())
    )
    assert nccl_tests_summary(prefixed, min_busbw_gbps=765.0, expected_ranks=8) == plain
    assert plain["passed"] is True


def test_summary_is_plain_data_with_verdict():
    summary = nccl_tests_summary(read("gb200-2node-all_reduce_perf.txt"), min_busbw_gbps=540.0, expected_ranks=8)
    assert summary["passed"] is True
    assert summary["ranks"] == 8
    assert summary["avg_busbw_gbps"] == 787.804
    assert summary["rows"][3]["busbw_gbps"] == 805.64
    assert summary["rows"][3]["out_of_place"] == {
        "time_us": 18664.0,
        "algbw_gbps": 460.24,
        "busbw_gbps": 805.42,
        "wrong": 0,
    }
    assert summary["min_busbw_gbps"] == 540.0


def test_the_communicators_mnnvl_state_is_read_per_rank():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf-mnnvl.txt"))
    assert result.mnnvl == {rank: 1 for rank in range(8)}
    assert len(result.rows) == 4 and result.avg_busbw_gbps == 787.804
    assert evaluate_nccl_tests(result, min_busbw_gbps=700, expected_ranks=8, require_mnnvl=True).passed
    summary = nccl_tests_summary(read("gb200-2node-all_reduce_perf-mnnvl.txt"), require_mnnvl=True)
    assert (summary["mnnvl_ranks"], summary["mnnvl_reported_ranks"]) == (8, 8)


def test_mnnvl_off_on_some_ranks_fails_naming_them():
    verdict = evaluate_nccl_tests(parse_nccl_tests(read("bad-mnnvl-off.txt")), min_busbw_gbps=700, require_mnnvl=True)
    assert not verdict.passed
    assert verdict.violations == [
        "NCCL did not use multi-node NVLink on 2 of 8 ranks (MNNVL 0: rank 5, 6): the bandwidth is not the NVLink "
        "fabric's; check the IMEX channel and NCCL_MNNVL_ENABLE/NCCL_CUMEM_ENABLE"
    ]


def test_a_log_that_does_not_show_mnnvl_fails_when_it_is_required():
    result = parse_nccl_tests(read("gb200-2node-all_reduce_perf.txt"))
    assert evaluate_nccl_tests(result, min_busbw_gbps=700).passed
    verdict = evaluate_nccl_tests(result, min_busbw_gbps=700, require_mnnvl=True)
    assert verdict.violations == [
        "the log does not show that NCCL used multi-node NVLink: no 'NCCL INFO comm ... MNNVL' line (run with "
        "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT)"
    ]


# The real full-rack capture: GB200 NVL72, 72 GPUs, published in coreweave/nccl-tests#43 (see the fixtures' README).
NVL72 = "coreweave-gb200-nvl72-all_reduce_perf.txt"
DEFAULT_FLOOR = round(NVL72_ALLREDUCE_REFERENCE.busbw_gbps * DEFAULT_MIN_FRACTION_OF_REFERENCE, 2)


def with_busbw(text: str, size: int, placement: int, busbw: float) -> str:
    """The log with one measurement (placement 0 out-of-place, 1 in-place) at ``busbw``: its time and algbw scaled
    alike, the average line recomputed as nccl-tests prints it (%g of the mean of every busbw cell)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == [str(size)])
    tokens = lines[at].split()
    time, algbw, old = (float(tokens[5 + 4 * placement + k]) for k in range(3))
    scale = busbw / old
    tokens[5 + 4 * placement : 8 + 4 * placement] = [f"{time / scale:.1f}", f"{algbw * scale:.2f}", f"{busbw:.2f}"]
    lines[at] = "".join(f"{token:>{width}}" for token, width in zip(tokens, (12, 14, 10, 8, 8, 9, 8, 8, 7, 9, 8, 8, 7)))
    rows = [line.split() for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    values = [float(row[column]) for row in rows for column in (7, 11)]
    avg = next(i for i, line in enumerate(lines) if line.startswith("# Avg bus bandwidth"))
    lines[avg] = f"# Avg bus bandwidth    : {sum(values) / len(values):g} "
    return "\n".join(lines) + "\n"


def test_the_default_floor_is_the_published_nvl72_figure_at_4_gib_and_more():
    assert NVL72_ALLREDUCE_REFERENCE.busbw_gbps == 834.57
    assert NVL72_ALLREDUCE_REFERENCE.min_bytes == 4 << 30
    assert DEFAULT_FLOOR == 751.11
    assert busbw_reference("NVIDIA-GB200", "all_reduce_perf") is NVL72_ALLREDUCE_REFERENCE
    assert busbw_reference("NVIDIA-GB300", "all_reduce_perf") is None
    assert busbw_reference("NVIDIA-GB200", "all_gather_perf") is None
    assert size_text(4 << 30) == "4 GiB" and size_text(512 << 20) == "512 MiB" and size_text(1000) == "1000 B"


def test_the_real_nvl72_rack_passes_the_default_floor_though_its_average_is_below_it():
    result = parse_nccl_tests(read(NVL72))
    assert result.ranks == 1 and result.devices[0].rank == 71 and result.devices[0].name == "NVIDIA Graphics Device"
    assert [row.size_bytes >> 20 for row in result.rows] == [512, 1024, 2048, 4096, 8192]
    # the average over 512 MiB-8 GiB is 745.53 and moves with -b; the rows of 4 GiB and more are the plateau
    assert result.avg_busbw_gbps == 745.53
    assert result.rows_average_gbps() == pytest.approx(745.53)
    assert result.lowest_busbw_gbps(4 << 30) == 834.57
    summary = nccl_tests_summary(read(NVL72), min_busbw_gbps=DEFAULT_FLOOR)
    assert summary["passed"] is True, summary["violations"]
    assert (summary["judged_min_bytes"], summary["judged_busbw_gbps"]) == (4 << 30, 834.57)
    assert summary["out_of_bounds_verdict"] == "OK"


def test_two_lost_links_at_8_gib_fail_the_real_rack_naming_the_size():
    # 16 of 18 NVLinks on the slowest GPU: 16/18 x 834.57 = 741.84 GB/s
    text = with_busbw(read(NVL72), 8 << 30, 0, 741.84)
    result = parse_nccl_tests(text)
    assert result.rows[-1].out_of_place.busbw_gbps == 741.84 and result.avg_busbw_gbps == 736.257
    verdict = evaluate_nccl_tests(result, min_busbw_gbps=DEFAULT_FLOOR, floor_explanation="the reference")
    assert verdict.violations == [
        "bus bandwidth below the floor 751.11 GB/s (the reference) at 1 of 4 measurements of 4 GiB and more: "
        "8 GiB out-of-place 741.84 GB/s; the NVLink fabric is slower than a healthy rack (run nvbandwidth to find "
        "the GPU or tray)"
    ]


def test_one_lost_link_stays_above_the_floor_and_every_row_low_fails_all_four():
    one_link = read(NVL72)
    for size in (4 << 30, 8 << 30):
        for placement in (0, 1):
            busbw = parse_nccl_tests(one_link).rows[-1 if size == 8 << 30 else -2]
            value = (busbw.out_of_place, busbw.in_place)[placement].busbw_gbps
            one_link = with_busbw(one_link, size, placement, round(value * 17 / 18, 2))
    # 17/18 of the healthy rows: 788.2-799.8 GB/s, above 751.11 (nvbandwidth's pairwise check finds one lost link)
    assert nccl_tests_summary(one_link, min_busbw_gbps=DEFAULT_FLOOR)["passed"] is True
    half = read(NVL72)
    for size in (4 << 30, 8 << 30):
        for placement in (0, 1):
            half = with_busbw(half, size, placement, 420.0)
    (violation,) = nccl_tests_summary(half, min_busbw_gbps=DEFAULT_FLOOR)["violations"]
    assert violation.startswith(
        "bus bandwidth below the floor 751.11 GB/s at 4 of 4 measurements of 4 GiB and more: 4 GiB out-of-place "
        "420.00, 4 GiB in-place 420.00, 8 GiB out-of-place 420.00, 8 GiB in-place 420.00 GB/s;"
    )


def test_a_run_that_never_reached_the_judged_sizes_fails_saying_so():
    lines = [line for line in read(NVL72).splitlines() if not line.startswith(("  4294967296", "  8589934592"))]
    text = "\n".join(lines).replace("745.53 ", "683.238 ")
    summary = nccl_tests_summary(text, min_busbw_gbps=DEFAULT_FLOOR)
    assert summary["judged_busbw_gbps"] is None
    assert summary["violations"] == [
        "no message size of 4 GiB or more was measured (the largest measured is 2 GiB): the floor 751.11 GB/s holds "
        "for 4 GiB and more; let the run reach them (-e 8G in verify_nccl_args)"
    ]


def test_nccl_tests_own_failed_verdict_fails_the_real_rack():
    text = read(NVL72).replace("# Avg bus bandwidth    : 745.53 ", "# Avg bus bandwidth    : 745.53 FAILED")
    summary = nccl_tests_summary(text, min_busbw_gbps=DEFAULT_FLOOR)
    assert summary["avg_busbw_verdict"] == "FAILED"
    assert summary["violations"] == [
        "nccl-tests judged its own run FAILED: the average bus bandwidth 745.53 GB/s is below 0.9 x NCCL_TESTS_MIN_BW "
        "set in its environment"
    ]
    oob = read(NVL72).replace("# Out of bounds values : 0 OK", "# Out of bounds values : 0 FAILED")
    assert nccl_tests_summary(oob)["violations"] == [
        "0 out-of-bounds values reported by the data check (nccl-tests: FAILED)"
    ]


@pytest.mark.parametrize("placement", [0, 1])
def test_a_non_zero_wrong_cell_fails_the_real_rack(placement):
    lines = read(NVL72).splitlines()
    row = lines[6].split()  # 1 GiB
    row[8 + 4 * placement] = "3"
    lines[6] = "".join(f"{token:>{width}}" for token, width in zip(row, (12, 14, 10, 8, 8, 9, 8, 8, 7, 9, 8, 8, 7)))
    result = parse_nccl_tests("\n".join(lines))
    assert result.rows[1].wrong == 3 and result.wrong_sizes == [1 << 30]
    assert evaluate_nccl_tests(result, min_busbw_gbps=DEFAULT_FLOOR).violations == [
        "wrong results (#wrong > 0) at 1 message sizes (1073741824 B): data corruption on the fabric or a broken "
        "NCCL transport"
    ]


ESCAPED_ERRORS = [
    # colour (CSI), a window title (OSC, BEL-terminated), a bell, a backspace, a cursor move, an 8-bit CSI
    "\x1b[1;31mERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused\x1b[0m",
    "\x1b]0;mpirun\x07ERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused",
    "\x07\x08ERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused",
    "\x1b[2K\x1b[1GERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused",
    "\x9b31mERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused\x9b0m",
    "\x1b]8;;https://example.invalid\x1b\\ERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection "
    "refused\x1b]8;;\x1b\\",
]


@pytest.mark.parametrize("line", ESCAPED_ERRORS)
def test_an_error_line_wrapped_in_terminal_escapes_fails_the_run(line):
    summary = nccl_tests_summary(read(NVL72) + line + "\n", min_busbw_gbps=DEFAULT_FLOOR)
    assert summary["failures"] == ["ERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused"]
    assert summary["violations"] == [
        "the test reported a failure: ERROR: ssh: connect to host nccl-test-worker-7 port 2222: Connection refused"
    ]


def test_a_test_failure_line_behind_an_osc_title_fails_and_escapes_elsewhere_are_cosmetic():
    text = read(NVL72)
    plain = nccl_tests_summary(text, min_busbw_gbps=DEFAULT_FLOOR)
    noisy = "\n".join(f"\x1b]0;launcher\x07\x1b[32m{line}\x1b[0m\x07" for line in text.splitlines())
    assert nccl_tests_summary(noisy, min_busbw_gbps=DEFAULT_FLOOR) == plain
    failed = text + "\x1b]2;nccl\x07slurm-gb200-207-171: Test NCCL failure common.cu:1279 'unhandled cuda error'\n"
    assert nccl_tests_summary(failed)["failures"] == [
        "slurm-gb200-207-171: Test NCCL failure common.cu:1279 'unhandled cuda error'"
    ]
    assert strip_terminal_escapes("a\x1b[0mb\x1b]0;t\x07c\x00d\te\r\n") == "abcd\te\r\n"
