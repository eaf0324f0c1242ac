# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check dcgm_diag: its parser and judge on ``dcgmi diag -j`` outputs written from DCGM 4.6.0's source
(tests/fixtures/dcgm/README.md says why none is a capture), its judge of a tray on what the sim's stand-in prints
(sim/simrack/programs/dcgm_diag.py), healthy at every level and under each fault, and its pod."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.dcgm_diag import (
    DcgmDiagCheck,
    script,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dcgm_json import parse_diag_json
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import MARK, sections
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan

REPO_ROOT = Path(__file__).resolve().parents[4]
DCGM = REPO_ROOT / "tests" / "fixtures" / "dcgm"
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack.programs import dcgm_diag as standin  # noqa: E402

TRAY = {
    "metadata": {"name": "gb200-r1-t5", "labels": {"nvidia.com/gpu.clique": "5c0d8b4e-0000-4000-8000-000000000000.1"}}
}
ROW_REMAP = (
    "GPU 2: software failed: GPU 2 had memory errors and row remappings are pending Check DCGM and system logs for "
    "errors. Reset GPU. Restart DCGM. Rerun diagnostics. (DCGM_FR code 85)"
)
NCCL_SKIPPED = (
    "GPU 0, 1, 2, 3: nccl_tests skipped, so not proven (DCGM printed no reason, see its nvvs.log); give DCGM what "
    "the test needs or choose a level without it (dcgm_diag.level)"
)
IMEX_NOTE = (
    "GPU 0, 1, 2, 3: software: IMEX daemon status is -3 (not READY) Check IMEX installation, configuration, domain "
    "and daemon status, and network connectivity. (DCGM_FR code 122), not counted: DCGM finds no IMEX daemon where "
    "none runs, as on every tray outside a ComputeDomain when the DRA driver brings IMEX; the imex_channel check "
    "proves the channel"
)


def check(**given) -> DcgmDiagCheck:
    return DcgmDiagCheck.from_params(checks.with_settings({"settings": {"dcgm_diag": given}}))


def rack(diag: DcgmDiagCheck, timeout: float = 0) -> rack_run.RackRun:
    plan = RackPlan("rack1", ["c.1"], ["t4", "t5"], ["t4", "t5"], [], 4, "NVIDIA GB200")
    return rack_run.RackRun(diag, object(), plan, rack_run.Settings(timeout=timeout))


def pod_log(fixture: str, status: int = 0) -> str:
    """A pod's log around a fixture: the host engine's start, then dcgmi's output and exit status."""
    return (
        f"{MARK} begin nv-hostengine\nStarted host engine version 4.6.0 using socket path: /tmp/nv-hostengine.sock\n"
        f"{MARK} end nv-hostengine rc=0\n{MARK} begin dcgmi diag\n{(DCGM / fixture).read_text()}"
        f"{MARK} end dcgmi diag rc={status}\n"
    )


def judged_fixture(fixture: str, status: int = 0, level: int = 1):
    return check(level=level).judge_tray("t5", pod_log(fixture, status), 4)


def judged(faults=None, level: int = 1, **given):
    diag = check(level=level, **given)
    text, code = standin.log(diag.manifest(rack(diag), "gb200-r1-t5"), TRAY, faults or {})
    finding = diag.judge_tray("gb200-r1-t5", text, 4)
    assert finding.details.get("exit_code") == code, "the pod exits with dcgmi's status"
    return finding


@pytest.mark.parametrize("fixture", sorted(p.name for p in DCGM.glob("*.json")))
def test_every_fixture_has_the_keys_dcgms_schema_requires(fixture):
    # testing/python3/dcgm_diag_schema.json of NVIDIA/DCGM 4.6.0: its "required" lists
    document = json.loads((DCGM / fixture).read_text())
    for run in document.get("iterations", [document]):
        body = run["DCGM Diagnostic"]
        for category in body.get("test_categories", []):
            assert {"category", "tests"} <= set(category)
            for test in category["tests"]:
                assert {"name", "results", "test_summary"} <= set(test) and "status" in test["test_summary"]
                for result in test["results"]:
                    assert {"entity_group", "entity_group_id", "entity_id", "status"} <= set(result)
                    assert result["status"] in ("Pass", "Fail", "Skip")  # -j prints Warn as Fail
                    for warning in result.get("warnings", []):
                        assert set(warning) == {"error_category", "error_id", "error_severity", "warning"}
        for group in run.get("entity_groups", []):
            assert {"entities", "entity_group", "entity_group_id"} <= set(group)
            assert all({"device_id", "entity_id"} <= set(e) for e in group["entities"])
        assert "runtime_error" in body or "version" in run["metadata"]


