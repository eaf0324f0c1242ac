# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check gpu_health: its parsers on real kernel logs and nvidia-smi reports, and its judge of a tray on what
the sim's stand-in prints (sim/simrack/programs/gpu_health.py), healthy and under each fault."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, gpu_memory, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import gpu_health
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.gpu_health import (
    GpuHealthCheck,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_counters import parse_nvlink_errors
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import MARK, sections
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan

REPO_ROOT = Path(__file__).resolve().parents[4]
SMI = REPO_ROOT / "tests" / "fixtures" / "nvidia-smi"
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack.programs import gpu_health as standin  # noqa: E402

TRAY = {
    "metadata": {"name": "gb200-r0-t3", "labels": {"nvidia.com/gpu.clique": "5c0d8b4e-0000-4000-8000-000000000000.1"}}
}


def nvlink_s(log: str, inactive: dict | None = None) -> str:
    """``nvidia-smi nvlink -s`` of the log's GPUs in the layout a GB200 prints (NVIDIA/k8s-test-infra issue 371:
    18 links at 53.125 GB/s), links ``inactive[gpu]`` shown ``<inactive>``."""
    lines = []
    for gpu, uuid in enumerate(re.findall(r"<uuid>([^<]+)</uuid>", log)):
        lines.append(f"GPU {gpu}: NVIDIA GB200 (UUID: {uuid})")
        down = (inactive or {}).get(gpu, ())
        lines += [f"\t Link {n}: {'<inactive>' if n in down else '53.125 GB/s'}" for n in range(18)]
    return "\n".join(lines)


def tray_log(faults=None) -> str:
    """The stand-in's log of this tray."""
    return standin.log({}, TRAY, faults or {})


def check(**given) -> GpuHealthCheck:
    params = checks.with_settings({"settings": {"gpu_health": given}})
    return GpuHealthCheck.from_params(params)


def judged(faults=None, **given):
    return check(**given).judge_tray("gb200-r0-t3", tray_log(faults), 4)


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
        "nvlinks_up": 72,
        "expected_nvlinks": 72,
        "exit_codes": {
            "clock": 0,
            "nvidia-smi -q -x": 0,
            "nvidia-smi nvlink -s": 0,
            "nvidia-smi nvlink -e": 0,
            "dmesg": 0,
        },
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
    assert older.judge_tray("t", tray_log({"xid": {"node": "gb200-r0-t3", "code": "79"}}), 4).passed


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
    log = tray_log()
    cut = log[: log.index(f"{MARK} begin dmesg")]
    assert check().judge_tray("t", cut, 4).problems == ["the pod's output lacks dmesg: it did not run to its end"]
    assert set(sections(log)) == {"clock", "nvidia-smi -q -x", "nvidia-smi nvlink -s", "nvidia-smi nvlink -e", "dmesg"}


def test_the_pod_reads_every_gpu_without_claiming_one():
    health = check(image="mirror.example/ubuntu:22.04")
    plan = RackPlan("rack0", ["c.1"], ["t0", "t1"], ["t0", "t1"], [], 4, "NVIDIA GB200")
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
    log = tray_log({"xid": {"node": "gb200-r0-t3", "gpu": "2", "code": "79"}})
    mig = log.replace("NVRM: Xid (PCI:0018:01:00): 79", "NVRM: Xid (PCI:0018:01:00 GPU-I:01 GPU-CI:00): 79")
    assert mig != log
    assert check().judge_tray("gb200-r0-t3", mig, 4).problems == [
        "GPU 2 GPU-I 1 GPU-CI 0: Xid 79 (GPU has fallen off the bus): pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus."
    ]


@pytest.mark.parametrize("path, meaning", gpu_memory.YES_FAULTS)
def test_each_memory_fault_the_report_shows_fails_the_tray_naming_the_gpu(path, meaning):
    element = path.rsplit("/", 1)[1]

    def fault(part: str) -> str:
        for old in (f"<{element}>No</{element}>", f"<{element}>N/A</{element}>"):
            part = part.replace(old, f"<{element}>Yes</{element}>", 1)
        return part

    assert check().judge_tray("gb200-r0-t3", with_gpu_xml(tray_log(), 1, fault), 4).problems == [f"GPU 1: {meaning}"]


@pytest.mark.parametrize("counter", ["dram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded"])
def test_a_volatile_uncorrectable_error_fails_the_tray_naming_the_gpu_and_the_counter(counter):
    def count(part: str) -> str:
        volatile = part.index("<volatile>")
        return part[:volatile] + part[volatile:].replace(f"<{counter}>0</{counter}>", f"<{counter}>2</{counter}>", 1)

    assert check().judge_tray("gb200-r0-t3", with_gpu_xml(tray_log(), 3, count), 4).problems == [
        f"GPU 3: 2 volatile uncorrectable ECC error(s) ({counter})"
    ]


@pytest.mark.parametrize(
    "line, problem",
    [
        ("NVRM: Xid (0018:01:00): 48, An uncorrectable double bit error", "GPU 2: Xid 48 (double-bit ECC error)"),
        ("NVRM: Xid (PCI:0018:01:00 GPU-I:05): 95, pid=9, Uncontained", "GPU 2 GPU-I 5: Xid 95 (uncontained memory"),
        ("NVRM: Xid (PCI:0018:01:00 GPU-I:3 GPU-C:1): 79, pid=12", "GPU 2 GPU-I 3 GPU-CI 1: Xid 79 (GPU has fallen"),
    ],
)
def test_every_xid_form_the_driver_prints_fails_the_tray_naming_the_gpu(line, problem):
    log = with_section("dmesg", f"{standin.BOOT}\n[86000.000000] {line}\n", 0, tray_log())
    (found,) = check().judge_tray("gb200-r0-t3", log, 4).problems
    assert found.startswith(problem)


def test_a_fatal_sxid_fails_the_tray_and_a_non_fatal_one_is_a_note():
    sxids = (
        "[86000.0] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n"
        "[86000.1] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Data {0x0, 0x0}\n"
        "[86001.0] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 12 egress non-posted PRIV error\n"
    )
    finding = check().judge_tray("gb200-r0-t3", with_section("dmesg", sxids, 0, tray_log()), 4)
    assert finding.problems == ["nvidia-nvswitch0: SXid 20034 (fatal): Link 30 LTSSM Fault Up"]
    assert finding.notes == ["nvidia-nvswitch1: SXid 12028 (non-fatal): Link 12 egress non-posted PRIV error"]


def legacy_counters(log: str, recovery: dict | None = None) -> str:
    """``nvidia-smi nvlink -e`` of the log's GPUs in the layout Hopper prints (tests/fixtures/nvidia-smi/
    h100-ml-engineering-nvidia-smi-nvlink-e.txt: Replay, Recovery and CRC Errors per link, a blank line between
    links), ``recovery[(gpu, link)]`` recovery errors."""
    lines = []
    for gpu, uuid in enumerate(re.findall(r"<uuid>([^<]+)</uuid>", log)):
        lines.append(f"GPU {gpu}: NVIDIA GB200 (UUID: {uuid})")
        for link in range(18):
            errors = (recovery or {}).get((gpu, link), 0)
            lines += [f"\t Link {link}: Replay Errors: 0", f"\t Link {link}: Recovery Errors: {errors}"]
            lines += [f"\t Link {link}: CRC Errors: 0", ""]
    return "\n".join(lines)


def test_the_legacy_counter_layout_is_judged_as_the_blackwell_one():
    real = parse_nvlink_errors((SMI / "h100-ml-engineering-nvidia-smi-nvlink-e.txt").read_text())
    assert sorted(real[0]) == [0, 1, 17]
    assert real[0][17] == {"Replay Errors": "0", "Recovery Errors": "0", "CRC Errors": "0"}
    log = tray_log()
    assert (
        check().judge_tray("gb200-r0-t3", with_section("nvidia-smi nvlink -e", legacy_counters(log), 0, log), 4).passed
    )
    failing = with_section("nvidia-smi nvlink -e", legacy_counters(log, {(3, 9): 2}), 0, log)
    assert check().judge_tray("gb200-r0-t3", failing, 4).problems == ["GPU 3 NVLink 9: Recovery Errors 2"]


def with_section(name: str, text: str, status: int, log: str = "") -> str:
    """The stand-in's healthy log with section ``name`` replaced (a bad case written here from the tools' outputs)."""
    log = log or tray_log()
    begin, end = f"{MARK} begin {name}\n", f"{MARK} end {name} rc=0\n"
    start, stop = log.index(begin) + len(begin), log.index(end)
    text = text if not text or text.endswith("\n") else text + "\n"
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
    log = tray_log()
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
        "nvidia-smi nvlink -s lists GPU 2, 3, which the tray does not have (it has 2 GPUs, gpu_fabric_gpus_per_tray "
        "or the Node's nvidia.com/gpu)",
        "nvidia-smi nvlink -e lists GPU 2, 3, which the tray does not have (it has 2 GPUs, gpu_fabric_gpus_per_tray "
        "or the Node's nvidia.com/gpu)",
    ]


