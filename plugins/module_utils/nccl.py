# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Parse and judge the output of the nccl-tests benchmarks (``all_reduce_perf`` and its siblings).

The layout is the one ``src/common.cu`` of NVIDIA/nccl-tests prints:

- a parameter line ``# nThread 1 nGpus 1 minBytes 8 maxBytes ... validation: 1 graph: 0``;
- ``# Using devices`` then one ``#  Rank  0 Group  0 Pid 123 on host device  0 [0x1b] NVIDIA H200`` per rank;
- a two-line column header (``size count type redop root`` then ``time algbw busbw #wrong`` for the
  out-of-place and again for the in-place run; ``cputime`` with ``-C 1``);
- one data row per message size;
- the footer ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 104.568 [OK|FAILED]``.

Like nvbandwidth, a run that broke may still leave a plausible-looking log behind (a table cut
short, ``NCCL WARN`` lines, ``Test NCCL failure``), so the verdict is made from the parsed content
and never from the exit code alone. The average is checked against the rows it is made of: nccl-tests
adds every printed ``busbw`` (out-of-place and in-place) and divides by their count, so a row lost or
doubled in the log, or a damaged average, shows as a disagreement.

nccl-tests' own verdict is honoured: ``# Avg bus bandwidth ... FAILED`` (printed when the average is below
0.9 x ``NCCL_TESTS_MIN_BW``), ``# Out of bounds values : N FAILED`` and a non-zero ``#wrong`` cell each fail.

The floor is judged at the large messages, not on the average line: the average is the mean over whatever sizes
the run swept (``-b``/``-e``), so it moves with the arguments (the published 72-GPU run below averages 745.53
GB/s over 512 MiB-8 GiB, about 787 over 1-8 GiB), and at 1-2 GiB a 72-GPU all-reduce has not reached its
plateau yet (681-774 GB/s). From 4 GiB on the bus bandwidth is flat (834.57-846.82 GB/s): a property of the
fabric, and every row there is held against the floor, so one slow size cannot hide in the mean.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth_output import clean_lines

GIB = 1 << 30


@dataclass(frozen=True)
class BusbwReference:
    """A healthy product's published bus bandwidth for one benchmark, at the message sizes it was read at."""

    match: str  # regular expression searched in the nvidia.com/gpu.product label (NVIDIA-GB200)
    binary: str
    busbw_gbps: float
    min_bytes: int  # the sizes it holds for: every row of this size and larger
    ranks: int
    source: str


# GB200 NVL72, all_reduce_perf (float, sum) over the 72 GPUs of one rack with multi-node NVLink, published in
# coreweave/nccl-tests pull request 43 (tests/fixtures/nccl/coreweave-gb200-nvl72-all_reduce_perf.txt):
#   4 GiB 839.16 / 835.32 GB/s, 8 GiB 834.57 / 846.82 GB/s (out-of-place / in-place); the lowest, 834.57, is the
#   reference. Below 4 GiB the figure still climbs (1 GiB 681.17, 2 GiB 757.78), hence min_bytes.
# Cross-check: NVIDIA's production NVL72 baseline (beacon-v2 baselines, 26.08.00, in NVIDIA/aicr issue 2784) is
#   about 770 GB/s, message sizes not stated; the default floor below (751.11) stays under it.
# busbw is nccl-tests' rank-independent figure (doc/PERFORMANCE.md), so the reference is also held against runs
#   over fewer trays; a site that verifies partial racks and sees less sets min_busbw_gbps from its own runs.
NVL72_ALLREDUCE_REFERENCE = BusbwReference(
    match="GB200",
    binary="all_reduce_perf",
    busbw_gbps=834.57,
    min_bytes=4 * GIB,
    ranks=72,
    source="GB200 NVL72 all_reduce_perf over 72 GPUs, coreweave/nccl-tests#43",
)
BUSBW_REFERENCES: tuple[BusbwReference, ...] = (NVL72_ALLREDUCE_REFERENCE,)
# 0.9 x 834.57 = 751.11 GB/s. Between one lost NVLink of 18 on the slowest GPU (17/18 = 0.944: an all-reduce runs at
# the pace of its slowest GPU, 788 GB/s; nvbandwidth's pairwise check finds that one) and two (16/18 = 0.889,
# 742 GB/s: fails), and below NVIDIA's ~770 production baseline by 2.5 %.
DEFAULT_MIN_FRACTION_OF_REFERENCE = 0.9
# The sizes a floor that comes without a reference (min_busbw_gbps, a fraction of the NVLink peak) applies to.
DEFAULT_JUDGED_MIN_BYTES = 4 * GIB

