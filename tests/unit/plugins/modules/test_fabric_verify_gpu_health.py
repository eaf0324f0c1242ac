# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""fabric_verify with ``check: gpu_health``, run as Ansible runs it: each case of issue 40's "Seen" list and each
signal the check reads, put on one tray of a rack of three, fails that tray by name and only that tray. The logs are
the sim's stand-in output (sim/simrack/programs/gpu_health.py) with one fault each; the API server is a stand-in
(tray_pod_cluster.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import MARK

from tests.unit.plugins.modules.tray_pod_cluster import TRAYS, stand_in, tray, verify

REPO_ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack.programs import gpu_health as standin  # noqa: E402

SICK = "gb200-r0-t1"


def nvlink_s(log: str, inactive=()) -> str:
    """``nvidia-smi nvlink -s`` of the log's GPUs in a GB200's layout (a public output: NVIDIA/k8s-test-infra issue
    371), GPU 2's links ``inactive`` shown ``<inactive>``."""
    lines = []
    for gpu, uuid in enumerate(re.findall(r"<uuid>([^<]+)</uuid>", log)):
        lines.append(f"GPU {gpu}: NVIDIA GB200 (UUID: {uuid})")
        lines += [f"\t Link {n}: {'<inactive>' if gpu == 2 and n in inactive else '53.125 GB/s'}" for n in range(18)]
    return "\n".join(lines)


def with_section(log: str, name: str, text: str, status: int = 0) -> str:
    """``log`` with section ``name`` printing ``text`` and ending with ``status``."""
    begin, end = f"{MARK} begin {name}\n", f"{MARK} end {name} rc="
    text = text if not text or text.endswith("\n") else text + "\n"
    start, stop = log.index(begin) + len(begin), log.index(end)
    return log[:start] + text + f"{end}{status}\n" + log[log.index("\n", stop) + 1 :]


def tray_log(node: str) -> str:
    return standin.log({}, tray(node), {})


def on_gpu(log: str, gpu: int, old: str, new: str) -> str:
    parts = log.split("<gpu id=")
    assert old in parts[gpu + 1]
    parts[gpu + 1] = parts[gpu + 1].replace(old, new, 1)
    return "<gpu id=".join(parts)


def without_gpu(log: str, section: str, gpu: int) -> str:
    start = log.index(f"{MARK} begin {section}\n") + len(f"{MARK} begin {section}\n")
    blocks = log[start : log.index(f"{MARK} end {section} rc=")].split("GPU ")
    return with_section(log, section, "GPU ".join(b for b in blocks if not b.startswith(f"{gpu}: ")))


FAULTS = {
    "a refused dmesg": (
        lambda log: with_section(log, "dmesg", "dmesg: read kernel buffer failed: Operation not permitted", 1),
        "dmesg exited 1, so its signals are unread: dmesg: read kernel buffer failed: Operation not permitted",
    ),
    "nvlink -e not supported": (
        lambda log: with_section(log, "nvidia-smi nvlink -e", "NVLink error counters are Not Supported", 3),
        "nvidia-smi nvlink -e exited 3, so its signals are unread: NVLink error counters are Not Supported",
    ),
    "nvlink -e printing nothing": (
        lambda log: with_section(log, "nvidia-smi nvlink -e", ""),
        "nvidia-smi nvlink -e exited 0 but printed nothing, so its signals are unread",
    ),
    "nvlink -s printing nothing": (
        lambda log: with_section(log, "nvidia-smi nvlink -s", ""),
        "nvidia-smi nvlink -s exited 0 but printed nothing, so its signals are unread",
    ),
    "3 of 4 GPUs in nvlink -s": (
        lambda log: without_gpu(log, "nvidia-smi nvlink -s", 3),
        "nvidia-smi nvlink -s lists 3 of the tray's 4 GPUs: GPU 3 missing (fallen off the bus, or not bound to the "
        "driver: check the tray's kernel log)",
    ),
    "3 of 4 GPUs in nvidia-smi -q -x": (
        lambda log: re.sub(
            r"\s*<gpu id=[^>]*>(?:(?!<gpu id=).)*</gpu>\s*(?=</nvidia_smi_log>)",
            "\n",
            log.replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>3</attached_gpus>"),
            flags=re.S,
        ),
        "nvidia-smi -q -x lists 3 of the tray's 4 GPUs: GPU 3 missing (fallen off the bus, or not bound to the "
        "driver: check the tray's kernel log)",
    ),
    "a lost NVLink": (
        lambda log: with_section(log, "nvidia-smi nvlink -s", nvlink_s(log, inactive=(7,))),
        "GPU 2: NVLink 7 inactive (17 of 18 links up)",
    ),
    "all links inactive": (
        lambda log: with_section(
            log,
            "nvidia-smi nvlink -s",
            re.sub(
                r"(GPU 2: [^\n]*)\n(\t Link [^\n]*\n)+",
                r"\1 NVML: Unable to retrieve Nvlink information as all links are inActive\n",
                nvlink_s(log) + "\n",
            ),
        ),
        "GPU 2: every NVLink inactive (nvidia-smi nvlink -s: NVML: Unable to retrieve Nvlink information as all "
        "links are inActive)",
    ),
    "unrepairable memory": (
        lambda log: on_gpu(log, 1, "<unrepairable_memory>No<", "<unrepairable_memory>Yes<"),
        "GPU 1: its memory has a fault it cannot repair: replace the GPU",
    ),
    "a channel repair pending": (
        lambda log: on_gpu(log, 1, "<channel_repair_pending>No<", "<channel_repair_pending>Yes<"),
        "GPU 1: a memory channel repair is pending: reset the GPU to apply it",
    ),
    "a TPC repair pending": (
        lambda log: on_gpu(log, 1, "<tpc_repair_pending>No<", "<tpc_repair_pending>Yes<"),
        "GPU 1: a TPC repair is pending: reset the GPU to apply it",
    ),
    "a fabric route unhealthy": (
        lambda log: on_gpu(log, 0, "<route_unhealthy>False<", "<route_unhealthy>True<"),
        "GPU 0: fabric route unhealthy: traffic to some GPUs of the domain has no healthy route",
    ),
    "a MIG Xid": (
        lambda log: with_section(
            log,
            "dmesg",
            f"{standin.BOOT}\n[86000.000000] NVRM: Xid (PCI:0018:01:00 GPU-I:05): 95, pid=9, Uncontained: FBHUB",
        ),
        "GPU 2 GPU-I 5: Xid 95 (uncontained memory error): pid=9, Uncontained: FBHUB",
    ),
}


def test_a_rack_of_healthy_trays_passes(monkeypatch, tmp_path):
    stand_in(monkeypatch, "gpu-health", {node: tray_log(node) for node in TRAYS})
    (record,) = verify(tmp_path, "gpu_health")["records"]
    assert (record["verdict"], record["failed_nodes"]) == ("passed", []), record["summary"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_fails_its_tray_by_name_and_leaves_the_others(monkeypatch, tmp_path, fault):
    change, problem = FAULTS[fault]
    logs = {node: tray_log(node) for node in TRAYS}
    logs[SICK] = change(logs[SICK])
    stand_in(monkeypatch, "gpu-health", logs)
    (record,) = verify(tmp_path, "gpu_health")["records"]
    assert (record["verdict"], record["failed_nodes"]) == ("failed", [SICK]), record["summary"]
    assert record["node_problems"] == {SICK: problem}


def test_the_links_expected_per_gpu_come_from_the_checks_settings(monkeypatch, tmp_path):
    stand_in(monkeypatch, "gpu-health", {node: tray_log(node) for node in TRAYS})
    (record,) = verify(tmp_path, "gpu_health", nvlinks_per_gpu=19)["records"]
    assert record["failed_nodes"] == list(TRAYS)
    assert record["node_problems"][SICK].startswith("GPU 0: nvidia-smi nvlink -s lists 18 of its 19 NVLinks")
