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
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import clean_lines

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
FAILURE_RE = re.compile(
    r"Test (?:NCCL|CUDA) failure|: Test failure |Test timeout|MPI_ABORT was invoked|mpirun noticed that process"
    r"|but \d+ process(?:es)? returned"
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

    def rows_average_gbps(self) -> Optional[float]:
        """The average bus bandwidth worked out from the rows, as nccl-tests does (both placements)."""
        values = [v for row in self.rows for v in (row.out_of_place.busbw_gbps, row.in_place.busbw_gbps)]
        return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class NcclVerdict:
    passed: bool
    violations: list[str]


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
    CR line ends are removed first. A row that cannot be read is kept in ``damaged_rows`` (the verdict fails),
    never raised.
    """
    result = NcclTestsResult()
    columns: Optional[list[str]] = None
    for raw in clean_lines(text):
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


def evaluate_nccl_tests(
    result: NcclTestsResult,
    min_busbw_gbps: Optional[float] = None,
    expected_ranks: Optional[int] = None,
    require_mnnvl: bool = False,
) -> NcclVerdict:
    """Judge a parsed run: it finished, the data were right, the average bus bandwidth is high enough and, with
    ``require_mnnvl``, every rank's communicator ran over multi-node NVLink."""
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
    if result.out_of_bounds:
        violations.append(f"{result.out_of_bounds} out-of-bounds values reported by the data check")
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
    if min_busbw_gbps is not None and result.avg_busbw_gbps is not None and result.avg_busbw_gbps < min_busbw_gbps:
        violations.append(
            f"average bus bandwidth {result.avg_busbw_gbps:g} GB/s is below the threshold {min_busbw_gbps:g} GB/s"
        )
    return NcclVerdict(passed=not violations, violations=violations)


def nccl_tests_summary(
    text: str,
    min_busbw_gbps: Optional[float] = None,
    expected_ranks: Optional[int] = None,
    require_mnnvl: bool = False,
) -> dict[str, Any]:
    """Parse and judge ``text``; a plain dictionary for filters, modules and records."""
    result = parse_nccl_tests(text)
    verdict = evaluate_nccl_tests(
        result, min_busbw_gbps=min_busbw_gbps, expected_ranks=expected_ranks, require_mnnvl=require_mnnvl
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
        "avg_busbw_gbps": result.avg_busbw_gbps,
        "avg_busbw_verdict": result.avg_busbw_verdict,
        "max_busbw_gbps": result.max_busbw_gbps,
        "wrong_sizes": result.wrong_sizes,
        "failures": list(result.failures),
        "mnnvl_ranks": sum(1 for flag in result.mnnvl.values() if flag),
        "mnnvl_reported_ranks": len(result.mnnvl),
        "warnings": list(result.warnings),
        "min_busbw_gbps": min_busbw_gbps,
        "violations": verdict.violations,
        "passed": verdict.passed,
    }