def test_a_healthy_level_1_run_is_read_per_gpu_with_its_serials_and_versions():
    (run,) = parse_diag_json((DCGM / "dcgm-4.6.0-r1-gb200-pass.json").read_text()).runs
    assert [(r.test, r.entity, r.status) for r in run.results] == [("software", f"GPU {g}", "Pass") for g in range(4)]
    assert run.summaries["software"].status == "Pass" and run.categories == {"software": "Deployment"}
    assert run.serials == {0: "1652220001000", 1: "1652220001001", 2: "1652220001002", 3: "1652220001003"}
    assert set(run.device_ids.values()) == {"2941"}
    assert (run.dcgm_version, run.driver_version, run.runtime_error) == ("4.6.0", "580.95.05", "")
    finding = judged_fixture("dcgm-4.6.0-r1-gb200-pass.json")
    assert finding.passed and finding.notes == []
    assert finding.details["gpus"] == [0, 1, 2, 3] and finding.details["tests"] == ["software"]


def test_a_pending_row_remapping_fails_the_tray_naming_the_gpu_dcgms_text_and_code():
    (run,) = parse_diag_json((DCGM / "dcgm-4.6.0-r1-gpu2-row-remap-pending.json").read_text()).runs
    (warning,) = run.results[2].warnings
    assert (warning.error_id, warning.severity, warning.category) == (85, 6, 10)
    finding = judged_fixture("dcgm-4.6.0-r1-gpu2-row-remap-pending.json", 226)
    assert finding.problems == [ROW_REMAP] and finding.notes == []


def test_a_whole_test_failed_for_one_gpu_names_that_gpu_and_notes_the_others():
    finding = judged_fixture("dcgm-4.6.0-r1-gpu1-recovery-reset-whole-test.json", 226)
    assert finding.problems == [
        "GPU 1: software failed: GPU 1 requires a reset to recover from a fault. Recovery action: 1 (GPU_RESET). "
        "Terminate all GPU processes and reset the GPU. (DCGM_FR code 125)"
    ]
    assert finding.notes == ["GPU 0, 2, 3: software marked Fail with the whole test, no error of its own"]


def test_a_warning_fails_as_dcgmi_fails_it_since_json_prints_it_as_fail():
    finding = judged_fixture("dcgm-4.6.0-r1-gpu3-persistence-mode-warn.json", 226)
    assert finding.problems == [
        "GPU 3: software failed: Persistence mode for GPU 3 is disabled. Enable persistence mode by running "
        '"nvidia-smi -i <gpuId> -pm 1 " as root. (DCGM_FR code 29)'
    ]


def test_an_error_of_no_gpu_fails_the_tray_under_its_test():
    finding = judged_fixture("dcgm-4.6.0-r1-cuda-env-no-entity.json", 226)
    assert finding.problems == [
        "software failed: Found CUDA performance-limiting environment variable 'CUDA_PROFILE'. Please unset this "
        "environment variable to address test failures. (DCGM_FR code 28)"
    ]
    assert finding.notes == ["GPU 0, 1, 2, 3: software marked Fail with the whole test, no error of its own"]


def test_a_runtime_error_fails_the_tray_with_dcgms_words():
    finding = judged_fixture("dcgm-4.6.0-runtime-error.json", 217)
    assert finding.problems == [
        "dcgmi diag did not run: Error: Unable to complete diagnostic for entities *,cpu:*. Return: (-39) : A diag "
        "instance is already running, cannot run a new diag until the current one finishes"
    ]


