# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Parse nvbandwidth output (text or ``-j`` JSON) and judge it against bandwidth thresholds.

nvbandwidth's exit code cannot be trusted: it exits 0 when a testcase is ``Waived``, when a
testcase threw a caught ``Error:``, and when a test name is unknown (``ERROR: Testcase <name> not
found!``). The verdict therefore comes from the output alone: the matrix, the ``SUM`` line (which
must agree with the cells), and the absence of error lines.

Text layout, as printed by nvbandwidth's ``PeerValueMatrix`` stream operator (v0.7/v0.8)::

    Running <testcase>.
    <description ending in "(GB/s)" or "(ns)">
      <column labels, each right-aligned in 10 characters; the indent is the row-label width (>= 2)>
    <row label, right-aligned in the indent><cells, each right-aligned in 10 characters, 2 decimals or N/A>
    ...
    (blank)
    SUM <key> <sum, 2 decimals>

Columns never wrap: a 72-GPU matrix is one 722-character line per row. Bidirectional
device-to-device tests print three matrices (keys ``<testcase>_read1``, ``_read2``, ``_total`` or
``_write1``, ``_write2``, ``_total``); their JSON form appends the three matrices into one
``3N x N`` ``bandwidth_matrix`` and keeps only the last ``sum`` (the total). Only the Python
standard library is used: the parser runs on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import bandwidth_rule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_rule import Judgement

Cell = Optional[float]

# Testcase names of nvbandwidth v0.8, in index order (single-node, then the multinode build's).
KNOWN_TESTCASES: Tuple[str, ...] = (
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "host_to_device_bidirectional_memcpy_ce",
    "device_to_host_bidirectional_memcpy_ce",
    "device_to_device_memcpy_read_ce",
    "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
    "device_to_device_bidirectional_memcpy_write_ce",
    "all_to_host_memcpy_ce",
    "all_to_host_bidirectional_memcpy_ce",
    "host_to_all_memcpy_ce",
    "host_to_all_bidirectional_memcpy_ce",
    "all_to_one_write_ce",
    "all_to_one_read_ce",
    "one_to_all_write_ce",
    "one_to_all_read_ce",
    "host_to_device_memcpy_sm",
    "device_to_host_memcpy_sm",
    "host_to_device_bidirectional_memcpy_sm",
    "device_to_host_bidirectional_memcpy_sm",
    "device_to_device_memcpy_read_sm",
    "device_to_device_memcpy_write_sm",
    "device_to_device_bidirectional_memcpy_read_sm",
    "device_to_device_bidirectional_memcpy_write_sm",
    "all_to_host_memcpy_sm",
    "all_to_host_bidirectional_memcpy_sm",
    "host_to_all_memcpy_sm",
    "host_to_all_bidirectional_memcpy_sm",
    "all_to_one_write_sm",
    "all_to_one_read_sm",
    "one_to_all_write_sm",
    "one_to_all_read_sm",
    "host_device_latency_sm",
    "device_to_device_latency_sm",
    "device_local_copy",
    "multinode_device_to_device_memcpy_read_ce",
    "multinode_device_to_device_memcpy_write_ce",
    "multinode_device_to_device_bidirectional_memcpy_read_ce",
    "multinode_device_to_device_bidirectional_memcpy_write_ce",
    "multinode_device_to_device_memcpy_read_sm",
    "multinode_device_to_device_memcpy_write_sm",
    "multinode_device_to_device_bidirectional_memcpy_read_sm",
    "multinode_device_to_device_bidirectional_memcpy_write_sm",
    "multinode_device_to_device_all_to_one_write_sm",
    "multinode_device_to_device_all_from_one_read_sm",
    "multinode_device_to_device_broadcast_one_to_all_sm",
    "multinode_device_to_device_broadcast_all_to_all_sm",
    "multinode_bisect_write_ce",
)

STATUS_PASSED = "Passed"
STATUS_WAIVED = "Waived"
STATUS_ERROR = "Error"  # the testcase ran and threw (text "Error: <msg>")
STATUS_NOT_FOUND = "ERROR"  # nvbandwidth's status for an unknown name or index
STATUS_INCOMPLETE = "Incomplete"  # started, but the output ends before its matrix and SUM line

BIDIRECTIONAL_SUFFIXES = ("_read1", "_read2", "_write1", "_write2", "_total")

