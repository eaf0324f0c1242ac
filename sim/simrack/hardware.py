# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model of the simulated rack's hardware: per tray and GPU, what is there and how it is.

Every stand-in renders from it: the Node's capacity, allocatable and GPU count label (``nodes.py``), the
``gpu_health`` pod's ``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``, ``nvidia-smi nvlink -e`` and kernel log, the
``dcgm_diag`` pod's ``dcgmi diag`` JSON and exit status (``programs/``), the nvbandwidth matrix and the nccl-tests
figures (``logs.py``, ``controllers/podlogs.py``). A hardware fault (``HARDWARE_FAULTS``) sets state here, never one
tool's output, so it shows in every tool a real tray would show it in.

The state comes from ``faults.json``'s dict (``{fault: {param: value}}``, validated by ``sim/rack fault``) and the
tray's name. Standard library only and pure: no file, no clock, no Kubernetes client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

GPUS_PER_TRAY = 4  # nodes.GPUS_PER_TRAY (nodes imports this module)
LINKS_PER_GPU = 18  # NVLink 5: a GB200 GPU has 18 links to the rack's NVLink switch trays
# What nvidia-smi nvlink -s prints per active GB200 link: a real GB200 prints "53.125 GB/s" for each of its 18
# (NVIDIA/k8s-test-infra issue 371), not the 50 GB/s of the synthesized fixture.
LINK_GBPS = "53.125"

# The faults that change hardware state, and their parameters (faultspec.PARAMS holds them with the sim's others).
# Each names a tray (node=) and GPUs of it (gpu=: one, a list 0,2, a range 1-3 or all), except degraded-gpu, which
# names a GPU by its index in its rack (rack=, gpu= 0..4*trays-1), as the nvbandwidth matrix numbers it.
HARDWARE_PARAMS: dict[str, tuple[str, ...]] = {
    "missing-gpu": ("node", "gpu"),
    "gpu-off-bus": ("node", "gpu"),
    "nvlink-down": ("node", "gpu", "links"),
    "row-remap-pending": ("node", "gpu"),
    "xid": ("node", "gpu", "code"),
    "nvlink-errors": ("node", "gpu", "link", "count"),
    "fabric-unhealthy": ("node", "gpu"),
    "degraded-gpu": ("rack", "gpu", "factor"),
}
HARDWARE_FAULTS = tuple(HARDWARE_PARAMS)
# gpu= when not given: the new faults hit GPU 0 (missing-gpu GPU 3, as "a tray reports 3 GPUs" always did); the
# knobs that came from the gpu_health program keep what they did there: every GPU of the tray.
DEFAULT_GPU = {
    "missing-gpu": "3",
    "gpu-off-bus": "0",
    "nvlink-down": "0",
    "fabric-unhealthy": "0",
    "row-remap-pending": "all",
    "xid": "all",
    "nvlink-errors": "all",
}
DEFAULT_XID = 79
DEFAULT_ERROR_LINK = 7
DEFAULT_RECOVERY_FAILURES = 3
DEFAULT_LINKS_DOWN = 1
DEFAULT_GPU_FACTOR = 0.944  # faultspec.DEFAULT_GPU_FACTOR: 17 of 18 NVLinks
XID_OFF_BUS = 79

_TRAY = re.compile(r"gb200-r(\d+)-t(\d+)")


@dataclass
class Gpu:
    """One GB200 GPU of a tray, as the driver and the fabric see it."""

    index: int  # as nvidia-smi numbers it on its tray, 0..3
    present: bool = True  # enumerated by the driver (a GPU that is not is in no tool, nor in the Node's capacity)
    on_bus: bool = True  # False: enumerated, but the driver lost it (Xid 79): no handle, no diagnostic, not allocatable
    links_down: tuple[int, ...] = ()  # link indices (0..17) that are inactive
    # bandwidth that the nvbandwidth matrix gives its row and column; (18 - down) / 18 but for degraded-gpu's exact one
    factor: float = 1.0
    recovery_failures: dict[int, int] = field(default_factory=dict)  # link -> failed NVLink recoveries
    dram_uncorrectable: int = 0  # volatile uncorrectable DRAM ECC errors
    remapped_rows_uncorrectable: int = 0
    remap_pending: bool = False  # a row remapping waits for a GPU reset
    xids: tuple[int, ...] = ()  # the Xid codes the kernel log holds for it
    fabric_state: str = "Completed"  # nvidia-smi -q -x <fabric><state>
    fabric_status: str = "Success"  # <fabric><status>
    fabric_health: str = "Healthy"  # <fabric><health><summary>

    @property
    def links_up(self) -> int:
        return LINKS_PER_GPU - len(self.links_down)

    @property
    def fabric_ok(self) -> bool:
        return (self.fabric_state, self.fabric_status) == ("Completed", "Success")

    @property
    def healthy(self) -> bool:
        return self == Gpu(self.index)


