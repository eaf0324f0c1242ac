# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutation fuzzer of the verifier's parsers over the real outputs in tests/fixtures/ (seeded, deterministic).

Each case takes one real output (nvbandwidth text and JSON, nccl-tests all_reduce_perf, nvidia-smi ``-q -x``
and ``nvlink -s``, Kubernetes Node objects), applies one mutation, and runs the result through the public entry
point the verifier uses (``nvbandwidth.check_nvbandwidth``, ``nccl.nccl_tests_summary``,
``nvidia_smi.parse_query_xml`` + ``fabric_problems`` / ``parse_nvlink_status``, ``cliques.group_nodes_by_clique``
+ ``check_clique_expectations``). A mutation is one of:

- **cosmetic**: the data are untouched (CRLF, kubectl ``--timestamps`` / ``--prefix``, ANSI colours, launcher and
  MPI lines between the lines, a blank line inside a matrix, non-UTF-8 bytes in a banner line decoded with
  ``errors="replace"`` as the callers decode, JSON re-indented): the verdict and the numbers must be the seed's.
- **damaging**: the data are made incomplete or inconsistent (a cut before the last SUM / Avg line, a matrix row
  dropped or doubled, a cell lowered below the rule with its SUM kept consistent, a SUM that does not add up, an
  error line, an ``inf`` / ``nan`` / ``N/A`` / negative cell, a fabric state that is not Completed, a node
  without its clique label): the verdict must fail. Only applied to seeds that pass.
- **neutral**: anything else (random cuts, dropped or doubled lines, flipped characters, huge and empty
  inputs): only checked for tracebacks.

A traceback is an exception other than the entry point's documented error (``ValueError`` for
``parse_query_xml`` and ``group_nodes_by_clique``; none for the others), or a failing verdict without a one-line
reason. The table counts, per parser: cases, expected-fail (damaging) cases, false passes, false failures on
cosmetic input, tracebacks; the exit status is 1 when any of the last three is not 0.

    python bench/fuzz_outputs.py                    # 5000 cases, seed 0
    python bench/fuzz_outputs.py --cases 20000 --seed 7 --show 5
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from module_process import import_collection

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"


import_collection()

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import (  # noqa: E402
    cliques,
    nccl,
    nvbandwidth,
    nvbandwidth_output,
    nvidia_smi,
)

COSMETIC = "cosmetic"
DAMAGING = "damaging"
NEUTRAL = "neutral"

# Lines a launcher, ssh or Open MPI prints among the tool's own (from the real MPIJob logs).
LAUNCHER_LINES = (
    "Warning: Permanently added 'nvbandwidth-test-worker-0.nvbandwidth-test.default.svc' (ED25519) to the list of "
    "known hosts.",
    "[nvbandwidth-test-worker-1:00031] MCW rank 5 bound to socket 0[core 1[hwt 0]]: [./B/./.]",
    'Defaulted container "mpi-launcher" out of: mpi-launcher, init (init)',
    "nccl-test-worker-0:41:41 [0] NCCL INFO Bootstrap : Using eth0:10.244.1.7<0>",
)
# Lines that say the run failed, as nvbandwidth, the CUDA runtime and Open MPI print them.
ERROR_LINES = (
    "ERROR: cuMemCreate failed",
    "MPI_ABORT was invoked on rank 4 in communicator MPI_COMM_WORLD",
    "[CUDA_ERROR_ILLEGAL_ADDRESS] an illegal memory access was encountered in expression cuMemcpyAsync(...)",
    "Waived: ",
    "CUDA error: an illegal memory access was encountered",
    "Error: Invalid value when checking the pattern at 0x7f2a",
)
NCCL_FAILURE_LINES = (
    "nccl-test-worker-1: Test NCCL failure common.cu:1005 'unhandled cuda error'",
    " .. nccl-test-worker-1 pid 52: Test failure common.cu:891",
    "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD",
)


# --------------------------------------------------------------------------------------------
# Observations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What an entry point said: the verdict, the numbers a cosmetic change must not move, and the reason."""

    passed: bool
    numbers: Any
    reason: str


class Unclean(Exception):
    """A failing verdict without a clean one-line reason."""


def _clean_reason(observation: Observation) -> Observation:
    if not observation.passed and (not observation.reason.strip() or "\n" in observation.reason):
        raise Unclean(f"unclean reason: {observation.reason!r}")
    return observation


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (list, tuple)):
        return tuple(_rounded(v) for v in value)
    return value


@dataclass
class Seed:
    name: str
    content: Any
    options: Dict[str, Any] = field(default_factory=dict)
    baseline: Optional[Observation] = None


Mutation = Callable[[random.Random, Seed], Any]


@dataclass
class Target:
    """One parser: its seeds, its entry point, its allowed errors and its mutations by kind."""

    name: str
    seeds: List[Seed]
    observe: Callable[[Any, Dict[str, Any]], Observation]
    allowed: Tuple[type, ...]
    mutations: Dict[str, List[Tuple[str, Mutation]]]
    weight: float = 1.0
    # Cosmetic and damaging mutations per input format ("text", "json"), where they differ.
    by_format: Optional[Dict[str, Dict[str, List[Tuple[str, Mutation]]]]] = None
    # For a parser of facts without a verdict (nvlink -s): damage must show in the numbers.
    damage_shows_in_numbers: bool = False

    def run(self, content: Any, seed: Seed) -> Observation:
        try:
            return _clean_reason(self.observe(content, seed.options))
        except self.allowed as exc:  # pylint: disable=catching-non-exception  # a tuple of exception classes
            reason = str(exc)
            if not reason.strip() or "\n" in reason:
                raise Unclean(f"unclean error: {reason!r}") from None
            return Observation(False, ("error", type(exc).__name__), reason)


# --------------------------------------------------------------------------------------------
# Mutations shared by the text outputs
# --------------------------------------------------------------------------------------------


def _lines(text: str) -> List[str]:
    return text.split("\n")