# Prefixes that log collectors put in front of every line: `kubectl logs --prefix`,
# `kubectl logs --timestamps`, `mpirun --tag-output`.
_LINE_PREFIX_RE = re.compile(
    r"^(?:\[pod/[^\]\s]+\]\s)?"
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)\s)?"
    r"(?:\[\d+,\d+\]<std(?:out|err)>:)?"
)
_RUNNING_RE = re.compile(r"^Running (\S+)\.\s*$")
_WAIVING_OLD_RE = re.compile(r"^Waiving (\S+)\.\s*$")  # nvbandwidth before v0.5
_WAIVED_RE = re.compile(r"^Waived:\s*(.*)$")
_ERROR_UPPER_RE = re.compile(r"^ERROR:\s*(.*)$")
_ERROR_RE = re.compile(r"^Error:\s*(.*)$")
_NOT_FOUND_RE = re.compile(r"Testcase (?:index )?(\S+) (?:not found!|out of bound!)")
# CU_ASSERT/CUDA_ASSERT print "[<error name>] <text> in expression ...", NVML_ASSERT "NVML_ERROR: [...]",
# ASSERT "ASSERT in expression ...": each one aborts the run (multinode: MPI_Abort).
_CUDA_ERROR_RE = re.compile(
    r"\[(?:CUDA_ERROR_[A-Z_]+|cudaError[A-Za-z]+)\]|NVML_ERROR: \[|^ASSERT in expression |MPI_ABORT was invoked"
    r"|\bCUDA error\b"
)
# Colour and cursor escapes (CSI sequences) a terminal or a log collector may put around a line.
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Testcases whose every matrix is N x N (GPU x GPU); bidirectional ones print three of them.
_SQUARE_RE = re.compile(r"device_to_device_(?:bidirectional_)?memcpy_(?:read|write)_(?:ce|sm)$")
_BIDIRECTIONAL_RE = re.compile(r"device_to_device_bidirectional_memcpy_(read|write)_(?:ce|sm)$")
_DESCRIPTION_RE = re.compile(r"^(?P<text>\S.*\((?P<unit>GB/s|ns)\))\s*$")
# multinode_bisect_write_ce is the one testcase whose description names no unit (multinode_testcases.cpp:
# "Bisect benchmarking, simultaneous write CE BW"); its N x 1 matrix is in GB/s like every CE copy.
_UNITLESS_DESCRIPTION_RE = re.compile(r"^(?P<text>Bisect benchmarking, .*\S)\s*$")
_SUM_RE = re.compile(r"^SUM (?P<key>\S+) (?P<value>\S+)\s*$")
_PERF_RE = re.compile(r"^&&&& PERF (?P<key>\S+) (?P<value>[-+0-9.eE]+|nan|inf)\s*(?P<unit>\S*)\s*$")
_STAT_RE = re.compile(r"^(?P<stat>MIN|MAX|AVG) (?P<key>\S+) (?P<value>\S+)\s*$")
_VERSION_RE = re.compile(r"^nvbandwidth Version: (\S+)")
_DRIVER_RE = re.compile(r"^Driver Version: (\S+)")
_CUDA_RE = re.compile(r"^CUDA Driver Version: (\d+)")
_PROCESS_RE = re.compile(
    r"^Process\s+(?P<rank>\d+) \((?P<host>[^)]*)\): device (?P<device>\d+): "
    r"(?P<name>.+) \((?P<pci>[0-9a-fA-F:.]+)\)\s*$"
)
_DEVICE_RE = re.compile(r"^Device (?P<device>\d+): (?P<name>.+) \((?P<pci>[0-9a-fA-F:.]+)\)\s*$")
_JSON_DEVICE_RE = re.compile(r"^(?P<device>\d+): (?P<name>.+) \((?P<pci>[0-9a-fA-F:.]+)\): \((?P<host>[^)]*)\)$")
_JSON_START_RE = re.compile(r'\{\s*"nvbandwidth"\s*:')
_CELL_RE = re.compile(r"^(?:N/A|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)$")


class NvbandwidthParseError(ValueError):
    """The text is not nvbandwidth output at all (nothing to judge)."""


@dataclass
class BandwidthMatrix:
    """One matrix as nvbandwidth printed it; ``None`` cells are ``N/A`` (not measured)."""

    key: str
    description: str
    unit: str
    rows: List[List[Cell]]
    row_labels: List[str] = field(default_factory=list)
    column_labels: List[str] = field(default_factory=list)
    reported_sum: Optional[float] = None
    damaged_rows: List[str] = field(default_factory=list)
    # Cells that are no bandwidth (inf, nan, negative, not a number), as "row R column C: 'text'"; None in rows.
    invalid_cells: List[str] = field(default_factory=list)

    @property
    def shape(self) -> Tuple[int, int]:
        return len(self.rows), (len(self.rows[0]) if self.rows else len(self.column_labels))

    def measured(self) -> List[Tuple[int, int, float]]:
        """Every measured cell as (row, column, value)."""
        return [(r, c, v) for r, row in enumerate(self.rows) for c, v in enumerate(row) if v is not None]

    def values(self) -> List[float]:
        """The measured values, row by row."""
        return [cell[2] for cell in self.measured()]

    @property
    def computed_sum(self) -> float:
        return sum(self.values())

    def sum_tolerance(self) -> float:
        """How far the cell total may drift from the printed SUM through the cells' rounding.

        Text cells carry 2 decimals (0.005 each); JSON cells carry 6 significant digits.
        """
        return 0.01 + sum(max(0.005, abs(v) * 5e-6) for v in self.values())

    def to_dict(self) -> Dict[str, Any]:
        values = self.values()
        return {
            "key": self.key,
            "description": self.description,
            "unit": self.unit,
            "matrix": [list(row) for row in self.rows],
            "row_labels": list(self.row_labels),
            "column_labels": list(self.column_labels),
            "sum": self.reported_sum,
            "min": min(values) if values else None,
            "max": max(values) if values else None,
            "mean": (sum(values) / len(values)) if values else None,
        }


@dataclass
class TestcaseResult:
    """One testcase of the output: its status and its matrices (three for bidirectional tests)."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    status: str
    message: str = ""
    matrices: List[BandwidthMatrix] = field(default_factory=list)
    # Why the testcase's output is damaged (a SUM line of another testcase, a bidirectional part missing).
    problems: List[str] = field(default_factory=list)

    def expected_parts(self) -> List[str]:
        """The matrix keys nvbandwidth prints for this testcase when it knows them (bidirectional: three)."""
        match = _BIDIRECTIONAL_RE.search(self.name)
        if not match:
            return []
        direction = match.group(1)
        return [f"{self.name}_{direction}1", f"{self.name}_{direction}2", f"{self.name}_total"]

    def matrix_named(self, part: Optional[str] = None) -> Optional[BandwidthMatrix]:
        """The matrix a verdict is about: ``part`` (e.g. ``total``, ``read1``) or the last one printed.

        For bidirectional tests the last one is ``_total``, the sum of both directions.
        """
        if not self.matrices:
            return None
        if part is None:
            return self.matrices[-1]
        for matrix in self.matrices:
            if matrix.key == self.name + "_" + part or (part == "main" and matrix.key == self.name):
                return matrix
        return None

    def parts(self) -> List[str]:
        return [m.key[len(self.name) + 1 :] if m.key.startswith(self.name + "_") else "main" for m in self.matrices]

    def to_dict(self) -> Dict[str, Any]:
        main = self.matrix_named()
        record: Dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "description": main.description if main else None,
            "unit": main.unit if main else None,
            "matrix": [list(row) for row in main.rows] if main else None,
            "sum": main.reported_sum if main else None,
        }
        if main:
            stats = main.to_dict()
            record.update({k: stats[k] for k in ("min", "max", "mean")})
        if len(self.matrices) > 1:
            record["matrices"] = {part: m.to_dict() for part, m in zip(self.parts(), self.matrices)}
        return record


@dataclass
class Device:
    """A GPU listed in the output header (single node: ``Device i``; multinode: ``Process i``)."""

    index: int
    device: int
    name: str
    pci_bus_id: str
    host: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "index": self.index,
            "device": self.device,
            "name": self.name,
            "pci_bus_id": self.pci_bus_id,
            "host": self.host,
        }


@dataclass
class NvbandwidthOutput:
    """Everything read from one nvbandwidth run."""

    format: str
    version: Optional[str] = None
    driver_version: Optional[str] = None
    cuda_version: Optional[int] = None
    devices: List[Device] = field(default_factory=list)
    testcases: Dict[str, TestcaseResult] = field(default_factory=dict)
    unnamed_waived: int = 0
    errors: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def clean_lines(content: str) -> List[str]:
    """The output's lines without carriage returns, ANSI escapes and per-line log prefixes (kubectl, mpirun)."""
    return [_LINE_PREFIX_RE.sub("", _ANSI_RE.sub("", line).rstrip("\r")) for line in content.splitlines()]


