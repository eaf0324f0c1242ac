# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutation fuzzer of the host checks' parsers over the outputs in tests/fixtures/ (seeded, deterministic).

The sibling of ``bench/fuzz_outputs.py`` for what the ``dcgm_diag`` and ``gpu_health`` pods print:

- ``dcgm_diag``: ``dcgmi diag -j`` documents (tests/fixtures/dcgm, written from DCGM 4.6.0's source), each in a pod
  log with dcgmi's exit status, judged by the check's own entry point (``DcgmDiagCheck.judge_tray``, which reads
  them with ``dcgm_json``) for a tray of 4 GPUs;
- ``kernel_log``: real kernel logs (tests/fixtures/nvidia-smi/h100-device-dmesg-*), read by
  ``kernel_log.parse_kernel_log``: a tray passes while no Xid and no fatal SXid is in it;
- ``gpu_memory``: real ``nvidia-smi -q -x`` reports, read by ``gpu_memory.memory_problems``;
- ``fabric_health``: the same reports' fabric health rows, read by ``nvidia_smi.fabric_health_faults``;
- ``nvlink_status``: ``nvidia-smi nvlink -s`` (real public GB200 and V100 outputs, the H200 capture, the GB200 ones
  synthesized in that layout), judged by ``gpu_health.nvlink_status_problems`` for a tray of the seed's GPUs with
  18 links each.

Each case applies one mutation to one seed. **Cosmetic** mutations leave the data as they were (JSON re-indented,
keys reordered, ids as strings, a line before the JSON; CRLF, trailing blanks, unrelated kernel lines, wall-clock
stamps; XML re-indented): verdict and numbers must be the seed's. **Damaging** ones take evidence away or add a
fault (a GPU's result dropped, a Skip or Not Run, an exit status the JSON does not explain, a GPU the tray does not
have, the JSON cut; an Xid in any form the driver prints, MIG's included, or a fatal SXid; a memory fault or an
uncorrectable count; a fabric health row showing a fault; a link inactive, without a figure or not listed, a GPU
unread or left out): the verdict must fail. Only applied to seeds that pass. **Neutral** ones (random cuts, flipped
characters, nulls and wrong types in the JSON, huge and empty inputs) are only checked for tracebacks.

A traceback is any exception but the entry point's documented one (``ValueError`` for ``memory_problems``; none for
the others), or a failing verdict without a one-line reason. The table counts per parser: cases, expected-fail
cases, false passes, false failures on cosmetic input, tracebacks; the exit status is 1 when any of the last three
is not 0.

    python bench/fuzz_host_outputs.py                    # 3000 cases, seed 0
    python bench/fuzz_host_outputs.py --cases 20000 --seed 7 --show 5
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from module_process import import_collection

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"


import_collection()

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import gpu_memory, kernel_log, nvidia_smi  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import dcgm_diag, gpu_health  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import MARK  # noqa: E402

COSMETIC = "cosmetic"
DAMAGING = "damaging"
NEUTRAL = "neutral"
GPUS = 4  # a GB200 tray


@dataclass(frozen=True)
class Observation:
    """What an entry point said: the verdict, the numbers a cosmetic change must not move, and the reason."""

    passed: bool
    numbers: Any
    reason: str


class Unclean(Exception):
    """A failing verdict without a clean one-line reason."""


@dataclass
class Seed:
    name: str
    content: Any
    baseline: Optional[Observation] = None


Mutation = Callable[[random.Random, Seed], Any]


@dataclass
class Target:
    """One parser: its seeds, its entry point, its allowed errors and its mutations by kind."""

    name: str
    seeds: List[Seed]
    observe: Callable[[Any], Observation]
    allowed: Tuple[type, ...]
    mutations: Dict[str, List[Tuple[str, Mutation]]]
    weight: float = 1.0

    def run(self, content: Any) -> Observation:
        try:
            observed = self.observe(content)
        except self.allowed as exc:  # pylint: disable=catching-non-exception  # a tuple of exception classes
            observed = Observation(False, ("error", type(exc).__name__), str(exc))
        if not observed.passed and (not observed.reason.strip() or "\n" in observed.reason):
            raise Unclean(f"unclean reason: {observed.reason[:200]!r}")
        return observed