def crlf(_rng: random.Random, seed: Seed) -> str:
    return seed.content.replace("\n", "\r\n")


def kubectl_timestamps(rng: random.Random, seed: Seed) -> str:
    second = rng.randrange(60)
    return "\n".join(
        f"2026-01-05T08:{(second + n // 60) % 60:02d}:{n % 60:02d}.{rng.randrange(10**9):09d}Z {line}"
        for n, line in enumerate(_lines(seed.content))
    )


def kubectl_prefix(_rng: random.Random, seed: Seed) -> str:
    return "\n".join(f"[pod/launcher-x7k2p/mpi-launcher] {line}" for line in _lines(seed.content))


def ansi_colours(rng: random.Random, seed: Seed) -> str:
    colour = rng.choice(("\x1b[32m", "\x1b[1;31m", "\x1b[0;33m", "\x1b[4m"))
    lines = _lines(seed.content)
    chosen = set(rng.sample(range(len(lines)), max(1, len(lines) // 3)))
    return "\n".join(f"{colour}{line}\x1b[0m" if n in chosen and line else line for n, line in enumerate(lines))


def launcher_lines(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    for _count in range(rng.randint(1, 4)):
        lines.insert(rng.randrange(1, len(lines)), rng.choice(LAUNCHER_LINES))
    return "\n".join(lines)


def trailing_spaces(rng: random.Random, seed: Seed) -> str:
    return "\n".join(line + " " * rng.randint(0, 3) for line in _lines(seed.content))


def non_utf8_in(pattern: str) -> Mutation:
    """Invalid UTF-8 bytes inside group 1 of ``pattern`` (prose, not data), decoded as the callers do.

    The callers read files with ``errors="replace"`` (nvbandwidth_check) and decode pod logs the same way
    (kube_api.Api.log), so a bad byte arrives as U+FFFD.
    """
    compiled = re.compile(pattern, re.M)

    def mutate(rng: random.Random, seed: Seed) -> Optional[str]:
        matches = list(compiled.finditer(seed.content))
        if not matches:
            return None
        match = rng.choice(matches)
        at = rng.randint(match.start(1), match.end(1))
        bad = rng.choice((b"\xff", b"\xc3\x28", b"\xe2\x82", b"\x80\x80")).decode("utf-8", errors="replace")
        return seed.content[:at] + bad + seed.content[at:]

    return mutate


def neutral_text_mutations() -> List[Tuple[str, Mutation]]:
    def cut_anywhere(rng: random.Random, seed: Seed) -> str:
        return seed.content[: rng.randrange(len(seed.content) + 1)]

    def drop_line(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)

    def double_line(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        n = rng.randrange(len(lines))
        lines.insert(n, lines[n])
        return "\n".join(lines)

    def swap_lines(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        return "\n".join(lines)

    def flip_chars(rng: random.Random, seed: Seed) -> str:
        chars = list(seed.content)
        for _count in range(rng.randint(1, 8)):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice('0123456789.-+eEnaif/N A\t\n#<>{}[]",:\x00\ufffd')
        return "".join(chars)

    def random_bytes(rng: random.Random, seed: Seed) -> str:
        raw = bytearray(seed.content.encode())
        for _count in range(rng.randint(1, 6)):
            raw.insert(rng.randrange(len(raw) + 1), rng.randrange(256))
        return bytes(raw).decode("utf-8", errors="replace")

    def huge(rng: random.Random, seed: Seed) -> str:
        return seed.content * rng.randint(20, 60)

    def long_line(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        lines.insert(
            rng.randrange(len(lines)), " ".join(rng.choice(("1.00", "N/A", "x", "inf")) for cell in range(20000))
        )
        return "\n".join(lines)

    def empty(rng: random.Random, _seed: Seed) -> str:
        return rng.choice(("", " ", "\n\n", "\r\n", "\x00", "\ufffd"))

    return [
        ("cut anywhere", cut_anywhere),
        ("drop a line", drop_line),
        ("double a line", double_line),
        ("swap two lines", swap_lines),
        ("flip characters", flip_chars),
        ("random bytes", random_bytes),
        ("huge input", huge),
        ("very long line", long_line),
        ("empty input", empty),
    ]


# --------------------------------------------------------------------------------------------
# nvbandwidth
# --------------------------------------------------------------------------------------------

_DESCRIPTION = re.compile(r"\((?:GB/s|ns)\)\s*$")
_TOKEN = re.compile(r"\S+")


@dataclass
class TextMatrix:
    """Where one matrix sits in an nvbandwidth text output (found without the parser under test)."""

    description: int
    rows: List[int]
    sum_line: Optional[int]


def text_matrices(lines: Sequence[str]) -> List[TextMatrix]:
    found = []
    for n, line in enumerate(lines):
        if not _DESCRIPTION.search(line) or n + 1 >= len(lines):
            continue
        rows = []
        index = n + 2
        while index < len(lines) and lines[index].strip():
            rows.append(index)
            index += 1
        sum_line = next((k for k in range(index, min(index + 3, len(lines))) if lines[k].startswith("SUM ")), None)
        found.append(TextMatrix(n, rows, sum_line))
    return found


def _cells(line: str) -> List[re.Match]:
    return list(_TOKEN.finditer(line))[1:]


def _replace_token(line: str, match: re.Match, text: str) -> str:
    start = line.rfind(" ", 0, match.start()) + 1 if match.start() else 0
    width = match.end() - start
    return line[:start] + text.rjust(width) + line[match.end() :]


def _measured(lines: Sequence[str], matrix: TextMatrix) -> List[Tuple[int, re.Match]]:
    return [(row, cell) for row in matrix.rows for cell in _cells(lines[row]) if cell.group() != "N/A"]


def _set_sum(lines: List[str], matrix: TextMatrix, delta: float) -> None:
    assert matrix.sum_line is not None
    key, value = lines[matrix.sum_line].split()[1:3]
    lines[matrix.sum_line] = f"SUM {key} {float(value) + delta:.2f}"


def _judged_matrices(lines: Sequence[str]) -> List[TextMatrix]:
    return [m for m in text_matrices(lines) if m.rows and m.sum_line is not None]


def nvbw_lower_cell(factor: float, keep_sum: bool, part: str = "any") -> Mutation:
    """A measured cell times ``factor``; with ``keep_sum`` its SUM line follows (the matrix stays consistent).

    ``part``: ``any`` matrix, ``direction`` (Read1/Read2 of a bidirectional run, the Total following the
    change as nvbandwidth computes it: Total = Read1 + Read2), ``direction-only`` (Read1/Read2, Total left as is).
    """

    def mutate(rng: random.Random, seed: Seed) -> Optional[str]:
        lines = _lines(seed.content)
        matrices = _judged_matrices(lines)
        if part != "any":
            if len(matrices) != 3:
                return None
            matrices = matrices[:2]
        matrix = rng.choice(matrices)
        row, cell = rng.choice(_measured(lines, matrix))
        old = float(cell.group())
        new = round(old * factor, 2)
        lines[row] = _replace_token(lines[row], cell, f"{new:.2f}")
        if keep_sum:
            _set_sum(lines, matrix, new - old)
        if part == "direction":
            total = _judged_matrices(lines)[2]
            position = matrix.rows.index(row)
            column = [c.start() for c in _cells(lines[row])].index(cell.start())
            total_row = total.rows[position]
            total_cell = _cells(lines[total_row])[column]
            lines[total_row] = _replace_token(
                lines[total_row], total_cell, f"{float(total_cell.group()) + new - old:.2f}"
            )
            _set_sum(lines, total, new - old)
        return "\n".join(lines)

    return mutate


def nvbw_bad_cell(token: str) -> Mutation:
    """A measured cell replaced by ``token`` (N/A, inf, nan, a negative value) with a SUM kept consistent."""

    def mutate(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        matrix = rng.choice(_judged_matrices(lines))
        row, cell = rng.choice(_measured(lines, matrix))
        old = float(cell.group())
        text = f"{-old:.2f}" if token == "negative" else token
        lines[row] = _replace_token(lines[row], cell, text)
        _set_sum(lines, matrix, (-2 * old) if token == "negative" else -old)
        return "\n".join(lines)

    return mutate


def nvbw_cut_before_last_sum(rng: random.Random, seed: Seed) -> str:
    """A cut anywhere before the last SUM line: mid-line or at a line end."""
    lines = _lines(seed.content)
    last = max(m.sum_line for m in _judged_matrices(lines))
    end = len("\n".join(lines[:last]))
    return seed.content[: rng.randrange(end + 1)]


def nvbw_drop_row(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    del lines[rng.choice(matrix.rows)]
    return "\n".join(lines)


def nvbw_double_row(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    row = rng.choice(matrix.rows)
    lines.insert(row, lines[row])
    return "\n".join(lines)


def nvbw_sum_off(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    key, value = lines[matrix.sum_line].split()[1:3]
    lines[matrix.sum_line] = f"SUM {key} {float(value) * rng.choice((0.5, 0.9, 0.98, 1.02, 1.1, 2.0)):.2f}"
    return "\n".join(lines)


def nvbw_sum_names_another_testcase(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    key, value = lines[matrix.sum_line].split()[1:3]
    other = rng.choice([name for name in nvbandwidth_output.KNOWN_TESTCASES if not key.startswith(name)])
    lines[matrix.sum_line] = f"SUM {other} {value}"
    return "\n".join(lines)


def nvbw_error_between_rows(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    lines.insert(rng.choice(matrix.rows[1:] or matrix.rows), rng.choice(ERROR_LINES))
    return "\n".join(lines)


def nvbw_error_anywhere(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(ERROR_LINES))
    return "\n".join(lines)


def nvbw_blank_in_matrix(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice([m for m in _judged_matrices(lines) if len(m.rows) > 1])
    lines.insert(rng.choice(matrix.rows[1:]), "")
    return "\n".join(lines)


def nvbw_blank_after_header(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    at = matrix.rows[0]
    return "\n".join(lines[:at] + [""] * rng.choice((1, 2, 40000)) + lines[at:])


def nvbw_many_blanks_in_matrix(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice([m for m in _judged_matrices(lines) if len(m.rows) > 1])
    at = rng.choice(matrix.rows[1:])
    return "\n".join(lines[:at] + [""] * 40000 + lines[at:])


def nvbw_launcher_between_rows(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    matrix = rng.choice(_judged_matrices(lines))
    lines.insert(rng.choice(matrix.rows[1:] or matrix.rows), rng.choice(LAUNCHER_LINES))
    return "\n".join(lines)


# JSON


def _document(seed: Seed) -> Dict[str, Any]:
    return json.loads(seed.content)


def _testcase(document: Dict[str, Any]) -> Dict[str, Any]:
    return document["nvbandwidth"]["testcases"][0]


def _dump(document: Any, rng: random.Random) -> str:
    return json.dumps(document, indent=rng.choice((None, 1, "\t")))


def _json_measured(entry: Dict[str, Any]) -> List[Tuple[int, int]]:
    return [(r, c) for r, row in enumerate(entry["bandwidth_matrix"]) for c, value in enumerate(row) if value != "N/A"]


def _value(cell: Any) -> float:
    return float(cell)


def json_reindent(rng: random.Random, seed: Seed) -> str:
    return _dump(_document(seed), rng)


def json_cells_as_numbers(rng: random.Random, seed: Seed) -> str:
    document = _document(seed)
    entry = _testcase(document)
    entry["bandwidth_matrix"] = [[v if v == "N/A" else float(v) for v in row] for row in entry["bandwidth_matrix"]]
    return _dump(document, rng)


def json_in_a_log(rng: random.Random, seed: Seed) -> str:
    return f"{rng.choice(LAUNCHER_LINES)}\n{seed.content}\n{rng.choice(LAUNCHER_LINES)}\n"


def json_lower_cell(factor: float, keep_sum: bool) -> Mutation:
    def mutate(rng: random.Random, seed: Seed) -> str:
        document = _document(seed)
        entry = _testcase(document)
        r, c = rng.choice(_json_measured(entry))
        old = _value(entry["bandwidth_matrix"][r][c])
        new = round(old * factor, 3)
        entry["bandwidth_matrix"][r][c] = f"{new:g}"
        columns = len(entry["bandwidth_matrix"][0])
        in_total = len(entry["bandwidth_matrix"]) == columns or r >= 2 * columns
        if keep_sum and in_total:
            entry["sum"] = float(entry["sum"]) + new - old
        return _dump(document, rng)

    return mutate


def json_bad_cell(value: Any) -> Mutation:
    def mutate(rng: random.Random, seed: Seed) -> str:
        document = _document(seed)
        entry = _testcase(document)
        r, c = rng.choice(_json_measured(entry))
        old = _value(entry["bandwidth_matrix"][r][c])
        entry["bandwidth_matrix"][r][c] = value if value != "negative" else -old
        return _dump(document, rng)

    return mutate


def json_set(path: str, value: Any) -> Mutation:
    """Set (or, with value ``...``, delete) one key of the testcase entry."""

    def mutate(rng: random.Random, seed: Seed) -> str:
        document = _document(seed)
        entry = _testcase(document)
        if value is Ellipsis:
            entry.pop(path, None)
        elif callable(value):
            entry[path] = value(entry.get(path))
        else:
            entry[path] = value
        return _dump(document, rng)

    return mutate


def json_drop_row(rng: random.Random, seed: Seed) -> str:
    document = _document(seed)
    entry = _testcase(document)
    del entry["bandwidth_matrix"][rng.randrange(len(entry["bandwidth_matrix"]))]
    return _dump(document, rng)


def json_testcase_not_object(rng: random.Random, seed: Seed) -> str:
    document = _document(seed)
    cases = document["nvbandwidth"]["testcases"]
    junk = rng.choice(("Passed", 7, None, ["N/A"]))
    if rng.random() < 0.5:
        cases[0] = junk
    else:
        cases.append(junk)
    return _dump(document, rng)


def json_cut(rng: random.Random, seed: Seed) -> str:
    end = seed.content.rstrip().rfind("}")
    return seed.content[: rng.randrange(end)]


def retried_run(damage: Mutation, last: bool) -> Mutation:
    """The seed and a damaged run of it in one log (a retried run): ``last`` puts the damaged run after the seed."""

    def mutate(rng: random.Random, seed: Seed) -> Optional[str]:
        damaged = damage(rng, seed)
        first_line = seed.content.lstrip().split("\n", 1)[0]
        if damaged is None or first_line not in damaged:
            return None  # the retry never printed its first line: no second run to judge
        runs = [seed.content, damaged] if last else [damaged, seed.content]
        return f"{runs[0].rstrip()}\n{rng.choice(LAUNCHER_LINES)}\n{runs[1]}"

    return mutate


def nvbw_observe(content: Any, options: Dict[str, Any]) -> Observation:
    verdict = nvbandwidth.check_nvbandwidth(
        content, thresholds=nvbandwidth.Thresholds(), gpu_product=options.get("gpu_product")
    )
    result = verdict.to_result()
    numbers = (
        result["passed"],
        result["testcase"],
        _rounded(result["matrix"]),
        _rounded(result["sum"]),
        tuple((p["src"], p["dst"], p["rule"]) for p in result["failing_pairs"]),
        len(result["errors"]),
    )
    return Observation(bool(result["passed"]), numbers, result["summary"])


def nvbandwidth_target() -> Target:
    folder = FIXTURES / "nvbandwidth"
    products = {"gb200": "NVIDIA-GB200", "h200": "NVIDIA-H200"}
    seeds = []
    for path in sorted(folder.glob("*")):
        if path.suffix not in (".txt", ".json"):
            continue
        product = next((value for key, value in products.items() if key in path.name), None)
        seeds.append(Seed(path.name, path.read_text(), {"gpu_product": product}))
    text_cosmetic = [
        ("CRLF line ends", crlf),
        ("kubectl --timestamps", kubectl_timestamps),
        ("kubectl --prefix", kubectl_prefix),
        ("ANSI colours", ansi_colours),
        ("launcher lines", launcher_lines),
        ("launcher line between rows", nvbw_launcher_between_rows),
        ("blank line in a matrix", nvbw_blank_in_matrix),
        ("blank lines between the header and the first row", nvbw_blank_after_header),
        ("40,000 blank lines in a matrix", nvbw_many_blanks_in_matrix),
        ("trailing spaces", trailing_spaces),
        ("non-UTF-8 in a banner line", non_utf8_in(r"^(?:NOTE:|Performance) ([^\n]*)$")),
        ("a failed run before the retry", retried_run(nvbw_lower_cell(0.5, True), last=False)),
    ]
    json_cosmetic = [
        ("CRLF line ends", crlf),
        ("kubectl --timestamps", kubectl_timestamps),
        ("ANSI colours", ansi_colours),
        ("re-indented", json_reindent),
        ("cells as numbers", json_cells_as_numbers),
        ("inside a launcher log", json_in_a_log),
        ("a failed run before the retry", retried_run(json_lower_cell(0.5, True), last=False)),
    ]
    text_damaging = [
        ("cut before the last SUM", nvbw_cut_before_last_sum),
        ("matrix row dropped", nvbw_drop_row),
        ("matrix row doubled", nvbw_double_row),
        ("cell halved, SUM consistent", nvbw_lower_cell(0.5, True)),
        ("cell at a lost link (0.94), SUM consistent", nvbw_lower_cell(0.94, True)),
        ("cell halved, SUM left", nvbw_lower_cell(0.5, False)),
        ("Read1/Read2 cell at 0.94, Total following", nvbw_lower_cell(0.94, True, "direction")),
        ("Read1/Read2 cell halved, Total left", nvbw_lower_cell(0.5, True, "direction-only")),
        ("N/A cell", nvbw_bad_cell("N/A")),
        ("inf cell", nvbw_bad_cell("inf")),
        ("nan cell", nvbw_bad_cell("nan")),
        ("negative cell", nvbw_bad_cell("negative")),
        ("SUM does not add up", nvbw_sum_off),
        ("SUM names another testcase", nvbw_sum_names_another_testcase),
        ("error line between rows", nvbw_error_between_rows),
        ("error line anywhere", nvbw_error_anywhere),
        ("retry after a pass halves a cell", retried_run(nvbw_lower_cell(0.5, True), last=True)),
        ("retry after a pass cut before its last SUM", retried_run(nvbw_cut_before_last_sum, last=True)),
    ]
    json_damaging = [
        ("cut JSON", json_cut),
        ("matrix row dropped", json_drop_row),
        ("cell halved, sum consistent", json_lower_cell(0.5, True)),
        ("cell at a lost link (0.94), sum consistent", json_lower_cell(0.94, True)),
        ("cell halved, sum left", json_lower_cell(0.5, False)),
        ("empty-string cell", json_bad_cell("")),
        ("cell with a unit", json_bad_cell("393.7 GB/s")),
        ("inf cell", json_bad_cell("inf")),
        ("null cell", json_bad_cell(None)),
        ("negative cell", json_bad_cell("negative")),
        ("sum off", json_set("sum", lambda s: float(s) * 1.1)),
        ("sum as a string", json_set("sum", lambda s: f"{float(s) * 1.1}")),
        ("sum not a number", json_set("sum", "n/a")),
        ("sum missing", json_set("sum", ...)),
        ("error key", json_set("error", "CUDA_ERROR_ILLEGAL_ADDRESS")),
        ("status Waived", json_set("status", "Waived")),
        ("bandwidth_matrix a string", json_set("bandwidth_matrix", "N/A")),
        ("bandwidth_matrix rows not lists", json_set("bandwidth_matrix", lambda m: [393.7 for row in m])),
        ("testcase not an object", json_testcase_not_object),
        ("retry after a pass halves a cell", retried_run(json_lower_cell(0.5, True), last=True)),
        ("retry after a pass cut off", retried_run(json_cut, last=True)),
    ]
    return Target(
        "nvbandwidth",
        seeds,
        nvbw_observe,
        (nvbandwidth_output.NvbandwidthParseError,),
        {COSMETIC: [], DAMAGING: [], NEUTRAL: neutral_text_mutations()},
        weight=5.0,
        by_format={
            "text": {COSMETIC: text_cosmetic, DAMAGING: text_damaging},
            "json": {COSMETIC: json_cosmetic, DAMAGING: json_damaging},
        },
    )


# --------------------------------------------------------------------------------------------
# nccl-tests
# --------------------------------------------------------------------------------------------

_NCCL_ROW = re.compile(r"^\s+\d+\s+\d+\s")


def _nccl_rows(lines: Sequence[str]) -> List[int]:
    return [n for n, line in enumerate(lines) if _NCCL_ROW.match(line)]


def _nccl_line(lines: Sequence[str], prefix: str) -> int:
    return next(n for n, line in enumerate(lines) if line.startswith(prefix))


def nccl_cut_before_avg(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    end = len("\n".join(lines[: _nccl_line(lines, "# Avg bus bandwidth")]))
    return seed.content[: rng.randrange(end + 1)]


def nccl_drop_row(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    del lines[rng.choice(_nccl_rows(lines))]
    return "\n".join(lines)


def nccl_double_row(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    row = rng.choice(_nccl_rows(lines))
    lines.insert(row, lines[row])
    return "\n".join(lines)


def nccl_rank(action: str) -> Mutation:
    def mutate(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        row = rng.choice([n for n, line in enumerate(lines) if line.startswith("#  Rank")])
        if action == "drop":
            del lines[row]
        else:
            lines.insert(row, lines[row])
        return "\n".join(lines)

    return mutate


def nccl_avg(value: Callable[[float], str]) -> Mutation:
    def mutate(_rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        n = _nccl_line(lines, "# Avg bus bandwidth")
        old = float(lines[n].split(":")[1].split()[0])
        lines[n] = f"# Avg bus bandwidth    : {value(old)} "
        return "\n".join(lines)

    return mutate


def nccl_row_cell(column: int, value: str) -> Mutation:
    """One token of a data row (5: out-of-place time ... 12: in-place #wrong) replaced by ``value``."""

    def mutate(rng: random.Random, seed: Seed) -> str:
        lines = _lines(seed.content)
        row = rng.choice(_nccl_rows(lines))
        token = list(_TOKEN.finditer(lines[row]))[column]
        lines[row] = _replace_token(lines[row], token, value)
        return "\n".join(lines)

    return mutate


def nccl_out_of_bounds(_rng: random.Random, seed: Seed) -> str:
    return seed.content.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED")


def nccl_failure_line(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(NCCL_FAILURE_LINES))
    return "\n".join(lines)


def nccl_observe(content: Any, options: Dict[str, Any]) -> Observation:
    # as the verifier judges it: multi-node NVLink must show in every rank's communicator line
    summary = nccl.nccl_tests_summary(
        content, min_busbw_gbps=options["min_busbw_gbps"], expected_ranks=8, require_mnnvl=True
    )
    numbers = (
        summary["passed"],
        summary["ranks"],
        tuple((r["size_bytes"], _rounded(r["busbw_gbps"]), r["wrong"]) for r in summary["rows"]),
        _rounded(summary["avg_busbw_gbps"]),
        len(summary["violations"]),
    )
    return Observation(bool(summary["passed"]), numbers, "; ".join(summary["violations"]))


def nccl_target() -> Target:
    folder = FIXTURES / "nccl"
    # 0.85 x 900 GB/s (GB200 NVLink 5), the threshold judges.nccl_threshold works out for the rack.
    seeds = [Seed(p.name, p.read_text(), {"min_busbw_gbps": 765.0}) for p in sorted(folder.glob("*.txt"))]
    return Target(
        "nccl",
        seeds,
        nccl_observe,
        (),
        {
            COSMETIC: [
                ("CRLF line ends", crlf),
                ("kubectl --timestamps", kubectl_timestamps),
                ("kubectl --prefix", kubectl_prefix),
                ("ANSI colours", ansi_colours),
                ("launcher lines", launcher_lines),
                ("trailing spaces", trailing_spaces),
                ("non-UTF-8 in a comment line", non_utf8_in(r"^# (Using devices)$")),
            ],
            DAMAGING: [
                ("cut before the Avg line", nccl_cut_before_avg),
                ("size row dropped", nccl_drop_row),
                ("size row doubled", nccl_double_row),
                ("rank line dropped", nccl_rank("drop")),
                ("rank line doubled", nccl_rank("double")),
                ("Avg below the threshold", nccl_avg(lambda v: f"{v * 0.9:g}")),
                ("Avg inf", nccl_avg(lambda v: "inf")),
                ("Avg nan", nccl_avg(lambda v: "nan")),
                ("Avg does not match the rows", nccl_avg(lambda v: f"{v * 1.05:g}")),
                ("busbw N/A", nccl_row_cell(7, "N/A")),
                ("busbw inf", nccl_row_cell(7, "inf")),
                ("busbw lowered", nccl_row_cell(11, "1.00")),
                ("#wrong not 0", nccl_row_cell(8, "5")),
                ("#wrong unreadable", nccl_row_cell(12, "x")),
                ("out-of-bounds values", nccl_out_of_bounds),
                ("failure line", nccl_failure_line),
            ],
            NEUTRAL: neutral_text_mutations(),
        },
        weight=2.0,
    )


# --------------------------------------------------------------------------------------------
# nvidia-smi
# --------------------------------------------------------------------------------------------


def xml_replace(pattern: str, replacement: str, which: str = "one") -> Mutation:
    def mutate(rng: random.Random, seed: Seed) -> Optional[str]:
        matches = list(re.finditer(pattern, seed.content))
        if not matches:
            return None
        chosen = [rng.choice(matches)] if which == "one" else matches
        text = seed.content
        for match in sorted(chosen, key=lambda m: m.start(), reverse=True):
            text = text[: match.start()] + match.expand(replacement) + text[match.end() :]
        return text

    return mutate


def xml_drop_gpu(rng: random.Random, seed: Seed) -> Optional[str]:
    blocks = list(re.finditer(r"\t<gpu id=.*?\n\t</gpu>\n", seed.content, re.S))
    if len(blocks) < 2:
        return None
    block = rng.choice(blocks)
    return seed.content[: block.start()] + seed.content[block.end() :]


def xml_cut(rng: random.Random, seed: Seed) -> str:
    return seed.content[: rng.randrange(seed.content.rfind("</nvidia_smi_log>"))]


def xml_reindent(_rng: random.Random, seed: Seed) -> str:
    return seed.content.replace("\t", "    ")


def xml_comment(rng: random.Random, seed: Seed) -> str:
    lines = _lines(seed.content)
    lines.insert(rng.randrange(4, len(lines) - 1), "<!-- collected by gpu_fabric.mnnvl -->")
    return "\n".join(lines)


def smi_observe(content: Any, _options: Dict[str, Any]) -> Observation:
    report = nvidia_smi.parse_query_xml(content)
    problems = nvidia_smi.fabric_problems(report.gpus)
    label = nvidia_smi.clique_label(report.gpus)
    numbers = (
        report.driver_version,
        report.cuda_version,
        tuple(
            (g.name, g.uuid, g.pci_bus_id, g.memory_total_mib, g.fabric.state, g.fabric.status, g.fabric.clique_id)
            for g in report.gpus
        ),
        label,
        len(problems),
    )
    # The verdict of nvidia_gpu_info's require_fabric alone: it must not lean on the clique label to fail.
    passed = not problems
    return Observation(passed, numbers, "; ".join(problems) or "ready")


def nvlink_observe(content: Any, _options: Dict[str, Any]) -> Observation:
    links = nvidia_smi.parse_nvlink_status(content)
    numbers = tuple(
        sorted((key, s.active_links, s.inactive_links, s.gbps_per_link, s.total_gbps) for key, s in links.items())
    )
    return Observation(True, numbers, "")


def nvidia_smi_target() -> Target:
    folder = FIXTURES / "nvidia-smi"
    seeds = [Seed(p.name, p.read_text()) for p in sorted(folder.glob("*-q.xml"))]
    state = r"<state>Completed</state>"
    return Target(
        "nvidia-smi -q -x",
        seeds,
        smi_observe,
        (ValueError,),
        {
            COSMETIC: [
                ("CRLF line ends", crlf),
                ("spaces for tabs", xml_reindent),
                ("XML comment", xml_comment),
                ("trailing spaces", trailing_spaces),
                ("non-UTF-8 in the timestamp", non_utf8_in(r"<timestamp>([^<]*)</timestamp>")),
            ],
            DAMAGING: [
                ("cut XML", xml_cut),
                ("fabric In Progress", xml_replace(state, "<state>In Progress</state>")),
                ("fabric status Failure", xml_replace(r"<status>Success</status>", "<status>Failure</status>")),
                ("fabric state N/A", xml_replace(state, "<state>N/A</state>")),
                (
                    "cluster UUID zero",
                    xml_replace(
                        r"<clusterUuid>[^<]+</clusterUuid>",
                        f"<clusterUuid>{'0' * 8}-0000-0000-0000-{'0' * 12}</clusterUuid>",
                    ),
                ),
                (
                    "other clique id on one GPU",
                    xml_replace(r"<cliqueId>(\d+)</cliqueId>", r"<cliqueId>\g<1>1</cliqueId>"),
                ),
                ("clique id not a number", xml_replace(r"<cliqueId>\d+</cliqueId>", "<cliqueId>\u00b2</cliqueId>")),
                (
                    "no clique id on any GPU (N/A)",
                    xml_replace(r"<cliqueId>\d+</cliqueId>", "<cliqueId>N/A</cliqueId>", "all"),
                ),
                (
                    "no clique id on any GPU (empty)",
                    xml_replace(r"<cliqueId>\d+</cliqueId>", "<cliqueId></cliqueId>", "all"),
                ),
                ("GPU dropped", xml_drop_gpu),
                ("fabric element dropped", xml_replace(r"<fabric>.*?</fabric>", "", "one")),
            ],
            NEUTRAL: neutral_text_mutations(),
        },
        weight=1.0,
    )


def nvlink_target() -> Target:
    folder = FIXTURES / "nvidia-smi"
    seeds = [Seed(p.name, p.read_text()) for p in sorted(folder.glob("*nvlink-s.txt")) if p.stat().st_size]

    def link_lines(seed: Seed) -> List[int]:
        return [n for n, line in enumerate(_lines(seed.content)) if "Link " in line and "GB/s" in line]

    def link(action: str) -> Mutation:
        def mutate(rng: random.Random, seed: Seed) -> Optional[str]:
            lines = _lines(seed.content)
            where = link_lines(seed)
            if not where:
                return None
            n = rng.choice(where)
            if action == "drop":
                del lines[n]
            elif action == "inactive":
                lines[n] = re.sub(r": .*$", ": <inactive>", lines[n])
            else:
                lines[n] = re.sub(r"[\d.]+ GB/s", lambda m: f"{float(m.group().split()[0]) / 2:.3f} GB/s", lines[n])
            return "\n".join(lines)

        return mutate

    def cut_in_links(rng: random.Random, seed: Seed) -> Optional[str]:
        where = link_lines(seed)
        if not where:
            return None
        end = len("\n".join(_lines(seed.content)[: where[-1]]))
        return seed.content[: rng.randrange(end + 1)]

    return Target(
        "nvidia-smi nvlink -s",
        seeds,
        nvlink_observe,
        (),
        {
            COSMETIC: [("CRLF line ends", crlf), ("trailing spaces", trailing_spaces)],
            DAMAGING: [
                ("link line dropped", link("drop")),
                ("link inactive", link("inactive")),
                ("link at half speed", link("slow")),
                ("cut before the last link", cut_in_links),
            ],
            NEUTRAL: neutral_text_mutations(),
        },
        weight=0.5,
        damage_shows_in_numbers=True,
    )


# --------------------------------------------------------------------------------------------
# cliques (Kubernetes Node objects)
# --------------------------------------------------------------------------------------------

TRAYS = 4


def clique_seed() -> List[Dict[str, Any]]:
    """The real GB200 tray Node object, once per tray of one rack (names t1..t4, the same clique)."""
    node = json.loads((FIXTURES / "k8s" / "gb200-tray-node.json").read_text())
    nodes = []
    for tray in range(1, TRAYS + 1):
        copy_ = copy.deepcopy(node)
        copy_["metadata"]["name"] = f"gb200-r0-t{tray}"
        copy_["metadata"]["labels"]["kubernetes.io/hostname"] = f"gb200-r0-t{tray}"
        nodes.append(copy_)
    return nodes


def _labels_of(node: Dict[str, Any]) -> Dict[str, Any]:
    return node["metadata"]["labels"]


def clique_mutation(action: str) -> Mutation:
    def mutate(rng: random.Random, seed: Seed) -> Any:
        nodes = copy.deepcopy(seed.content)
        node = rng.choice(nodes)
        labels = _labels_of(node)
        value = labels.get(cliques.CLIQUE_LABEL, "")
        if action == "reorder":
            rng.shuffle(nodes)
            node["metadata"]["labels"] = dict(reversed(list(labels.items())))
        elif action == "extra label":
            labels["example.com/rack-row"] = "f06"
        elif action == "capacity as int":
            node["status"]["capacity"][cliques.GPU_RESOURCE] = 4
        elif action == "drop label":
            del labels[cliques.CLIQUE_LABEL]
        elif action == "empty label":
            labels[cliques.CLIQUE_LABEL] = ""
        elif action == "other clique":
            labels[cliques.CLIQUE_LABEL] = value.rsplit(".", 1)[0] + ".32767"
        elif action == "cut value":
            labels[cliques.CLIQUE_LABEL] = value[: rng.randrange(len(value))]
        elif action == "newline in value":
            labels[cliques.CLIQUE_LABEL] = value + "\n"
        elif action == "drop node":
            nodes.remove(node)
        elif action == "double node":
            nodes.append(copy.deepcopy(node))
        elif action == "labels not a mapping":
            node["metadata"]["labels"] = rng.choice((["nvidia.com/gpu.clique"], "nvidia.com/gpu.clique", 7))
        elif action == "metadata not a mapping":
            node["metadata"] = rng.choice((None, "gb200-r0-t1", []))
        elif action == "node not a mapping":
            nodes[nodes.index(node)] = rng.choice(("gb200-r0-t1", None, 3, []))
        elif action == "capacity junk":
            node["status"]["capacity"][cliques.GPU_RESOURCE] = rng.choice(("4Gi", None, {"x": 1}, [], "-1"))
        elif action == "label value junk":
            labels[cliques.CLIQUE_LABEL] = rng.choice((32766, None, ["x"], {"a": 1}, True))
        return nodes

    return mutate


def cliques_observe(content: Any, _options: Dict[str, Any]) -> Observation:
    grouping = cliques.group_nodes_by_clique(content)
    violations = cliques.check_clique_expectations(grouping, expected_cliques=1, nodes_per_clique=TRAYS)
    numbers = (tuple((k, tuple(v)) for k, v in grouping.groups.items()), tuple(grouping.unlabelled_gpu_nodes))
    return Observation(not violations, numbers, "; ".join(violations))


def cliques_target() -> Target:
    return Target(
        "cliques",
        [Seed("gb200-tray-node.json x4", clique_seed())],
        cliques_observe,
        (ValueError,),
        {
            COSMETIC: [
                ("nodes and labels reordered", clique_mutation("reorder")),
                ("an unrelated label", clique_mutation("extra label")),
                ("GPU capacity as an integer", clique_mutation("capacity as int")),
            ],
            DAMAGING: [
                ("clique label dropped", clique_mutation("drop label")),
                ("clique label empty", clique_mutation("empty label")),
                ("other clique on one node", clique_mutation("other clique")),
                ("clique value cut", clique_mutation("cut value")),
                ("newline after the value", clique_mutation("newline in value")),
                ("node dropped", clique_mutation("drop node")),
                ("node doubled", clique_mutation("double node")),
            ],
            NEUTRAL: [
                (name, clique_mutation(name))
                for name in (
                    "labels not a mapping",
                    "metadata not a mapping",
                    "node not a mapping",
                    "capacity junk",
                    "label value junk",
                )
            ],
        },
        weight=0.5,
    )


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    expected_fail: int = 0
    false_passes: int = 0
    false_failures: int = 0
    tracebacks: int = 0
    examples: List[str] = field(default_factory=list)

    def bad(self) -> int:
        return self.false_passes + self.false_failures + self.tracebacks


def targets() -> List[Target]:
    found = [nvbandwidth_target(), nccl_target(), nvidia_smi_target(), nvlink_target(), cliques_target()]
    for target in found:
        for seed in target.seeds:
            seed.baseline = target.run(seed.content, seed)
    return found


def _mutations_for(target: Target, seed: Seed, kind: str) -> List[Tuple[str, Mutation]]:
    if target.by_format and kind != NEUTRAL:
        return target.by_format["json" if seed.name.endswith(".json") else "text"][kind]
    return target.mutations[kind]


def run_case(target: Target, rng: random.Random) -> Tuple[str, str, str, Optional[str]]:
    """One case: (kind, seed name, mutation name, what went wrong or None)."""
    seed = rng.choice(target.seeds)
    assert seed.baseline is not None
    kinds = [COSMETIC, NEUTRAL] + ([DAMAGING] if seed.baseline.passed else [])
    kind = rng.choice(kinds)
    content = None
    name = ""
    for _attempt in range(10):
        name, mutate = rng.choice(_mutations_for(target, seed, kind))
        try:
            content = mutate(rng, seed)
        except (IndexError, KeyError, TypeError, ValueError, StopIteration):
            content = None  # the mutation does not apply to this seed (no matrix, no such line)
        if content is not None:
            break
    if content is None:
        kind, name, content = NEUTRAL, "unchanged", seed.content
    try:
        observed = target.run(content, seed)
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return (
            kind,
            seed.name,
            name,
            f"traceback: {type(exc).__name__}: {str(exc)[:100]} at {where.name}:{where.lineno}",
        )
    unchanged = observed.numbers == seed.baseline.numbers
    if kind == DAMAGING and (unchanged if target.damage_shows_in_numbers else observed.passed):
        return kind, seed.name, name, "false pass"
    if kind == COSMETIC and (observed.passed != seed.baseline.passed or observed.numbers != seed.baseline.numbers):
        return kind, seed.name, name, f"false failure: {observed.reason[:160]}"
    return kind, seed.name, name, None


def run_fuzz(cases: int = 5000, seed: int = 0) -> Dict[str, Tally]:
    """Run ``cases`` seeded cases over every parser; the tally per parser."""
    found = targets()
    picker = random.Random(seed)
    weights = [t.weight for t in found]
    tallies = {t.name: Tally() for t in found}
    for number in range(cases):
        target = picker.choices(found, weights)[0]
        rng = random.Random(f"{seed}:{number}")
        kind, seed_name, mutation, problem = run_case(target, rng)
        tally = tallies[target.name]
        tally.cases += 1
        tally.expected_fail += kind == DAMAGING
        if problem is None:
            continue
        if problem.startswith("traceback"):
            tally.tracebacks += 1
        elif problem == "false pass":
            tally.false_passes += 1
        else:
            tally.false_failures += 1
        tally.examples.append(f"case {number}: {seed_name}, {kind} '{mutation}': {problem}")
    return tallies


def table(tallies: Dict[str, Tally]) -> str:
    header = "| parser | cases | expected-fail | false passes | false failures (cosmetic) | tracebacks |"
    rows = [header, "| --- | ---: | ---: | ---: | ---: | ---: |"]
    total = Tally()
    for name, t in tallies.items():
        rows.append(
            f"| {name} | {t.cases} | {t.expected_fail} | {t.false_passes} | {t.false_failures} | {t.tracebacks} |"
        )
        total.cases += t.cases
        total.expected_fail += t.expected_fail
        total.false_passes += t.false_passes
        total.false_failures += t.false_failures
        total.tracebacks += t.tracebacks
    rows.append(
        f"| all | {total.cases} | {total.expected_fail} | {total.false_passes} | {total.false_failures} "
        f"| {total.tracebacks} |"
    )
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000, help="number of cases (default 5000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--show", type=int, default=3, help="examples to print per parser with problems")
    args = parser.parse_args(argv)
    tallies = run_fuzz(args.cases, args.seed)
    print(f"python bench/fuzz_outputs.py --cases {args.cases} --seed {args.seed}\n")
    print(table(tallies))
    for name, tally in tallies.items():
        for example in tally.examples[: args.show]:
            print(f"  {name}: {example}")
    return 1 if any(t.bad() for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