def _decode_json_documents(content: str) -> List[Optional[Dict[str, Any]]]:
    """Every ``{"nvbandwidth": ...}`` start in ``content``, in order: its document, or None where it does not decode.

    A start inside a document already read is no new document; the scan goes on after that document's end.
    """
    decoder = json.JSONDecoder()
    found: List[Optional[Dict[str, Any]]] = []
    end = 0
    for match in _JSON_START_RE.finditer(content):
        if match.start() < end:
            continue
        try:
            document, end = decoder.raw_decode(content, match.start())
        except (ValueError, RecursionError):
            found.append(None)
            continue
        if isinstance(document, dict) and isinstance(document.get("nvbandwidth"), dict):
            found.append(document)
    return found


def json_documents(content: str) -> List[Optional[Dict[str, Any]]]:
    """The nvbandwidth ``-j`` documents in ``content`` (logs may surround them), None for one that is cut off.

    Documents whose lines carry log prefixes (``kubectl logs --timestamps``) or colour escapes are read from
    the cleaned lines, when those read better.
    """
    if not _JSON_START_RE.search(content) and '"nvbandwidth"' not in content:
        return []
    raw = _decode_json_documents(content)
    if raw and raw[-1] is not None and None not in raw:
        return raw
    cleaned = _decode_json_documents("\n".join(clean_lines(content)))
    if cleaned and (cleaned[-1] is not None or sum(map(bool, cleaned)) > sum(map(bool, raw))):
        return cleaned
    return raw


def find_json_document(content: str) -> Optional[Dict[str, Any]]:
    """The last complete ``{"nvbandwidth": ...}`` document inside ``content``, or None.

    A log that holds a retried run holds several documents; the last one is the run that counts, as the
    text parser judges the last ``Running <testcase>.`` of a name.
    """
    complete = [document for document in json_documents(content) if document is not None]
    return complete[-1] if complete else None


def detect_format(content: str) -> str:
    """``json`` when the content holds an nvbandwidth ``-j`` document, else ``text``."""
    return "json" if find_json_document(content) is not None else "text"


def _cell_value(value: Any) -> Tuple[Cell, Optional[str]]:
    """A text token or JSON value as a cell, and why it is no bandwidth (inf, nan, negative, not a number)."""
    if value is None or value == "N/A":
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None, f"{value!r} is not a number"
    try:
        number = float(value)
    except ValueError:
        return None, f"{value!r} is not a number"
    if not math.isfinite(number):
        return None, f"{value!r} is not a finite number"
    if number < 0:
        return None, f"{value!r} is negative"
    return number, None


def _add_row(matrix: BandwidthMatrix, label: str, tokens: Sequence[Any]) -> None:
    cells: List[Cell] = []
    for column, token in enumerate(tokens):
        cell, problem = _cell_value(token)
        if problem:
            matrix.invalid_cells.append(f"row {label} column {column}: {problem}")
        cells.append(cell)
    matrix.row_labels.append(label)
    matrix.rows.append(cells)


def _split_row(line: str, columns: int) -> Optional[Tuple[str, List[str]]]:
    """A matrix row as (label, cells), or None when the line is not a row of ``columns`` cells.

    Cells are the last ``columns`` whitespace-separated tokens; whatever precedes them is the row
    label, which may itself hold spaces (``multinode_bisect_write_ce`` labels rows "40-> 4").
    """
    tokens = line.split()
    if len(tokens) < columns + 1:
        return None
    cells = tokens[-columns:]
    if not all(_CELL_RE.match(token) for token in cells):
        return None
    label = line[: len(line.rstrip())].rsplit(None, columns)[0].strip()
    return label, cells


def _ends_matrix(line: str) -> bool:
    return bool(
        _SUM_RE.match(line) or _PERF_RE.match(line) or _RUNNING_RE.match(line) or _description_of(line) is not None
    )


def _description_of(line: str) -> Optional[Tuple[str, str]]:
    """A matrix's description line as (text, unit), or None when the line is none."""
    match = _DESCRIPTION_RE.match(line)
    if match:
        return match.group("text"), match.group("unit")
    match = _UNITLESS_DESCRIPTION_RE.match(line)
    return (match.group("text"), "GB/s") if match else None


def _continues_matrix(lines: List[str], index: int, matrix: BandwidthMatrix, columns: int) -> bool:
    """Whether the first non-blank line from ``index`` on is a row of ``matrix`` (a blank line inside it)."""
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or _ends_matrix(lines[index]):
        return False
    return _split_row(lines[index], columns) is not None or lines[index].split()[0] == str(len(matrix.rows))


def _is_error_line(line: str) -> bool:
    return bool(
        _CUDA_ERROR_RE.search(line)
        or _ERROR_UPPER_RE.match(line)
        or _ERROR_RE.match(line)
        or _WAIVED_RE.match(line)
        or _WAIVING_OLD_RE.match(line)
    )