def test_a_skipped_test_is_no_evidence_and_fails_the_tray_naming_gpus_and_test():
    finding = judged_fixture("dcgm-4.6.0-r3-gb200-pass-nccl-skip.json", level=3)
    assert finding.problems == [NCCL_SKIPPED] and finding.notes == []
    assert judged_fixture("dcgm-4.6.0-r3-gb200-pass-nccl-skip.json", level=1).problems == [NCCL_SKIPPED]
    assert finding.details["tests"] == [
        "diagnostic",
        "memory",
        "memory_bandwidth",
        "nccl_tests",
        "nvbandwidth",
        "pcie",
        "software",
        "targeted_power",
        "targeted_stress",
    ]


def test_iterations_are_judged_each_and_named():
    report = parse_diag_json((DCGM / "dcgm-4.6.0-r1-iterations-2.json").read_text())
    assert (len(report.runs), report.overall, report.warning) == (2, "Fail", "DCGM GPU Diagnostic returned an error")
    finding = judged_fixture("dcgm-4.6.0-r1-iterations-2.json", 226)
    assert finding.problems == ["iteration 2: " + ROW_REMAP]


def test_imex_unhealthy_is_a_note_never_a_failure():
    finding = judged_fixture("dcgm-r1-imex-unhealthy-hypothetical.json", 205)
    assert finding.passed and finding.notes == [IMEX_NOTE]


def test_output_that_is_not_dcgms_json_fails_the_tray_saying_what_was_printed():
    log = (
        f"{MARK} begin nv-hostengine\nErr: Failed to start DCGM Server: -7\n{MARK} end nv-hostengine rc=255\n"
        f"{MARK} begin dcgmi diag\nError: unable to establish a connection to the specified host: "
        f"unix:///tmp/nv-hostengine.sock\n{MARK} end dcgmi diag rc=248\n"
    )
    assert check().judge_tray("t", log, 4).problems == [
        "dcgmi diag printed no result (exit 248, no JSON of DCGM's diagnostic): Error: unable to establish a "
        "connection to the specified host: unix:///tmp/nv-hostengine.sock; nv-hostengine exited 255: Err: Failed to "
        "start DCGM Server: -7"
    ]


def test_an_unfinished_output_and_an_exit_the_results_do_not_explain_fail_the_tray():
    log = pod_log("dcgm-4.6.0-r1-gb200-pass.json")
    cut = log[: log.index(f"{MARK} end dcgmi diag")]
    assert check().judge_tray("t", cut, 4).problems == [
        "the pod's output lacks the end of dcgmi diag: it did not run to its end"
    ]
    assert set(sections(log)) == {"nv-hostengine", "dcgmi diag"}
    assert judged_fixture("dcgm-4.6.0-r1-gb200-pass.json", 245).problems == [
        "dcgmi diag exited 245 (DCGM return code -11), which is neither 0 nor errors found (226, 205) though its "
        "results show no failure"
    ]


@pytest.mark.parametrize("level", [1, 2])
def test_the_standins_healthy_tray_passes_at_levels_1_and_2(level):
    finding = judged(level=level)
    assert finding.passed, finding.problems
    assert finding.details["gpus"] == [0, 1, 2, 3] and finding.details["serials"]["3"] == "1652220105003"
    assert len(finding.details["tests"]) == {1: 1, 2: 3}[level]


def test_at_level_3_the_standins_skipped_nccl_tests_fail_the_tray_as_dcgms_image_would():
    finding = judged(level=3)
    assert finding.problems == [NCCL_SKIPPED] and len(finding.details["tests"]) == 9


def test_a_failing_gpu_of_the_standin_is_named_with_dcgms_text():
    finding = judged({"dcgm-fail": {"node": "gb200-r1-t5", "gpu": "2", "test": "software", "code": "85"}})
    assert finding.problems == [ROW_REMAP] and finding.details["exit_code"] == 226


