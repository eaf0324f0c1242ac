# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write nvbandwidth text output the way nvbandwidth v0.8 does, for inputs no machine here can produce.

A line-for-line port of the emitters in NVIDIA/nvbandwidth v0.8: ``output.cpp``
(``addVersionInfo``, ``addCudaAndDriverInfo``, ``printGPUsMultinode``/``printGPUs``, ``addTestcase``,
``addTestcaseResults``) and the ``PeerValueMatrix`` stream operator in ``inline_common.h``
(row-label width max(2, longest label), every column ``setw(10)``, cells ``std::fixed``
``setprecision(2)``, ``N/A`` for a missing value, a blank line, ``SUM <key> <sum>``). The real
captures in tests/fixtures/nvbandwidth have exactly this layout; test_nvbandwidth checks that the
emitter reproduces one of them byte for byte. ``emit_generated_rack`` writes the generated 72-GPU
fixture (run this file to rewrite it).
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

NOTE = (
    "NOTE: The reported results may not reflect the full capabilities of the platform.\n"
    "Performance can vary with software drivers, hardware clocks, and system topology.\n"
)
MPI_VERSION = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
READ_DESCRIPTION = "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"


@dataclass
class Matrix:
    key: str
    description: str
    rows: List[List[Optional[float]]]
    row_labels: Optional[List[str]] = None
    column_labels: Optional[List[str]] = None
    # nvbandwidth sums the unrounded values; a capture's SUM can differ from the rounded cells' total.
    reported_sum: Optional[float] = None


@dataclass
class Testcase:
    __test__ = False  # a record, not a pytest class

    name: str
    matrices: List[Matrix] = field(default_factory=list)
    status: str = "Running"  # or "Waived", or "Error" (with message), or "ERROR" (unknown name)
    message: str = ""


def emit_matrix(matrix: Matrix) -> str:
    """``output->addTestcaseResults(matrix, description)``."""
    width = max([2] + [len(label) for label in matrix.row_labels or []])
    columns = len(matrix.rows[0])
    lines = [matrix.description]
    labels = matrix.column_labels or [str(c) for c in range(columns)]
    lines.append(" " * width + "".join(f"{label:>10}" for label in labels))
    total = 0.0
    for r, row in enumerate(matrix.rows):
        label = f"{matrix.row_labels[r]:>{width}}" if matrix.row_labels else f"{r:>2}"
        cells = "".join(f"{'N/A':>10}" if v is None else f"{v:>10.2f}" for v in row)
        lines.append(label + cells)
        total += sum(v for v in row if v is not None)
    lines.append("")
    total = total if matrix.reported_sum is None else matrix.reported_sum
    lines.append(f"SUM {matrix.key} {total:.2f}")
    return "\n".join(lines) + "\n\n"


def padded_process_id(index: int, world_size: int) -> str:
    """``getPaddedProcessId``: right-aligned to the digits of world_size - 1."""
    width = int(math.log10(world_size - 1)) + 1 if world_size > 1 else 1
    return f"{index:>{width}}"