def _read_text_matrix(
    lines: List[str], start: int, description: str, unit: str, errors: Optional[List[str]] = None
) -> Tuple[BandwidthMatrix, int]:
    """Read the header and rows that follow a description line; return the matrix and the next index.

    An error line printed between the rows (``ERROR:``, ``[CUDA_ERROR_...]``, ``MPI_ABORT``, ``Waived:``)
    goes to ``errors``: it is no row, but the run it interrupts did not complete.
    """
    index = start
    matrix = BandwidthMatrix(key="", description=description, unit=unit, rows=[])
    # The header is the column labels (GPU indices); a log line before it is skipped.
    while index < len(lines):
        tokens = lines[index].split()
        if tokens and all(token.isdigit() for token in tokens):
            break
        if tokens and (
            _ends_matrix(lines[index]) or any(_CELL_RE.match(t) and ("." in t or t == "N/A") for t in tokens)
        ):
            return matrix, index  # no header: the output was cut right after the description
        if tokens and _is_error_line(lines[index].strip()) and errors is not None:
            errors.append(f"{lines[index].strip()} (printed before the matrix '{description}')")
        index += 1
    if index >= len(lines):
        return matrix, index
    header = lines[index].split()
    matrix.column_labels = header
    index += 1
    columns = len(header)
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            # Blank lines between the header and a row, or between rows, are skipped at once: the scan stays
            # linear in the blank lines, however many there are.
            following = index
            while following < len(lines) and not lines[following].strip():
                following += 1
            if _continues_matrix(lines, following, matrix, columns):
                index = following
                continue
            break
        if _ends_matrix(line):
            break
        row = _split_row(line, columns)
        if row is None:
            # A log line interleaved with the matrix (mpirun, ssh) is kept out of the cells; a line that
            # starts like a row of this matrix but lacks cells means the matrix itself is damaged.
            stripped = line.strip()
            if _is_error_line(stripped):
                if errors is not None:
                    errors.append(f"{stripped} (printed inside the matrix '{description}')")
            elif stripped.split()[0] == str(len(matrix.rows)):
                matrix.damaged_rows.append(stripped)
            index += 1
            continue
        _add_row(matrix, *row)
        index += 1
    return matrix, index


def parse_text(content: str) -> NvbandwidthOutput:
    """Parse nvbandwidth's text output (single node or multinode, one or several testcases)."""
    lines = clean_lines(content)
    output = NvbandwidthOutput(format="text")
    current: Optional[TestcaseResult] = None
    last_matrix: Optional[BandwidthMatrix] = None
    previous_line = ""
    runs = 1
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if _CUDA_ERROR_RE.search(stripped):
            output.errors.append(stripped)
        if match := _VERSION_RE.match(line):
            if output.testcases or output.devices:
                # A log of a retried run holds several runs: the last one is judged, as for JSON documents,
                # and one that is cut off fails rather than leaving an earlier pass standing.
                runs += 1
                output = NvbandwidthOutput(format="text", warnings=output.warnings)
                current, last_matrix = None, None
            output.version = match.group(1)
        elif match := _DRIVER_RE.match(line):
            output.driver_version = match.group(1)
        elif match := _CUDA_RE.match(line):
            output.cuda_version = int(match.group(1))
        elif match := _PROCESS_RE.match(line):
            output.devices.append(
                Device(
                    index=int(match.group("rank")),
                    device=int(match.group("device")),
                    name=match.group("name").strip(),
                    pci_bus_id=match.group("pci"),
                    host=match.group("host"),
                )
            )
        elif match := _DEVICE_RE.match(line):
            host = previous_line.strip() if not output.devices and " " not in previous_line.strip() else ""
            if output.devices and output.devices[-1].host:
                host = output.devices[-1].host
            output.devices.append(
                Device(
                    index=int(match.group("device")),
                    device=int(match.group("device")),
                    name=match.group("name").strip(),
                    pci_bus_id=match.group("pci"),
                    host=host,
                )
            )
        elif match := _RUNNING_RE.match(line):
            current = TestcaseResult(name=match.group(1), status=STATUS_INCOMPLETE)
            if current.name in output.testcases:
                # A log of a retried run: the last run of a testcase is the one judged, as for JSON documents.
                output.warnings.append(
                    f"testcase {current.name} ran more than once in this output: the last run is judged"
                )
            output.testcases[current.name] = current
            last_matrix = None
        elif match := _WAIVING_OLD_RE.match(line):
            output.testcases[match.group(1)] = TestcaseResult(name=match.group(1), status=STATUS_WAIVED)
            current = None
        elif match := _WAIVED_RE.match(line):
            # v0.8 prints a bare "Waived: " without the testcase's name.
            output.unnamed_waived += 1
            current = None
        elif match := _ERROR_UPPER_RE.match(line):
            message = match.group(1).strip()
            found = _NOT_FOUND_RE.search(message)
            if found:
                output.testcases[found.group(1)] = TestcaseResult(
                    name=found.group(1), status=STATUS_NOT_FOUND, message=message
                )
            else:
                output.errors.append(stripped)
            current = None
        elif match := _ERROR_RE.match(line):
            message = match.group(1).strip()
            if current is not None:
                current.status = STATUS_ERROR
                current.message = message
            else:
                output.errors.append(stripped)
        elif described := _description_of(line):
            matrix, index = _read_text_matrix(lines, index + 1, *described, output.errors)
            if current is None:
                output.warnings.append(
                    f"a matrix ({matrix.description}) appears outside any 'Running <testcase>.' line"
                )
                current = TestcaseResult(name="unnamed", status=STATUS_INCOMPLETE)
                output.testcases.setdefault(current.name, current)
            current.matrices.append(matrix)
            last_matrix = matrix
            previous_line = line
            continue
        elif (match := _SUM_RE.match(line)) or (match := _PERF_RE.match(line)):
            if last_matrix is not None and current is not None and last_matrix.reported_sum is None:
                key = match.group("key")
                last_matrix.key = key
                if current.name != "unnamed" and key != current.name and not key.startswith(current.name + "_"):
                    current.problems.append(
                        f"its matrix '{last_matrix.description}' ends in the SUM line of another testcase "
                        f"('{stripped}'): the output of two runs is mixed"
                    )
                reported, problem = _cell_value(match.group("value"))
                if problem or reported is None:
                    output.errors.append(f"unreadable SUM line: {stripped}")
                last_matrix.reported_sum = reported
                if current.status == STATUS_INCOMPLETE:
                    current.status = STATUS_PASSED
        elif _STAT_RE.match(line):
            pass  # -v statistics are recomputed from the cells
        previous_line = line
        index += 1

    for testcase in output.testcases.values():
        _finish_testcase(testcase)
    if runs > 1:
        output.warnings.append(f"the output holds {runs} nvbandwidth runs (a retried run): the last one is judged")
    return output