# --------------------------------------------------------------------------------------------
# Text mutations any output can take
# --------------------------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    return content["text"] if isinstance(content, dict) else content


def _with_text(seed: Seed, text: str) -> Any:
    return dict(seed.content, text=text) if isinstance(seed.content, dict) else text


def neutral_text_mutations() -> List[Tuple[str, Mutation]]:
    def cut(rng: random.Random, seed: Seed) -> Any:
        text = _text_of(seed.content)
        return _with_text(seed, text[: rng.randrange(len(text) + 1)])

    def drop_line(rng: random.Random, seed: Seed) -> Any:
        lines = _text_of(seed.content).split("\n")
        del lines[rng.randrange(len(lines))]
        return _with_text(seed, "\n".join(lines))

    def double_line(rng: random.Random, seed: Seed) -> Any:
        lines = _text_of(seed.content).split("\n")
        at = rng.randrange(len(lines))
        lines.insert(at, lines[at])
        return _with_text(seed, "\n".join(lines))

    def flip(rng: random.Random, seed: Seed) -> Any:
        chars = list(_text_of(seed.content))
        for _count in range(rng.randint(1, 8)):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice('0123456789-:.()[]{}",<>/ \n\tNYes\x00\ufffd')
        return _with_text(seed, "".join(chars))

    def random_bytes(rng: random.Random, seed: Seed) -> Any:
        raw = bytearray(_text_of(seed.content).encode())
        for _count in range(rng.randint(1, 6)):
            raw.insert(rng.randrange(len(raw) + 1), rng.randrange(256))
        return _with_text(seed, bytes(raw).decode("utf-8", errors="replace"))

    def huge(rng: random.Random, seed: Seed) -> Any:
        return _with_text(seed, _text_of(seed.content) * rng.randint(10, 30))

    def empty(rng: random.Random, seed: Seed) -> Any:
        return _with_text(seed, rng.choice(("", " ", "\n\n", "\x00", "\ufffd")))

    return [
        ("cut anywhere", cut),
        ("drop a line", drop_line),
        ("double a line", double_line),
        ("flip characters", flip),
        ("random bytes", random_bytes),
        ("huge input", huge),
        ("empty input", empty),
    ]


def crlf(_rng: random.Random, seed: Seed) -> Any:
    return _with_text(seed, _text_of(seed.content).replace("\n", "\r\n"))


def trailing_blanks(rng: random.Random, seed: Seed) -> Any:
    lines = _text_of(seed.content).split("\n")
    return _with_text(seed, "\n".join(line + rng.choice(("", " ", "  ", "\t")) for line in lines))


# --------------------------------------------------------------------------------------------
# dcgm_diag: dcgmi diag -j in a pod log, judged for a tray of 4 GPUs
# --------------------------------------------------------------------------------------------

# seed -> (dcgmi's exit status, level): the statuses the README of tests/fixtures/dcgm gives each document
DCGM_SEEDS = {
    "dcgm-4.6.0-r1-gb200-pass.json": (0, 1),
    "dcgm-4.6.0-r1-gpu2-row-remap-pending.json": (226, 1),
    "dcgm-4.6.0-r1-gpu1-recovery-reset-whole-test.json": (226, 1),
    "dcgm-4.6.0-r1-gpu3-persistence-mode-warn.json": (226, 1),
    "dcgm-4.6.0-r1-cuda-env-no-entity.json": (226, 1),
    "dcgm-4.6.0-runtime-error.json": (217, 1),
    "dcgm-4.6.0-r3-gb200-pass-nccl-skip.json": (0, 3),
    "dcgm-4.6.0-r1-iterations-2.json": (226, 1),
    "dcgm-r1-imex-unhealthy-hypothetical.json": (205, 1),
}
CHECKS = {level: dcgm_diag.DcgmDiagCheck(level=level) for level in (1, 2, 3)}


