# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check gpu_health: its parsers on real kernel logs and nvidia-smi reports, and its judge of a tray on what
the sim's stand-in prints (sim/simrack/programs/gpu_health.py), healthy and under each fault."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, rack_run, verification
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import gpu_health
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.gpu_health import (
    MARK,
    GpuHealthCheck,
    sections,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_counters import parse_nvlink_errors

REPO_ROOT = Path(__file__).resolve().parents[4]
SMI = REPO_ROOT / "tests" / "fixtures" / "nvidia-smi"
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack.programs import gpu_health as standin  # noqa: E402

TRAY = {
    "metadata": {"name": "gb200-r0-t3", "labels": {"nvidia.com/gpu.clique": "5c0d8b4e-0000-4000-8000-000000000000.1"}}
}


def check(**given) -> GpuHealthCheck:
    params = checks.with_settings({"settings": {"gpu_health": given}})
    return GpuHealthCheck.from_params(params)


def judged(faults=None, **given):
    return check(**given).judge_tray("gb200-r0-t3", standin.log({}, TRAY, faults or {}), 4)


def test_hopper_counters_are_read_too():
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 2\n"
    assert parse_nvlink_errors(text) == {0: {0: {"Replay Errors": "0", "Recovery Errors": "2"}}}
    finding = gpu_health.TrayFinding()
    check()._judge_nvlink(parse_nvlink_errors(text), finding)
    assert finding.problems == ["GPU 0 NVLink 0: Recovery Errors 2"]


def test_a_healthy_gb200_tray_passes_with_its_four_gpus_in_one_clique():
    finding = judged()
    assert finding.passed, finding.problems
    assert finding.details == {
        "gpus": 4,
        "expected_gpus": 4,
        "driver_version": "580.95.05",
        "fabric": ["Completed/Success"],
        "exit_codes": {"clock": 0, "nvidia-smi -q -x": 0, "nvidia-smi nvlink -e": 0, "dmesg": 0},
    }
    assert finding.notes == []


def test_an_xid_fails_the_tray_naming_the_gpu_and_what_it_means():
    finding = judged({"xid": {"node": "gb200-r0-t3", "gpu": "2", "code": "79"}})
    assert finding.problems == [
        "GPU 2: Xid 79 (GPU has fallen off the bus): pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    ]


def test_an_application_xid_is_a_note_and_an_older_one_than_the_window_does_not_count():
    assert judged({"xid": {"node": "gb200-r0-t3", "gpu": "0", "code": "31"}}).notes == [
        "Xid 31 x1 (an application's error, not the tray's)"
    ]
    # the sim's Xid is 10 minutes old: outside a window of 0.1 h (6 minutes), inside the default 24 h
    assert judged({"xid": {"node": "gb200-r0-t3", "code": "79"}}, xid_window_hours=1).problems
    older = check(xid_window_hours=1)
    older.xid_window_hours = 0.1
    assert older.judge_tray("t", standin.log({}, TRAY, {"xid": {"node": "gb200-r0-t3", "code": "79"}}), 4).passed


def test_a_failed_link_recovery_fails_the_tray_naming_gpu_and_link():
    finding = judged({"nvlink-errors": {"node": "gb200-r0-t3", "gpu": "1", "link": "7", "count": "3"}})
    assert finding.problems == ["GPU 1 NVLink 7: Link recovery failed events 3"]


def test_a_pending_row_remapping_fails_the_tray_naming_the_gpu():
    finding = judged({"row-remap-pending": {"node": "gb200-r0-t3", "gpu": "3"}})
    assert finding.problems == [
        "GPU 3: 1 volatile uncorrectable ECC error(s) (dram_uncorrectable)",
        "GPU 3: a row remapping is pending: reset the GPU to apply it",
    ]


def test_a_fault_on_another_tray_leaves_this_one_healthy():
    assert judged({"xid": {"node": "gb200-r0-t4", "code": "79"}}).passed


def test_an_unfinished_output_fails_the_tray_saying_what_is_missing():
    log = standin.log({}, TRAY, {})
    cut = log[: log.index(f"{MARK} begin dmesg")]
    assert check().judge_tray("t", cut, 4).problems == ["the pod's output lacks dmesg: it did not run to its end"]
    assert set(sections(log)) == {"clock", "nvidia-smi -q -x", "nvidia-smi nvlink -e", "dmesg"}


def test_the_pod_reads_every_gpu_without_claiming_one():
    health = check(image="mirror.example/ubuntu:22.04")
    plan = verification.RackPlan("rack0", ["c.1"], ["t0", "t1"], ["t0", "t1"], [], 4, "NVIDIA GB200")
    run = rack_run.RackRun(health, object(), plan, rack_run.Settings())
    pod = health.manifest(run, "t1")
    (container,) = pod["spec"]["containers"]
    assert pod["metadata"]["name"] == "gpu-health-t1" and pod["spec"]["runtimeClassName"] == "nvidia"
    assert container["image"] == "mirror.example/ubuntu:22.04" and "resources" not in container
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    assert container["securityContext"] == {"privileged": True}
    assert health.pod_security_level == "privileged" and health.uses_gpus is False
    assert pod["metadata"]["labels"]["gpu-fabric.nvidia.com/check"] == "gpu_health"


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError, match=r"^gpu_health.xid_window_hours is -1: 0 \(since boot\) or more$"):
        check(xid_window_hours=-1)


def test_an_xid_in_the_mig_form_fails_the_tray_naming_the_gpu_and_its_instances():
    log = standin.log({}, TRAY, {"xid": {"node": "gb200-r0-t3", "gpu": "2", "code": "79"}})
    mig = log.replace("NVRM: Xid (PCI:0018:01:00): 79", "NVRM: Xid (PCI:0018:01:00 GPU-I:01 GPU-CI:00): 79")
    assert mig != log
    assert check().judge_tray("gb200-r0-t3", mig, 4).problems == [
        "GPU 2 GPU-I 1 GPU-CI 0: Xid 79 (GPU has fallen off the bus): pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus."
    ]


@pytest.mark.parametrize(
    "element, problem",
    [
        ("unrepairable_memory", "GPU 1: its memory has a fault it cannot repair: replace the GPU"),
        ("channel_repair_pending", "GPU 1: a memory channel repair is pending: reset the GPU to apply it"),
        ("tpc_repair_pending", "GPU 1: a TPC repair is pending: reset the GPU to apply it"),
    ],
)
def test_each_memory_fault_the_report_shows_fails_the_tray_naming_the_gpu(element, problem):
    log = standin.log({}, TRAY, {})
    parts = log.split("<gpu id=")
    parts[2] = parts[2].replace(f"<{element}>No</{element}>", f"<{element}>Yes</{element}>", 1)
    assert check().judge_tray("gb200-r0-t3", "<gpu id=".join(parts), 4).problems == [problem]


def with_section(name: str, text: str, status: int, log: str = "") -> str:
    """The stand-in's healthy log with section ``name`` replaced (a bad case written here from the tools' outputs)."""
    log = log or standin.log({}, TRAY, {})
    begin, end = f"{MARK} begin {name}\n", f"{MARK} end {name} rc=0\n"
    start, stop = log.index(begin) + len(begin), log.index(end)
    return log[:start] + text + log[stop:].replace(end, f"{MARK} end {name} rc={status}\n", 1)


def test_a_refused_kernel_log_is_an_error_naming_the_tool_and_its_status():
    log = with_section("dmesg", "dmesg: read kernel buffer failed: Operation not permitted\n", 1)
    assert check().judge_tray("gb200-r0-t3", log, 4).problems == [
        "dmesg exited 1, so its signals are unread: dmesg: read kernel buffer failed: Operation not permitted"
    ]


def test_nvlink_counters_not_supported_or_not_printed_are_errors():
    unsupported = with_section("nvidia-smi nvlink -e", "NVLink error counters are Not Supported on this GPU\n", 3)
    assert check().judge_tray("gb200-r0-t3", unsupported, 4).problems == [
        "nvidia-smi nvlink -e exited 3, so its signals are unread: NVLink error counters are Not Supported on this GPU"
    ]
    silent = with_section("nvidia-smi nvlink -e", "", 0)
    assert check().judge_tray("gb200-r0-t3", silent, 4).problems == [
        "nvidia-smi nvlink -e exited 0 but printed nothing, so its signals are unread"
    ]


def test_a_gpu_the_tools_do_not_list_fails_the_tray_naming_its_index():
    log = standin.log({}, TRAY, {})
    xml_start = log.index("<?xml")
    xml = log[xml_start : log.index(f"{MARK} end nvidia-smi -q -x")]
    three = xml[: xml.rindex("\t<gpu id=")] + "</nvidia_smi_log>\n"
    three = three.replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>3</attached_gpus>")
    assert three != xml
    finding = check().judge_tray("gb200-r0-t3", with_section("nvidia-smi -q -x", three, 0, log), 4)
    assert finding.problems == [
        "nvidia-smi -q -x lists 3 of the tray's 4 GPUs: GPU 3 missing (fallen off the bus, or not bound to the "
        "driver: check the tray's kernel log)"
    ]
    counters = log[log.index(f"{MARK} begin nvidia-smi nvlink -e\n") :].split("\n", 1)[1]
    counters = counters[: counters.index(f"{MARK} end nvidia-smi nvlink -e")]
    blocks = counters.split("GPU ")
    without_gpu_1 = "GPU ".join(b for b in blocks if not b.startswith("1: "))
    finding = check().judge_tray("gb200-r0-t3", with_section("nvidia-smi nvlink -e", without_gpu_1, 0, log), 4)
    assert finding.problems == [
        "nvidia-smi nvlink -e lists 3 of the tray's 4 GPUs: GPU 1 missing (fallen off the bus, or not bound to the "
        "driver: check the tray's kernel log)"
    ]
    assert check().judge_tray("gb200-r0-t3", log, 2).problems == [
        "nvidia-smi -q -x lists GPU 2, 3, which the tray does not have (it has 2 GPUs, gpu_fabric_gpus_per_tray or "
        "the Node's nvidia.com/gpu)",
        "nvidia-smi nvlink -e lists GPU 2, 3, which the tray does not have (it has 2 GPUs, gpu_fabric_gpus_per_tray "
        "or the Node's nvidia.com/gpu)",
    ]


def test_a_section_that_ends_without_its_exit_status_did_not_end():
    log = standin.log({}, TRAY, {}).replace(f"{MARK} end dmesg rc=0", f"{MARK} end dmesg")
    assert check().judge_tray("gb200-r0-t3", log, 4).problems == [
        "the pod's output lacks dmesg: it did not run to its end"
    ]