def _finish_testcase(testcase: TestcaseResult) -> None:
    """Mark a testcase incomplete when any of its matrices lacks cells or a SUM line, or a part is missing.

    A bidirectional device-to-device testcase is complete with its three matrices only (``_read1``,
    ``_read2``, ``_total``): a run cut after the first one must not be judged as if it were whole.
    """
    if testcase.status != STATUS_PASSED:
        return
    for matrix in testcase.matrices:
        if not matrix.rows or matrix.reported_sum is None:
            testcase.status = STATUS_INCOMPLETE
        if not matrix.key:
            matrix.key = testcase.name
    expected = testcase.expected_parts()
    keys = [matrix.key for matrix in testcase.matrices]
    if expected and keys != expected:
        missing = [key for key in expected if key not in keys]
        testcase.status = STATUS_INCOMPLETE
        testcase.message = f"it printed {', '.join(keys) or 'no matrix'}; nvbandwidth prints {', '.join(expected)}" + (
            f" (missing: {', '.join(missing)})" if missing else ""
        )


def _unit_of(description: str) -> str:
    described = _description_of(description.strip())
    return described[1] if described else ""


def parse_json(content: Union[str, Dict[str, Any]]) -> NvbandwidthOutput:
    """Parse nvbandwidth's ``-j`` document (a string that holds it, or the decoded dict).

    A document of the wrong shape (a testcase that is no object, a matrix that is no list of rows, a cell or
    ``sum`` that is no number) is read as far as it goes; what is wrong becomes a problem of its testcase or
    an error of the output, never an exception.
    """
    documents = [content] if isinstance(content, dict) else json_documents(content)
    complete = [document for document in documents if document is not None]
    document = complete[-1] if complete else None
    if document is None or not isinstance(document.get("nvbandwidth"), dict):
        raise NvbandwidthParseError('no {"nvbandwidth": ...} JSON document found')
    root = document["nvbandwidth"]
    output = NvbandwidthOutput(format="json")
    if documents[-1] is None:
        # Judging the earlier, complete document would pass a retry that never finished.
        output.errors.append(
            f"the output holds {len(documents)} nvbandwidth JSON documents and the last one is cut off "
            "(not valid JSON): the last run did not complete; rerun nvbandwidth"
        )
    elif len(documents) > 1:
        output.warnings.append(
            f"the output holds {len(documents)} nvbandwidth JSON documents (a retried run): the last one is judged"
        )
    output.version = root.get("version") if isinstance(root.get("version"), str) else None
    output.driver_version = root.get("Driver Version") if isinstance(root.get("Driver Version"), str) else None
    cuda = root.get("CUDA Runtime Version")
    output.cuda_version = cuda if isinstance(cuda, int) and not isinstance(cuda, bool) else None
    devices = root.get("GPU Device list")
    for position, entry in enumerate(devices if isinstance(devices, list) else []):
        text = str(entry)
        match = _JSON_DEVICE_RE.match(text) or _PROCESS_RE.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        output.devices.append(
            Device(
                index=int(groups.get("rank") or position),
                device=int(groups["device"]),
                name=groups["name"].strip(),
                pci_bus_id=groups["pci"],
                host=groups.get("host") or "",
            )
        )
    if root.get("error"):
        output.errors.append(str(root["error"]))
    if root.get("warning"):
        output.warnings.append(str(root["warning"]))
    entries = root.get("testcases") or []
    if not isinstance(entries, list):
        output.errors.append(f"'testcases' is {type(entries).__name__}, not a list of testcase objects")
        entries = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            output.errors.append(f"testcases entry {position} is not a testcase object: {str(entry)[:80]!r}")
            continue
        testcase = _json_testcase(entry)
        output.testcases[testcase.name] = testcase
    return output


def _json_testcase(entry: Dict[str, Any]) -> TestcaseResult:
    name = str(entry.get("name", "unnamed"))
    status = str(entry.get("status", ""))
    error = entry.get("error")
    testcase = TestcaseResult(name=name, status=status, message=str(error or ""))
    if error and status in (STATUS_PASSED, ""):
        testcase.status = STATUS_ERROR  # a testcase that reports an error did not pass, whatever its status says
    raw = entry.get("bandwidth_matrix")
    description = str(entry.get("bandwidth_description", "")).strip()
    if raw is not None and not (isinstance(raw, list) and all(isinstance(row, list) for row in raw)):
        testcase.problems.append(f"its bandwidth_matrix is not a list of rows: {str(raw)[:80]!r}")
        raw = None
    total, problem = (None, None) if entry.get("sum") is None else _cell_value(entry.get("sum"))
    if problem:
        testcase.problems.append(f"its sum is unreadable ({problem})")
    if raw:
        testcase.matrices = _split_json_matrix(name, description, raw, total)
    if testcase.status == STATUS_PASSED and (not raw or entry.get("sum") is None):
        testcase.status = STATUS_INCOMPLETE
    expected = testcase.expected_parts()
    keys = [matrix.key for matrix in testcase.matrices]
    if testcase.status == STATUS_PASSED and expected and keys != expected:
        testcase.status = STATUS_INCOMPLETE
        columns = max((len(row) for row in raw or []), default=0)
        testcase.message = (
            f"its bandwidth_matrix has {len(raw or [])} rows of {columns}; a bidirectional run appends its "
            f"three {columns}x{columns} matrices ({', '.join(expected)}) into {3 * columns} rows"
        )
    return testcase


def _json_matrix(key: str, description: str, unit: str, rows: List[List[Any]], reported: Cell) -> BandwidthMatrix:
    matrix = BandwidthMatrix(key=key, description=description, unit=unit, rows=[], reported_sum=reported)
    for number, row in enumerate(rows):
        _add_row(matrix, str(number), row)
    matrix.column_labels = [str(c) for c in range(max((len(row) for row in rows), default=0))]
    return matrix


def _split_json_matrix(name: str, description: str, rows: List[List[Any]], total: Cell) -> List[BandwidthMatrix]:
    """One JSON matrix, or the three N x N blocks a bidirectional testcase appends into 3N rows."""
    columns = len(rows[0])
    unit = _unit_of(description)
    if "bidirectional" in name and columns > 1 and len(rows) == 3 * columns:
        direction = "write" if "write" in name.split("bidirectional", 1)[1] else "read"
        blocks = []
        for number, suffix in enumerate([f"_{direction}1", f"_{direction}2", "_total"]):
            # JSON keeps only the last description (Total); name the parts like the text does.
            part = description if suffix == "_total" else re.sub(r"\bTotal\b", suffix[1:].title(), description)
            block = _json_matrix(name + suffix, part, unit, rows[number * columns : (number + 1) * columns], None)
            # JSON keeps only the total's sum: the parts are checked against the total cell by cell.
            block.reported_sum = total if suffix == "_total" else block.computed_sum
            blocks.append(block)
        return blocks
    return [_json_matrix(name, description, unit, rows, total)]


