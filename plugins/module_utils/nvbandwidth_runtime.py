# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""How long one rack's nvbandwidth run takes, per testcase: the model behind the check's wait.

nvbandwidth measures its pairs one after another (facts read in the NVIDIA/nvbandwidth source, v0.7 and
v0.8 alike): ``device_to_device_*`` and ``multinode_device_to_device_*`` loop over every ordered pair of
distinct GPUs, N*(N-1) steps (5,112 on a 72-GPU NVL72); ``host_to_device_*`` / ``device_to_host_*`` one
step per GPU; ``multinode_bisect_write_ce`` ONE step in which every GPU i writes to GPU (i + N/2) mod N at
once. In each step nvbandwidth allocates the step's buffers (multinode: a fabric allocation created by
its owner, its handle broadcast with MPI and imported by every rank, then an MPI barrier; another at
free), and runs ``testSamples`` samples, each a pattern fill, ``WARMUP_COUNT`` untimed copies,
``loopCount`` timed copies, two MPI barriers and a check of the copied data.

A step therefore costs ``copies x buffer / pair bandwidth`` plus a set-up per step and per buffer (and,
multinode, MPI coordination per buffer); the process costs its start-up once. Only this module's
constants say how much; each names where its number comes from, and the ones not measured yet say so
(the issue on measuring nvbandwidth on two real GPUs refines them).

Standard library only: the simulated rack's launcher stand-in (``sim/simrack``) loads this file too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

# -- nvbandwidth's defaults (common.h, memcpy.cpp of NVIDIA/nvbandwidth v0.7 and v0.8) --------------------
DEFAULT_BUFFER_MIB = 512  # defaultBufferSize; option -b / --bufferSize (MiB)
DEFAULT_TEST_SAMPLES = 3  # defaultAverageLoopCount; option -i / --testSamples
DEFAULT_LOOP_COUNT = 16  # defaultLoopCount; option --loopCount: timed copies per sample
WARMUP_COPIES = 4  # WARMUP_COUNT in memcpy.cpp: untimed copies before each sample's timed ones (they add)
MIB = 1024 * 1024

# -- pair bandwidth (GB/s, 1e9 bytes/s) when the caller has no figure -------------------------------------
# The product references of bandwidth_thresholds: GB200 read CE 820.35-822.16 on driver 580 (the guide's run),
# H200 393.6-393.8 on 580 (the real 2x H200 capture in tests/fixtures/nvbandwidth).
NVLINK_GBPS_BY_PRODUCT: Tuple[Tuple[str, float], ...] = (
    ("GB200", 820.0),
    ("GB300", 820.0),
    ("B200", 820.0),
    ("H200", 394.0),
    ("H100", 394.0),
    ("GH200", 394.0),
)
# A product not in the table: the lowest NVLink figure above, so the wait errs long, never short.
FALLBACK_NVLINK_GBPS = 394.0
# Host <-> device over PCIe Gen5 x16 (H200 SXM): MEASURED on one H200 (driver 580.159.04, nvbandwidth
# v0.7): host_to_device_memcpy_ce 54.5-55.5 GB/s, device_to_host_memcpy_ce 54.8-55.4 GB/s, every buffer
# size from 64 to 512 MiB (tests/fixtures/nvbandwidth/h200x1-timings).
HOST_GBPS = 55.0