def test_a_section_that_ends_without_its_exit_status_did_not_end():
    log = tray_log().replace(f"{MARK} end dmesg rc=0", f"{MARK} end dmesg")
    assert check().judge_tray("gb200-r0-t3", log, 4).problems == [
        "the pod's output lacks dmesg: it did not run to its end"
    ]


def test_the_pod_prints_the_link_state_between_the_report_and_the_counters():
    names = [name for name, _command in gpu_health.SECTIONS]
    assert names[names.index("nvidia-smi -q -x") + 1 : names.index("nvidia-smi nvlink -e")] == ["nvidia-smi nvlink -s"]
    assert f"echo '{MARK} begin nvidia-smi nvlink -s'; nvidia-smi nvlink -s; " in gpu_health.script()


def test_an_inactive_nvlink_fails_the_tray_naming_the_gpu_and_the_links():
    log = tray_log()
    links = with_section("nvidia-smi nvlink -s", nvlink_s(log, {2: (4, 11)}), 0, log)
    finding = check().judge_tray("gb200-r0-t3", links, 4)
    assert finding.problems == ["GPU 2: NVLink 4, 11 inactive (16 of 18 links up)"]
    assert (finding.details["nvlinks_up"], finding.details["expected_nvlinks"]) == (70, 72)


@pytest.mark.parametrize(
    "text, status, problem",
    [
        ("", 0, "nvidia-smi nvlink -s exited 0 but printed nothing, so its signals are unread"),
        (
            "NVML: Unable to retrieve NVLink information: Not Supported",
            3,
            "nvidia-smi nvlink -s exited 3, so its signals are unread: NVML: Unable to retrieve NVLink information: "
            "Not Supported",
        ),
    ],
)
def test_link_state_not_printed_or_not_supported_is_an_error_naming_the_tool(text, status, problem):
    log = tray_log()
    assert check().judge_tray("gb200-r0-t3", with_section("nvidia-smi nvlink -s", text, status, log), 4).problems == [
        problem
    ]