@dataclass
class Tray:
    """One GB200 compute tray: its name, its rack and tray index, and its 4 GPUs (present or not)."""

    name: str
    rack: int
    index: int
    gpus: list[Gpu]

    @property
    def present(self) -> list[Gpu]:
        """The GPUs the driver enumerates, in index order."""
        return [gpu for gpu in self.gpus if gpu.present]

    @property
    def reachable(self) -> list[Gpu]:
        """The enumerated GPUs the driver can talk to (nvidia-smi gets a handle, DCGM diagnoses them)."""
        return [gpu for gpu in self.present if gpu.on_bus]

    @property
    def capacity(self) -> int:
        """``nvidia.com/gpu`` capacity and the ``nvidia.com/gpu.count`` label: the GPUs enumerated."""
        return len(self.present)

    @property
    def allocatable(self) -> int:
        """``nvidia.com/gpu`` allocatable: the device plugin marks a GPU it lost unhealthy."""
        return len(self.reachable)

    def gpu(self, index: int) -> Gpu:
        return self.gpus[index]


def parse_tray(name: str) -> Optional[tuple[int, int]]:
    """(rack, tray) of a tray name ``gb200-r<R>-t<T>``; None for any other name."""
    match = _TRAY.fullmatch(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def gpu_indices(value: Any, gpus: int) -> list[int]:
    """The GPUs a ``gpu=`` value names (one, ``0,2``, ``1-3``, ``all``); what does not parse names none."""
    text = str(value).strip()
    if text == "all":
        return list(range(gpus))
    chosen: list[int] = []
    for item in text.split(","):
        bounds = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", item)
        if not bounds:
            return []
        low = int(bounds.group(1))
        high = int(bounds.group(2)) if bounds.group(2) else low
        chosen.extend(g for g in range(low, min(high, gpus - 1) + 1) if g not in chosen)
    return chosen


def _int(params: dict[str, Any], key: str, default: int) -> int:
    try:
        return int(str(params.get(key, default)))
    except ValueError:
        return default


def links_lost(factor: float) -> int:
    """The NVLinks a GPU at ``factor`` of its bandwidth has lost: ``round(18 * (1 - factor))``, at least one
    below a full factor (degraded-gpu's 0.944 is 1 link; 0.5 is 9)."""
    if factor >= 1:
        return 0
    return min(LINKS_PER_GPU, max(1, round(LINKS_PER_GPU * (1 - factor))))


def down_links(count: int) -> tuple[int, ...]:
    """The indices of ``count`` inactive links: the highest ones (17, then 16, ...), so link 7 of nvlink-errors
    stays up unless 11 or more are lost."""
    return tuple(range(LINKS_PER_GPU - count, LINKS_PER_GPU))


def _on(faults: dict[str, dict[str, Any]], fault: str, name: str) -> list[int]:
    """The GPUs of tray ``name`` that ``fault`` hits (none when it is off or names another tray)."""
    params = faults.get(fault)
    if params is None or str(params.get("node") or "") != name:
        return []
    return gpu_indices(params.get("gpu", DEFAULT_GPU[fault]), GPUS_PER_TRAY)


def _lose_links(gpu: Gpu, count: int, factor: float) -> None:
    count = max(count, len(gpu.links_down))
    gpu.links_down = down_links(count)
    gpu.factor = min(gpu.factor, factor)


def tray(faults: dict[str, dict[str, Any]], name: str) -> Tray:
    """The hardware of tray ``name`` under ``faults`` (a healthy tray without any)."""
    rack, index = parse_tray(name) or (0, 0)
    gpus = [Gpu(g) for g in range(GPUS_PER_TRAY)]
    for g in _on(faults, "missing-gpu", name):
        gpus[g].present = False
    for g in _on(faults, "gpu-off-bus", name):
        gpus[g].on_bus = False
        gpus[g].xids += (XID_OFF_BUS,)
    for g in _on(faults, "nvlink-down", name):
        count = min(LINKS_PER_GPU, max(1, _int(faults["nvlink-down"], "links", DEFAULT_LINKS_DOWN)))
        _lose_links(gpus[g], count, (LINKS_PER_GPU - count) / LINKS_PER_GPU)
    for g in _on(faults, "row-remap-pending", name):
        gpus[g].dram_uncorrectable = 1
        gpus[g].remapped_rows_uncorrectable = 1
        gpus[g].remap_pending = True
    for g in _on(faults, "xid", name):
        gpus[g].xids += (_int(faults["xid"], "code", DEFAULT_XID),)
    for g in _on(faults, "nvlink-errors", name):
        params = faults["nvlink-errors"]
        link = _int(params, "link", DEFAULT_ERROR_LINK)
        gpus[g].recovery_failures[link] = _int(params, "count", DEFAULT_RECOVERY_FAILURES)
    for g in _on(faults, "fabric-unhealthy", name):
        gpus[g].fabric_status = "Failure"
        gpus[g].fabric_health = "Unhealthy"
    degraded = faults.get("degraded-gpu")
    if degraded is not None and _int(degraded, "rack", 0) == rack:
        factor = _factor(degraded)
        for rack_gpu in gpu_indices(degraded.get("gpu", 0), (index + 1) * GPUS_PER_TRAY):
            if rack_gpu // GPUS_PER_TRAY == index:
                _lose_links(gpus[rack_gpu % GPUS_PER_TRAY], links_lost(factor), factor)
    return Tray(name, rack, index, gpus)


def _factor(params: dict[str, Any]) -> float:
    try:
        factor = float(str(params.get("factor", DEFAULT_GPU_FACTOR)))
    except ValueError:
        return 1.0
    return factor if 0 < factor <= 1 else 1.0


def rack_gpu(tray_index: int, gpu: int) -> int:
    """The index of GPU ``gpu`` of tray ``tray_index`` in its rack (the nvbandwidth matrix's, trays in order)."""
    return tray_index * GPUS_PER_TRAY + gpu


def tray_of_rack_gpu(rack: int, rack_index: int) -> tuple[str, int]:
    """(tray name, GPU on the tray) of GPU ``rack_index`` of ``rack``."""
    return f"gb200-r{rack}-t{rack_index // GPUS_PER_TRAY}", rack_index % GPUS_PER_TRAY


def rank_factors(faults: dict[str, dict[str, Any]], ranks: list[tuple[str, int]]) -> dict[int, float]:
    """Per rank of a job whose ranks run on (tray, GPU), the factor on its matrix row and column, for the ranks
    whose GPU lost links (nvlink-down, and degraded-gpu with its exact factor): the tray's hardware decides, so a
    rank is slowed where its worker was scheduled, whatever its place in the matrix."""
    factors: dict[int, float] = {}
    trays: dict[str, Tray] = {}
    for rank, (name, gpu) in enumerate(ranks):
        if name not in trays:
            trays[name] = tray(faults, name)
        if 0 <= gpu < GPUS_PER_TRAY and trays[name].gpu(gpu).factor < 1:
            factors[rank] = trays[name].gpu(gpu).factor
    return factors


CATCHES: dict[str, dict[str, str]] = {
    "missing-gpu": {"cliques": "failed", "gpu_health": "failed"},
    "gpu-off-bus": {"cliques": "failed", "gpu_health": "failed"},
    "nvlink-down": {"nvbandwidth": "failed", "gpu_health": "failed"},
    "row-remap-pending": {"gpu_health": "failed", "dcgm_diag": "failed"},
    "xid": {"gpu_health": "failed"},
    "nvlink-errors": {"gpu_health": "failed"},
    "fabric-unhealthy": {"gpu_health": "failed", "dcgm_diag": "failed"},
    "degraded-gpu": {"nvbandwidth": "failed", "gpu_health": "failed"},
}
"""The fault matrix: for each hardware fault put on one tray (its parameters at their defaults), the checks that
must refuse that tray and how (``failed``: the check measured the tray and it is bad; ``error``: the check could not
measure it). A check that cannot see the fault is not listed. Why each entry holds:

* missing-gpu: the Node's capacity, allocatable and ``nvidia.com/gpu.count`` are 3. ``cliques`` fails a tray whose
  allocatable GPUs are not the site's 4 (``gpu_fabric_gpus_per_tray``); ``gpu_health`` reads ``nvidia-smi -q -x``,
  ``nvlink -s`` and ``nvlink -e`` listing GPUs 0-2 and fails the GPU they leave out. nvbandwidth, nccl and dcgm_diag
  hold 4 GPUs per tray: the planner skips a tray with 3 allocatable, with its reason; a skip is not a refusal, so
  they are not listed.
* gpu-off-bus: every nvidia-smi command ends 255 with "Unable to determine the device handle for GPU ...: Unknown
  Error" and the kernel log holds Xid 79: ``gpu_health`` fails. The Node keeps capacity 4 with 3 allocatable (the
  device plugin marks the GPU unhealthy): ``cliques`` fails a tray whose allocatable GPUs are not the site's 4, and
  the GPU-holding checks skip the tray (not listed).
* nvlink-down (1 link of 18): ``nvidia-smi nvlink -s`` shows it ``<inactive>`` (``gpu_health`` fails the GPU); the
  nvbandwidth matrix's row and column of that GPU are 17/18 of a healthy one, below 0.97 of the rack's median
  (``nvbandwidth`` fails the pairs). The rack's nccl bus bandwidth drops to 17/18 too, above nccl's 0.9 of its
  reference and of the fleet median: ``nccl`` passes one lost link (3 or more fail it). DCGM's diagnostic does not
  look: DCGM_FR_NVLINK_DOWN comes from its health watch only, and the pcie plugin's DCGM_FR_GPU_EXPECTED_NVLINKS_UP
  needs ``pcie.gpu_nvlinks_expected_up``, 0 by default.
* row-remap-pending: ``-q -x`` shows an uncorrectable DRAM error and a pending remap (``gpu_health`` fails), and
  DCGM's software plugin (level 1, ``checkRowRemapping``) fails the GPU with DCGM_FR_PENDING_ROW_REMAP (85).
* xid (79): the kernel log only; ``gpu_health`` fails an Xid that needs a reset.
* nvlink-errors: ``nvidia-smi nvlink -e`` only; ``gpu_health`` fails the failed recoveries.
* fabric-unhealthy: ``-q -x``'s fabric section says Completed / Failure / Unhealthy (``gpu_health`` fails), and DCGM's
  software plugin (``checkFabricManager``) fails every GPU of the test with DCGM_FR_FABRIC_MANAGER_TRAINING_ERROR
  (112). The clique label stays (GPU Feature Discovery labels a tray from the GPUs whose registration completed), so
  ``cliques`` passes; what a GPU outside the fabric does to a multi-node job is not modelled, so nvbandwidth and
  nccl are not listed.
* degraded-gpu (0.944): as nvlink-down, spelt by the GPU's index in its rack: ``nvbandwidth`` and ``gpu_health``.
"""

# The checks in the order the report shows them (the verify roles' order), the columns of catches_table.
CHECK_ORDER = ("cliques", "imex_channel", "nvbandwidth", "nccl", "gpu_health", "dcgm_diag")


def catches_table() -> str:
    """``CATCHES`` as the Markdown table of docs/verification.md: a row per hardware fault, a column per check,
    ``failed`` or ``error`` where the check must refuse the tray and a dash where it does not (it passes the tray, or
    skips it as unusable, naming why)."""
    lines = [
        "| hardware fault | " + " | ".join(f"`{check}`" for check in CHECK_ORDER) + " |",
        "| --- |" + " --- |" * len(CHECK_ORDER),
    ]
    for fault, refused in CATCHES.items():
        cells = [f"**{refused[check]}**" if check in refused else "-" for check in CHECK_ORDER]
        lines.append(f"| `{fault}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
