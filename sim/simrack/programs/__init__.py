# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-ins of what a check's pods print: one module of this package per check, found without a list.

A check that runs one pod per tray (as ``imex_channel`` does) gets its pods' output in the sim from one
module here, ``simrack/programs/<anything>.py``, that declares (README.md in this folder):

* ``CHECK: str``: the check's name; its pods are those labelled ``gpu-fabric.nvidia.com/check: <CHECK>``,
  the label the collection puts on every object of a check (``common_labels`` in
  ``plugins/module_utils/verification_objects.py``);
* ``FAULTS: dict[str, tuple[str, ...]]``: its fault knobs and their parameters, accepted by
  ``sim/rack fault <knob> key=value ...`` next to the sim's own faults (``faultspec.all_params()``);
* ``def log(pod, node, faults) -> str``: the pod's output on tray ``node`` (the Node object, with its
  labels) given the active faults as ``faults.json`` holds them (``{knob: {param: value}}``);

and, optionally, ``FAULT_HELP: dict[str, str]`` (a knob's line in ``sim/rack fault --list``) and
``def validate_fault(name, params) -> dict[str, str]`` (its own checks of a knob's parameters, after the
common ones; returns what to record, ValueError of one line when wrong).

Modules are found with ``pkgutil`` over this package (the sim runs from its source tree); a name starting
with ``_`` is not a program. Standard library only, as ``faultspec`` is: the CLI validates with it.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from simrack import faultspec
from simrack.nodes import GPUS_PER_TRAY

# plugins/module_utils/verification_objects.py: CHECK_LABEL, one of common_labels (a unit test keeps them equal).
CHECK_LABEL = "gpu-fabric.nvidia.com/check"

_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_KNOB = re.compile(r"[a-z0-9][a-z0-9-]*")

Log = Callable[[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]]], str]
FaultValidator = Callable[[str, dict[str, str]], dict[str, str]]


class ProgramError(ValueError):
    """A module of simrack/programs breaks the contract, or does not import (one line, naming the file)."""


@dataclass(frozen=True)
class Program:
    """One check's stand-in, as its module declares it."""

    module: str  # the file's name without .py
    check: str
    faults: dict[str, tuple[str, ...]]
    log: Log
    fault_help: dict[str, str] = field(default_factory=dict)
    validate_fault: Optional[FaultValidator] = None

    def describe(self, knob: str) -> str:
        """The knob's line in ``sim/rack fault --list``: its FAULT_HELP, else what it is for and its parameters."""
        text = self.fault_help.get(knob) or f"a fault of the {self.check} check's pod output"
        params = " ".join(f"{key}=<{'tray' if key == 'node' else '...'}>" for key in self.faults[knob])
        return f"{text} (simrack/programs/{self.module}.py){' (' + params + ')' if params else ''}"


def _program(module: Any, short: str) -> Program:
    where = f"simrack/programs/{short}.py"
    check = getattr(module, "CHECK", None)
    if not isinstance(check, str) or not _LABEL_VALUE.fullmatch(check):
        raise ProgramError(f"{where}: CHECK must be the check's name, a label value (got {check!r})")
    faults = getattr(module, "FAULTS", None)
    if not isinstance(faults, dict):
        raise ProgramError(f"{where}: FAULTS must be a dict of fault knob -> tuple of parameter names")
    knobs: dict[str, tuple[str, ...]] = {}
    for knob, params in faults.items():
        if not isinstance(knob, str) or not _KNOB.fullmatch(knob):
            raise ProgramError(f"{where}: fault knob {knob!r} is not a name like xid-error")
        if not isinstance(params, (tuple, list)) or not all(isinstance(p, str) and p for p in params):
            raise ProgramError(f"{where}: FAULTS[{knob!r}] must be a tuple of parameter names")
        knobs[knob] = tuple(params)
    log = getattr(module, "log", None)
    if not callable(log):
        raise ProgramError(f"{where}: needs def log(pod, node, faults) -> str")
    fault_help = getattr(module, "FAULT_HELP", {})
    if not isinstance(fault_help, dict) or set(fault_help) - set(knobs):
        raise ProgramError(f"{where}: FAULT_HELP must be a dict of some of its FAULTS' knobs -> one line")
    validate_fault = getattr(module, "validate_fault", None)
    if validate_fault is not None and not callable(validate_fault):
        raise ProgramError(f"{where}: validate_fault must be a function (name, params) -> params")
    return Program(short, check, knobs, log, dict(fault_help), validate_fault)


@functools.lru_cache(maxsize=1)
def discover() -> dict[str, Program]:
    """Every program of this package, by the check it stands in for (loaded once; ``rediscover`` again)."""
    found: dict[str, Program] = {}
    knob_owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:
            raise ProgramError(f"simrack/programs/{info.name}.py does not import: {exc!r}") from exc
        program = _program(module, info.name)
        if program.check in found:
            raise ProgramError(
                f"simrack/programs/{info.name}.py: check {program.check!r} is already the one of "
                f"simrack/programs/{found[program.check].module}.py"
            )
        for knob in program.faults:
            if knob in faultspec.PARAMS:
                raise ProgramError(f"simrack/programs/{info.name}.py: fault {knob!r} is one of the sim's own")
            if knob in knob_owner:
                raise ProgramError(
                    f"simrack/programs/{info.name}.py: fault {knob!r} is already one of "
                    f"simrack/programs/{knob_owner[knob]}.py"
                )
            knob_owner[knob] = info.name
        found[program.check] = program
    return found


def rediscover() -> dict[str, Program]:
    """Find the programs again (tests that add one)."""
    discover.cache_clear()
    return discover()


def for_pod(pod: dict[str, Any]) -> Optional[Program]:
    """The program of the check whose label the pod carries, if one claims it."""
    check = ((pod.get("metadata") or {}).get("labels") or {}).get(CHECK_LABEL)
    return discover().get(check) if check else None


def fault_params() -> dict[str, tuple[str, ...]]:
    """Every program's fault knobs and their parameters."""
    return {knob: params for program in discover().values() for knob, params in program.faults.items()}


def fault_descriptions() -> dict[str, str]:
    """Every program's fault knobs and their lines for ``sim/rack fault --list``."""
    return {knob: program.describe(knob) for program in discover().values() for knob in program.faults}


def owner_of(knob: str) -> Optional[Program]:
    """The program a fault knob belongs to (None for the sim's own faults)."""
    return next((program for program in discover().values() if knob in program.faults), None)


# --- for the programs ----------------------------------------------------------------------------


def node_name(node: dict[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def fault_on(faults: dict[str, dict[str, Any]], knob: str, node: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The parameters of fault ``knob`` when it is on for tray ``node`` (its ``node=`` names it, or it
    names no tray); None otherwise."""
    params = faults.get(knob)
    if params is None:
        return None
    wanted = params.get("node")
    return params if not wanted or wanted == node_name(node) else None


def tray_gpus(params: dict[str, Any]) -> list[int]:
    """The GPUs of a tray (0..3, as nvidia-smi numbers them) that a fault's ``gpu=`` names: one, a list
    ``0,2``, a range ``1-3`` or ``all``; every GPU when not given (validated by ``sim/rack fault``)."""
    return faultspec.gpu_list(params.get("gpu", "all"), GPUS_PER_TRAY)