def test_a_gpu_whose_links_nvml_cannot_read_or_that_is_not_listed_fails_naming_it():
    log = tray_log()
    blocks = nvlink_s(log).split("GPU ")
    blocks[2] = blocks[2].split("\n", 1)[0] + " NVML: Unable to retrieve Nvlink information as all links are inActive\n"
    blocks[4] = blocks[4].split("\n", 1)[0] + "\n\t NVML: Unable to retrieve NVLink information: Not Supported\n"
    del blocks[3]  # GPU 2
    text = "GPU ".join(blocks)
    finding = check().judge_tray("gb200-r0-t3", with_section("nvidia-smi nvlink -s", text, 0, log), 4)
    assert finding.problems == [
        "nvidia-smi nvlink -s lists 3 of the tray's 4 GPUs: GPU 2 missing (fallen off the bus, or not bound to the "
        "driver: check the tray's kernel log)",
        "GPU 1: every NVLink inactive (nvidia-smi nvlink -s: NVML: Unable to retrieve Nvlink information as all links "
        "are inActive)",
        "GPU 3: nvidia-smi nvlink -s lists no NVLink, so none is proven up: NVML: Unable to retrieve NVLink "
        "information: Not Supported",
    ]


def test_a_link_state_without_a_figure_or_a_link_not_listed_is_not_a_link_up():
    log = tray_log()
    text = (
        nvlink_s(log).replace("\t Link 5: 53.125 GB/s", "\t Link 5: N/A", 1).replace("\t Link 17: 53.125 GB/s\n", "", 1)
    )
    finding = check().judge_tray("gb200-r0-t3", with_section("nvidia-smi nvlink -s", text, 0, log), 4)
    assert finding.problems == [
        "GPU 0: NVLink 5 'N/A' without a bandwidth figure: not proven up",
        "GPU 0: nvidia-smi nvlink -s lists 17 of its 18 NVLinks: link 17 missing",
    ]