# -- costs beyond the copies (seconds) --------------------------------------------------------------------
# Process start-up of a single-node run (CUDA init of the GPUs, contexts, output): fitted so that the
# whole process of device_to_device_memcpy_read_ce on a real 2x H200 (driver 580, nvbandwidth v0.8,
# 512 MiB) models to 1.16 s, measured 1.0-1.2 s. On one H200 a process that starts CUDA and runs no
# testcase measured 0.31-0.36 s (h200x1-timings): the rest of the fit is the second GPU and peer access.
SINGLE_NODE_STARTUP_S = 0.8
# Per step: streams and events, the result's statistics (from the same 2x H200 fit).
STEP_SETUP_S = 0.02
# Per device buffer of a step: allocate and map 512 MiB, fill it with the pattern and check it after each
# sample at HBM speed (2x H200 fit: 2 pairs x (0.02 + 2 x 0.04 + 0.082 copies) + 0.8 = 1.16 s).
DEVICE_BUFFER_SETUP_S = 0.04
# Per pinned host buffer: cuMemHostAlloc of 512 MiB and the pattern fill over PCIe: fitted so that the
# whole process of host_to_device_memcpy_ce on the 2x H200 (2 steps) models to 2.5 s, measured 2.5 s.
# On one H200, pinning 512 MiB alone measured 0.24-0.27 s (h200x1-timings, ce_timer).
HOST_BUFFER_SETUP_S = 0.2
# Multinode, per buffer: MPI_Bcast of the fabric handle, its import and mapping on every other rank
# through IMEX, an MPI barrier at allocation and one at free, and its share of each sample's two
# barriers. ASSUMED (no multinode timing is at hand): a few collectives over the ranks' TCP network
# (tens of microseconds to milliseconds each on 72 ranks) and the fabric import on 71 ranks.
MPI_PER_BUFFER_S = 0.025
# Multinode process start-up: mpirun reaching every worker over ssh, MPI_Init over 72 ranks, CUDA init of
# each GPU. ASSUMED; the estimates of a whole run were 9 to 40 minutes, this model's default
# testcase on 72 GPUs is about 16.
MULTINODE_STARTUP_S = 10.0

# -- the check's wait ---------------------------------------------------------------------------------------
# Everything before and around the run: namespace, ComputeDomain Ready on every tray, the image pulled on
# every tray (a first pull of the nvbandwidth image on a fresh rack takes minutes), sshd up in every
# worker, the launcher's log read. 900 s is the fixed wait the check had before this model, which covered
# all of it on the sim and on the example rack: nothing that finished in time then times out now.
START_ALLOWANCE_S = 900.0
# The modelled run time is multiplied by this: the model's assumed constants may be off by as much (a
# busy management network, slower IMEX imports), and a run that is merely slow must not end in `error`.
SAFETY_FACTOR = 2.0


@dataclass(frozen=True)
class Shape:
    """How a testcase walks the GPUs: steps run one after another; in each, ``concurrent`` copies at once."""

    steps: str  # "ordered_pairs" (N*(N-1)), "gpus" (N), "one" (a single step)
    buffers_per_copy: int  # device or host buffers one copy needs (bidirectional: twice the one-way)
    host: bool = False  # one side is pinned host memory (PCIe, not NVLink)
    multinode: bool = False
    concurrent: str = "one"  # "one" copy (pair) per step, or "gpus": every GPU at once (bisect)


def _shapes() -> Dict[str, Shape]:
    shapes: Dict[str, Shape] = {}
    for engine in ("ce", "sm"):
        for way in ("read", "write"):
            shapes[f"device_to_device_memcpy_{way}_{engine}"] = Shape("ordered_pairs", 2)
            shapes[f"device_to_device_bidirectional_memcpy_{way}_{engine}"] = Shape("ordered_pairs", 4)
            shapes[f"multinode_device_to_device_memcpy_{way}_{engine}"] = Shape("ordered_pairs", 2, multinode=True)
            shapes[f"multinode_device_to_device_bidirectional_memcpy_{way}_{engine}"] = Shape(
                "ordered_pairs", 4, multinode=True
            )
        for way in ("host_to_device", "device_to_host"):
            shapes[f"{way}_memcpy_{engine}"] = Shape("gpus", 2, host=True)
            shapes[f"{way}_bidirectional_memcpy_{engine}"] = Shape("gpus", 4, host=True)
    shapes["multinode_bisect_write_ce"] = Shape("one", 2, multinode=True, concurrent="gpus")
    return shapes