def test_the_standin_fails_the_whole_test_where_dcgm_does():
    finding = judged({"dcgm-fail": {"node": "gb200-r1-t5", "gpu": "0", "test": "software", "code": "9"}})
    assert finding.problems == [
        "GPU 0: software failed: A corrupt InfoROM has been detected in GPU 0. Flash the InfoROM to clear this "
        "corruption. (DCGM_FR code 9)"
    ]
    assert finding.notes == ["GPU 1, 2, 3: software marked Fail with the whole test, no error of its own"]


def test_a_plugin_fault_shows_only_at_the_level_that_runs_the_test():
    fault = {"dcgm-fail": {"node": "gb200-r1-t5", "gpu": "1", "test": "memory", "code": "81"}}
    assert judged(fault, level=1).passed
    assert judged(fault, level=2).problems == [
        "GPU 1: memory failed: GPU had an uncontained error (XID 95) Drain the GPU and reset it or reboot the node. "
        "(DCGM_FR code 81)"
    ]


def test_the_standins_imex_alarm_passes_and_its_runtime_error_fails():
    imex = judged({"dcgm-imex-unhealthy": {"node": "gb200-r1-t5"}})
    assert imex.passed and imex.notes == [IMEX_NOTE] and imex.details["exit_code"] == 205
    assert (
        judged({"dcgm-runtime-error": {"node": "gb200-r1-t5"}})
        .problems[0]
        .startswith("dcgmi diag did not run: Error: Unable to complete diagnostic for entities *,cpu:*. Return: (-39)")
    )


def test_a_fault_on_another_tray_leaves_this_one_healthy():
    assert judged({"dcgm-fail": {"node": "gb200-r1-t6", "gpu": "2", "code": "85"}}).passed


def test_the_standin_refuses_a_code_it_has_no_text_for_and_one_its_test_does_not_raise():
    with pytest.raises(ValueError, match=r"^dcgm-fail: code=95: the stand-in knows 9, 29, 80, 81, 85, 101, 112, 125$"):
        standin.validate_fault("dcgm-fail", {"node": "t", "code": "95"})
    with pytest.raises(ValueError, match=r"^dcgm-fail: DCGM raises code 81 in a plugin test .*, not in software$"):
        standin.validate_fault("dcgm-fail", {"node": "t", "code": "81"})
    assert standin.validate_fault("dcgm-fail", {"node": "t"}) == {"node": "t", "test": "software", "code": "85"}


def test_the_pod_holds_every_gpu_of_the_tray_and_runs_its_own_host_engine():
    diag = check(image="mirror.example/dcgm:4.6.0-1-ubuntu24.04")
    pod = diag.manifest(rack(diag), "t5")
    (container,) = pod["spec"]["containers"]
    assert pod["metadata"]["name"] == "dcgm-diag-t5" and pod["spec"]["runtimeClassName"] == "nvidia"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 4}}
    assert container["securityContext"] == {"privileged": True} and diag.pod_security_level == "privileged"
    assert container["command"] == ["sh", "-c", script(1)]
    assert "nv-hostengine --pid /tmp/nv-hostengine.pid -d /tmp/nv-hostengine.sock" in container["command"][2]
    assert "dcgmi diag -r 1 -j --host unix:///tmp/nv-hostengine.sock;" in container["command"][2]
    assert container["command"][2].endswith("exit $rc")
    assert DcgmDiagCheck.uses_gpus is True and DcgmDiagCheck.fails_with_findings is True
    assert pod["metadata"]["labels"]["gpu-fabric.nvidia.com/check"] == "dcgm_diag"


def test_through_the_operators_host_engine_the_pod_only_runs_the_client():
    diag = check(level=2, hostengine="nvidia-dcgm.gpu-operator.svc:5555", extra_args=["-p", "pcie.test_p2p_on=false"])
    (container,) = diag.manifest(rack(diag), "t5")["spec"]["containers"]
    assert "nv-hostengine" not in container["command"][2] and "securityContext" not in container
    assert (
        "dcgmi diag -r 2 -j --host nvidia-dcgm.gpu-operator.svc:5555 -p pcie.test_p2p_on=false;"
        in (container["command"][2])
    )
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 4}} and diag.pod_security_level == "baseline"
    assert judged(level=2, hostengine="nvidia-dcgm.gpu-operator.svc:5555").passed


