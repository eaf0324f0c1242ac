# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check ``dcgm_diag``: DCGM's active diagnostics (``dcgmi diag``) on every usable tray.

One pod per tray holds every GPU of the tray (``nvidia.com/gpu``, as the MPI workers request them), so no job
shares a GPU with the diagnostic and a busy tray is skipped with its reason. The pod runs ``dcgmi diag -r <level>
-j``: by default against a host engine of its own (the DCGM image's ``nv-hostengine``, started in the pod on a Unix
socket and stopped after), or, with ``hostengine``, against the GPU Operator's (``nvidia-dcgm.<ns>.svc:5555``).
``--host`` is always given: without it ``dcgmi diag`` silently starts an embedded host engine when it cannot
connect (``StartDiag::DoExecuteConnectionFailure`` in DCGM's ``dcgmi/Diag.cpp``).

Levels as ``dcgmi diag --help`` sizes them: 1 the software deployment checks (seconds), 2 adds ``memory`` and
``pcie`` (about 2 minutes), 3 adds ``diagnostic``, ``nvbandwidth``, ``nccl_tests``, ``memory_bandwidth``,
``targeted_stress`` and ``targeted_power`` (about 15 minutes). Level 4 (hours) is not offered.

The judge reads the JSON ``dcgmi diag -j`` prints (DCGM 4.x: ``"DCGM Diagnostic" -> test_categories -> tests ->
results`` per entity, ``warnings`` with DCGM's text and its ``DCGM_FR`` code; the ``runtime_error`` form; the
``iterations`` form; ``dcgm_json`` reads it). Coverage first: the tray's GPUs are 0 to ``gpus_per_tray`` - 1 and
each test of the level (``LEVEL_TESTS``) must have a result of its own on each of them; a GPU or test DCGM printed no
result for, a ``Skip`` (DCGM's reason quoted) and a GPU the tray does not have fail the tray, named: none of them is
evidence. Then per GPU: an error fails the tray, naming the GPU, the test, DCGM's text and code; an error DCGM
attached to a GPU whose result is ``Pass`` contradicts itself and fails it too. Last, dcgmi's exit status must say
what the JSON says (0: no error; 226 or 205: errors found), else the tray fails naming both.

``dcgmi diag -j`` prints a Warn result as ``Fail`` (``HelperDisplayDiagResult`` without
``DDR_DISPLAY_WARN``; DCGM's own test asserts it) and exits non-zero for it, so a warning cannot be told from a
failure here and fails the tray as it fails ``dcgmi``. A GPU that DCGM marked Fail only because the whole test
failed (``SetResult`` of every GPU for another GPU's error) is a note, and the error is named on its own GPU; that
holds only while another GPU's failed result or the test's summary carries the error.

DCGM_FR_IMEX_UNHEALTHY (code 122) is a note, never a failure: DCGM raises it when ``nvidia-imex-ctl`` finds no
IMEX daemon, which with the DRA driver is every tray outside a running ComputeDomain (NVIDIA/DCGM issue 308); the
IMEX channel is what ``imex_channel`` proves, inside one. At DCGM 4.6.0 only the NVLink health watch raises it,
not a diagnostic plugin; the rule guards against a DCGM that brings it into the diagnostic.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import nvbandwidth_runtime as runtime
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.tray_pods import TrayFinding, TrayPodCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dcgm_json import (
    STATUS_NOT_RUN,
    STATUS_PASS,
    STATUS_SKIP,
    DcgmParseError,
    DiagResult,
    DiagRun,
    DiagWarning,
    parse_diag_json,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import section_script, sections
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun

DEFAULT_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"  # the GPU Operator's dcgm image
SOCKET = "/tmp/nv-hostengine.sock"
PID_FILE = "/tmp/nv-hostengine.pid"
# What each level runs and how long NVIDIA says it takes (``dcgmi diag --help``; the test names of
# ``NvidiaValidationSuite::FillTestVectors``): the wait for a rack is the start allowance plus twice the run.
LEVELS: Dict[int, Tuple[str, float]] = {
    1: ("software deployment checks, seconds", 60.0),
    2: ("+ memory and pcie, about 2 minutes", 120.0),
    3: ("+ diagnostic, nvbandwidth, nccl_tests, memory_bandwidth, targeted_stress/power, about 15 minutes", 900.0),
}
# The tests each level runs on every GPU (``FillTestVectors``; the names ``dcgmi diag -j`` prints): a tray passes
# only when each of them passed on each of its GPUs.
LEVEL_TESTS: Dict[int, Tuple[str, ...]] = {
    1: ("software",),
    2: ("software", "memory", "pcie"),
    3: (
        "software",
        "memory",
        "pcie",
        "diagnostic",
        "nvbandwidth",
        "nccl_tests",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ),
}
# Arguments of dcgmi diag that the check sets itself, or that would narrow the GPUs it diagnoses.
OWN_ARGS = ("-r", "--run", "-j", "--json", "--host", "-g", "--group", "-i", "--entity-id", "-f", "--fakeGpuList")
# DCGM_FR codes that are notes, not failures, and why.
NOTE_CODES = {
    122: "DCGM finds no IMEX daemon where none runs, as on every tray outside a ComputeDomain when the DRA driver "
    "brings IMEX; the imex_channel check proves the channel",
}
# dcgmi's exit status for a diagnostic that ran and found errors: DCGM_ST_NVVS_ERROR (-30) and
# DCGM_ST_NVVS_ISOLATE_ERROR (-51), as the pod's shell sees them (256 + the dcgmReturn_t).
FOUND_ERRORS_EXIT = (226, 205)


def script(level: int, hostengine: str = "", extra_args: Sequence[str] = ()) -> str:
    """The pod's shell script: each command between markers with its exit status; the pod exits with dcgmi's."""
    host = hostengine or f"unix://{SOCKET}"
    diag = _command(["dcgmi", "diag", "-r", str(level), "-j", "--host", host, *extra_args])
    steps = [section_script("dcgmi diag", diag, keep_status=True)]
    if not hostengine:
        engine = _command(["nv-hostengine", "--pid", PID_FILE, "-d", SOCKET, "--log-level", "ERROR"])
        steps.insert(0, section_script("nv-hostengine", engine))
        steps.append(f"nv-hostengine --term --pid {PID_FILE} >/dev/null 2>&1")
    return "; ".join([*steps, "exit $rc"])


def _command(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(arg) for arg in argv)


def judge_coverage(run: DiagRun, tests: Sequence[str], gpus: Sequence[int], finding: TrayFinding, prefix: str) -> None:
    """Every test of ``tests`` on every GPU of ``gpus``, each with a result of its own: a test DCGM skipped or
    printed no result for is no evidence, and so fails the tray naming the GPUs and the test; so does a result
    for a GPU the tray does not have."""
    for test in tests:
        missing = [f"GPU {gpu}" for gpu in gpus if run.result(test, gpu) is None]
        if missing:
            finding.problems.append(
                f"{prefix}{_names(missing)}: {test} not run: DCGM printed no result for it (every test of the level "
                f"runs on each of the tray's {len(gpus)} GPUs)"
            )
        not_run = [f"GPU {gpu}" for gpu in gpus if getattr(run.result(test, gpu), "status", "") == STATUS_NOT_RUN]
        if not_run:
            finding.problems.append(
                f"{prefix}{_names(not_run)}: {test} not run: DCGM printed its result as Not Run, which proves nothing"
            )
        skipped: Dict[str, List[str]] = {}
        for gpu in gpus:
            result = run.result(test, gpu)
            if result is not None and result.status == STATUS_SKIP:
                said = result.info or (run.summaries[test].info if test in run.summaries else [])
                reason = "; ".join(one_line(i) for i in said) or "DCGM printed no reason, see its nvvs.log"
                skipped.setdefault(reason, []).append(result.entity)
        for reason, entities in skipped.items():
            finding.problems.append(
                f"{prefix}{_names(entities)}: {test} skipped, so not proven ({reason}); give DCGM what the test "
                "needs or choose a level without it (dcgm_diag.level)"
            )
    others = sorted({r.entity_id for r in run.results if r.entity_group == "GPU"} - set(gpus) - {None})
    if others:
        finding.problems.append(
            f"{prefix}DCGM diagnosed {_names([f'GPU {g}' for g in others])}, which the tray does not have (it has "
            f"{len(gpus)} GPUs, 0 to {len(gpus) - 1}): the pod saw other GPUs than the tray's"
        )


def judge_run(run: DiagRun, finding: TrayFinding, prefix: str = "") -> None:
    """The problems and notes of one run's results: per GPU, named; errors no GPU carries, under their test."""
    if run.runtime_error:
        finding.problems.append(f"{prefix}dcgmi diag did not run: {one_line(run.runtime_error, 300, '...')}")
        return
    for test in dict.fromkeys([r.test for r in run.results] + list(run.summaries)):
        _judge_test(test, [r for r in run.results if r.test == test], run.summaries.get(test), finding, prefix)


def _names(entities: Sequence[str]) -> str:
    """``GPU 0, 2, 3`` for entities of one group, else each in full."""
    groups = {e.rsplit(" ", 1)[0] for e in entities}
    if len(groups) == 1 and all(" " in e for e in entities):
        return f"{groups.pop()} " + ", ".join(e.rsplit(" ", 1)[1] for e in entities)
    return ", ".join(entities)


def _failed(warning: DiagWarning) -> str:
    return f"{one_line(warning.text)} (DCGM_FR code {warning.error_id})"


def _judge_test(
    test: str, results: List[DiagResult], summary: Optional[DiagResult], finding: TrayFinding, prefix: str
) -> None:
    """One test's results: each error on the GPU DCGM attached it to. A GPU marked Fail without an error of its own
    is the whole test's failure only when another GPU's failed result, or the test's summary, carries the error."""
    carried = {(w.text, w.error_id) for r in results for w in r.warnings}
    loose = [w for w in (summary.warnings if summary else []) if (w.text, w.error_id) not in carried]
    explained = bool(loose) or any(r.warnings for r in results if r.status not in (STATUS_PASS, STATUS_SKIP))
    noted: Dict[int, List[Tuple[str, DiagWarning]]] = {}
    collateral: List[str] = []
    for result in sorted(results, key=lambda r: (r.entity_group, r.entity_id or 0)):
        if result.status in (STATUS_SKIP, STATUS_NOT_RUN):
            continue  # judged by the coverage: no evidence
        for warning in result.warnings:
            if warning.error_id in NOTE_CODES:
                noted.setdefault(warning.error_id, []).append((result.entity, warning))
            elif result.status == STATUS_PASS:
                finding.problems.append(
                    f"{prefix}{result.entity}: {test} Pass with an error DCGM attached to it: {_failed(warning)}; "
                    "the result contradicts itself"
                )
            else:
                finding.problems.append(f"{prefix}{result.entity}: {test} failed: {_failed(warning)}")
        if result.status not in (STATUS_PASS, STATUS_NOT_RUN) and not result.warnings:  # Fail, or Warn of a newer DCGM
            if explained:
                collateral.append(result.entity)  # DCGM failed the whole test for another entity's error
            else:
                finding.problems.append(f"{prefix}{result.entity}: {test} {result.status} with no error from DCGM")
    for warning in loose:  # errors of no GPU: the test's own (Denylist, Permissions, ...)
        if warning.error_id in NOTE_CODES:
            noted.setdefault(warning.error_id, []).append((test, warning))
        else:
            finding.problems.append(f"{prefix}{test} failed: {_failed(warning)}")
    if (
        summary
        and summary.status not in (STATUS_PASS, STATUS_SKIP, STATUS_NOT_RUN)
        and not results
        and not summary.warnings
    ):
        finding.problems.append(f"{prefix}{test}: {summary.status} with no error from DCGM")
    for code, found in noted.items():
        where = _names([entity for entity, _warning in found])
        finding.notes.append(f"{prefix}{where}: {test}: {_failed(found[0][1])}, not counted: {NOTE_CODES[code]}")
    if collateral:
        finding.notes.append(
            f"{prefix}{_names(collateral)}: {test} marked Fail with the whole test, no error of its own"
        )


class DcgmDiagCheck(TrayPodCheck):
    name = "dcgm_diag"
    uses_gpus = True  # the pod holds every GPU of the tray: a tray a job holds is skipped, with its reason
    pod_prefix = "dcgm-diag"
    what = "DCGM diagnostics"
    fails_with_findings = True  # dcgmi exits 226 or 205 when a test fails; its JSON says which
    options = {
        "dcgm_diag": dict(
            type="dict",
            default={},
            options=dict(
                image=dict(type="str", default=DEFAULT_IMAGE),
                level=dict(type="int", default=1),
                hostengine=dict(type="str", default=""),
                extra_args=dict(type="list", elements="str", default=[]),
                runtime_class=dict(type="str", default="nvidia"),
            ),
        ),
    }

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        level: int = 1,
        hostengine: str = "",
        extra_args: Sequence[str] = (),
        runtime_class: str = "nvidia",
    ) -> None:
        self.image = image
        self.level = level
        self.hostengine = hostengine
        self.extra_args = list(extra_args)
        self.runtime_class = runtime_class
        # its own host engine runs the diagnostic's plugins in the pod: privileged, as the GPU Operator's
        # nvidia-dcgm container is; through the operator's, the pod only runs the client
        self.pod_security_level = "baseline" if hostengine else "privileged"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DcgmDiagCheck:
        given = dict(params["dcgm_diag"])
        if given["level"] not in LEVELS:
            raise ValueError(
                f"dcgm_diag.level is {given['level']}: 1 ({LEVELS[1][0]}), 2 ({LEVELS[2][0]}) or 3 ({LEVELS[3][0]})"
            )
        given["hostengine"] = given["hostengine"].strip()
        for arg in given["extra_args"]:
            if arg.split("=", 1)[0] in OWN_ARGS:
                raise ValueError(
                    f"dcgm_diag.extra_args gives {arg}, which the check sets itself (it diagnoses every GPU of the "
                    "tray): use dcgm_diag.level and dcgm_diag.hostengine"
                )
        return cls(**given)

    def container(self, run: RackRun, node: str) -> Dict[str, Any]:
        container: Dict[str, Any] = {
            "image": self.image,
            "command": ["sh", "-c", script(self.level, self.hostengine, self.extra_args)],
            # every GPU of the tray, as an MPI worker requests them: the diagnostic has them to itself
            "resources": {"limits": {"nvidia.com/gpu": run.plan.gpus_per_tray}},
        }
        if not self.hostengine:
            container["securityContext"] = {"privileged": True}
        return container

    def pod_spec(self, run: RackRun, node: str) -> Dict[str, Any]:
        return {"runtimeClassName": self.runtime_class} if self.runtime_class else {}

    def expected_seconds(self) -> float:
        return LEVELS[self.level][1]

    def timeout(self, plan: RackPlan, configured: float) -> float:
        """The site's timeout when > 0, else the start allowance (image pull on every tray) plus twice the
        level's run as NVIDIA sizes it: 1020 s at level 1, 1140 s at 2, 2700 s at 3."""
        if configured > 0:
            return configured
        return runtime.START_ALLOWANCE_S + runtime.SAFETY_FACTOR * self.expected_seconds()

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        view.update(
            level=self.level,
            hostengine=self.hostengine or "its own, in the pod",
            gpus_per_pod=run.plan.gpus_per_tray,
            timeout_s=run.timeout,
            expected=f"dcgmi diag -r {self.level} ({LEVELS[self.level][0]}); waits up to "
            + runtime.duration_text(run.timeout),
        )
        return view

    def passed_summary(self, run: RackRun, findings: Dict[str, TrayFinding]) -> str:
        nodes = run.plan.nodes
        notes = sum(len(f.notes) for f in findings.values())
        return (
            f"{self.what} (level {self.level}): no failure on {len(nodes)} of {len(nodes)} trays "
            f"({nodes[0]} .. {nodes[-1]})" + (f", {notes} note(s)" if notes else "")
        )

    def judge_tray(self, node: str, log: str, gpus: int) -> TrayFinding:
        """The tray's verdict: first the coverage (each test of the level on each of its ``gpus`` GPUs, 0 to
        gpus - 1), then DCGM's errors per GPU, then whether dcgmi's exit status says what its JSON says."""
        finding = TrayFinding()
        parts = sections(log)
        engine = parts.get("nv-hostengine")
        if "dcgmi diag" not in parts or parts["dcgmi diag"][1] is None:
            finding.problems.append("the pod's output lacks the end of dcgmi diag: it did not run to its end")
            return finding
        text, status = parts["dcgmi diag"]
        finding.details = {"level": self.level, "exit_code": status}
        try:
            report = parse_diag_json(text)
        except DcgmParseError as exc:
            started = ""
            if engine and engine[1]:
                started = f"; nv-hostengine exited {engine[1]}: {one_line(engine[0], 200, '...')}"
            printed = one_line(text, 300, "...") or "nothing"
            finding.problems.append(f"dcgmi diag printed no result (exit {status}, {exc}): {printed}{started}")
            return finding
        expected = list(range(gpus))
        for index, run in enumerate(report.runs):
            prefix = f"iteration {index + 1}: " if len(report.runs) > 1 else ""
            if not run.runtime_error:  # the level's tests, and any other DCGM ran
                tests = dict.fromkeys([*LEVEL_TESTS[self.level], *run.categories, *(r.test for r in run.results)])
                judge_coverage(run, list(tests), expected, finding, prefix)
            judge_run(run, finding, prefix)
        if report.overall == "Fail" and not finding.problems:
            finding.problems.append(
                f"dcgmi diag iterations failed: {one_line(report.warning) or 'DCGM gave no reason'}"
            )
        self._judge_exit(status, report.found_errors, any(run.runtime_error for run in report.runs), finding)
        seen = sorted({r.entity_id for run in report.runs for r in run.results if r.entity_group == "GPU"} - {None})
        last = report.runs[-1] if report.runs else DiagRun()
        finding.details.update(
            gpus=seen,
            expected_gpus=expected,
            expected_tests=list(LEVEL_TESTS[self.level]),
            serials={str(gpu): serial for gpu, serial in sorted(last.serials.items())},
            tests=sorted(last.categories),
            dcgm_version=last.dcgm_version,
            driver_version=last.driver_version,
        )
        return finding

    @staticmethod
    def _judge_exit(status: int, found_errors: bool, runtime_error: bool, finding: TrayFinding) -> None:
        """dcgmi exits 0 when the diagnostic found nothing and 226 or 205 when it found errors: a status that says
        otherwise than the JSON leaves the result unproven."""
        code = status - 256 if status > 127 else status
        if runtime_error:
            return  # judged: the diagnostic did not run, whatever dcgmi exited with
        if status in FOUND_ERRORS_EXIT and not found_errors:
            finding.problems.append(
                f"dcgmi diag exited {status} (DCGM return code {code}: errors found) but its JSON shows no error: "
                "the status and the results disagree; rerun the check and read the pod's log"
            )
        elif status == 0 and found_errors:
            finding.problems.append(
                "dcgmi diag exited 0 (no error) but its JSON shows errors: the status and the results disagree; "
                "rerun the check and read the pod's log"
            )
        elif status not in (0, *FOUND_ERRORS_EXIT):
            finding.problems.append(
                f"dcgmi diag exited {status} (DCGM return code {code}), which is neither 0 nor errors found (226, 205)"
                + ("" if finding.problems else " though its results show no failure")
            )


CHECK = DcgmDiagCheck