def emit_run(
    testcases: Sequence[Testcase],
    hosts: Optional[Sequence[str]] = None,
    gpus_per_host: int = 4,
    gpu_name: str = "NVIDIA GB200",
    single_node_gpus: int = 0,
    version: str = "v0.8",
    driver: str = "580.95.05",
) -> str:
    """A whole run: multinode when ``hosts`` is given (one rank per GPU), else single node."""
    out = [f"nvbandwidth Version: {version}\n", f"Built from Git version: {version}\n\n"]
    if hosts:
        out.append(f"MPI version: {MPI_VERSION}\n")
    out.append(f"CUDA Runtime Version: 13000\nCUDA Driver Version: 13000\nDriver Version: {driver}\n\n")
    buses = ["00000008:01:00", "00000009:01:00", "00000018:01:00", "00000019:01:00"]
    if hosts:
        world = len(hosts) * gpus_per_host
        for rank in range(world):
            host, device = hosts[rank // gpus_per_host], rank % gpus_per_host
            bus = buses[device % len(buses)]
            out.append(f"Process {padded_process_id(rank, world)} ({host}): device {device}: {gpu_name} ({bus})\n")
        out.append("\n")
    else:
        out.append("gpu-host\n")
        for device in range(single_node_gpus):
            out.append(f"Device {device}: {gpu_name} (00000000:00:{device + 6:02x})\n")
        out.append("\n")
    for testcase in testcases:
        if testcase.status == "ERROR":
            out.append(f"ERROR: Testcase {testcase.name} not found!\n")
            continue
        if testcase.status == "Waived":
            out.append("Waived: \n")
            continue
        out.append(f"Running {testcase.name}.\n")
        for matrix in testcase.matrices:
            out.append(emit_matrix(matrix))
        if testcase.status == "Error":
            out.append(f"Error: {testcase.message}\n")
    out.append(NOTE)
    return "".join(out)


def uniform_peer_matrix(gpus: int, value: float, step: float = 0.01) -> List[List[Optional[float]]]:
    """An N x N read matrix with N/A on the diagonal and values near ``value`` (deterministic)."""
    return [
        [None if r == c else round(value + step * ((r * 7 + c * 3) % 11 - 5), 2) for c in range(gpus)]
        for r in range(gpus)
    ]


# The generated 72-GPU rack (tests/fixtures/nvbandwidth/generated-*): 18 GB200 trays x 4 GPUs, one MPI rank per
# GPU, laid out like the real 2-tray capture (nvbandwidth v0.7, driver 580.95.05, worker pods as hosts), each
# cell drawn uniformly from the real capture's range of cells with a fixed seed and rounded as nvbandwidth prints.
MN_READ = "multinode_device_to_device_memcpy_read_ce"
GENERATED_RACK_FIXTURE = "generated-gb200-18node-multinode_device_to_device_memcpy_read_ce.txt"
GENERATED_RACK_SEED = 20260105
GENERATED_RACK_TRAYS = 18
GENERATED_RACK_GPUS_PER_TRAY = 4
REAL_GB200_RANGE = (820.35, 822.16)  # min and max cell of gb200-2node-multinode_device_to_device_memcpy_read_ce.txt


def generated_rack_hosts(trays: int = GENERATED_RACK_TRAYS) -> List[str]:
    """The MPI worker pods, as the real capture names its hosts."""
    return [f"nvbandwidth-test-worker-{tray}" for tray in range(trays)]


def generated_rack_rows(
    trays: int = GENERATED_RACK_TRAYS,
    gpus_per_tray: int = GENERATED_RACK_GPUS_PER_TRAY,
    seed: int = GENERATED_RACK_SEED,
    value_range: Sequence[float] = REAL_GB200_RANGE,
) -> List[List[Optional[float]]]:
    """An N x N read matrix, N/A on the diagonal, cells uniform in ``value_range`` (2 decimals), row by row."""
    draw = random.Random(seed)
    gpus = trays * gpus_per_tray
    low, high = value_range
    return [[None if r == c else round(draw.uniform(low, high), 2) for c in range(gpus)] for r in range(gpus)]


def emit_generated_rack(rows: Optional[List[List[Optional[float]]]] = None) -> str:
    """The generated rack's whole launcher output (``rows`` replaces the generated cells, e.g. a degraded copy)."""
    rows = generated_rack_rows() if rows is None else rows
    testcase = Testcase(MN_READ, [Matrix(MN_READ, READ_DESCRIPTION, rows)])
    return emit_run(
        [testcase], hosts=generated_rack_hosts(), gpus_per_host=GENERATED_RACK_GPUS_PER_TRAY, version="v0.7"
    )


if __name__ == "__main__":
    # python tests/unit/plugins/module_utils/nvbandwidth_emitter.py: (re)write the generated fixture.
    target = Path(__file__).resolve().parents[3] / "fixtures" / "nvbandwidth" / GENERATED_RACK_FIXTURE
    target.write_text(emit_generated_rack())
    sys.stdout.write(f"wrote {target}\n")