def test_each_level_waits_as_long_as_nvidia_says_it_runs_unless_the_site_says():
    assert [rack(check(level=level)).timeout for level in (1, 2, 3)] == [1020.0, 1140.0, 2700.0]
    assert rack(check(level=3), timeout=600).timeout == 600
    view = check(level=2).plan_view(rack(check(level=2)))
    assert view["expected"] == "dcgmi diag -r 2 (+ memory and pcie, about 2 minutes); waits up to 19 min 0 s"


def test_a_level_other_than_1_to_3_and_an_argument_the_check_sets_are_refused():
    with pytest.raises(ValueError, match=r"^dcgm_diag.level is 4: 1 \(software deployment checks, seconds\), 2 "):
        check(level=4)
    with pytest.raises(ValueError, match=r"^dcgm_diag.extra_args gives --host=x, which the check sets itself"):
        check(extra_args=["--host=x"])


def test_null_entries_are_read_as_absent_and_a_malformed_document_is_one_line():
    document = json.loads((DCGM / "dcgm-4.6.0-r1-gpu2-row-remap-pending.json").read_text())
    results = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]
    results[0]["warnings"] = None
    results.append(None)
    document["entity_groups"] = None
    log = pod_log("dcgm-4.6.0-r1-gb200-pass.json", 226).replace(
        (DCGM / "dcgm-4.6.0-r1-gb200-pass.json").read_text(), json.dumps(document) + "\n"
    )
    assert check().judge_tray("t5", log, 4).problems == [ROW_REMAP]
    results[1]["entity_id"] = "one"
    bad = pod_log("dcgm-4.6.0-r1-gb200-pass.json", 226).replace(
        (DCGM / "dcgm-4.6.0-r1-gb200-pass.json").read_text(), json.dumps(document) + "\n"
    )
    (problem,) = check().judge_tray("t5", bad, 4).problems
    assert problem.startswith(
        "dcgmi diag printed no result (exit 226, test software result 1 entity_id is 'one', expected a number): {"
    )


def log_of(document: dict, status: int) -> str:
    """A pod's log around a document written here from a fixture (a bad case; the fixture is the pass run's)."""
    fixture = (DCGM / "dcgm-4.6.0-r1-gb200-pass.json").read_text()
    return pod_log("dcgm-4.6.0-r1-gb200-pass.json", status).replace(fixture, json.dumps(document, indent=3) + "\n")


def passing_document() -> dict:
    return json.loads((DCGM / "dcgm-4.6.0-r1-gb200-pass.json").read_text())


def software_results(document: dict) -> list:
    return document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]


def test_gpus_dcgm_did_not_diagnose_fail_the_tray_naming_them_and_the_test():
    document = passing_document()
    del software_results(document)[2:]
    finding = check().judge_tray("t5", log_of(document, 0), 4)
    assert finding.problems == [
        "GPU 2, 3: software not run: DCGM printed no result for it (every test of the level runs on each of the "
        "tray's 4 GPUs)"
    ]
    assert finding.details["gpus"] == [0, 1] and finding.details["expected_gpus"] == [0, 1, 2, 3]


def test_every_test_of_the_level_is_expected_on_every_gpu():
    finding = check(level=2).judge_tray("t5", pod_log("dcgm-4.6.0-r1-gb200-pass.json"), 4)
    assert finding.problems == [
        f"GPU 0, 1, 2, 3: {test} not run: DCGM printed no result for it (every test of the level runs on each of the "
        "tray's 4 GPUs)"
        for test in ("memory", "pcie")
    ]
    assert finding.details["expected_tests"] == ["software", "memory", "pcie"]


def test_a_gpu_the_tray_does_not_have_fails_the_tray():
    finding = check().judge_tray("t5", pod_log("dcgm-4.6.0-r1-gb200-pass.json"), 2)
    assert finding.problems == [
        "DCGM diagnosed GPU 2, 3, which the tray does not have (it has 2 GPUs, 0 to 1): the pod saw other GPUs than "
        "the tray's"
    ]


