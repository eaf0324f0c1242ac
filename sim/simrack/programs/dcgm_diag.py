# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a ``dcgm_diag`` pod prints on a simulated GB200 tray, and its faults.

The pod's script (``checks/dcgm_diag.py``) starts its own ``nv-hostengine`` on a Unix socket (unless it names the
GPU Operator's with ``--host``) and runs ``dcgmi diag -r <level> -j``, each between markers with its exit status.
Here the host engine prints its start line (``hostengine/src/main.cpp``) and ``dcgmi diag -j`` prints the JSON of
DCGM 4.6.0 as ``dcgmi/Diag.cpp`` builds it (``HelperJsonBuildOutput``; jsoncpp's styled writer: keys sorted,
3-space indent): ``"DCGM Diagnostic"`` with the level's tests (``NvidiaValidationSuite::FillTestVectors``: 1
``software``; 2 adds ``memory`` and ``pcie``; 3 adds ``diagnostic``, ``nvbandwidth``, ``nccl_tests``,
``memory_bandwidth``, ``targeted_stress``, ``targeted_power``), one result per GPU, each test's ``test_summary``,
``entity_groups`` (the tray's 4 GPUs, device id ``2941``, DCGM's GB200 NVL, with serial numbers made from the tray's
name) and ``metadata``. ``nccl_tests`` is ``Skip`` (the DCGM image sets no ``DCGM_NCCL_TESTS_BIN_PATH``).
No real ``dcgmi diag`` capture exists here: the shape is DCGM's code and the texts are ``dcgm_errors.h``'s.
The pod exits with dcgmi's status, as its script does: 0; 226 or 205 (DCGM_ST_NVVS_ERROR, _ISOLATE_ERROR) when a
test found an error; 217 (DCGM_ST_DIAG_ALREADY_RUNNING) for the runtime error; the kwok stages ``gb200-check-pod-*``
then end it ``Failed`` with that code, which the check, judging the output, does not hold against the tray.

