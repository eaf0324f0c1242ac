# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parameters of the faults (what ``sim/rack fault NAME key=value ...`` accepts) and the per-rack
nvbandwidth faults as the log writer applies them.

The sim's own faults are ``PARAMS``; the fault knobs of the checks' stand-in programs
(``simrack/programs``, each module's ``FAULTS``) join them in ``all_params()``, which ``validate`` and the
CLI use.

Standard library only: the CLI validates with it before writing ``faults.json``, the pod log
writer reads the matrix faults of one rack with it.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from simrack import FAULTS
from simrack.hardware import HARDWARE_PARAMS, LINKS_PER_GPU
from simrack.nodes import GPUS_PER_TRAY, tray_name

# One NVLink of the 18 a GB200 GPU has to the NVLink switch trays lost: 17/18 of the bandwidth.
DEFAULT_GPU_FACTOR = 0.944
DEFAULT_LINK_GBPS = 400.0
# rack-run-time: the launcher runs for the modelled time of a real rack x scale (1 = as long as a real one).
DEFAULT_RUN_TIME_SCALE = 1.0

# Accepted parameters per fault of the sim's own (the ones with a default are optional); all_params() adds
# the checks' programs' knobs.
PARAMS: dict[str, tuple[str, ...]] = {
    "unlabelled-node": ("node",),
    "split-clique": ("rack",),
    "apiserver-restart": (),
    "degraded-link": ("rack", "src", "dst", "gbps"),
    **HARDWARE_PARAMS,
    "busy-node": ("node",),
    "launcher-fails": ("code",),
    "compute-domain-not-ready": (),
    "missing-deviceclass": (),
    "channel-missing": (),
    "rack-run-time": ("scale",),
}
# Faults that name a tray (node=, no default); the hardware faults among them also name GPUs of it (gpu=).
NODE_FAULTS = ("busy-node", *(name for name, params in HARDWARE_PARAMS.items() if "node" in params))
# The defaults recorded for the hardware faults of a tray (faults.json says what is in effect); missing-gpu records
# none, as before (its GPU is 3 unless gpu= says: hardware.DEFAULT_GPU).
TRAY_FAULT_DEFAULTS = {
    "gpu-off-bus": {"gpu": "0"},
    "nvlink-down": {"gpu": "0", "links": "1"},
    "fabric-unhealthy": {"gpu": "0"},
    "xid": {"code": "79"},
    "nvlink-errors": {"link": "7", "count": "3"},
}
# Faults that change one rack's nvbandwidth matrix (param rack, default 0).
MATRIX_FAULTS = ("degraded-link", "degraded-gpu")


def all_params() -> dict[str, tuple[str, ...]]:
    """Every fault ``sim/rack fault`` accepts and its parameters: the sim's own, then the knobs of the
    checks' stand-in programs (``simrack/programs``)."""
    from simrack import programs  # imports this module

    return {**PARAMS, **programs.fault_params()}


def all_descriptions() -> dict[str, str]:
    """Every fault and its line for ``sim/rack fault --list``: the sim's own, then the programs' knobs."""
    from simrack import programs

    return {**FAULTS, **programs.fault_descriptions()}


def _int(name: str, key: str, value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ValueError(f"{name}: {key}={value} is not an integer") from None


def _float(name: str, key: str, value: Any) -> float:
    try:
        number = float(str(value))
    except ValueError:
        raise ValueError(f"{name}: {key}={value} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: {key}={value} is not a finite number")
    return number


def _rack(name: str, params: dict[str, Any], racks: int) -> int:
    rack = _int(name, "rack", params.get("rack", 0))
    if not 0 <= rack < racks:
        raise ValueError(f"{name}: rack={rack} is not in this sim (racks 0..{racks - 1})")
    return rack


def _gpu(name: str, key: str, value: Any, rack: int, gpus: int) -> int:
    gpu = _int(name, key, value)
    if not 0 <= gpu < gpus:
        raise ValueError(f"{name}: {key}={gpu} is out of range (rack {rack} has GPUs 0..{gpus - 1})")
    return gpu


def gpu_list(value: Any, gpus: int) -> list[int]:
    """The GPUs a ``gpu=`` value names: one index, a list (``1,4,6``), ranges (``0-17``) or ``all``.

    Raises ValueError saying what is wrong ("is out of range", "has 99, which is out of range").
    """
    text = str(value).strip()
    if text == "all":
        return list(range(gpus))
    items = [item.strip() for item in text.split(",")]
    chosen: list[int] = []
    for item in items:
        said = "" if len(items) == 1 else f"has {item or '(empty)'}, which "
        bounds = re.fullmatch(r"(\d+)-(\d+)", item)
        try:
            low, high = (int(bounds.group(1)), int(bounds.group(2))) if bounds else (int(item), int(item))
        except ValueError:
            raise ValueError(f"{said}is not an integer, a range a-b or all") from None
        if not 0 <= low <= high < gpus:
            raise ValueError(f"{said}is out of range")
        chosen.extend(g for g in range(low, high + 1) if g not in chosen)
    return chosen


def _node(name: str, params: dict[str, Any], racks: int, trays_per_rack: int) -> str:
    node = str(params.get("node") or "")
    if not node:
        raise ValueError(f"{name} needs node=<tray> (e.g. node={tray_name(0, min(3, trays_per_rack - 1))})")
    trays = {tray_name(r, t) for r in range(racks) for t in range(trays_per_rack)}
    if node not in trays:
        raise ValueError(f"{name}: node={node} is not a tray of this sim (e.g. {tray_name(0, 0)})")
    return node


def validate(name: str, params: dict[str, str], racks: int, trays_per_rack: int) -> dict[str, str]:
    """The parameters to record for fault ``name``; ValueError (one line) when they are wrong.

    Parameters given are kept as given; the new faults also record their defaults, so
    ``faults.json`` and ``--list`` say what is in effect. A knob of a check's program
    (``simrack/programs``) gets the common checks and then the program's own ``validate_fault``.
    """
    accepted = all_params()
    allowed = accepted.get(name)
    if allowed is None:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(accepted)}")
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        known = f"known: {', '.join(allowed)}" if allowed else "it takes no parameters"
        raise ValueError(f"{name}: unknown parameter {', '.join(unknown)} ({known})")
    if name not in PARAMS:
        return _program_fault(name, params, allowed, racks, trays_per_rack)
    out = dict(params)
    gpus = trays_per_rack * GPUS_PER_TRAY
    if name in NODE_FAULTS:
        _node(name, params, racks, trays_per_rack)
        if name != "busy-node":
            out = _tray_fault(name, params)
    elif name == "degraded-link":
        rack = _rack(name, params, racks)
        ends = []
        for key, default in (("src", 0), ("dst", 1)):
            try:
                ends.append(gpu_list(params.get(key, default), gpus))
            except ValueError as exc:
                raise ValueError(
                    f"{name}: {key}={params.get(key, default)} {exc} (rack {rack} has GPUs 0..{gpus - 1})"
                ) from None
        if ends[0] == ends[1] and len(ends[0]) == 1:
            raise ValueError(f"{name}: src and dst are both {ends[0][0]}; a link joins two different GPUs")
        gbps = _float(name, "gbps", params.get("gbps", DEFAULT_LINK_GBPS))
        if gbps < 0:
            raise ValueError(f"{name}: gbps={params['gbps']} must not be negative")
    elif name == "degraded-gpu":
        rack = _rack(name, params, racks)
        if "gpu" not in params:
            raise ValueError(
                f"{name} needs gpu=<index in the rack's matrix, 0..{gpus - 1}> (or a list 1,4,6, a range 0-17, or all)"
            )
        try:
            gpu_list(params["gpu"], gpus)
        except ValueError as exc:
            raise ValueError(f"{name}: gpu={params['gpu']} {exc} (rack {rack} has GPUs 0..{gpus - 1})") from None
        factor = _float(name, "factor", params.get("factor", DEFAULT_GPU_FACTOR))
        if not 0 < factor <= 1:
            raise ValueError(f"{name}: factor={params['factor']} must be in (0, 1] (0.944 = 17 of 18 NVLinks)")
        out.setdefault("rack", "0")
        out.setdefault("factor", str(DEFAULT_GPU_FACTOR))
    elif name == "split-clique":
        _rack(name, params, racks)
    elif name == "launcher-fails" and "code" in params:
        _int(name, "code", params["code"])
    elif name == "rack-run-time":
        scale = _float(name, "scale", params.get("scale", DEFAULT_RUN_TIME_SCALE))
        if not 0 <= scale <= 10:
            raise ValueError(f"{name}: scale={params['scale']} must be in [0, 10] (1 = a real rack's time)")
        out.setdefault("scale", str(DEFAULT_RUN_TIME_SCALE))
    return out


def _tray_fault(name: str, params: dict[str, str]) -> dict[str, str]:
    """A hardware fault of a tray: ``gpu`` GPUs of it, the whole numbers whole, a link of the 18; defaults recorded."""
    out = {**TRAY_FAULT_DEFAULTS.get(name, {}), **params}
    if "gpu" in out:
        try:
            gpu_list(out["gpu"], GPUS_PER_TRAY)
        except ValueError as exc:
            raise ValueError(f"{name}: gpu={out['gpu']} {exc} (a tray has GPUs 0..{GPUS_PER_TRAY - 1})") from None
    for key in ("code", "count", "link", "links"):
        if key in out and not str(out[key]).isdigit():
            raise ValueError(f"{name}: {key}={out[key]} is not a whole number")
    if int(out.get("link", 0)) >= LINKS_PER_GPU:
        raise ValueError(f"{name}: link={out['link']}: a GB200 GPU has links 0..{LINKS_PER_GPU - 1}")
    if "links" in out and not 1 <= int(out["links"]) <= LINKS_PER_GPU:
        raise ValueError(f"{name}: links={out['links']}: a GB200 GPU has 1..{LINKS_PER_GPU} links to lose")
    return out


def _program_fault(
    name: str, params: dict[str, str], allowed: tuple[str, ...], racks: int, trays_per_rack: int
) -> dict[str, str]:
    """A program's knob: the common parameters checked (``node`` a tray of this sim, needed where the knob
    has it; ``rack`` a rack of it; ``gpu`` GPUs of a tray, 0..3, a list, a range or all), then the
    program's own ``validate_fault``, if it has one."""
    from simrack import programs

    if "node" in allowed:
        _node(name, params, racks, trays_per_rack)
    if "rack" in params:
        _rack(name, params, racks)
    if "gpu" in params:
        try:
            gpu_list(params["gpu"], GPUS_PER_TRAY)
        except ValueError as exc:
            raise ValueError(f"{name}: gpu={params['gpu']} {exc} (a tray has GPUs 0..{GPUS_PER_TRAY - 1})") from None
    program = programs.owner_of(name)
    if program is not None and program.validate_fault is not None:
        return dict(program.validate_fault(name, dict(params)))
    return dict(params)


def run_time_scale(faults: dict[str, dict[str, Any]]) -> float:
    """The factor on the modelled run time of an nvbandwidth launcher (0 when ``rack-run-time`` is off)."""
    params = faults.get("rack-run-time")
    if params is None:
        return 0.0
    try:
        return max(0.0, float(params.get("scale", DEFAULT_RUN_TIME_SCALE)))
    except (TypeError, ValueError):
        return 0.0


def fault_rack(params: dict[str, Any]) -> int:
    """The rack a matrix fault is for (0 when ``rack=`` was not given)."""
    try:
        return int(str(params.get("rack", 0)))
    except ValueError:
        return -1


def matrix_faults(
    faults: dict[str, dict[str, Any]], rack: Optional[int], world: int
) -> tuple[dict[tuple[int, int], float], dict[int, float], list[str]]:
    """What the active faults do to the matrix of a ``world``-rank job on ``rack``.

    Answers (cells set to a value, per-GPU factors for its row and column, notes on faults that
    did not fit this matrix). A job whose rack is not known (None) gets none of them.
    """
    cells: dict[tuple[int, int], float] = {}
    factors: dict[int, float] = {}
    notes: list[str] = []
    if rack is None:
        return cells, factors, notes
    link = faults.get("degraded-link")
    if link is not None and fault_rack(link) == rack:
        # src and dst each name one GPU, a list, a range or all: every pair between them (a whole row with dst=all)
        src, dst = link.get("src", 0), link.get("dst", 1)
        try:
            gbps = float(link.get("gbps", DEFAULT_LINK_GBPS))
        except (TypeError, ValueError):
            notes.append(f"degraded-link: unreadable params {link}")
        else:
            try:
                pairs = [(s, d) for s in gpu_list(src, world) for d in gpu_list(dst, world) if s != d]
            except ValueError:
                notes.append(f"degraded-link: pair ({src}, {dst}) is outside a {world}-rank matrix")
            else:
                cells.update(dict.fromkeys(pairs, gbps))
    gpu_fault = faults.get("degraded-gpu")
    if gpu_fault is not None and fault_rack(gpu_fault) == rack:
        try:
            factor = float(gpu_fault.get("factor", DEFAULT_GPU_FACTOR))
        except (TypeError, ValueError):
            notes.append(f"degraded-gpu: unreadable params {gpu_fault}")
        else:
            try:
                gpus = gpu_list(gpu_fault.get("gpu", 0), world)
            except ValueError:
                gpus = []
            if gpus and 0 < factor <= 1:
                factors.update(dict.fromkeys(gpus, factor))
            else:
                notes.append(
                    f"degraded-gpu: gpu {gpu_fault.get('gpu', 0)} (factor {factor}) does not fit a {world}-rank matrix"
                )
    return cells, factors, notes
