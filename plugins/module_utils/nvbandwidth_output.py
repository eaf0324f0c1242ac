# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What one nvbandwidth run printed, as records: its devices, testcases and bandwidth matrices.

Both parsers (``nvbandwidth_text`` for the text output, ``nvbandwidth_json`` for ``-j``) fill these records;
``nvbandwidth`` judges them. Text layout, as printed by nvbandwidth's ``PeerValueMatrix`` stream operator
(v0.7/v0.8)::

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
standard library is used: the parsers run on GPU hosts as well as on the controller.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

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
# Colour and cursor escapes (CSI sequences) a terminal or a log collector may put around a line.
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Bidirectional device-to-device testcases print three N x N matrices (GPU x GPU).
_BIDIRECTIONAL_RE = re.compile(r"device_to_device_bidirectional_memcpy_(read|write)_(?:ce|sm)$")
_DESCRIPTION_RE = re.compile(r"^(?P<text>\S.*\((?P<unit>GB/s|ns)\))\s*$")
# multinode_bisect_write_ce is the one testcase whose description names no unit (multinode_testcases.cpp:
# "Bisect benchmarking, simultaneous write CE BW"); its N x 1 matrix is in GB/s like every CE copy.
_UNITLESS_DESCRIPTION_RE = re.compile(r"^(?P<text>Bisect benchmarking, .*\S)\s*$")
# A multinode run lists its GPUs as "Process <rank> (<host>): device <n>: <name> (<PCI bus id>)", in both forms.
PROCESS_RE = re.compile(
    r"^Process\s+(?P<rank>\d+) \((?P<host>[^)]*)\): device (?P<device>\d+): "
    r"(?P<name>.+) \((?P<pci>[0-9a-fA-F:.]+)\)\s*$"
)


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

    def add_row(self, label: str, tokens: Sequence[Any]) -> None:
        """Append a row of text tokens or JSON values; a cell that is no bandwidth is None and noted."""
        cells: List[Cell] = []
        for column, token in enumerate(tokens):
            cell, problem = cell_value(token)
            if problem:
                self.invalid_cells.append(f"row {label} column {column}: {problem}")
            cells.append(cell)
        self.row_labels.append(label)
        self.rows.append(cells)

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


def gpu_product_of(devices: Sequence[Device]) -> Tuple[Optional[str], Optional[str]]:
    """The GPU product the output's device lines name, as the ``nvidia.com/gpu.product`` label spells it, and a
    note when they name several.

    nvbandwidth prints each GPU's CUDA name (``Process 0 (host): device 0: NVIDIA GB200 (...)``, ``Device 0:
    NVIDIA H200 (...)``, JSON ``0: NVIDIA H200 (...): (host)``); the GPU feature discovery labels a node with the
    same name, spaces replaced by ``-`` (``NVIDIA-GB200``). (None, None) without device lines.
    """
    names = sorted({"-".join(device.name.split()) for device in devices if device.name.strip()})
    if len(names) == 1:
        return names[0], None
    if not names:
        return None, None
    return None, (
        f"the output's device lines name several GPU products ({', '.join(names)}): no product reference is read "
        "from them; set gpu_product"
    )


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


def clean_lines(content: str) -> List[str]:
    """The output's lines without carriage returns, ANSI escapes and per-line log prefixes (kubectl, mpirun)."""
    return [_LINE_PREFIX_RE.sub("", _ANSI_RE.sub("", line).rstrip("\r")) for line in content.splitlines()]


def cell_value(value: Any) -> Tuple[Cell, Optional[str]]:
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


def description_of(line: str) -> Optional[Tuple[str, str]]:
    """A matrix's description line as (text, unit), or None when the line is none."""
    match = _DESCRIPTION_RE.match(line)
    if match:
        return match.group("text"), match.group("unit")
    match = _UNITLESS_DESCRIPTION_RE.match(line)
    return (match.group("text"), "GB/s") if match else None