The tray's hardware (``simrack/hardware.py``) decides which GPUs are diagnosed and what DCGM finds on its own: a GPU
the driver does not enumerate (``missing-gpu``) is not in DCGM and the GPUs after it take its id; one off the bus
(``gpu-off-bus``) keeps its id and the diagnostic leaves it out (``DcgmDiagManager.cpp``, "Skip GPUs that are lost to
the CM"): it is in neither ``results`` nor ``entity_groups``. The software test (level 1 and up) fails a GPU with a
pending row remap (``row-remap-pending``: ``Software::checkRowRemapping``, DCGM_FR_PENDING_ROW_REMAP 85, that GPU)
and a fabric registration that completed with an error (``fabric-unhealthy``: ``Software::checkFabricManager``,
DCGM_FR_FABRIC_MANAGER_TRAINING_ERROR 112, every GPU of the test). A lost NVLink (``nvlink-down``, ``degraded-gpu``)
is not a diagnostic's: DCGM_FR_NVLINK_DOWN comes from the health watch only, and the pcie plugin's
DCGM_FR_GPU_EXPECTED_NVLINKS_UP needs ``pcie.gpu_nvlinks_expected_up``, 0 (off) by default.

Knobs of this program (``sim/rack fault <knob> node=<tray>``), for what DCGM says beyond the hardware:

* ``dcgm-fail`` (``gpu``, ``test`` software, ``code`` 85): the GPUs named fail the test with DCGM's text for the
  code. As DCGM's software plugin does, some codes fail only their GPU (85, 80: ``SetResultForGpu``) and some mark
  every GPU of the test ``Fail`` with the error on the named GPU only (9, 29, 112, 125: ``SetResult``);
* ``dcgm-imex-unhealthy``: DCGM_FR_IMEX_UNHEALTHY (122, "IMEX daemon status is -3 (not READY)") on every GPU.
  DCGM 4.6.0 raises it from its NVLink health watch, not from a diagnostic plugin: this stands in for a DCGM that
  brings it into the diagnostic, which the check must not fail;
* ``dcgm-runtime-error``: the diagnostic does not run (``runtime_error``: another diagnostic holds the GPUs).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from simrack import hardware, programs
from simrack.nodes import parse_tray_name

CHECK = "dcgm_diag"
FAULTS = {
    "dcgm-fail": ("node", "gpu", "test", "code"),
    "dcgm-imex-unhealthy": ("node",),
    "dcgm-runtime-error": ("node",),
}
FAULT_HELP = {
    "dcgm-fail": "GPUs gpu= of tray node= fail DCGM test test= (software) with DCGM_FR code code= (85)",
    "dcgm-imex-unhealthy": "dcgmi diag reports DCGM_FR_IMEX_UNHEALTHY (122) on every GPU of tray node= (not a fault)",
    "dcgm-runtime-error": "dcgmi diag on tray node= does not run: another diagnostic is running",
}
MARK = "#### gpu-fabric"
DCGM_VERSION = "4.6.0"
DRIVER_VERSION = "580.95.05"  # the sim's GB200 nvidia-smi report's
DEVICE_ID = "2941"  # GB200 NVL (DCGM's modules/mndiag/DcgmMnDiagManager.cpp)
TRIAGE = "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
CATEGORIES = ("Deployment", "Hardware", "Integration", "Stress")
TESTS = {  # level -> (category, test) in the order DCGM runs them
    1: [("Deployment", "software")],
    2: [("Hardware", "memory"), ("Integration", "pcie")],
    3: [
        ("Hardware", "diagnostic"),
        ("Hardware", "nvbandwidth"),
        ("Hardware", "nccl_tests"),
        ("Stress", "memory_bandwidth"),
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
    ],
}
SKIPPED = ("nccl_tests",)
# DCGM_FR code -> message (with {gpu}), next steps, severity, category (dcgm_errors.h, dcgm_errors.c), the tests that
# raise it ("software" or any plugin's), and whether the test marks every GPU (SetResult) or the GPU (SetResultForGpu).
CODES: dict[int, tuple[str, str, int, int, str, bool]] = {
    85: ("GPU {gpu} had memory errors and row remappings are pending", TRIAGE, 6, 10, "software", False),
    80: (
        "GPU {gpu} had uncorrectable memory errors and row remapping failed.",
        "Row remapping failure indicates unrecoverable memory hardware damage. Reset the GPU or reboot the node "
        "immediately.",
        6,
        10,
        "software",
        False,
    ),
    9: (
        "A corrupt InfoROM has been detected in GPU {gpu}.",
        "Flash the InfoROM to clear this corruption.",
        4,
        15,
        "software",
        True,
    ),
    29: (
        "Persistence mode for GPU {gpu} is disabled.",
        'Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.',
        5,
        8,
        "software",
        True,
    ),
    112: (
        "Fabric Manager (Cluster UUID: {cluster}, Clique ID: {clique}, Health Mask: 0x2): Fabric Manager training "
        "failed.",
        "Ensure that the FabricManager is running without errors.",
        5,
        6,
        "software",
        True,
    ),
    125: (
        "GPU {gpu} requires a reset to recover from a fault. Recovery action: 1 (GPU_RESET).",
        "Terminate all GPU processes and reset the GPU.",
        6,
        15,
        "software",
        True,
    ),
    81: (
        "GPU had an uncontained error (XID 95)",
        "Drain the GPU and reset it or reboot the node.",
        2,
        5,
        "plugin",
        False,
    ),
    101: (
        "Detected XID 79 for GPU {gpu}",
        "Please consult the documentation for details of this XID.",
        4,
        5,
        "plugin",
        False,
    ),
}
IMEX = (
    "IMEX daemon status is -3 (not READY)",
    "Check IMEX installation, configuration, domain and daemon status, and network connectivity.",
    2,
    8,
)
RUNTIME_ERROR = (
    "Error: Unable to complete diagnostic for entities *,cpu:*. Return: (-39) : A diag instance is already running, "
    "cannot run a new diag until the current one finishes\n"
)


def validate_fault(name: str, params: dict[str, str]) -> dict[str, str]:
    if name != "dcgm-fail":
        return params
    params.setdefault("test", "software")
    params.setdefault("code", "85")
    tests = [test for level in TESTS.values() for _category, test in level]
    if params["test"] not in tests:
        raise ValueError(f"{name}: test={params['test']} is no DCGM test of levels 1-3 ({', '.join(tests)})")
    if not params["code"].isdigit() or int(params["code"]) not in CODES:
        raise ValueError(f"{name}: code={params['code']}: the stand-in knows {', '.join(map(str, sorted(CODES)))}")
    raised_by = CODES[int(params["code"])][4]
    if (raised_by == "software") != (params["test"] == "software"):
        where = "the software test" if raised_by == "software" else "a plugin test (memory, pcie, diagnostic, ...)"
        raise ValueError(f"{name}: DCGM raises code {params['code']} in {where}, not in {params['test']}")
    return params


def _argv(pod: dict[str, Any]) -> list[str]:
    """The words of the pod's shell script, ``;`` apart (``sh -c '<script>'``)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    command = list(containers[0].get("command") or []) + list(containers[0].get("args") or [])
    if not command:
        return []
    lexer = shlex.shlex(command[-1], posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    return list(lexer)


def _option(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else default


def serial(node: dict[str, Any], gpu: int) -> str:
    rack, tray = parse_tray_name(programs.node_name(node)) or (0, 0)
    return f"165222{rack:02d}{tray:02d}{gpu:03d}"


def _warning(code: int, gpu: int, node: dict[str, Any]) -> dict[str, Any]:
    message, steps, severity, category, _tests, _whole = CODES[code]
    clique = ((node.get("metadata") or {}).get("labels") or {}).get("nvidia.com/gpu.clique", "")
    cluster, _, clique_id = clique.rpartition(".")
    text = message.format(gpu=gpu, cluster=cluster or "N/A", clique=clique_id or "0")
    return {"error_category": category, "error_id": code, "error_severity": severity, "warning": f"{text} {steps}"}


def diagnosed(node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> list[int]:
    """DCGM's ids of the GPUs its diagnostic runs on: the GPUs the driver enumerates are DCGM's 0.. in order; one
    lost to the driver (off the bus) keeps its id, and the diagnostic leaves it out (``DcgmDiagManager.cpp``:
    "Skip GPUs that are lost to the CM")."""
    tray = hardware.tray(faults, programs.node_name(node))
    return [dcgm_id for dcgm_id, gpu in enumerate(tray.present) if gpu.on_bus]


def hardware_failures(name: str, node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> list[tuple[int, int]]:
    """(DCGM_FR code, DCGM GPU id) that test ``name`` raises from the tray's hardware state: the software plugin's
    ``checkRowRemapping`` (a pending remap: 85, per GPU) and ``checkFabricManager`` (a fabric registration that
    completed with an error: 112, which fails every GPU of the test). Nothing else of the model is a diagnostic's:
    DCGM_FR_NVLINK_DOWN comes from the health watch, not from a plugin."""
    if name != "software":
        return []
    tray = hardware.tray(faults, programs.node_name(node))
    found = []
    for dcgm_id, gpu in enumerate(tray.present):
        if not gpu.on_bus:
            continue
        if gpu.remap_pending:
            found.append((85, dcgm_id))
        if gpu.fabric_status == "Failure":
            found.append((112, dcgm_id))
    return found


def _test(name: str, node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> dict[str, Any]:
    gpus = diagnosed(node, faults)
    status = {gpu: "Skip" if name in SKIPPED else "Pass" for gpu in gpus}
    warnings: dict[int, list[dict[str, Any]]] = {gpu: [] for gpu in gpus}
    fail = programs.fault_on(faults, "dcgm-fail", node)
    raised: list[tuple[int, int]] = []
    if fail is not None and fail.get("test", "software") == name:
        code = int(fail.get("code", 85))
        raised += [(code, gpu) for gpu in programs.tray_gpus(fail) if gpu in status]
    raised += hardware_failures(name, node, faults)
    for code, gpu in raised:
        warnings[gpu].append(_warning(code, gpu, node))
        for failed in gpus if CODES[code][5] else [gpu]:
            status[failed] = "Fail"
    if name == "software" and programs.fault_on(faults, "dcgm-imex-unhealthy", node) is not None:
        message, steps, severity, category = IMEX
        for gpu in gpus:
            warnings[gpu].append(
                {
                    "error_category": category,
                    "error_id": 122,
                    "error_severity": severity,
                    "warning": f"{message} {steps}",
                }
            )
            status[gpu] = "Fail"
    results = []
    for gpu in gpus:
        result: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": status[gpu]}
        if warnings[gpu]:
            result["warnings"] = warnings[gpu]
        results.append(result)
    summary: dict[str, Any] = {
        "status": "Fail" if "Fail" in status.values() else (results or [{"status": "Skip"}])[0]["status"]
    }
    every = [w for gpu in gpus for w in warnings[gpu]]
    if every:
        summary["warnings"] = every
    return {"name": name, "results": results, "test_summary": summary}


def diag_json(level: int, node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    if programs.fault_on(faults, "dcgm-runtime-error", node) is not None:
        document: dict[str, Any] = {"DCGM Diagnostic": {"runtime_error": RUNTIME_ERROR, "version": DCGM_VERSION}}
    else:
        tests = [test for lvl in sorted(TESTS) if lvl <= level for test in TESTS[lvl]]
        document = {
            "DCGM Diagnostic": {
                "test_categories": [
                    {
                        "category": category,
                        "tests": [_test(name, node, faults) for cat, name in tests if cat == category],
                    }
                    for category in CATEGORIES
                    if any(cat == category for cat, _name in tests)
                ]
            },
            "entity_groups": [
                {
                    "entities": [
                        {"device_id": DEVICE_ID, "entity_id": gpu, "serial_num": serial(node, gpu)}
                        for gpu in diagnosed(node, faults)
                    ],
                    "entity_group": "GPU",
                    "entity_group_id": 1,
                }
            ],
            "metadata": {"Driver Version Detected": DRIVER_VERSION, "version": DCGM_VERSION},
        }
    return json.dumps(document, indent=3, sort_keys=True, separators=(",", " : "))


def exit_code(text: str) -> int:
    """dcgmi's exit status: 0, or 256 + DCGM_ST_NVVS_ERROR (-30) / _ISOLATE_ERROR (-51) / the runtime error's."""
    if '"runtime_error"' in text:
        return 256 - 39
    severities = [int(s) for s in re.findall(r'"error_severity" : (\d+)', text)]
    if not severities:
        return 0
    return 256 - 51 if 2 in severities else 256 - 30


def log(pod: dict[str, Any], node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> tuple[str, int]:
    """The pod's output, and its exit code: dcgmi's, as the pod's script exits with it."""
    argv = _argv(pod)
    level = int(_option(argv, "-r", "1")) if _option(argv, "-r", "1").isdigit() else 1
    host = _option(argv, "--host", "")
    out = []
    if not host or host.startswith("unix://"):
        socket = host[len("unix://") :] or "/tmp/nv-hostengine.sock"
        out.append(f"{MARK} begin nv-hostengine")
        out.append(f"Started host engine version {DCGM_VERSION} using socket path: {socket}")
        out.append(f"{MARK} end nv-hostengine rc=0")
    text = diag_json(level, node, faults)
    code = exit_code(text)
    out += [f"{MARK} begin dcgmi diag", text, f"{MARK} end dcgmi diag rc={code}"]
    return "\n".join(out) + "\n", code
