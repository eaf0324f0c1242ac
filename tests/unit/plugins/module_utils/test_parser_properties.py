# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Properties of the verifier's parsers over generated and mutated real outputs (hypothesis, fixed seed).

Oracles: incomplete or inconsistent data fail (never pass); cosmetic changes (CRLF, kubectl timestamps and
prefixes, ANSI colours, launcher lines, a blank line inside a matrix) give the same numbers and verdict; no
input raises anything but the entry point's documented error. Inputs arrive as the callers decode them
(``errors="replace"``).
"""

from __future__ import annotations

import json
import re
import string
import sys
from pathlib import Path
from typing import List, Optional

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import cliques, nccl, nvbandwidth, nvidia_smi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from nvbandwidth_emitter import READ_DESCRIPTION, Matrix, Testcase, emit_run  # noqa: E402

FIXTURES = HERE.parents[2] / "fixtures"
PROPERTY = settings(
    derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
FEW = settings(PROPERTY, max_examples=25)

D2D = "device_to_device_memcpy_read_ce"
BIDIR = "device_to_device_bidirectional_memcpy_read_ce"
BIDIR_DESCRIPTION = "memcpy CE GPU(row) <-> GPU(column) {} bandwidth (GB/s)"
LAUNCHER = "[nvbandwidth-test-worker-1:00031] MCW rank 5 bound to socket 0[core 1[hwt 0]]: [./B/./.]"
ERROR_LINES = (
    "ERROR: cuMemCreate failed",
    "MPI_ABORT was invoked on rank 4 in communicator MPI_COMM_WORLD",
    "[CUDA_ERROR_ILLEGAL_ADDRESS] an illegal memory access was encountered in expression cuMemcpyAsync(...)",
    "Waived: ",
    "CUDA error: an illegal memory access was encountered",
    "Error: Invalid value when checking the pattern",
)


def fixture(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text()


def one_line(verdict: nvbandwidth.Verdict) -> None:
    assert verdict.passed or verdict.summary.strip()
    assert "\n" not in verdict.summary


# ------------------------------------------------------------------ generated nvbandwidth outputs


@st.composite
def peer_rows(draw, min_gpus: int = 2, max_gpus: int = 8) -> List[List[Optional[float]]]:
    """A healthy N x N peer matrix: a level from H200 to GB200 bandwidths, every pair within 0.5 % of it."""
    gpus = draw(st.integers(min_gpus, max_gpus))
    level = draw(st.floats(390.0, 900.0))  # above the H200 floor, 0.85 x 450 GB/s
    jitter = st.floats(-0.005, 0.005)
    return [[None if r == c else round(level * (1 + draw(jitter)), 2) for c in range(gpus)] for r in range(gpus)]


@st.composite
def healthy_runs(draw) -> str:
    """A whole nvbandwidth text run: a read matrix, or a bidirectional run whose Total is Read1 + Read2."""
    rows = draw(peer_rows())
    if draw(st.booleans()):
        matrices = [Matrix(D2D, READ_DESCRIPTION, rows)]
        name = D2D
    else:
        second = [
            [None if v is None else round(v * (1 + draw(st.floats(-0.003, 0.003))), 2) for v in row] for row in rows
        ]
        total = [[None if a is None else round(a + b, 2) for a, b in zip(r1, r2)] for r1, r2 in zip(rows, second)]
        name = BIDIR
        matrices = [
            Matrix(f"{BIDIR}_read1", BIDIR_DESCRIPTION.format("Read1"), rows),
            Matrix(f"{BIDIR}_read2", BIDIR_DESCRIPTION.format("Read2"), second),
            Matrix(f"{BIDIR}_total", BIDIR_DESCRIPTION.format("Total"), total),
        ]
    return emit_run([Testcase(name, matrices)], single_node_gpus=len(rows), gpu_name="NVIDIA H200")


def row_lines(lines: List[str]) -> List[int]:
    """Indexes of the matrix rows: the lines after a column header up to the blank line."""
    found = []
    for n, line in enumerate(lines):
        if line.endswith("(GB/s)"):
            k = n + 2
            while k < len(lines) and lines[k].strip():
                found.append(k)
                k += 1
    return found


def sum_lines(lines: List[str]) -> List[int]:
    return [n for n, line in enumerate(lines) if line.startswith("SUM ")]


def cosmetic(content: str, how: str, where: int) -> str:
    lines = content.split("\n")
    if how == "crlf":
        return "\r\n".join(lines)
    if how == "timestamps":
        return "\n".join(f"2026-01-05T08:31:{n % 60:02d}.{n:09d}Z {line}" for n, line in enumerate(lines))
    if how == "prefix":
        return "\n".join(f"[pod/nvbandwidth-launcher-x7k2p/mpi-launcher] {line}" for line in lines)
    if how == "ansi":
        return "\n".join(f"\x1b[0;32m{line}\x1b[0m" if n % 2 else line for n, line in enumerate(lines))
    rows = row_lines(lines)
    if how == "blank lines after the header":
        firsts = [n for n in rows if n - 1 not in rows]
        at = firsts[where % len(firsts)]
        return "\n".join(lines[:at] + [""] * (1 + where % 3) + lines[at:])
    inner = [n for n in rows[1:] if n - 1 in rows]
    if how == "many blank lines in a matrix":
        at = inner[where % len(inner)]
        return "\n".join(lines[:at] + [""] * 5000 + lines[at:])
    at = inner[where % len(inner)]
    lines.insert(at, "" if how == "blank line in a matrix" else LAUNCHER)
    return "\n".join(lines)


COSMETIC = st.sampled_from(
    [
        "crlf",
        "timestamps",
        "prefix",
        "ansi",
        "blank line in a matrix",
        "blank lines after the header",
        "many blank lines in a matrix",
        "launcher line",
    ]
)


@PROPERTY
@given(healthy_runs(), COSMETIC, st.integers(0, 10**6))
def test_generated_run_passes_and_cosmetic_changes_keep_the_verdict(content, how, where):
    plain = nvbandwidth.check_nvbandwidth(content, gpu_product="NVIDIA-H200").to_result()
    assert plain["passed"], plain["summary"]
    changed = nvbandwidth.check_nvbandwidth(cosmetic(content, how, where), gpu_product="NVIDIA-H200").to_result()
    assert changed == plain


@PROPERTY
@given(healthy_runs(), st.data())
def test_cut_before_the_last_sum_line_fails(content, data):
    lines = content.split("\n")
    end = len("\n".join(lines[: sum_lines(lines)[-1]]))
    cut = content[: data.draw(st.integers(0, end))]
    verdict = nvbandwidth.check_nvbandwidth(cut)
    assert not verdict.passed
    one_line(verdict)


@PROPERTY
@given(healthy_runs(), st.data(), st.booleans())
def test_dropped_or_doubled_row_fails(content, data, double):
    lines = content.split("\n")
    row = data.draw(st.sampled_from(row_lines(lines)))
    if double:
        lines.insert(row, lines[row])
    else:
        del lines[row]
    verdict = nvbandwidth.check_nvbandwidth("\n".join(lines))
    assert not verdict.passed
    assert verdict.errors


def _retouch(lines: List[str], row: int, column: int, text: str) -> float:
    """Put ``text`` in cell ``column`` of line ``row``; the old value."""
    tokens = lines[row].split()
    old = tokens[column + 1]
    head = lines[row][: len(lines[row]) - 10 * (len(tokens) - 1 - column)]
    tail = lines[row][len(head) + 10 :]
    lines[row] = head + text.rjust(10) + tail
    return float(old)


def _measured_cells(lines: List[str], rows: List[int]) -> List[tuple]:
    return [(r, c) for r in rows for c, token in enumerate(lines[r].split()[1:]) if token != "N/A"]


def _matrix_of(lines: List[str], row: int) -> int:
    """The SUM line of the matrix ``row`` belongs to."""
    return next(n for n in sum_lines(lines) if n > row)


@PROPERTY
@given(healthy_runs(), st.data(), st.floats(0.0, 0.9))
def test_cell_below_the_rule_fails_even_with_a_consistent_sum(content, data, factor):
    lines = content.split("\n")
    row, column = data.draw(st.sampled_from(_measured_cells(lines, row_lines(lines))))
    new = round(float(lines[row].split()[column + 1]) * factor, 2)
    old = _retouch(lines, row, column, f"{new:.2f}")
    sum_line = _matrix_of(lines, row)
    key, value = lines[sum_line].split()[1:]
    lines[sum_line] = f"SUM {key} {float(value) - old + new:.2f}"
    verdict = nvbandwidth.check_nvbandwidth("\n".join(lines), gpu_product="NVIDIA-H200")
    assert not verdict.passed
    one_line(verdict)


@PROPERTY
@given(healthy_runs(), st.data(), st.sampled_from(["inf", "nan", "-1.00", "N/A", "1e400", "x"]))
def test_cell_that_is_no_bandwidth_fails(content, data, token):
    lines = content.split("\n")
    row, column = data.draw(st.sampled_from(_measured_cells(lines, row_lines(lines))))
    old = _retouch(lines, row, column, token)
    sum_line = _matrix_of(lines, row)
    key, value = lines[sum_line].split()[1:]
    lines[sum_line] = f"SUM {key} {float(value) - old:.2f}"
    assert not nvbandwidth.check_nvbandwidth("\n".join(lines)).passed


@PROPERTY
@given(healthy_runs(), st.data(), st.floats(0.01, 0.5), st.booleans())
def test_sum_that_does_not_add_up_fails(content, data, off, up):
    lines = content.split("\n")
    sum_line = data.draw(st.sampled_from(sum_lines(lines)))
    key, value = lines[sum_line].split()[1:]
    lines[sum_line] = f"SUM {key} {float(value) * (1 + off if up else 1 - off):.2f}"
    verdict = nvbandwidth.check_nvbandwidth("\n".join(lines))
    assert not verdict.passed
    assert verdict.errors


@PROPERTY
@given(healthy_runs(), st.data(), st.sampled_from(ERROR_LINES))
def test_error_line_anywhere_fails(content, data, error):
    lines = content.split("\n")
    lines.insert(data.draw(st.integers(0, len(lines))), error)
    verdict = nvbandwidth.check_nvbandwidth("\n".join(lines))
    assert not verdict.passed
    one_line(verdict)


@PROPERTY
@given(healthy_runs(), st.binary(max_size=40), st.data())
def test_bytes_that_are_not_utf8_never_raise(content, junk, data):
    raw = content.encode()
    at = data.draw(st.integers(0, len(raw)))
    text = (raw[:at] + junk + raw[at:]).decode("utf-8", errors="replace")  # as nvbandwidth_check reads its src
    one_line(nvbandwidth.check_nvbandwidth(text))


@PROPERTY
@given(st.text(alphabet=string.printable + "\ufffd\x1b", max_size=2000))
def test_any_text_gives_a_verdict(text):
    one_line(nvbandwidth.check_nvbandwidth(text))


def test_huge_and_empty_inputs_give_a_verdict():
    real = fixture("nvbandwidth", "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt")
    for text in ("", " \n", real * 200, "1.00 " * 200000, "\n" * 100000):
        one_line(nvbandwidth.check_nvbandwidth(text))


# ------------------------------------------------------------------ nvbandwidth JSON

JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True), st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@PROPERTY
@given(
    st.dictionaries(
        st.sampled_from(["name", "status", "bandwidth_matrix", "sum", "error", "bandwidth_description"]),
        JSON_VALUES,
    ),
    st.booleans(),
)
def test_any_json_testcase_gives_a_verdict(entry, as_text):
    document = {"nvbandwidth": {"testcases": [entry], "version": "v0.8"}}
    content = json.dumps(document) if as_text else document
    one_line(nvbandwidth.check_nvbandwidth(content))


@PROPERTY
@given(
    peer_rows(), st.booleans(), st.integers(0, 10**6), st.sampled_from(["", "\u00a0", "393.7 GB/s", True, [1.0], "inf"])
)
def test_generated_json_passes_and_a_bad_cell_fails(rows, numbers, where, bad):
    cells = [["N/A" if v is None else (v if numbers else f"{v:g}") for v in row] for row in rows]
    total = sum(v for row in rows for v in row if v is not None)
    entry = {"name": D2D, "status": "Passed", "bandwidth_description": READ_DESCRIPTION, "bandwidth_matrix": cells}
    entry["sum"] = total
    good = nvbandwidth.check_nvbandwidth(json.dumps({"nvbandwidth": {"testcases": [entry]}}))
    assert good.passed, good.summary
    assert good.matrix.rows == rows
    measured = [(r, c) for r, row in enumerate(rows) for c, v in enumerate(row) if v is not None]
    r, c = measured[where % len(measured)]
    cells[r][c] = bad
    verdict = nvbandwidth.check_nvbandwidth(json.dumps({"nvbandwidth": {"testcases": [entry]}}))
    assert not verdict.passed
    one_line(verdict)


# ------------------------------------------------------------------ nccl-tests

NCCL_REAL = fixture("nccl", "gb200-2node-all_reduce_perf.txt")
NCCL_ROWS = [n for n, line in enumerate(NCCL_REAL.split("\n")) if line[:1] == " " and line.split()[:1] != []]


def nccl_summary(text: str) -> dict:
    return nccl.nccl_tests_summary(text, min_busbw_gbps=765.0, expected_ranks=8)


@PROPERTY
@given(st.sampled_from(["crlf", "timestamps", "prefix", "ansi"]), st.integers(0, 10**6))
def test_nccl_cosmetic_changes_keep_the_verdict(how, where):
    lines = NCCL_REAL.split("\n")
    lines.insert(
        1 + where % (len(lines) - 1), "Warning: Permanently added 'nccl-test-worker-0' (ED25519) to known hosts."
    )
    changed = cosmetic("\n".join(lines), how, where)
    assert nccl_summary(changed) == nccl_summary(NCCL_REAL)
    assert nccl_summary(NCCL_REAL)["passed"]


@PROPERTY
@given(st.data())
def test_nccl_cut_before_the_average_fails(data):
    end = NCCL_REAL.index("# Avg bus bandwidth")
    assert not nccl_summary(NCCL_REAL[: data.draw(st.integers(0, end))])["passed"]


@PROPERTY
@given(st.sampled_from(NCCL_ROWS), st.booleans())
def test_nccl_dropped_or_doubled_row_fails(row, double):
    lines = NCCL_REAL.split("\n")
    size_rows = [n for n in NCCL_ROWS if lines[n].split()[0].isdigit() and len(lines[n].split()) >= 13]
    row = size_rows[row % len(size_rows)]
    if double:
        lines.insert(row, lines[row])
    else:
        del lines[row]
    assert not nccl_summary("\n".join(lines))["passed"]


@PROPERTY
@given(st.text(alphabet=string.printable + "\ufffd", max_size=1500), st.integers(0, 10**6))
def test_nccl_any_text_gives_a_verdict(junk, where):
    at = where % (len(NCCL_REAL) + 1)
    summary = nccl_summary(NCCL_REAL[:at] + junk + NCCL_REAL[at:])
    assert summary["passed"] or all("\n" not in v for v in summary["violations"])


# ------------------------------------------------------------------ nvidia-smi

SMI_GB200 = fixture("nvidia-smi", "synth-gb200-nvidia-smi-q.xml")
SMI_H200 = fixture("nvidia-smi", "h200x2-nvidia-smi-q.xml")


@FEW
@given(st.sampled_from([SMI_GB200, SMI_H200]), st.data())
def test_cut_xml_is_a_value_error(xml, data):
    cut = xml[: data.draw(st.integers(0, xml.rindex("</nvidia_smi_log>")))]
    with pytest.raises(ValueError):
        nvidia_smi.parse_query_xml(cut)


@FEW
@given(st.integers(0, 3), st.sampled_from(["state", "status"]), st.text(max_size=20))
def test_fabric_not_completed_on_one_gpu_is_a_problem(gpu, element, value):
    good = {"state": "Completed", "status": "Success"}[element]
    if value.strip() == good:
        value = "In Progress"
    spots = [m.start() for m in re.finditer(f"<{element}>{good}</{element}>", SMI_GB200)]
    assert len(spots) == 4
    escaped = value.replace("&", "&amp;").replace("<", "&lt;")
    at = spots[gpu]
    text = (
        SMI_GB200[:at] + f"<{element}>{escaped}</{element}>" + SMI_GB200[at + len(f"<{element}>{good}</{element}>") :]
    )
    try:
        gpus = nvidia_smi.parse_query_xml(text).gpus
    except ValueError:
        return  # a value XML cannot carry (a control character) makes the report unreadable: it fails too
    problems = nvidia_smi.fabric_problems(gpus)
    assert problems and problems[0].startswith(f"GPU {gpu} (")


@FEW
@given(st.sets(st.integers(0, 3), min_size=1), st.sampled_from(["N/A", "", " ", "none", "0x7ffe", "-1"]))
def test_gpus_without_a_clique_id_fail_the_fabric_requirement(gpus, value):
    spots = list(re.finditer(r"<cliqueId>\d+</cliqueId>", SMI_GB200))
    text = SMI_GB200
    for number in sorted(gpus, reverse=True):
        spot = spots[number]
        text = text[: spot.start()] + f"<cliqueId>{value}</cliqueId>" + text[spot.end() :]
    problems = nvidia_smi.fabric_problems(nvidia_smi.parse_query_xml(text).gpus)
    assert sorted(int(p.split()[1]) for p in problems if "no clique ID" in p) == sorted(gpus)


@PROPERTY
@given(st.text(alphabet=string.printable + "\ufffd", max_size=800), st.integers(0, 10**6))
def test_any_text_in_the_xml_is_a_report_or_a_value_error(junk, where):
    at = where % (len(SMI_H200) + 1)
    try:
        report = nvidia_smi.parse_query_xml(SMI_H200[:at] + junk + SMI_H200[at:])
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    nvidia_smi.fabric_problems(report.gpus)
    nvidia_smi.clique_label(report.gpus)


NVLINK = fixture("nvidia-smi", "synth-gb200-nvidia-smi-nvlink-s.txt")


@PROPERTY
@given(st.text(alphabet=string.printable + "\ufffd", max_size=800), st.integers(0, 10**6), st.booleans())
def test_nvlink_any_text_never_raises_and_crlf_is_cosmetic(junk, where, crlf):
    at = where % (len(NVLINK) + 1)
    nvidia_smi.parse_nvlink_status(NVLINK[:at] + junk + NVLINK[at:])
    if crlf:
        assert nvidia_smi.parse_nvlink_status(NVLINK.replace("\n", "\r\n")) == nvidia_smi.parse_nvlink_status(NVLINK)


@PROPERTY
@given(st.data())
def test_nvlink_lost_or_slow_link_shows_in_the_numbers(data):
    lines = NVLINK.split("\n")
    links = [n for n, line in enumerate(lines) if "GB/s" in line]
    n = data.draw(st.sampled_from(links))
    how = data.draw(st.sampled_from(["drop", "inactive", "slow"]))
    if how == "drop":
        del lines[n]
    elif how == "inactive":
        lines[n] = lines[n].split(":")[0] + ": <inactive>"
    else:
        lines[n] = lines[n].split(":")[0] + ": 25.000 GB/s"
    assert nvidia_smi.parse_nvlink_status("\n".join(lines)) != nvidia_smi.parse_nvlink_status(NVLINK)


# ------------------------------------------------------------------ cliques

TRAY = json.loads(fixture("k8s", "gb200-tray-node.json"))
CLIQUE = TRAY["metadata"]["labels"][cliques.CLIQUE_LABEL]


def tray(number: int, value: Optional[str]) -> dict:
    node = json.loads(json.dumps(TRAY))
    node["metadata"]["name"] = f"gb200-r0-t{number}"
    if value is None:
        del node["metadata"]["labels"][cliques.CLIQUE_LABEL]
    else:
        node["metadata"]["labels"][cliques.CLIQUE_LABEL] = value
    return node


@PROPERTY
@given(st.lists(st.one_of(st.just(CLIQUE), st.none(), st.text(max_size=50)), min_size=1, max_size=18))
def test_expectations_pass_only_when_every_tray_is_in_the_one_clique(values):
    nodes = [tray(n, value) for n, value in enumerate(values)]
    grouping = cliques.group_nodes_by_clique(nodes)
    violations = cliques.check_clique_expectations(grouping, expected_cliques=1, nodes_per_clique=len(values))
    assert (not violations) == all(value == CLIQUE for value in values)
    assert all("\n" not in v for v in violations)


NODE_LIKE = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.dictionaries(
            st.sampled_from(
                ["metadata", "labels", "name", "status", "capacity", cliques.CLIQUE_LABEL, cliques.GPU_RESOURCE]
            ),
            inner,
            max_size=4,
        )
        | st.lists(inner, max_size=3)
    ),
    max_leaves=15,
)


@PROPERTY
@given(st.lists(NODE_LIKE, max_size=5))
def test_any_node_list_is_grouped_or_a_value_error(nodes):
    try:
        grouping = cliques.group_nodes_by_clique(nodes)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    cliques.check_clique_expectations(grouping, expected_cliques=1, nodes_per_clique=4, racks={"r0": ["gb200-r0-t1"]})