# Terminal escapes a TTY-attached launcher or a log collector leaves in a line: CSI (colours, cursor; 7-bit and the
# 8-bit 0x9b), OSC (window title, hyperlink: ESC ] ... BEL or ST), DCS/SOS/PM/APC strings, other ESC sequences;
# then every control character but tab, CR and LF (CR and LF are line ends, handled by clean_lines).
TERMINAL_ESCAPE_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b\n]*(?:\x1b\\)?|\x1b[ -/]*[0-~]"
)
CONTROL_CHARACTER_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

PARAMS_RE = re.compile(
    r"^#\s*nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<min_bytes>\d+)"
    r"\s+maxBytes\s+(?P<max_bytes>\d+)"
)
DEVICE_RE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+(?P<group>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus_id>[^\]]+)\]\s+(?P<name>.+?)\s*$"
)
OUT_OF_BOUNDS_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>\d+)\s*(?P<verdict>OK|FAILED)?")
AVG_BUSBW_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>\S+)\s*(?P<verdict>OK|FAILED)?")
# Failures the test binary reports itself (common.h CUDACHECK/NCCLCHECK/TESTCHECK, the timeout path).
# "ERROR:" at the start of a line: the launcher's, ssh's or the image's entrypoint's own error report.
FAILURE_RE = re.compile(
    r"Test (?:NCCL|CUDA) failure|: Test failure |Test timeout|MPI_ABORT was invoked|mpirun noticed that process"
    r"|but \d+ process(?:es)? returned|^\s*ERROR:"
)
NCCL_WARN_RE = re.compile(r"\bNCCL WARN\b")
# With NCCL_DEBUG=INFO (subsystem INIT) every rank prints, once its communicator is up (init.cc of NCCL 2.23 to
# 2.30): "<host>:<pid>:<tid> [<dev>] NCCL INFO comm 0x... rank R nRanks N nNodes M localRanks L localRank l MNNVL B",
# B 1 when the communicator runs over multi-node NVLink.
COMM_INIT_RE = re.compile(
    r"NCCL INFO comm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
    r"localRanks \d+ localRank \d+ MNNVL (?P<mnnvl>\d+)"
)
# Column names of one placement (out-of-place or in-place) in the order nccl-tests prints them.
PLACEMENT_COLUMNS = ("time", "algbw", "busbw", "#wrong")


@dataclass(frozen=True)
class NcclDevice:
    """One ``#  Rank N ... device D [0xBB] NAME`` line."""

    rank: int
    group: int
    pid: int
    host: str
    device: int
    bus_id: str
    name: str


@dataclass(frozen=True)
class NcclPlacement:
    """Timing of one placement (out-of-place or in-place) for one message size."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Optional[int]


@dataclass(frozen=True)
class NcclRow:
    """One data row of the size table."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: NcclPlacement
    in_place: NcclPlacement

    @property
    def busbw_gbps(self) -> float:
        return max(self.out_of_place.busbw_gbps, self.in_place.busbw_gbps)

    @property
    def wrong(self) -> int:
        return (self.out_of_place.wrong or 0) + (self.in_place.wrong or 0)


@dataclass
class NcclTestsResult:
    """Everything read from one nccl-tests log."""

    params: dict[str, int] = field(default_factory=dict)
    devices: list[NcclDevice] = field(default_factory=list)
    rows: list[NcclRow] = field(default_factory=list)
    out_of_bounds: Optional[int] = None
    out_of_bounds_verdict: Optional[str] = None
    avg_busbw_gbps: Optional[float] = None
    avg_busbw_verdict: Optional[str] = None
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    damaged_rows: list[str] = field(default_factory=list)
    mnnvl: dict[int, int] = field(default_factory=dict)  # rank -> the MNNVL flag of its communicator's INIT line

    @property
    def ranks(self) -> int:
        return len(self.devices)

    @property
    def max_busbw_gbps(self) -> Optional[float]:
        return max((row.busbw_gbps for row in self.rows), default=None)

    @property
    def wrong_sizes(self) -> list[int]:
        return [row.size_bytes for row in self.rows if row.wrong]

    def judged_rows(self, min_bytes: int) -> list[NcclRow]:
        return [row for row in self.rows if row.size_bytes >= min_bytes]

    def lowest_busbw_gbps(self, min_bytes: int) -> Optional[float]:
        """The lowest bus bandwidth (either placement) of the rows of ``min_bytes`` and more."""
        return min(
            (min(row.out_of_place.busbw_gbps, row.in_place.busbw_gbps) for row in self.judged_rows(min_bytes)),
            default=None,
        )

    def rows_average_gbps(self) -> Optional[float]:
        """The average bus bandwidth worked out from the rows, as nccl-tests does (both placements)."""
        values = [v for row in self.rows for v in (row.out_of_place.busbw_gbps, row.in_place.busbw_gbps)]
        return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class NcclVerdict:
    passed: bool
    violations: list[str]