def parse_nvbandwidth(content: Union[str, Dict[str, Any]], output_format: str = "auto") -> NvbandwidthOutput:
    """Parse ``content`` as text or JSON (``output_format``: ``auto``, ``text`` or ``json``)."""
    if isinstance(content, dict):
        return parse_json(content)
    if output_format == "json" or (output_format == "auto" and detect_format(content) == "json"):
        return parse_json(content)
    return parse_text(content)


def parse_to_dict(content: Union[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """``{testcase name: {description, unit, matrix, sum, status, ...}}`` (the filter's shape)."""
    output = parse_nvbandwidth(content)
    return {name: testcase.to_dict() for name, testcase in output.testcases.items()}


# --------------------------------------------------------------------------------------------
# Judging
# --------------------------------------------------------------------------------------------


@dataclass
class Thresholds(bandwidth_rule.Thresholds):
    """The bandwidth rule's thresholds (``bandwidth_rule.Thresholds``) plus the GPU count the matrix must cover.

    The per-pair floor is ``min_gbps`` when above 0, else ``min_fraction_of_peak`` (0.85) x the NVLink peak
    (``peak_gbps``, or the GPU product's); every pair must also reach ``min_fraction_of_median`` (0.97) x the
    matrix's median. See plugins/module_utils/bandwidth_rule.py.
    """

    expected_gpus: Optional[int] = None


@dataclass
class Verdict:
    """The judgement of one testcase. ``errors`` mean the test did not really run (always fatal)."""

    testcase: Optional[str]
    matrix: Optional[BandwidthMatrix] = None
    errors: List[str] = field(default_factory=list)
    violations: List[str] = field(default_factory=list)
    failing_pairs: List[Dict[str, Any]] = field(default_factory=list)
    threshold_gbps: Optional[float] = None
    warnings: List[str] = field(default_factory=list)
    output: Optional[NvbandwidthOutput] = None
    judgement: Optional[Judgement] = None
    gpu_product: Optional[str] = None

    @property
    def passed(self) -> bool:
        return not self.errors and not self.violations

    @property
    def summary(self) -> str:
        """One line: why the output shows no completed run, or the bandwidth rule's verdict."""
        if self.errors:
            return "the nvbandwidth output does not show a completed run: " + "; ".join(self.errors)
        judged = self.judgement.violations if self.judgement else []
        own = [v for v in self.violations if v not in judged]  # e.g. the GPU count
        parts = own + ([self.judgement.summary] if self.judgement and self.judgement.summary else [])
        return "; ".join(parts)

    def to_result(self) -> Dict[str, Any]:
        """The module's return values (documented in the module's RETURN)."""
        matrix = self.matrix
        values = matrix.values() if matrix else []
        rows, columns = matrix.shape if matrix else (0, 0)
        output = self.output or NvbandwidthOutput(format="text")
        judgement = self.judgement
        return {
            "testcase": self.testcase,
            "testcases": list(output.testcases),
            "format": output.format,
            "version": output.version,
            "driver_version": output.driver_version,
            "description": matrix.description if matrix else None,
            "matrix_key": matrix.key if matrix else None,
            "unit": matrix.unit if matrix else None,
            "matrix": [list(r) for r in matrix.rows] if matrix else [],
            "row_labels": list(matrix.row_labels) if matrix else [],
            "row_pairs": judgement.row_pairs if judgement else None,
            "column_labels": list(matrix.column_labels) if matrix else [],
            "gpus": gpu_count(matrix) if matrix else 0,
            "devices": [d.to_dict() for d in output.devices],
            "sum": matrix.reported_sum if matrix else None,
            "min": min(values) if values else None,
            "max": max(values) if values else None,
            "mean": round(sum(values) / len(values), 6) if values else None,
            "measured_cells": len(values),
            "shape": [rows, columns],
            "threshold_gbps": self.threshold_gbps,
            "threshold_explanation": judgement.threshold_explanation if judgement else None,
            "gpu_product": self.gpu_product,
            "peak_gbps": judgement.peak_gbps if judgement else None,
            "min_fraction_of_peak": judgement.min_fraction_of_peak if judgement else None,
            "min_fraction_of_median": judgement.min_fraction_of_median if judgement else None,
            "median_gbps": judgement.median_gbps if judgement else None,
            "median_threshold_gbps": judgement.median_threshold_gbps if judgement else None,
            "reference": dict(judgement.reference) if judgement and judgement.reference else None,
            "references": [dict(r) for r in judgement.references] if judgement else [],
            "failing_pairs": [dict(p) for p in self.failing_pairs],
            "low_gpus": [dict(g) for g in judgement.low_gpus] if judgement else [],
            "failed_nodes": list(judgement.failed_nodes) if judgement else [],
            "summary": self.summary,
            "violations": list(self.violations),
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "passed": self.passed,
        }


def gpu_count(matrix: BandwidthMatrix) -> int:
    """GPUs a matrix covers: N for an N x N matrix, the columns for a host<->device 1 x N one."""
    rows, columns = matrix.shape
    return columns if rows <= 1 or rows == columns else max(rows, columns)


def _select_testcase(output: NvbandwidthOutput, testcase: Optional[str]) -> Tuple[Optional[TestcaseResult], List[str]]:
    found = list(output.testcases)
    waived_note = (
        f"; the output shows {output.unnamed_waived} 'Waived:' line(s): nvbandwidth waives multinode testcases "
        "run with fewer than 2 MPI ranks and peer testcases on GPUs without peer access"
        if output.unnamed_waived
        else ""
    )
    if testcase is None:
        waived_count = f", plus {output.unnamed_waived} waived" if output.unnamed_waived else ""
        if len(found) + output.unnamed_waived > 1:
            return None, [
                f"the output holds several testcases ({', '.join(found) or 'none by name'}"
                f"{waived_count}); "
                "set testcase to the one to judge"
            ]
        if not found:
            return None, [f"no testcase ran: no 'Running <testcase>.' line and no matrix in the output{waived_note}"]
        return output.testcases[found[0]], []
    if testcase in output.testcases:
        return output.testcases[testcase], []
    known = (
        ""
        if testcase in KNOWN_TESTCASES
        else f"; '{testcase}' is not an nvbandwidth v0.8 testcase name (nvbandwidth -l lists them)"
    )
    return None, [
        f"testcase {testcase} did not run: it is not in the output (found: {', '.join(found) or 'none'})"
        f"{waived_note}{known}"
    ]


def evaluate(
    output: NvbandwidthOutput,
    testcase: Optional[str] = None,
    thresholds: Optional[bandwidth_rule.Thresholds] = None,
    part: Optional[str] = None,
    gpu_product: Optional[str] = None,
    nodes: Optional[Sequence[str]] = None,
    gpus_per_node: Optional[int] = None,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
    product_references: Optional[Sequence[Mapping[str, Any]]] = None,
    baseline: Optional[bandwidth_rule.Baseline] = None,
) -> Verdict:
    """Judge ``testcase`` of ``output`` against ``thresholds`` with the bandwidth rule (``bandwidth_rule.judge``).

    ``errors`` (the test did not really run, or its output is damaged) and ``violations`` (a
    threshold missed) are kept apart so a caller can ignore violations but never errors.
    ``part`` picks one matrix of a bidirectional testcase (``total`` by default). ``gpu_product``
    (``nvidia.com/gpu.product``) picks the NVLink peak; GPU i lives on ``nodes[i // gpus_per_node]``, and
    without ``nodes`` on the host the output names for it (the ``Process N (host)`` lines). The product
    reference follows from ``gpu_product``, the testcase and the output's driver version (``product_references``
    tried first); ``baseline`` is the rack's earlier run.
    """
    thresholds = thresholds or Thresholds()
    verdict = Verdict(testcase=testcase, output=output, warnings=list(output.warnings), gpu_product=gpu_product)
    verdict.errors.extend(f"nvbandwidth reported an error: {line}" for line in output.errors)

    selected, problems = _select_testcase(output, testcase)
    verdict.errors.extend(problems)
    for name, other in output.testcases.items():
        if selected is not None and name != selected.name and other.status != STATUS_PASSED:
            verdict.warnings.append(f"testcase {name}: {other.status} {other.message}".rstrip())
    if selected is None:
        return verdict
    verdict.testcase = selected.name
    if output.unnamed_waived:
        verdict.warnings.append(f"{output.unnamed_waived} other testcase(s) of this run were waived")

    if selected.status in (STATUS_NOT_FOUND, "Not Found"):
        said = f" (it printed: ERROR: {selected.message})" if selected.message else ""
        verdict.errors.append(
            f"testcase {selected.name} is unknown to this nvbandwidth{said}; use a name from 'nvbandwidth -l' "
            "(multinode testcases need a build with -DMULTINODE=1)"
        )
        return verdict
    if selected.status == STATUS_WAIVED:
        verdict.errors.append(
            f"testcase {selected.name} was waived, not run: multinode testcases need 2 or more MPI ranks in one "
            "NVLink clique, peer testcases need 2 or more GPUs with peer access"
        )
        return verdict
    if selected.status == STATUS_ERROR:
        verdict.errors.append(f"testcase {selected.name} failed inside nvbandwidth: Error: {selected.message}")
        return verdict

    verdict.errors.extend(f"testcase {selected.name}: {problem}" for problem in selected.problems)
    matrix = selected.matrix_named(part)
    if matrix is None:
        if part is not None and selected.matrices:
            verdict.errors.append(
                f"testcase {selected.name} has no '{part}' matrix (it has: {', '.join(selected.parts())})"
            )
        else:
            verdict.errors.append(
                f"testcase {selected.name} started but printed no matrix: the output is truncated or the run "
                "aborted; read the launcher and worker logs"
            )
        return verdict
    verdict.matrix = matrix

    if selected.status != STATUS_PASSED:
        if selected.expected_parts() and selected.message:
            verdict.errors.append(
                f"testcase {selected.name} is incomplete: {selected.message}; the output is truncated or the run "
                "aborted"
            )
            return verdict
        missing = "SUM line" if matrix.rows else "matrix"
        verdict.errors.append(
            f"testcase {selected.name} has no {missing} for {matrix.key or selected.name}: the output is truncated "
            f"(status {selected.status}); the run did not finish"
        )
        return verdict
    if matrix.unit != "GB/s":
        verdict.errors.append(
            f"testcase {selected.name} reports {matrix.unit or 'an unknown unit'} ('{matrix.description}'), "
            "not bandwidth in GB/s: latency testcases cannot be judged against GB/s thresholds; "
            "run a *_memcpy_* testcase"
        )
    if not matrix.measured() and not matrix.invalid_cells:
        verdict.errors.append(
            f"testcase {selected.name} measured nothing: every cell is N/A (no peer access between the GPUs)"
        )
    # Every matrix of the testcase must be whole, not only the one judged: a bidirectional run whose Read1 is
    # damaged did not measure what its Total claims.
    for each in selected.matrices:
        verdict.errors.extend(_matrix_problems(selected, each))
    verdict.errors.extend(_parts_problems(selected))
    if verdict.errors:
        return verdict

    if not nodes:
        nodes, gpus_per_node = _hosts_of(output, matrix)
    references = {"testcase": selected.name, "driver_version": output.driver_version}
    references.update(product_references=product_references, baseline=baseline)
    _check_thresholds(verdict, matrix, thresholds, gpu_product, nodes, gpus_per_node, peak_table, references)
    directions = [m for m in selected.matrices if m.key in selected.expected_parts()[:2]]
    if len(directions) == 2:
        verdict.violations.extend(bandwidth_rule.direction_violations(directions, thresholds.min_fraction_of_median))
    return verdict


def _matrix_problems(testcase: TestcaseResult, matrix: BandwidthMatrix) -> List[str]:
    """Why one matrix is damaged: a damaged row, a cell that is no bandwidth, a missing row, a SUM that disagrees."""
    problems = [f"matrix {matrix.key} has a damaged row: '{damaged}'" for damaged in matrix.damaged_rows]
    if matrix.invalid_cells:
        shown = "; ".join(matrix.invalid_cells[:3])
        more = f"; and {len(matrix.invalid_cells) - 3} more" if len(matrix.invalid_cells) > 3 else ""
        problems.append(f"matrix {matrix.key} has cells that are no bandwidth: {shown}{more}")
    rows, columns = len(matrix.rows), len(matrix.column_labels)
    widths = sorted({len(row) for row in matrix.rows})
    if len(widths) > 1:
        problems.append(f"matrix {matrix.key} has rows of {', '.join(map(str, widths))} cells: rows are damaged")
    elif _SQUARE_RE.search(testcase.name) and not rows == columns == (widths[0] if widths else 0):
        problems.append(
            f"matrix {matrix.key} has {rows} rows of {widths[0] if widths else 0} cells under {columns} columns; "
            f"{testcase.name} measures every GPU pair (N x N): rows are missing or doubled"
        )
    labels = matrix.row_labels
    if labels and all(label.isdigit() for label in labels) and labels != [str(n) for n in range(len(labels))]:
        problems.append(
            f"matrix {matrix.key} has the rows {', '.join(labels)}, expected 0 to {len(labels) - 1} in order: "
            "rows are missing or doubled"
        )
    computed, reported = matrix.computed_sum, matrix.reported_sum
    if reported is not None and not (math.isfinite(computed) and abs(computed - reported) <= matrix.sum_tolerance()):
        problems.append(
            f"matrix {matrix.key} is inconsistent: its cells add up to {computed:.2f} but the SUM line "
            f"says {reported:.2f}; rows are missing or damaged"
        )
    return problems


def _parts_problems(testcase: TestcaseResult) -> List[str]:
    """A bidirectional testcase's Total must be Read1 + Read2 cell by cell (nvbandwidth adds them up)."""
    expected = testcase.expected_parts()
    parts = {matrix.key: matrix for matrix in testcase.matrices}
    if not expected or any(key not in parts for key in expected):
        return []
    first, second, total = (parts[key] for key in expected)
    widths = [[len(row) for row in matrix.rows] for matrix in (first, second, total)]
    if not first.rows or not (widths[0] == widths[1] == widths[2]):
        return [
            f"the matrices of {testcase.name} differ in shape ({first.shape}, {second.shape}, {total.shape}): "
            "the output is damaged"
        ]
    wrong = []
    for r, row in enumerate(total.rows):
        for c, cell in enumerate(row):
            one, two = first.rows[r][c], second.rows[r][c]
            if cell is None and one is None and two is None:
                continue
            if cell is None or one is None or two is None or abs(cell - (one + two)) > 0.02 + 1e-5 * abs(cell):
                wrong.append(f"{r}->{c}: {_shown(one)} + {_shown(two)} is not {_shown(cell)}")
    if not wrong:
        return []
    more = f"; and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    return [
        f"matrix {total.key} is not the sum of {first.key} and {second.key} "
        f"({'; '.join(wrong[:3])}{more}): the output is damaged"
    ]


def _shown(cell: Cell) -> str:
    return "N/A" if cell is None else f"{cell:.2f}"


def _hosts_of(output: NvbandwidthOutput, matrix: BandwidthMatrix) -> Tuple[Optional[List[str]], Optional[int]]:
    """The host of each GPU of the matrix, from the output's device list (one entry per GPU), or none."""
    gpus = gpu_count(matrix)
    by_index = {device.index: device.host for device in output.devices}
    hosts = [by_index.get(gpu) or "" for gpu in range(gpus)]
    if gpus and all(hosts):
        return hosts, 1
    return None, None


def _check_thresholds(
    verdict: Verdict,
    matrix: BandwidthMatrix,
    thresholds: bandwidth_rule.Thresholds,
    gpu_product: Optional[str],
    nodes: Optional[Sequence[str]],
    gpus_per_node: Optional[int],
    peak_table: Optional[Sequence[Mapping[str, Any]]],
    references: Optional[Mapping[str, Any]] = None,
) -> None:
    expected = getattr(thresholds, "expected_gpus", None)
    gpus = gpu_count(matrix)
    if expected is not None and gpus != expected:
        rows, columns = matrix.shape
        verdict.violations.append(
            f"the matrix covers {gpus} GPUs ({rows}x{columns}), expected {expected}: "
            "check the MPI rank count (-np), slots per worker and GPUs per node"
        )
    judgement = bandwidth_rule.judge(
        matrix, thresholds, gpu_product, gpus_per_node, nodes, peak_table=peak_table, **dict(references or {})
    )
    verdict.judgement = judgement
    verdict.warnings.extend(judgement.warnings)
    verdict.threshold_gbps = judgement.threshold_gbps
    verdict.failing_pairs = sorted(judgement.failing_pairs, key=lambda p: (p["src"], p["dst"]))
    verdict.violations.extend(judgement.violations)


def check_nvbandwidth(
    content: Union[str, Dict[str, Any]],
    testcase: Optional[str] = None,
    thresholds: Optional[Thresholds] = None,
    output_format: str = "auto",
    part: Optional[str] = None,
    gpu_product: Optional[str] = None,
    nodes: Optional[Sequence[str]] = None,
    gpus_per_node: Optional[int] = None,
    peak_table: Optional[Sequence[Mapping[str, Any]]] = None,
    product_references: Optional[Sequence[Mapping[str, Any]]] = None,
    baseline: Optional[bandwidth_rule.Baseline] = None,
) -> Verdict:
    """Parse ``content`` and judge it: the one call the module makes (arguments as for ``evaluate``)."""
    if isinstance(content, str) and not content.strip():
        verdict = Verdict(testcase=testcase)
        verdict.errors.append("the nvbandwidth output is empty: the launcher printed nothing (did the job run?)")
        return verdict
    try:
        output = parse_nvbandwidth(content, output_format)
    except NvbandwidthParseError as exc:
        verdict = Verdict(testcase=testcase)
        verdict.errors.append(f"{exc}: the content is not nvbandwidth -j output; use format=text or auto")
        return verdict
    return evaluate(
        output,
        testcase=testcase,
        thresholds=thresholds,
        part=part,
        gpu_product=gpu_product,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        peak_table=peak_table,
        product_references=product_references,
        baseline=baseline,
    )