def test_the_links_expected_per_gpu_are_an_option_and_a_count_below_one_is_refused():
    log = tray_log()
    assert check(nvlinks_per_gpu=18).judge_tray("gb200-r0-t3", log, 4).passed
    assert check(nvlinks_per_gpu=20).judge_tray("gb200-r0-t3", log, 4).problems[0] == (
        "GPU 0: nvidia-smi nvlink -s lists 18 of its 20 NVLinks: link 18, 19 missing"
    )
    with pytest.raises(ValueError, match=r"^gpu_health.nvlinks_per_gpu is 0: the NVLinks each GPU has, 1 or more"):
        check(nvlinks_per_gpu=0)


def with_gpu_xml(log: str, gpu: int, change) -> str:
    """The log with ``change`` applied to GPU ``gpu``'s part of the ``nvidia-smi -q -x`` report."""
    parts = log.split("<gpu id=")
    changed = change(parts[gpu + 1])
    assert changed != parts[gpu + 1]
    parts[gpu + 1] = changed
    return "<gpu id=".join(parts)


@pytest.mark.parametrize(
    "old, new, problem",
    [
        (
            "<state>Completed</state>",
            "<state>In Progress</state>",
            "GPU 1 (00000009:01:00.0): fabric state In Progress, status Success (expected Completed/Success)",
        ),
        (
            "<status>Success</status>",
            "<status>NVML_ERROR_UNKNOWN</status>",
            "GPU 1 (00000009:01:00.0): fabric state Completed, status NVML_ERROR_UNKNOWN (expected Completed/Success)",
        ),
        (
            "<summary>Healthy</summary>",
            "<summary>Unhealthy</summary>",
            "GPU 1 (00000009:01:00.0): fabric Completed/Success but health summary Unhealthy (see the Fabric Health "
            "rows of 'nvidia-smi -q')",
        ),
        (
            "<bandwidth>Full</bandwidth>",
            "<bandwidth>Degraded</bandwidth>",
            "GPU 1: fabric bandwidth Degraded (expected Full): NVLink bandwidth is lost",
        ),
        (
            "<route_unhealthy>False</route_unhealthy>",
            "<route_unhealthy>True</route_unhealthy>",
            "GPU 1: fabric route unhealthy: traffic to some GPUs of the domain has no healthy route",
        ),
    ],
)
def test_a_fabric_not_completed_successful_and_healthy_fails_the_tray_naming_the_gpu(old, new, problem):
    log = with_gpu_xml(tray_log(), 1, lambda part: part.replace(old, new, 1))
    assert check().judge_tray("gb200-r0-t3", log, 4).problems == [problem]


def test_a_gb200_report_without_a_fabric_section_fails_naming_the_gpu():
    log = with_gpu_xml(tray_log(), 2, lambda part: re.sub(r"\s*<fabric>.*?</fabric>", "", part, count=1, flags=re.S))
    assert check().judge_tray("gb200-r0-t3", log, 4).problems == [
        "GPU 2 (00000018:01:00.0): no fabric state (N/A): the GPU is not registered with an NVLink fabric (expected "
        "Completed/Success)"
    ]


def test_the_rack_run_fails_the_tray_whose_link_is_down_and_passes_the_other(monkeypatch):
    health = check()
    plan = RackPlan("rack1", ["c.1"], ["t4", "t5"], ["t4", "t5"], [], 4, "NVIDIA GB200")
    run = rack_run.RackRun(health, object(), plan, rack_run.Settings())
    pods = {
        health.pod_name(node): {"metadata": {"name": health.pod_name(node)}, "status": {"phase": "Succeeded"}}
        for node in plan.nodes
    }
    healthy = tray_log()
    logs = {
        health.pod_name("t4"): with_section("nvidia-smi nvlink -s", nvlink_s(healthy, {2: (4, 11)}), 0, healthy),
        health.pod_name("t5"): healthy,
    }
    run.api = SimpleNamespace(list=lambda *args, **kwargs: list(pods.values()))
    monkeypatch.setattr(run, "create_namespace", lambda: None)
    monkeypatch.setattr(run, "create_pod", lambda body: body)
    monkeypatch.setattr(run, "watch_for", lambda *args, **kwargs: True)
    monkeypatch.setattr(run, "read_log", logs.__getitem__)
    result = health.measure(run)
    assert result.passed is False and result.failed_nodes == ["t4"]
    assert result.node_problems["t4"] == "GPU 2: NVLink 4, 11 inactive (16 of 18 links up)"
