# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container logs of the simulated rack, generated from real outputs (``sim/fixtures/``).

* the IMEX channel injection pod's ``ls -la /dev/nvidia-caps-imex-channels``;
* the nvbandwidth launcher's output, scaled to the job's ranks (workers x slots) in the text
  emitter's exact layout, its cells cycled from the measured GB200 matrix;
* an nccl-tests ``all_reduce_perf`` table for jobs that run it;
* the CRI log format that kwok serves through ``kubectl logs``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Optional

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NVBANDWIDTH_FIXTURE = FIXTURES / "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt"
IMEX_LISTING_FIXTURE = FIXTURES / "imex-channel-injection-pod.log"

DEFAULT_TESTCASE = "multinode_device_to_device_memcpy_read_ce"
MULTINODE_TESTCASES = (
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
NOTE = (
    "NOTE: The reported results may not reflect the full capabilities of the platform.\n"
    "Performance can vary with software drivers, hardware clocks, and system topology."
)


@dataclass(frozen=True)
class NvbandwidthFixture:
    """What the real GB200 run gives us to build other runs from."""

    preamble: list[str]  # version lines up to (not including) the first "Process" line
    device_name: str
    pci_ids: list[str]  # per local device index
    cells: list[str]  # measured off-diagonal cells, row-major, as printed
    sum_text: str


@lru_cache(maxsize=1)
def load_nvbandwidth_fixture(path: Path = NVBANDWIDTH_FIXTURE) -> NvbandwidthFixture:
    lines = path.read_text().splitlines()
    first_process = next(i for i, line in enumerate(lines) if line.startswith("Process "))
    pci: dict[int, str] = {}
    name = ""
    for line in lines:
        m = re.match(r"Process +\d+ \([^)]*\): device (\d+): (.+) \(([0-9a-fA-F:]+)\)$", line)
        if m:
            pci[int(m.group(1))] = m.group(3)
            name = m.group(2)
    start = next(i for i, line in enumerate(lines) if line.startswith("memcpy CE"))
    cells: list[str] = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells.extend(tok for tok in line.split()[1:] if tok != "N/A")
    sum_line = next(line for line in lines if line.startswith("SUM "))
    return NvbandwidthFixture(
        preamble=lines[:first_process],
        device_name=name,
        pci_ids=[pci[i] for i in sorted(pci)],
        cells=cells,
        sum_text=sum_line.split()[-1],
    )


@dataclass
class NvbandwidthRun:
    """One simulated launcher run."""

    hostnames: list[str]  # one entry per rank (MPI process)
    local_devices: list[int]  # local device index per rank
    testcase: str = DEFAULT_TESTCASE
    degraded: dict[tuple[int, int], float] = field(default_factory=dict)  # (src, dst) -> GB/s printed
    failure: Optional[str] = None  # None, or a short reason that ends the run with a CUDA/MPI error
    gpu_factors: dict[int, float] = field(default_factory=dict)  # rank -> factor on its row and column


def daemon_lost_lines(lost: str, hostnames: list[str]) -> list[str]:
    """What Open MPI's mpirun prints when the ORTE daemon of a node dies under it (``<pod>@<tray>``)."""
    worker = lost.split("@", 1)[0]
    hosts = list(dict.fromkeys(hostnames))
    index = hosts.index(worker) + 1 if worker in hosts else len(hosts)
    launcher = worker.rsplit("-worker-", 1)[0] + "-launcher"
    return [
        "--------------------------------------------------------------------------",
        "ORTE has lost communication with a remote daemon.",
        "",
        f"  HNP daemon   : [[40123,0],0] on node {launcher}",
        f"  Remote daemon: [[40123,0],{index}] on node {worker}",
        "",
        "This is usually due to either a failure of the TCP network",
        "connection to the node, or possibly an internal failure of",
        "the daemon itself. We cannot recover from this failure, and",
        "therefore will terminate the job.",
        "--------------------------------------------------------------------------",
    ]


def ranks_for(mpijob: str, workers: int, slots: int) -> tuple[list[str], list[int]]:
    """Hostnames and local devices of ``workers x slots`` ranks, mapped by node like ``ppr:<slots>:node``."""
    hostnames = [f"{mpijob}-worker-{w}" for w in range(workers) for _ in range(slots)]
    devices = [s for _ in range(workers) for s in range(slots)]
    return hostnames, devices


def _padded(rank: int, world: int) -> str:
    width = int(math.log10(world - 1)) + 1 if world > 1 else 1
    return str(rank).rjust(width)


def _description(testcase: str) -> str:
    engine = "SM" if testcase.endswith("_sm") else "CE"
    arrow = "<-" if "_write_" in testcase else "->"
    return f"memcpy {engine} GPU(row) {arrow} GPU(column) bandwidth (GB/s)"


def bandwidth_matrix(
    world: int,
    degraded: dict[tuple[int, int], float],
    gpu_factors: Optional[dict[int, float]] = None,
) -> list[list[Optional[str]]]:
    """``world x world`` cells as printed: measured values cycled row-major, ``None`` on the diagonal.

    ``gpu_factors`` scales every cell of a GPU's row and column (a GPU that lost NVLinks); a cell
    between two such GPUs takes the lower factor: a copy crosses the source's links, the NVLink switches
    and the destination's links, and the slower end bounds it. ``degraded`` sets single cells and wins
    over both.
    """
    fx = load_nvbandwidth_fixture()
    factors = gpu_factors or {}
    matrix: list[list[Optional[str]]] = []
    k = 0
    for r in range(world):
        row: list[Optional[str]] = []
        for c in range(world):
            if r == c:
                row.append(None)
                continue
            cell = fx.cells[k % len(fx.cells)]
            k += 1
            if (r, c) in degraded:
                cell = f"{degraded[(r, c)]:.2f}"
            elif r in factors or c in factors:
                cell = f"{float(cell) * min(factors.get(r, 1.0), factors.get(c, 1.0)):.2f}"
            row.append(cell)
        matrix.append(row)
    return matrix


BISECT_TESTCASE = "multinode_bisect_write_ce"
BISECT_DESCRIPTION = "Bisect benchmarking, simultaneous write CE BW"


def bisect_peer(rank: int, world: int) -> int:
    """The GPU that rank writes to in multinode_bisect_write_ce (nvbandwidth multinode_testcases.cpp)."""
    return (rank + world // 2) % world


def bisect_column(
    world: int,
    degraded: dict[tuple[int, int], float],
    gpu_factors: Optional[dict[int, float]] = None,
) -> list[list[Optional[str]]]:
    """``world x 1`` cells: row i is GPU i writing to its peer, every GPU at once.

    A GPU that lost links slows both the row it writes in and the row that writes to it (the slower end
    bounds a copy, as in ``bandwidth_matrix``); ``degraded`` sets the cell of a (src, peer) pair.
    """
    fx = load_nvbandwidth_fixture()
    factors = gpu_factors or {}
    column: list[list[Optional[str]]] = []
    for rank in range(world):
        peer = bisect_peer(rank, world)
        cell = fx.cells[rank % len(fx.cells)]
        if (rank, peer) in degraded:
            cell = f"{degraded[(rank, peer)]:.2f}"
        elif rank in factors or peer in factors:
            cell = f"{float(cell) * min(factors.get(rank, 1.0), factors.get(peer, 1.0)):.2f}"
        column.append([cell])
    return column


def render_bisect(column: list[list[Optional[str]]]) -> list[str]:
    """As nvbandwidth prints a matrix with row labels: the label column as wide as the widest label."""
    world = len(column)
    labels = [f"{_padded(rank, world)}->{_padded(bisect_peer(rank, world), world)}" for rank in range(world)]
    width = max([2, *(len(label) for label in labels)])
    out = [" " * width + f"{0:>10}"]
    out.extend(f"{label:>{width}}" + f"{'N/A' if row[0] is None else row[0]:>10}" for label, row in zip(labels, column))
    return out


def matrix_sum(matrix: list[list[Optional[str]]]) -> str:
    fx = load_nvbandwidth_fixture()
    flat = [cell for row in matrix for cell in row if cell is not None]
    if flat == fx.cells:
        return fx.sum_text  # the real run's SUM was taken before rounding the cells
    return f"{sum(float(cell) for cell in flat):.2f}"


def render_matrix(matrix: list[list[Optional[str]]]) -> list[str]:
    world = len(matrix)
    out = ["  " + "".join(f"{c:>10}" for c in range(world))]
    for r, row in enumerate(matrix):
        out.append(f"{r:>2}" + "".join(f"{'N/A' if cell is None else cell:>10}" for cell in row))
    return out


def nvbandwidth_text(run: NvbandwidthRun) -> str:
    """The launcher's stdout, line for line as nvbandwidth v0.7 prints it under mpirun."""
    fx = load_nvbandwidth_fixture()
    world = len(run.hostnames)
    lines = list(fx.preamble)
    for rank, (host, dev) in enumerate(zip(run.hostnames, run.local_devices)):
        pci = fx.pci_ids[dev % len(fx.pci_ids)]
        lines.append(f"Process {_padded(rank, world)} ({host}): device {dev}: {fx.device_name} ({pci})")
    lines.append("")
    if run.testcase not in MULTINODE_TESTCASES:
        lines.append(f"ERROR: Testcase {run.testcase} not found!")
        lines.append("")
        return "\n".join(lines) + "\n"
    lines.append(f"Running {run.testcase}.")
    if world < 2:
        lines.append("Waived: ")
        lines.append("")
        lines.append(NOTE)
        return "\n".join(lines) + "\n"
    if run.failure and run.failure.startswith("worker-lost:"):
        lines.extend(daemon_lost_lines(run.failure.split(":", 1)[1], run.hostnames))
        return "\n".join(lines) + "\n"
    if run.failure:
        host = run.hostnames[0]
        lines.extend(
            [
                "[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression "
                f"cuMemCreate(&handle, roundedUpAllocationSize, &prop, 0) on {host}, rank = 0 in "
                "MultinodeMemoryAllocationUnicast::MultinodeMemoryAllocationUnicast() : "
                "/nvbandwidth/multinode_memcpy.cpp:44",
                "--------------------------------------------------------------------------",
                "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD",
                "with errorcode 1.",
                "",
                "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
                "You may or may not see output from other processes, depending on",
                "exactly when Open MPI kills them.",
                "--------------------------------------------------------------------------",
            ]
        )
        return "\n".join(lines) + "\n"
    if run.testcase == BISECT_TESTCASE:
        matrix = bisect_column(world, run.degraded, run.gpu_factors)
        lines.append(BISECT_DESCRIPTION)
        lines.extend(render_bisect(matrix))
    else:
        matrix = bandwidth_matrix(world, run.degraded, run.gpu_factors)
        lines.append(_description(run.testcase))
        lines.extend(render_matrix(matrix))
    lines.append("")
    lines.append(f"SUM {run.testcase} {matrix_sum(matrix)}")
    lines.append("")
    lines.append(NOTE)
    return "\n".join(lines) + "\n"


def imex_listing(channel_present: bool) -> str:
    """``ls -la /dev/nvidia-caps-imex-channels`` inside the pod.

    Without an injected channel the directory does not exist in the container at all (the CDI
    spec carries the device node), so ``ls`` fails the way it does on a real node.
    """
    if channel_present:
        return IMEX_LISTING_FIXTURE.read_text()
    return "ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory\n"


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGkmg]?)", text.strip())
    if not m:
        raise ValueError(f"size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def all_reduce_perf_text(args: list[str], ranks: int, hostnames: list[str], link_gbps: float) -> str:
    """An nccl-tests v2.13 ``all_reduce_perf`` run: header, table and footer.

    Bus bandwidth follows the standard model (``busbw = algbw * 2(n-1)/n``, ``algbw = S/t``) with
    ``t = latency + S * 2(n-1)/n / link``, so busbw approaches ``link_gbps`` (callers pass the mean
    measured nvbandwidth cell) for large messages.
    """
    opts = {"-b": "8", "-e": "128M", "-f": "2"}
    for i, arg in enumerate(args[:-1]):
        if arg in ("-b", "-e", "-f", "--minbytes", "--maxbytes", "--stepfactor"):
            opts[{"--minbytes": "-b", "--maxbytes": "-e", "--stepfactor": "-f"}.get(arg, arg)] = args[i + 1]
    size, end, factor = _parse_size(opts["-b"]), _parse_size(opts["-e"]), int(opts["-f"])
    n = max(ranks, 1)
    ring = 2 * (n - 1) / n if n > 1 else 1.0
    lines = [
        f"# nThread 1 nGpus 1 minBytes {size} maxBytes {end} step: {factor}(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    fx = load_nvbandwidth_fixture()
    for rank, host in enumerate(hostnames):
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {host} device  {rank % len(fx.pci_ids)} "
            f"[0x{fx.pci_ids[rank % len(fx.pci_ids)].split(':')[1]}] {fx.device_name}"
        )
    lines += comm_init_lines(args, hostnames, fx.pci_ids)
    lines += [
        "#",
        "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10,
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ]
    busbws: list[float] = []
    while size <= end:
        count = size // 4
        row = f"{size:12d}  {count:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        for extra_us in (0.0, 0.35):
            t_us = 12.5 + extra_us + size * ring / (link_gbps * 1e3)  # GB/s -> bytes/us
            algbw = size / t_us / 1e3
            busbw = algbw * ring
            busbws.append(busbw)
            row += f"  {t_us:7.2f}  {algbw:6.2f}  {busbw:6.2f}  {0:5d}"
        lines.append(row)
        size *= factor
    avg = sum(busbws) / len(busbws) if busbws else 0.0
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:g} ", "#", ""]
    return "\n".join(lines)