def dcgm_observe(content: Dict[str, Any]) -> Observation:
    mark = MARK
    log = f"{mark} begin dcgmi diag\n{content['text']}\n{mark} end dcgmi diag rc={content['status']}\n"
    finding = CHECKS[content["level"]].judge_tray("t", log, GPUS)
    details = finding.details
    numbers = (tuple(finding.problems), tuple(finding.notes), tuple(details.get("gpus", ())), details.get("tests"))
    if any("\n" in line for line in finding.problems + finding.notes):
        raise Unclean(f"a problem or note of more than one line: {finding.problems + finding.notes}")
    return Observation(finding.passed, numbers, "; ".join(finding.problems))


def _runs(document: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [r for r in document.get("iterations", [document]) if isinstance(r, dict)]


def results_of(document: Dict[str, Any]) -> List[Tuple[Dict[str, Any], List[Dict[str, Any]]]]:
    """(test, its results) of every test of every run."""
    return [
        (test, test["results"])
        for run in _runs(document)
        for category in run["DCGM Diagnostic"].get("test_categories", [])
        for test in category["tests"]
    ]


def dcgm_json_mutation(change: Callable[[random.Random, Dict[str, Any]], Optional[bool]]) -> Mutation:
    """A mutation of the parsed document, dumped as dcgmi prints it (None when it does not apply)."""

    def mutate(rng: random.Random, seed: Seed) -> Optional[Dict[str, Any]]:
        document = json.loads(seed.content["text"])
        if change(rng, document) is False:
            return None
        return dict(seed.content, text=json.dumps(document, indent=3))

    return mutate


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


def dcgm_reindent(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    document = json.loads(seed.content["text"])
    return dict(seed.content, text=json.dumps(document, indent=rng.choice((None, 1, 2, 4, "\t"))))


def dcgm_keys_reordered(_rng: random.Random, seed: Seed) -> Dict[str, Any]:
    return dict(seed.content, text=json.dumps(_reversed_keys(json.loads(seed.content["text"])), indent=3))


def dcgm_line_before(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    line = rng.choice(("Successfully started the diagnostic", "Warning: nvvs.log is not writable", ""))
    return dict(seed.content, text=f"{line}\n{seed.content['text']}")


def _ids_as_text(_rng: random.Random, document: Dict[str, Any]) -> None:
    for _test, results in results_of(document):
        for result in results:
            result["entity_id"] = str(result["entity_id"])


def _pick_result(rng: random.Random, document: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    _test, results = rng.choice(results_of(document))
    return results, rng.choice(results)


def _drop_result(rng: random.Random, document: Dict[str, Any]) -> None:
    results, result = _pick_result(rng, document)
    results.remove(result)


def _skip_result(rng: random.Random, document: Dict[str, Any]) -> None:
    result = _pick_result(rng, document)[1]
    result["status"] = "Skip"
    result.pop("warnings", None)


def _not_run_result(rng: random.Random, document: Dict[str, Any]) -> None:
    result = _pick_result(rng, document)[1]
    result["status"] = "Not Run"
    result.pop("warnings", None)


def _fail_result(rng: random.Random, document: Dict[str, Any]) -> None:
    result = _pick_result(rng, document)[1]
    result["status"] = "Fail"
    result["warnings"] = [
        {"error_category": 10, "error_id": 85, "error_severity": 6, "warning": "row remappings are pending"}
    ]


def _warning_on_a_pass(rng: random.Random, document: Dict[str, Any]) -> Optional[bool]:
    passing = [r for _test, results in results_of(document) for r in results if r["status"] == "Pass"]
    if not passing:
        return False
    rng.choice(passing)["warnings"] = [
        {"error_category": 10, "error_id": 9, "error_severity": 6, "warning": "A corrupt InfoROM has been detected"}
    ]
    return None


def _gpu_not_on_the_tray(rng: random.Random, document: Dict[str, Any]) -> None:
    result = _pick_result(rng, document)[1]
    result["entity_id"] = rng.randint(GPUS, 71)


def _drop_test(rng: random.Random, document: Dict[str, Any]) -> None:
    run = rng.choice(_runs(document))
    category = rng.choice(run["DCGM Diagnostic"]["test_categories"])
    category["tests"].pop(rng.randrange(len(category["tests"])))


def _runtime_error(rng: random.Random, document: Dict[str, Any]) -> None:
    rng.choice(_runs(document))["DCGM Diagnostic"]["runtime_error"] = "Error: Unable to complete diagnostic"


def dcgm_status_disagrees(_rng: random.Random, seed: Seed) -> Dict[str, Any]:
    return dict(seed.content, status=0 if seed.content["status"] else 226)


def dcgm_cut_json(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    text = seed.content["text"]
    return dict(seed.content, text=text[: rng.randrange(1, text.rindex("}"))])


JUNK = (None, "x", [], {}, 7, -1, True, 1.5, [None], {"a": None})


def _junk_anywhere(rng: random.Random, document: Dict[str, Any]) -> None:
    """A value of the document (at any depth) replaced by null or a value of another kind."""
    places: List[Tuple[Any, Any]] = []

    def walk(value: Any) -> None:
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            places.append((value, key))
            walk(child)

    walk(document)
    parent, key = rng.choice(places)
    parent[key] = copy.deepcopy(rng.choice(JUNK))


def dcgm_target() -> Target:
    seeds = [
        Seed(name, {"text": (FIXTURES / "dcgm" / name).read_text(), "status": status, "level": level})
        for name, (status, level) in DCGM_SEEDS.items()
    ]
    return Target(
        "dcgm_diag",
        seeds,
        dcgm_observe,
        (),
        {
            COSMETIC: [
                ("JSON re-indented", dcgm_reindent),
                ("keys reordered", dcgm_keys_reordered),
                ("a line before the JSON", dcgm_line_before),
                ("entity ids as text", dcgm_json_mutation(_ids_as_text)),
            ],
            DAMAGING: [
                ("a GPU's result dropped", dcgm_json_mutation(_drop_result)),
                ("a result skipped", dcgm_json_mutation(_skip_result)),
                ("a result printed as Not Run", dcgm_json_mutation(_not_run_result)),
                ("a result failed", dcgm_json_mutation(_fail_result)),
                ("an error on a passing GPU", dcgm_json_mutation(_warning_on_a_pass)),
                ("a GPU the tray does not have", dcgm_json_mutation(_gpu_not_on_the_tray)),
                ("a test dropped", dcgm_json_mutation(_drop_test)),
                ("a runtime error", dcgm_json_mutation(_runtime_error)),
                ("an exit status the JSON does not explain", dcgm_status_disagrees),
                ("the JSON cut", dcgm_cut_json),
            ],
            NEUTRAL: [("null or junk anywhere", dcgm_json_mutation(_junk_anywhere)), *neutral_text_mutations()],
        },
    )


# --------------------------------------------------------------------------------------------
# kernel_log: Xid and SXid lines of real kernel logs
# --------------------------------------------------------------------------------------------

KERNEL_SEEDS = (
    "h100-device-dmesg-nvrm-boot.txt",
    "h100-device-dmesg-T-nvrm-boot.txt",
    "h100-device-dmesg-nvrm-xid.txt",
    "h100-device-dmesg-T-nvrm-xid.txt",
)
OTHER_KERNEL_LINES = (
    "[ 12.345678] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode.",
    "[ 12.4] nvidia-nvlink: Nvlink Core is being initialized, major device number 240",
    "[ 99.0] NVRM: GPU at PCI:0009:01:00: GPU-3f1c2a9e-5b7d-4c1e-9a2b-7d6e5f4c3b2a",
    "[ 99.1] NVRM: GPU Board Serial Number: 1652220001000",
    "[ 120.0] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
)
# Every form of the driver's Xid line (kernel_log's docstring gives the sources), and a fatal SXid.
EVENT_LINES = (
    "NVRM: Xid (PCI:0009:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "NVRM: Xid (0000:03:00): 48, An uncorrectable double bit error (DBE) has been detected",
    "NVRM: Xid (PCI:0018:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
    "NVRM: Xid (PCI:0019:01:00 GPU-I:01 GPU-CI:02): 95, pid=9, name=python3, Uncontained: FBHUB. RST: Yes",
    "NVRM: Xid (PCI:0008:01:00 GPU-I:3 GPU-C:1): 13, pid=12, name=x, Graphics Exception",
    "nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
)


def kernel_observe(text: str) -> Observation:
    log = kernel_log.parse_kernel_log(text)
    fatal = [s for s in log.sxids if s.fatal]
    numbers = (
        tuple((x.code, x.pci, x.gpu_instance, x.compute_instance, x.text) for x in log.xids),
        tuple((s.switch, s.code, s.fatal, s.text) for s in log.sxids),
    )
    reason = "; ".join([f"Xid {x.code} at {x.where}" for x in log.xids] + [f"SXid {s.code}" for s in fatal])
    return Observation(not log.xids and not fatal, numbers, reason)


def kernel_other_lines(rng: random.Random, seed: Seed) -> str:
    lines = seed.content.split("\n")
    for _count in range(rng.randint(1, 5)):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(OTHER_KERNEL_LINES))
    return "\n".join(lines)


def kernel_wall_clock(rng: random.Random, seed: Seed) -> str:
    """The raw ``[seconds]`` stamps as ``dmesg -T`` prints them."""
    stamp = f"[Mon Dec  7 0{rng.randint(0, 9)}:12:3{rng.randint(0, 9)} 2026]"
    return "\n".join(
        stamp + line[line.index("]") + 1 :] if line.startswith("[") and "]" in line else line
        for line in seed.content.split("\n")
    )


def kernel_event(rng: random.Random, seed: Seed) -> str:
    lines = seed.content.split("\n")
    stamp = rng.choice(("[ 4242.000001] ", "[Mon Dec  7 03:12:30 2026] ", ""))
    lines.insert(rng.randrange(len(lines) + 1), stamp + rng.choice(EVENT_LINES))
    return "\n".join(lines)


def kernel_target() -> Target:
    seeds = [Seed(name, (FIXTURES / "nvidia-smi" / name).read_text()) for name in KERNEL_SEEDS]
    return Target(
        "kernel_log",
        seeds,
        kernel_observe,
        (),
        {
            COSMETIC: [
                ("CRLF", crlf),
                ("trailing blanks", trailing_blanks),
                ("other kernel lines", kernel_other_lines),
                ("wall-clock stamps", kernel_wall_clock),
            ],
            DAMAGING: [("an Xid or fatal SXid in any form", kernel_event)],
            NEUTRAL: neutral_text_mutations(),
        },
    )


# --------------------------------------------------------------------------------------------
# gpu_memory: the memory faults of nvidia-smi -q -x
# --------------------------------------------------------------------------------------------

MEMORY_SEEDS = (
    "h100-device-nvidia-smi-q.xml",
    "h200-device-nvidia-smi-q.xml",
    "h200x2-nvidia-smi-q.xml",
    "synth-gb200-nvidia-smi-q.xml",
)
FAULT_ELEMENTS = tuple(path.rsplit("/", 1)[1] for path, _meaning in gpu_memory.YES_FAULTS)


def memory_observe(text: str) -> Observation:
    problems = gpu_memory.memory_problems(text)
    reason = "; ".join(f"GPU {index}: {', '.join(found)}" for index, found in sorted(problems.items()))
    return Observation(not problems, tuple(sorted((k, tuple(v)) for k, v in problems.items())), reason)


def memory_reindent(rng: random.Random, seed: Seed) -> str:
    indent = rng.choice(("  ", "    ", " "))
    return "\n".join(line.replace("\t", indent) for line in seed.content.split("\n"))


def _gpu_parts(text: str) -> List[str]:
    return text.split("<gpu id=")


def memory_fault(rng: random.Random, seed: Seed) -> Optional[str]:
    parts = _gpu_parts(seed.content)
    at = rng.randrange(1, len(parts))
    element = rng.choice(FAULT_ELEMENTS)
    for old in (f"<{element}>No</{element}>", f"<{element}>N/A</{element}>"):
        if old in parts[at]:
            parts[at] = parts[at].replace(old, f"<{element}>Yes</{element}>", 1)
            return "<gpu id=".join(parts)
    return None


def memory_uncorrectable(rng: random.Random, seed: Seed) -> Optional[str]:
    parts = _gpu_parts(seed.content)
    at = rng.randrange(1, len(parts))
    volatile = parts[at].find("<volatile>")
    old = "<dram_uncorrectable>0</dram_uncorrectable>"
    where = parts[at].find(old, volatile)
    if volatile < 0 or where < 0:
        return None
    new = f"<dram_uncorrectable>{rng.randint(1, 9)}</dram_uncorrectable>"
    parts[at] = parts[at][:where] + new + parts[at][where + len(old) :]
    return "<gpu id=".join(parts)


def memory_target() -> Target:
    seeds = [Seed(name, (FIXTURES / "nvidia-smi" / name).read_text()) for name in MEMORY_SEEDS]
    return Target(
        "gpu_memory",
        seeds,
        memory_observe,
        (ValueError,),
        {
            COSMETIC: [("CRLF", crlf), ("XML re-indented", memory_reindent)],
            DAMAGING: [("a memory fault", memory_fault), ("an uncorrectable error count", memory_uncorrectable)],
            NEUTRAL: neutral_text_mutations(),
        },
        weight=0.5,
    )


# --------------------------------------------------------------------------------------------
# fabric_health: the fabric health rows of nvidia-smi -q -x
# --------------------------------------------------------------------------------------------

# a healthy row's value -> the value of a fault there (nvidia_smi.FABRIC_HEALTH_ROWS)
FABRIC_ROW_FAULTS = {
    "bandwidth": ("Full", "Degraded"),
    "route_unhealthy": ("False", "True"),
    "route_recovery_in_progress": ("False", "True"),
    "access_timeout_recovery": ("False", "True"),
}


def fabric_health_observe(text: str) -> Observation:
    faults = nvidia_smi.fabric_health_faults(text)
    reason = "; ".join(f"GPU {index}: {', '.join(found)}" for index, found in sorted(faults.items()))
    return Observation(not faults, tuple(sorted((k, tuple(v)) for k, v in faults.items())), reason)


def fabric_health_fault(rng: random.Random, seed: Seed) -> Optional[str]:
    parts = _gpu_parts(seed.content)
    at = rng.randrange(1, len(parts))
    row = rng.choice(sorted(FABRIC_ROW_FAULTS))
    healthy, fault = FABRIC_ROW_FAULTS[row]
    old = f"<{row}>{healthy}</{row}>"
    if old not in parts[at]:
        return None
    parts[at] = parts[at].replace(old, f"<{row}>{fault}</{row}>", 1)
    return "<gpu id=".join(parts)


def fabric_health_target() -> Target:
    seeds = [Seed(name, (FIXTURES / "nvidia-smi" / name).read_text()) for name in MEMORY_SEEDS]
    return Target(
        "fabric_health",
        seeds,
        fabric_health_observe,
        (ValueError,),
        {
            COSMETIC: [("CRLF", crlf), ("XML re-indented", memory_reindent)],
            DAMAGING: [("a fabric health row showing a fault", fabric_health_fault)],
            NEUTRAL: neutral_text_mutations(),
        },
        weight=0.3,
    )


# --------------------------------------------------------------------------------------------
# nvlink_status: nvidia-smi nvlink -s, judged for a tray of the seed's GPUs with 18 links each
# --------------------------------------------------------------------------------------------

# seed -> the GPUs its tray has: real public and captured outputs, and the GB200 ones synthesized in that layout
NVLINK_STATUS_SEEDS = {
    "h200x2-nvidia-smi-nvlink-s.txt": 2,
    "gb200-k8s-test-infra-371-nvidia-smi-nvlink-s.txt": 2,
    "v100-azhpc-diagnostics-73-nvidia-smi-nvlink-s.txt": 4,
    "synth-gb200-nvidia-smi-nvlink-s.txt": GPUS,
    "synth-gb200-degraded-nvidia-smi-nvlink-s.txt": GPUS,
}
NVLINK_LINE_FAULTS = (
    "<inactive>",
    "N/A",
    "Not Supported",
)


def nvlink_status_observe(content: Dict[str, Any]) -> Observation:
    problems, up = gpu_health.nvlink_status_problems(content["text"], content["gpus"], gpu_health.NVLINKS_PER_GPU)
    if any("\n" in line for line in problems):
        raise Unclean(f"a problem of more than one line: {problems}")
    return Observation(not problems, (tuple(problems), up), "; ".join(problems))


def nvlink_status_indent(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    """The tab and space before each link as a copy into an issue shows them: spaces only."""
    indent = rng.choice(("         ", "    ", "\t"))
    return _with_text(
        seed,
        "\n".join(
            indent + line.lstrip() if line.lstrip().startswith("Link ") else line
            for line in seed.content["text"].split("\n")
        ),
    )


def _link_lines(seed: Seed) -> List[int]:
    return [n for n, line in enumerate(seed.content["text"].split("\n")) if line.lstrip().startswith("Link ")]


def nvlink_link_down(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    lines = seed.content["text"].split("\n")
    at = rng.choice(_link_lines(seed))
    lines[at] = lines[at][: lines[at].index(":") + 1] + " " + rng.choice(NVLINK_LINE_FAULTS)
    return _with_text(seed, "\n".join(lines))


def nvlink_link_dropped(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    lines = seed.content["text"].split("\n")
    del lines[rng.choice(_link_lines(seed))]
    return _with_text(seed, "\n".join(lines))


def nvlink_gpu_unread(rng: random.Random, seed: Seed) -> Dict[str, Any]:
    """One GPU's links replaced by what NVML prints when it cannot tell, or the GPU left out."""
    blocks = seed.content["text"].split("GPU ")
    at = rng.randrange(1, len(blocks))
    head = blocks[at].split("\n", 1)[0]
    unread = (
        head + " NVML: Unable to retrieve Nvlink information as all links are inActive\n",
        head + "\n\t NVML: Unable to retrieve NVLink information: Not Supported\n",
        None,
    )
    blocks[at : at + 1] = [text for text in [rng.choice(unread)] if text is not None]
    return _with_text(seed, "GPU ".join(blocks))


def nvlink_status_target() -> Target:
    seeds = [
        Seed(name, {"text": (FIXTURES / "nvidia-smi" / name).read_text(), "gpus": gpus})
        for name, gpus in NVLINK_STATUS_SEEDS.items()
    ]
    return Target(
        "nvlink_status",
        seeds,
        nvlink_status_observe,
        (),
        {
            COSMETIC: [("CRLF", crlf), ("trailing blanks", trailing_blanks), ("indent", nvlink_status_indent)],
            DAMAGING: [
                ("a link inactive or without a figure", nvlink_link_down),
                ("a link not listed", nvlink_link_dropped),
                ("a GPU unread or not listed", nvlink_gpu_unread),
            ],
            NEUTRAL: neutral_text_mutations(),
        },
        weight=0.5,
    )


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    expected_fail: int = 0
    false_passes: int = 0
    false_failures: int = 0
    tracebacks: int = 0
    examples: List[str] = field(default_factory=list)

    def bad(self) -> int:
        return self.false_passes + self.false_failures + self.tracebacks


def targets() -> List[Target]:
    found = [dcgm_target(), kernel_target(), memory_target(), fabric_health_target(), nvlink_status_target()]
    for target in found:
        for seed in target.seeds:
            seed.baseline = target.run(seed.content)
    return found


def run_case(target: Target, rng: random.Random) -> Tuple[str, str, str, Optional[str]]:
    """One case: (kind, seed name, mutation name, what went wrong or None)."""
    seed = rng.choice(target.seeds)
    assert seed.baseline is not None
    kind = rng.choice([COSMETIC, NEUTRAL] + ([DAMAGING] if seed.baseline.passed else []))
    content, name = None, ""
    for _attempt in range(10):
        name, mutate = rng.choice(target.mutations[kind])
        try:
            content = mutate(rng, seed)
        except (IndexError, KeyError, TypeError, ValueError, AttributeError):
            content = None  # the mutation does not apply to this seed
        if content is not None:
            break
    if content is None:
        kind, name, content = NEUTRAL, "unchanged", seed.content
    try:
        observed = target.run(content)
    except Exception as exc:  # any exception is what the fuzzer counts
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return (
            kind,
            seed.name,
            name,
            f"traceback: {type(exc).__name__}: {str(exc)[:100]} at {where.name}:{where.lineno}",
        )
    if kind == DAMAGING and observed.passed:
        return kind, seed.name, name, "false pass"
    if kind == COSMETIC and (observed.passed, observed.numbers) != (seed.baseline.passed, seed.baseline.numbers):
        return kind, seed.name, name, f"false failure: {observed.reason[:160]}"
    return kind, seed.name, name, None


def run_fuzz(cases: int = 3000, seed: int = 0) -> Dict[str, Tally]:
    """Run ``cases`` seeded cases over every parser; the tally per parser."""
    found = targets()
    picker = random.Random(seed)
    weights = [t.weight for t in found]
    tallies = {t.name: Tally() for t in found}
    for number in range(cases):
        target = picker.choices(found, weights)[0]
        kind, seed_name, mutation, problem = run_case(target, random.Random(f"{seed}:{number}"))
        tally = tallies[target.name]
        tally.cases += 1
        tally.expected_fail += kind == DAMAGING
        if problem is None:
            continue
        if problem.startswith("traceback"):
            tally.tracebacks += 1
        elif problem == "false pass":
            tally.false_passes += 1
        else:
            tally.false_failures += 1
        tally.examples.append(f"case {number}: {seed_name}, {kind} '{mutation}': {problem}")
    return tallies


def table(tallies: Dict[str, Tally]) -> str:
    rows = [
        "| parser | cases | expected-fail | false passes | false failures (cosmetic) | tracebacks |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, t in tallies.items():
        rows.append(
            f"| {name} | {t.cases} | {t.expected_fail} | {t.false_passes} | {t.false_failures} | {t.tracebacks} |"
        )
    every = list(tallies.values())
    rows.append(
        f"| all | {sum(t.cases for t in every)} | {sum(t.expected_fail for t in every)} "
        f"| {sum(t.false_passes for t in every)} | {sum(t.false_failures for t in every)} "
        f"| {sum(t.tracebacks for t in every)} |"
    )
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000, help="number of cases (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--show", type=int, default=3, help="examples to print per parser with problems")
    args = parser.parse_args(argv)
    tallies = run_fuzz(args.cases, args.seed)
    print(f"python bench/fuzz_host_outputs.py --cases {args.cases} --seed {args.seed}\n")
    print(table(tallies))
    for name, tally in tallies.items():
        for example in tally.examples[: args.show]:
            print(f"  {name}: {example}")
    return 1 if any(t.bad() for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