def test_every_test_skipped_fails_the_tray_with_dcgms_reason():
    document = passing_document()
    for result in software_results(document):
        result.update(status="Skip", info=["The software test is not supported on this platform"])
    assert check().judge_tray("t5", log_of(document, 0), 4).problems == [
        "GPU 0, 1, 2, 3: software skipped, so not proven (The software test is not supported on this platform); "
        "give DCGM what the test needs or choose a level without it (dcgm_diag.level)"
    ]


def test_an_exit_status_the_json_does_not_explain_fails_the_tray_naming_both():
    assert judged_fixture("dcgm-4.6.0-r1-gb200-pass.json", 226).problems == [
        "dcgmi diag exited 226 (DCGM return code -30: errors found) but its JSON shows no error: the status and the "
        "results disagree; rerun the check and read the pod's log"
    ]
    assert judged_fixture("dcgm-4.6.0-r1-gpu2-row-remap-pending.json", 0).problems == [
        ROW_REMAP,
        "dcgmi diag exited 0 (no error) but its JSON shows errors: the status and the results disagree; rerun the "
        "check and read the pod's log",
    ]


def test_a_warning_belongs_to_its_gpu_and_a_fail_without_one_is_not_excused_by_a_passing_gpu():
    document = json.loads((DCGM / "dcgm-4.6.0-r1-gpu2-row-remap-pending.json").read_text())
    results = software_results(document)
    results[1]["status"] = "Fail"  # GPU 1 fails with no error of its own
    results[2]["status"] = "Pass"  # while GPU 2 passes, carrying the error
    finding = check().judge_tray("t5", log_of(document, 226), 4)
    assert finding.problems == [
        "GPU 1: software Fail with no error from DCGM",
        "GPU 2: software Pass with an error DCGM attached to it: GPU 2 had memory errors and row remappings are "
        "pending Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. (DCGM_FR code "
        "85); the result contradicts itself",
    ]
    assert finding.notes == []


def test_arguments_that_narrow_the_gpus_are_refused():
    for arg in ("-i", "--entity-id=0,1", "-g", "--group=7"):
        with pytest.raises(ValueError, match=rf"^dcgm_diag.extra_args gives {arg}, which the check sets itself"):
            check(extra_args=[arg])


def test_the_rack_run_holds_each_tray_to_the_gpus_its_plan_gives(monkeypatch):
    diag = check()
    plan = RackPlan("rack1", ["c.1"], ["t4", "t5"], ["t4", "t5"], [], 8, "NVIDIA GB200")
    run = rack_run.RackRun(diag, object(), plan, rack_run.Settings())
    pods = {
        diag.pod_name(node): {"metadata": {"name": diag.pod_name(node)}, "status": {"phase": "Succeeded"}}
        for node in plan.nodes
    }
    run.api = SimpleNamespace(list=lambda *args, **kwargs: list(pods.values()))
    monkeypatch.setattr(run, "create_namespace", lambda: None)
    monkeypatch.setattr(run, "create_pod", lambda body: body)
    monkeypatch.setattr(run, "watch_for", lambda *args, **kwargs: True)
    monkeypatch.setattr(run, "read_log", lambda pod: pod_log("dcgm-4.6.0-r1-gb200-pass.json"))
    result = diag.measure(run)
    assert result.passed is False and result.failed_nodes == ["t4", "t5"]
    assert result.node_problems["t5"] == (
        "GPU 4, 5, 6, 7: software not run: DCGM printed no result for it (every test of the level runs on each of "
        "the tray's 8 GPUs)"
    )


def test_a_result_printed_as_not_run_is_no_evidence():
    document = passing_document()
    software_results(document)[3]["status"] = "Not Run"
    assert check().judge_tray("t5", log_of(document, 0), 4).problems == [
        "GPU 3: software not run: DCGM printed its result as Not Run, which proves nothing"
    ]