SHAPES: Dict[str, Shape] = _shapes()
# The fleet modes the docs and the benchmark compare (docs/verification.md, "Modelled rack times").
MODES: Tuple[Tuple[str, str], ...] = (
    ("full pairwise (default)", "multinode_device_to_device_memcpy_read_ce"),
    ("full pairwise, write", "multinode_device_to_device_memcpy_write_ce"),
    ("full pairwise, bidirectional", "multinode_device_to_device_bidirectional_memcpy_read_ce"),
    ("fast: bisect", "multinode_bisect_write_ce"),
)


@dataclass(frozen=True)
class Estimate:
    """The modelled run of one testcase on one rack."""

    seconds: float  # the whole process, start-up included
    pairs: int  # GPU pairs (or host-GPU pairs) the testcase measures
    steps: int  # steps run one after another
    per_pair_s: float  # seconds of one step (copies and set-up)
    inputs: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "pairs": self.pairs,
            "steps": self.steps,
            "per_pair_s": round(self.per_pair_s, 4),
            "inputs": dict(self.inputs),
        }


def pair_gbps_for(product: str, testcase: str = "") -> float:
    """The bandwidth one copy of ``testcase`` runs at on ``product`` (``nvidia.com/gpu.product``)."""
    shape = SHAPES.get(testcase)
    if shape is not None and shape.host:
        return HOST_GBPS
    upper = (product or "").upper()
    # the longest name that matches: GH200 is not GB200's H200
    for name, gbps in sorted(NVLINK_GBPS_BY_PRODUCT, key=lambda item: -len(item[0])):
        if name in upper:
            return gbps
    return FALLBACK_NVLINK_GBPS


def modelled_seconds(
    testcase: str,
    gpus: int,
    buffer_mib: float = DEFAULT_BUFFER_MIB,
    iterations: int = DEFAULT_TEST_SAMPLES,
    pair_gbps: float = 0.0,
    loop_count: int = DEFAULT_LOOP_COUNT,
) -> Estimate:
    """The modelled run of ``testcase`` over ``gpus`` ranks (``iterations``: nvbandwidth's ``--testSamples``).

    A testcase this model does not know is modelled as the pairwise one of its kind (multinode or not),
    and ``inputs["assumed_shape"]`` says so. ``pair_gbps`` 0: the fallback NVLink (or host) figure.
    """
    if gpus < 1:
        raise ValueError(f"gpus is {gpus}; a run needs at least one GPU")
    if buffer_mib <= 0 or iterations < 1 or loop_count < 1:
        raise ValueError(
            f"buffer {buffer_mib} MiB, {iterations} samples, loop count {loop_count}: each must be positive"
        )
    shape = SHAPES.get(testcase)
    assumed = shape is None
    if shape is None:
        shape = Shape("ordered_pairs", 2, multinode=testcase.startswith("multinode"))
    gbps = pair_gbps if pair_gbps > 0 else (HOST_GBPS if shape.host else FALLBACK_NVLINK_GBPS)
    copies = iterations * (loop_count + WARMUP_COPIES)
    copy_s = copies * buffer_mib * MIB / (gbps * 1e9)
    scale = buffer_mib / DEFAULT_BUFFER_MIB  # buffer set-up (fill, check, pinning) grows with the buffer
    if shape.host:
        per_buffer = (DEVICE_BUFFER_SETUP_S + HOST_BUFFER_SETUP_S) / 2 * scale
    else:
        per_buffer = DEVICE_BUFFER_SETUP_S * scale
    if shape.multinode:
        per_buffer += MPI_PER_BUFFER_S
    if shape.steps == "ordered_pairs":
        steps, pairs = gpus * (gpus - 1), gpus * (gpus - 1)
    elif shape.steps == "gpus":
        steps, pairs = gpus, gpus
    else:
        steps, pairs = 1, gpus
    copies_per_step = gpus if shape.concurrent == "gpus" else 1
    step_s = STEP_SETUP_S + copies_per_step * shape.buffers_per_copy * per_buffer + copy_s
    startup = MULTINODE_STARTUP_S if shape.multinode else SINGLE_NODE_STARTUP_S
    inputs: Dict[str, Any] = {
        "testcase": testcase,
        "gpus": gpus,
        "buffer_mib": buffer_mib,
        "iterations": iterations,
        "loop_count": loop_count,
        "copies_per_pair": copies,
        "pair_gbps": gbps,
        "copy_s": round(copy_s, 4),
        "startup_s": startup,
    }
    if assumed:
        inputs["assumed_shape"] = "pairwise (testcase not in the model)"
    return Estimate(startup + steps * step_s, pairs, steps, step_s, inputs)