def strip_terminal_escapes(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (line ends kept)."""
    return CONTROL_CHARACTER_RE.sub("", TERMINAL_ESCAPE_RE.sub("", text))


def size_text(size_bytes: int) -> str:
    """A message size as nccl-tests' arguments write it: 4 GiB, 512 MiB, 8 B."""
    for unit, name in ((GIB, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size_bytes >= unit and size_bytes % unit == 0:
            return f"{size_bytes // unit} {name}"
    return f"{size_bytes} B"


def busbw_reference(product: Optional[str], binary: str) -> Optional[BusbwReference]:
    """The published healthy figure for this GPU product (``nvidia.com/gpu.product``) and benchmark, or None."""
    for reference in BUSBW_REFERENCES:
        if product and binary == reference.binary and re.search(reference.match, product):
            return reference
    return None


def _number(text: str) -> float:
    """A time or bandwidth cell: a finite number, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a measurement")
    return value


def _wrong(text: str) -> Optional[int]:
    # "#wrong" is printed with %5g (an integer in practice) or "N/A" when the data check is off (-c 0).
    if text == "N/A":
        return None
    value = _number(text)
    return int(value)


def _header_columns(line: str) -> Optional[list[str]]:
    tokens = line.lstrip("#").split()
    if tokens[:2] != ["size", "count"]:
        return None
    return tokens


def _parse_row(tokens: list[str], columns: list[str]) -> NcclRow:
    # columns: size count type redop root <placement columns> <placement columns> [extra columns]
    fixed = dict(zip(columns[:5], tokens[:5]))
    placements: list[dict[str, str]] = [{}, {}]
    which = 0
    for name, value in zip(columns[5:], tokens[5:]):
        column = "time" if name == "cputime" else name
        if column in placements[which] and which == 0:
            which = 1
        placements[which][column] = value
    parsed = []
    for placement in placements:
        missing = [name for name in PLACEMENT_COLUMNS if name not in placement]
        if missing:
            raise ValueError(f"row {' '.join(tokens)!r} lacks the columns {', '.join(missing)}")
        parsed.append(
            NcclPlacement(
                time_us=_number(placement["time"]),
                algbw_gbps=_number(placement["algbw"]),
                busbw_gbps=_number(placement["busbw"]),
                wrong=_wrong(placement["#wrong"]),
            )
        )
    return NcclRow(
        size_bytes=int(fixed["size"]),
        count=int(fixed["count"]),
        type=fixed["type"],
        redop=fixed["redop"],
        root=int(fixed["root"]),
        out_of_place=parsed[0],
        in_place=parsed[1],
    )


def parse_nccl_tests(text: str) -> NcclTestsResult:
    """Read an nccl-tests log (launcher output; other lines, such as mpirun's, are ignored).

    Log prefixes (``kubectl logs --timestamps`` / ``--prefix``, ``mpirun --tag-output``), colour escapes and
    CR line ends are removed first, and so are other terminal escapes (OSC titles, cursor moves) and control
    characters, so that an ``ERROR:`` or ``Test NCCL failure`` line wrapped in them is still seen.
    A row that cannot be read is kept in ``damaged_rows`` (the verdict fails), never raised.
    """
    result = NcclTestsResult()
    columns: Optional[list[str]] = None
    for raw in clean_lines(strip_terminal_escapes(text)):
        line = raw.rstrip()
        if not line.strip():
            continue
        if FAILURE_RE.search(line):
            result.failures.append(line.strip())
            continue
        if NCCL_WARN_RE.search(line):
            result.warnings.append(line.strip())
            continue
        match = COMM_INIT_RE.search(line)
        if match:
            result.mnnvl[int(match.group("rank"))] = int(match.group("mnnvl"))
            continue
        if line.lstrip().startswith("#"):
            match = PARAMS_RE.match(line.strip())
            if match:
                result.params = {key: int(value) for key, value in match.groupdict().items()}
                continue
            match = DEVICE_RE.match(line.strip())
            if match:
                values = match.groupdict()
                result.devices.append(
                    NcclDevice(
                        rank=int(values["rank"]),
                        group=int(values["group"]),
                        pid=int(values["pid"]),
                        host=values["host"],
                        device=int(values["device"]),
                        bus_id=values["bus_id"],
                        name=values["name"],
                    )
                )
                continue
            match = OUT_OF_BOUNDS_RE.match(line.strip())
            if match:
                result.out_of_bounds = int(match.group("count"))
                result.out_of_bounds_verdict = match.group("verdict")
                continue
            match = AVG_BUSBW_RE.match(line.strip())
            if match:
                try:
                    result.avg_busbw_gbps = _number(match.group("value"))
                except ValueError as exc:
                    result.damaged_rows.append(f"{line.strip()} ({exc})")
                result.avg_busbw_verdict = match.group("verdict")
                continue
            header = _header_columns(line)
            if header is not None:
                columns = header
            continue
        tokens = line.split()
        if columns is None or len(tokens) < 2 or not tokens[0].isdigit() or not tokens[1].isdigit():
            continue
        try:
            result.rows.append(_parse_row(tokens, columns))
        except (ValueError, KeyError) as exc:
            result.damaged_rows.append(f"{line.strip()} ({exc})")
    return result


def mnnvl_violations(result: NcclTestsResult) -> list[str]:
    """Why the log does not show that every rank's communicator ran over multi-node NVLink (empty: it does)."""
    if not result.mnnvl:
        return [
            "the log does not show that NCCL used multi-node NVLink: no 'NCCL INFO comm ... MNNVL' line (run with "
            "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT)"
        ]
    off = sorted(rank for rank, flag in result.mnnvl.items() if not flag)
    if off:
        shown = ", ".join(map(str, off[:8])) + (" ..." if len(off) > 8 else "")
        return [
            f"NCCL did not use multi-node NVLink on {len(off)} of {len(result.mnnvl)} ranks (MNNVL 0: rank {shown}): "
            "the bandwidth is not the NVLink fabric's; check the IMEX channel and NCCL_MNNVL_ENABLE/NCCL_CUMEM_ENABLE"
        ]
    if result.devices and len(result.mnnvl) < result.ranks:
        return [f"only {len(result.mnnvl)} of {result.ranks} ranks printed their communicator's MNNVL state"]
    return []


def floor_violations(
    result: NcclTestsResult, min_busbw_gbps: float, min_bytes: int = DEFAULT_JUDGED_MIN_BYTES, explanation: str = ""
) -> list[str]:
    """Why the rows of ``min_bytes`` and more do not all reach ``min_busbw_gbps`` (empty: they do)."""
    source = f" ({explanation})" if explanation else ""
    judged = result.judged_rows(min_bytes)
    if not judged:
        largest = max((row.size_bytes for row in result.rows), default=None)
        measured = f"the largest measured is {size_text(largest)}" if largest is not None else "none was measured"
        return [
            f"no message size of {size_text(min_bytes)} or more was measured ({measured}): the floor "
            f"{min_busbw_gbps:g} GB/s{source} holds for {size_text(min_bytes)} and more; let the run reach them "
            "(-e 8G in verify_nccl_args)"
        ]
    low = [
        f"{size_text(row.size_bytes)} {placement} {value:.2f}"
        for row in judged
        for placement, value in (("out-of-place", row.out_of_place.busbw_gbps), ("in-place", row.in_place.busbw_gbps))
        if value < min_busbw_gbps
    ]
    if not low:
        return []
    return [
        f"bus bandwidth below the floor {min_busbw_gbps:g} GB/s{source} at {len(low)} of {2 * len(judged)} "
        f"measurements of {size_text(min_bytes)} and more: {', '.join(low)} GB/s; the NVLink fabric is slower than "
        "a healthy rack (run nvbandwidth to find the GPU or tray)"
    ]


def evaluate_nccl_tests(
    result: NcclTestsResult,
    min_busbw_gbps: Optional[float] = None,
    expected_ranks: Optional[int] = None,
    require_mnnvl: bool = False,
    min_bytes: int = DEFAULT_JUDGED_MIN_BYTES,
    floor_explanation: str = "",
) -> NcclVerdict:
    """Judge a parsed run: it finished, the data were right (nccl-tests' own verdict included), the bus bandwidth
    of every row of ``min_bytes`` and more reaches ``min_busbw_gbps`` and, with ``require_mnnvl``, every rank's
    communicator ran over multi-node NVLink."""
    violations: list[str] = []
    if require_mnnvl:
        violations.extend(mnnvl_violations(result))
    for failure in result.failures:
        violations.append(f"the test reported a failure: {failure}")
    for damaged in result.damaged_rows:
        violations.append(f"a result line cannot be read, the log is damaged: {damaged}")
    if not result.rows:
        violations.append(
            "no result row was found in the output: the benchmark did not run (look at the launcher log for "
            "mpirun, ssh or NCCL errors)"
        )
    if result.avg_busbw_gbps is None:
        violations.append(
            "the '# Avg bus bandwidth' line is missing: the benchmark did not finish "
            f"({len(result.rows)} sizes measured before it stopped)"
        )
    if expected_ranks is not None and result.devices and result.ranks != expected_ranks:
        violations.append(
            f"{result.ranks} ranks took part, {expected_ranks} were expected: check slotsPerWorker, the worker "
            "count and the GPUs each worker requests"
        )
    wrong = result.wrong_sizes
    if wrong:
        violations.append(
            f"wrong results (#wrong > 0) at {len(wrong)} message sizes ({', '.join(str(size) for size in wrong)} B): "
            "data corruption on the fabric or a broken NCCL transport"
        )
    if result.out_of_bounds or result.out_of_bounds_verdict == "FAILED":
        verdict = " (nccl-tests: FAILED)" if result.out_of_bounds_verdict == "FAILED" else ""
        violations.append(f"{result.out_of_bounds} out-of-bounds values reported by the data check{verdict}")
    if result.avg_busbw_verdict == "FAILED":
        violations.append(
            f"nccl-tests judged its own run FAILED: the average bus bandwidth {result.avg_busbw_gbps:g} GB/s is below "
            "0.9 x NCCL_TESTS_MIN_BW set in its environment"
        )
    rows_average = result.rows_average_gbps()
    # Each busbw is printed with 2 decimals (0.005 each at most), the average with 6 significant digits.
    if (
        result.avg_busbw_gbps is not None
        and rows_average is not None
        and not result.damaged_rows
        and abs(rows_average - result.avg_busbw_gbps) > 0.006 + 1e-5 * result.avg_busbw_gbps
    ):
        violations.append(
            f"the '# Avg bus bandwidth' {result.avg_busbw_gbps:g} GB/s is not the average of the "
            f"{2 * len(result.rows)} busbw values of the {len(result.rows)} rows ({rows_average:.3f}): rows are "
            "missing, doubled or damaged in the log"
        )
    if min_busbw_gbps is not None and result.rows:
        violations.extend(floor_violations(result, min_busbw_gbps, min_bytes, floor_explanation))
    return NcclVerdict(passed=not violations, violations=violations)


def nccl_tests_summary(
    text: str,
    min_busbw_gbps: Optional[float] = None,
    expected_ranks: Optional[int] = None,
    require_mnnvl: bool = False,
    min_bytes: int = DEFAULT_JUDGED_MIN_BYTES,
    floor_explanation: str = "",
) -> dict[str, Any]:
    """Parse and judge ``text``; a plain dictionary for filters, modules and records."""
    result = parse_nccl_tests(text)
    verdict = evaluate_nccl_tests(
        result,
        min_busbw_gbps=min_busbw_gbps,
        expected_ranks=expected_ranks,
        require_mnnvl=require_mnnvl,
        min_bytes=min_bytes,
        floor_explanation=floor_explanation,
    )
    return {
        "params": dict(result.params),
        "devices": [asdict(device) for device in result.devices],
        "ranks": result.ranks,
        "rows": [
            {
                "size_bytes": row.size_bytes,
                "count": row.count,
                "type": row.type,
                "redop": row.redop,
                "root": row.root,
                "out_of_place": asdict(row.out_of_place),
                "in_place": asdict(row.in_place),
                "busbw_gbps": row.busbw_gbps,
                "wrong": row.wrong,
            }
            for row in result.rows
        ],
        "out_of_bounds": result.out_of_bounds,
        "out_of_bounds_verdict": result.out_of_bounds_verdict,
        "avg_busbw_gbps": result.avg_busbw_gbps,
        "avg_busbw_verdict": result.avg_busbw_verdict,
        "max_busbw_gbps": result.max_busbw_gbps,
        "judged_min_bytes": min_bytes,
        "judged_busbw_gbps": result.lowest_busbw_gbps(min_bytes),
        "wrong_sizes": result.wrong_sizes,
        "failures": list(result.failures),
        "mnnvl_ranks": sum(1 for flag in result.mnnvl.values() if flag),
        "mnnvl_reported_ranks": len(result.mnnvl),
        "warnings": list(result.warnings),
        "min_busbw_gbps": min_busbw_gbps,
        "violations": verdict.violations,
        "passed": verdict.passed,
    }