def comm_init_lines(args: list[str], hostnames: list[str], pci_ids: list[str]) -> list[str]:
    """With ``-x NCCL_DEBUG=INFO`` (or TRACE), each rank's INIT line as NCCL 2.23-2.30 prints it once its
    communicator is up, ``MNNVL 1`` on the GB200 fabric; ``MNNVL 0`` when NCCL_MNNVL_ENABLE=0 or
    NCCL_CUMEM_ENABLE=0 takes multi-node NVLink away. Nothing without NCCL_DEBUG=INFO, as NCCL prints nothing."""
    if not any(a in ("NCCL_DEBUG=INFO", "NCCL_DEBUG=TRACE") for a in args):
        return []
    mnnvl = 0 if any(a in ("NCCL_MNNVL_ENABLE=0", "NCCL_CUMEM_ENABLE=0") for a in args) else 1
    nodes = list(dict.fromkeys(hostnames))
    local = {host: [r for r, h in enumerate(hostnames) if h == host] for host in nodes}
    out = []
    for rank, host in enumerate(hostnames):
        local_rank = local[host].index(rank)
        prefix = f"{host}:{1000 + rank}:{2000 + rank} [{local_rank % len(pci_ids)}]"
        out.append(
            f"{prefix} NCCL INFO comm 0x{0x55D0C0A0 + rank * 0x10:x} rank {rank} nRanks {len(hostnames)} "
            f"nNodes {len(nodes)} localRanks {len(local[host])} "
            f"localRank {local_rank} MNNVL {mnnvl}"
        )
    return out


def mean_measured_cell() -> float:
    cells = load_nvbandwidth_fixture().cells
    return sum(float(c) for c in cells) / len(cells)


def cri_lines(text: str, when: Optional[datetime] = None) -> str:
    """``text`` in the CRI log format (``<RFC3339Nano> stdout F <line>``) that kwok serves."""
    when = when or datetime.now(timezone.utc)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    body = text[:-1] if text.endswith("\n") else text
    return "".join(f"{stamp} stdout F {line}\n" for line in body.split("\n"))


def cri_text(cri: str) -> str:
    """The text back out of CRI log lines (inverse of :func:`cri_lines`)."""
    return "".join(line.split(" ", 3)[3] + "\n" for line in cri.splitlines() if line.count(" ") >= 3)