def _option(args: Sequence[str], names: Sequence[str]) -> Optional[str]:
    """The value of the last of ``names`` in ``args`` (``-b 64``, ``--bufferSize 64``, ``--bufferSize=64``)."""
    found: Optional[str] = None
    items = [str(a) for a in args]
    for index, arg in enumerate(items):
        for name in names:
            if arg == name and index + 1 < len(items):
                found = items[index + 1]
            elif name.startswith("--") and arg.startswith(name + "="):
                found = arg[len(name) + 1 :]
    return found


def run_options(args: Sequence[str]) -> Dict[str, float]:
    """Buffer (MiB), samples and loop count that nvbandwidth arguments ``args`` ask for (its defaults else)."""
    options = {
        "buffer_mib": (("-b", "--bufferSize"), float(DEFAULT_BUFFER_MIB)),
        "iterations": (("-i", "--testSamples"), float(DEFAULT_TEST_SAMPLES)),
        "loop_count": (("--loopCount",), float(DEFAULT_LOOP_COUNT)),
    }
    values: Dict[str, float] = {}
    for key, (names, default) in options.items():
        text = _option(args, names)
        try:
            values[key] = float(text) if text is not None else default
        except ValueError:
            raise ValueError(
                f"nvbandwidth argument {names[-1]} is {text!r}; expected a number (fix verify_nvbandwidth_extra_args)"
            ) from None
    return values


def estimate_for(testcase: str, gpus: int, extra_args: Sequence[str] = (), product: str = "") -> Estimate:
    """The modelled run of the check's ``testcase`` with its ``extra_args`` on ``gpus`` GPUs of ``product``."""
    options = run_options(extra_args)
    return modelled_seconds(
        testcase,
        gpus,
        buffer_mib=options["buffer_mib"],
        iterations=int(options["iterations"]),
        pair_gbps=pair_gbps_for(product, testcase),
        loop_count=int(options["loop_count"]),
    )


def wait_seconds(estimate: Estimate, allowance: float = START_ALLOWANCE_S, safety: float = SAFETY_FACTOR) -> int:
    """The check's default wait for a rack: the start allowance plus the modelled run x the safety factor."""
    return math.ceil(allowance + estimate.seconds * safety)


def duration_text(seconds: float) -> str:
    """``seconds`` for a person: 42 s, 16 min 5 s, 1 h 3 min."""
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{total // 60} min {total % 60} s"
    return f"{total // 3600} h {total % 3600 // 60} min"


def plan_text(estimate: Estimate, wait: int) -> str:
    """One line for the plan of a rack: the expected run time and the wait it gets."""
    return (
        f"{estimate.inputs['testcase']} on {estimate.inputs['gpus']} GPUs: {estimate.pairs} pairs in "
        f"{estimate.steps} step(s) of {estimate.per_pair_s:.3f} s, expected {duration_text(estimate.seconds)}; "
        f"waits up to {duration_text(wait)}"
    )


def mode_table(
    gpus: int = 72, product: str = "NVIDIA-GB200", modes: Sequence[Tuple[str, str]] = MODES
) -> List[Dict[str, Any]]:
    """Per fleet mode: its testcase and the modelled run on ``gpus`` GPUs of ``product`` (the docs' table)."""
    rows = []
    for mode, testcase in modes:
        estimate = estimate_for(testcase, gpus, product=product)
        rows.append({"mode": mode, "testcase": testcase, **estimate.to_dict(), "wait_s": wait_seconds(estimate)})
    return rows
