# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check ``gpu_health``: the passive signals that predict a failing tray, read on every usable tray.

One pod per tray prints, between markers, ``nvidia-smi -q -x`` (fabric state and health, ECC errors, row
remapping, retired pages), ``nvidia-smi nvlink -s`` (each NVLink's state and bandwidth), ``nvidia-smi nvlink -e``
(NVLink error and recovery counters), the kernel log
(``dmesg``: the ``NVRM: Xid`` lines of the GPUs and the ``SXid`` lines of NVSwitches) and the clock and
uptime that date the kernel log's lines.

Evidence first: each section must end with its exit status, exit 0 and print something; a refused ``dmesg``
(CAP_SYSLOG), ``nvlink -e`` answering Not Supported or printing nothing, a failed ``nvidia-smi`` is an error naming
the tool and its status, never a pass. ``nvidia-smi -q -x`` and ``nvlink -e`` must each list every GPU of the tray
(0 to ``gpus_per_tray`` - 1): a GPU either leaves out fails the tray naming its index. Then a tray fails, naming
the GPU, on:

* an Xid (any form the driver prints, MIG's ``GPU-I``/``GPU-CI`` included: ``kernel_log``) in the last
  ``xid_window_hours`` that is not in ``xid_ignore`` (by default the codes NVIDIA's Xid
  catalogue resolves by restarting the application or ignoring: 13, 31, 43, 45, 63, 94), and a fatal SXid;
  an Xid 154 that sets the recovery action to None is a note;
* a GPU that ``nvidia-smi nvlink -s`` does not list with ``nvlinks_per_gpu`` (18) links, each with a bandwidth
  figure (``nvlink_status``): an inactive link fails naming GPU and links; NVML's "all links are inActive" or "Not
  Supported" instead of the links, a status without a figure, a link not listed: not proven up, never a pass;
* a non-zero NVLink counter of ``nvlink_fail_counters``: on Blackwell the failed link recoveries, malformed
  packets, buffer overruns, local link integrity and effective (post-FEC) errors; on Hopper and before the
  recovery errors. A successful link recovery is a note, as in DCGM's NVLink health watch (warn, not fail);
* every memory fault ``nvidia-smi -q -x`` reports (``gpu_memory``): a volatile uncorrectable ECC error, a row
  remapping pending or failed, a page retirement, memory channel or TPC repair pending, unrepairable memory, SRAM
  errors past the driver's threshold;
* a GPU whose fabric is not Completed/Success, has no clique, has no ``<fabric>`` section at all, or whose fabric
  health is Unhealthy (``nvidia_smi.fabric_verdict``; Limited capacity is a note); a fabric health row that shows a
  fault: bandwidth not Full, a route unhealthy or in recovery, an access timeout recovery, an incorrect
  configuration (``nvidia_smi.fabric_health_faults``).

SXid lines come from the ``nvidia-nvswitch`` kernel driver, so a kernel log shows them only on a host whose
NVSwitches that driver runs (an HGX/DGX baseboard). A GB200 NVL72 compute tray has no NVSwitch: the rack's switches
sit in its NVLink switch trays, under their own OS and NVIDIA's NMX, and their faults reach the compute tray as the
GPUs' NVLink Xids (144 to 150), inactive links and the fabric's health rows, all read here. A switch tray's own
log is outside what a pod on a compute tray can read.

DCGM's NVLink health watch marks IMEX unhealthy (DCGM_FR_IMEX_UNHEALTHY, code 122) on a tray where no
IMEX daemon runs, which is every idle tray of a cluster whose IMEX daemons come with ComputeDomains (the
DRA driver): this check does not read DCGM's health, so it raises no such alarm; the IMEX channel itself
is what the ``imex_channel`` check proves, inside a ComputeDomain.

Formats: the Xid lines and ``nvidia-smi -q -x`` as captured on an H100 and H200 (``tests/fixtures/nvidia-smi``);
the SXid line as NVIDIA's documentation prints it (no SXid was captured); ``nvidia-smi nvlink -s`` as a GB200
prints it in a public output (NVIDIA/k8s-test-infra issue 371); ``nvlink -e`` in the legacy layout (Replay,
Recovery, CRC Errors) as an H100 prints it in a public output, and in the Blackwell layout with the counter names of
DCGM's NVLink fields. No Blackwell ``nvlink -e`` output is stored, and a public NVIDIA script shows a GB300 printing
the legacy layout, so both are read and judged alike; the GB200 fixtures are synthesized.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.tray_pods import TrayFinding, TrayPodCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.gpu_memory import memory_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kernel_log import PciKey, parse_kernel_log, pci_key
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvidia_smi import (
    fabric_health_faults,
    fabric_verdict,
    parse_query_xml,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_counters import (
    NvlinkCounters,
    count,
    parse_nvlink_errors,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_status import link_problems, parse_nvlink_status
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pod_sections import section_script, sections
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun

SECTIONS = (
    ("clock", "date +%s; cat /proc/uptime"),
    ("nvidia-smi -q -x", "nvidia-smi -q -x"),
    ("nvidia-smi nvlink -s", "nvidia-smi nvlink -s"),
    ("nvidia-smi nvlink -e", "nvidia-smi nvlink -e"),
    ("dmesg", "dmesg"),
)
# NVIDIA's Xid catalogue: the codes whose resolution is restarting the application or nothing (the tray is fine).
APPLICATION_XIDS = [13, 31, 43, 45, 63, 94]
XID_MEANING = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    63: "row remapping event",
    64: "row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained memory error",
    95: "uncontained memory error",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    136: "NVLink link training failed",
    137: "NVLink privilege error",
    140: "unrecovered ECC error",
    143: "GPU initialization error",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW control error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed",
    155: "NVLink software-defined error",
    156: "resource retirement event",
}
NVLINK_FAIL_COUNTERS = [
    "Link recovery failed events",
    "Malformed packet Errors",
    "Buffer overrun Errors",
    "Local link integrity Errors",
    "Effective Errors",
    "Recovery Errors",
]
NVLINK_NOTE_COUNTERS = ("Link recovery successful events",)
NVLINKS_PER_GPU = 18  # a GB200's NVLink 5 links, each to the rack's NVSwitch trays


def script() -> str:
    """The pod's shell script: each section between markers, with its exit status."""
    return "; ".join(section_script(name, command) for name, command in SECTIONS)


class GpuHealthCheck(TrayPodCheck):
    name = "gpu_health"
    uses_gpus = False  # reads, claims no GPU: a tray a tenant's job holds is read too
    pod_security_level = "privileged"  # the kernel log needs CAP_SYSLOG
    pod_prefix = "gpu-health"
    what = "GPU health signals"
    options = {
        "gpu_health": dict(
            type="dict",
            default={},
            options=dict(
                image=dict(type="str", default="ubuntu:22.04"),
                runtime_class=dict(type="str", default="nvidia"),
                xid_window_hours=dict(type="int", default=24),
                xid_ignore=dict(type="list", elements="int", default=list(APPLICATION_XIDS)),
                nvlink_fail_counters=dict(type="list", elements="str", default=list(NVLINK_FAIL_COUNTERS)),
                nvlinks_per_gpu=dict(type="int", default=NVLINKS_PER_GPU),
            ),
        ),
    }

    def __init__(
        self,
        image: str,
        runtime_class: str = "nvidia",
        xid_window_hours: int = 24,
        xid_ignore: Sequence[int] = tuple(APPLICATION_XIDS),
        nvlink_fail_counters: Sequence[str] = tuple(NVLINK_FAIL_COUNTERS),
        nvlinks_per_gpu: int = NVLINKS_PER_GPU,
    ) -> None:
        self.image = image
        self.runtime_class = runtime_class
        self.xid_window_hours = xid_window_hours
        self.xid_ignore = set(xid_ignore)
        self.nvlink_fail_counters = list(nvlink_fail_counters)
        self.nvlinks_per_gpu = nvlinks_per_gpu

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> GpuHealthCheck:
        given = params["gpu_health"]
        if given["xid_window_hours"] < 0:
            raise ValueError(f"gpu_health.xid_window_hours is {given['xid_window_hours']}: 0 (since boot) or more")
        if given["nvlinks_per_gpu"] < 1:
            raise ValueError(
                f"gpu_health.nvlinks_per_gpu is {given['nvlinks_per_gpu']}: the NVLinks each GPU has, 1 or more "
                f"({NVLINKS_PER_GPU} on a GB200)"
            )
        return cls(**given)

    def container(self, run: RackRun, node: str) -> Dict[str, Any]:
        return {
            "image": self.image,
            "command": ["sh", "-c", script()],
            "env": [
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
            ],
            "securityContext": {"privileged": True},
        }

    def pod_spec(self, run: RackRun, node: str) -> Dict[str, Any]:
        return {"runtimeClassName": self.runtime_class} if self.runtime_class else {}

    def judge_tray(self, node: str, log: str, gpus: int) -> TrayFinding:
        """The tray's verdict: first the evidence (each section ended, exited 0 and printed something; the report
        and the NVLink counters list each of the tray's ``gpus`` GPUs, 0 to gpus - 1), then the signals."""
        finding = TrayFinding()
        parts = sections(log)
        missing = [name for name, _command in SECTIONS if name not in parts or parts[name][1] is None]
        if missing:
            finding.problems.append(f"the pod's output lacks {', '.join(missing)}: it did not run to its end")
            return finding
        for name, _command in SECTIONS:
            text, status = parts[name]
            if status:
                printed = one_line(text, 200, "...") or "nothing"
                finding.problems.append(f"{name} exited {status}, so its signals are unread: {printed}")
            elif not text.strip():
                finding.problems.append(f"{name} exited 0 but printed nothing, so its signals are unread")
        smi_text = parts["nvidia-smi -q -x"][0]
        try:
            report = parse_query_xml(smi_text) if not parts["nvidia-smi -q -x"][1] and smi_text.strip() else None
            memory = memory_problems(smi_text) if report is not None else {}
            fabric_health = fabric_health_faults(smi_text) if report is not None else {}
        except ValueError as exc:
            finding.problems.append(f"nvidia-smi -q -x gave no report (rc {parts['nvidia-smi -q -x'][1]}): {exc}")
            report, memory, fabric_health = None, {}, {}
        gpu_of: Dict[PciKey, int] = {}
        if report is not None:
            finding.problems += _count_problems("nvidia-smi -q -x", [g.index for g in report.gpus], gpus)
            for gpu in report.gpus:
                with contextlib.suppress(ValueError):  # no readable bus id: its Xids are named by PCI address
                    gpu_of[pci_key(gpu.pci_bus_id or "")] = gpu.index
            verdict = fabric_verdict(report.gpus)
            finding.problems += verdict.problems + verdict.pending
            finding.notes += verdict.warnings
            for index, faults in sorted(fabric_health.items()):
                finding.problems += [f"GPU {index}: {fault}" for fault in faults]
            for index, problems in sorted(memory.items()):
                finding.problems += [f"GPU {index}: {problem}" for problem in problems]
        links_up = 0
        if not parts["nvidia-smi nvlink -s"][1] and parts["nvidia-smi nvlink -s"][0].strip():
            problems, links_up = nvlink_status_problems(parts["nvidia-smi nvlink -s"][0], gpus, self.nvlinks_per_gpu)
            finding.problems += problems
        if not parts["nvidia-smi nvlink -e"][1]:
            counters = parse_nvlink_errors(parts["nvidia-smi nvlink -e"][0])
            if parts["nvidia-smi nvlink -e"][0].strip():
                finding.problems += _count_problems("nvidia-smi nvlink -e", list(counters), gpus)
                finding.problems += [
                    f"GPU {gpu}: nvidia-smi nvlink -e printed no counter of any link"
                    for gpu, links in counters.items()
                    if not links
                ]
            self._judge_nvlink(counters, finding)
        if not parts["dmesg"][1]:
            self._judge_kernel_log(parts["dmesg"][0], parts["clock"][0], gpu_of, finding)
        finding.details = {
            "gpus": len(report.gpus) if report else 0,
            "expected_gpus": gpus,
            "driver_version": report.driver_version if report else None,
            "fabric": sorted({f"{g.fabric.state}/{g.fabric.status}" for g in report.gpus}) if report else [],
            "nvlinks_up": links_up,
            "expected_nvlinks": gpus * self.nvlinks_per_gpu,
            "exit_codes": {name: parts[name][1] for name, _command in SECTIONS},
        }
        return finding

    def _judge_nvlink(self, counters: NvlinkCounters, finding: TrayFinding) -> None:
        for gpu, links in sorted(counters.items()):
            for link, values in sorted(links.items()):
                for counter, value in values.items():
                    if counter in self.nvlink_fail_counters and count(value):
                        finding.problems.append(f"GPU {gpu} NVLink {link}: {counter} {value}")
                    elif counter in NVLINK_NOTE_COUNTERS and count(value):
                        finding.notes.append(f"GPU {gpu} NVLink {link}: {counter} {value}")

    def _judge_kernel_log(self, dmesg: str, clock: str, gpu_of: Dict[PciKey, int], finding: TrayFinding) -> None:
        since = self._since_boot(clock)
        log = parse_kernel_log(dmesg)
        ignored: Dict[int, int] = {}
        for event in log.xids:
            if since is not None and event.seconds is not None and event.seconds < since:
                continue
            gpu = gpu_of.get(event.pci)
            where = f"GPU {gpu}{event.instances}" if gpu is not None else f"GPU at PCI {event.where}"
            meaning = XID_MEANING.get(event.code, "see NVIDIA's Xid catalogue")
            text = f"{where}: Xid {event.code} ({meaning}): {event.text[:160]}"
            if event.code in self.xid_ignore or (event.code == 154 and "to 0x0 (None)" in event.text):
                ignored[event.code] = ignored.get(event.code, 0) + 1
            elif text not in finding.problems:  # one event can print several lines
                finding.problems.append(text)
        finding.notes += [
            f"Xid {code} x{times} (an application's error, not the tray's)" for code, times in sorted(ignored.items())
        ]
        for sxid in log.sxids:
            severity = "fatal" if sxid.fatal else "non-fatal"
            text = f"{sxid.switch}: SXid {sxid.code} ({severity}): {sxid.text[:160]}"
            (finding.problems if sxid.fatal else finding.notes).append(text)

    def _since_boot(self, clock: str) -> Optional[float]:
        """Seconds after boot from which the kernel log's events count (None: every event since boot); read from
        the tray's own uptime, so the clocks of this machine and the tray need not agree."""
        if not self.xid_window_hours:
            return None
        numbers = re.findall(r"\d+(?:\.\d+)?", clock)
        if len(numbers) < 2:
            return None  # no clock: every event counts
        uptime = float(numbers[1])
        return uptime - self.xid_window_hours * 3600.0


def nvlink_status_problems(text: str, gpus: int, links_per_gpu: int) -> Tuple[List[str], int]:
    """``nvidia-smi nvlink -s`` of a tray of ``gpus`` GPUs judged: (one line per problem, the links proven up)."""
    links = parse_nvlink_status(text)
    problems = _count_problems("nvidia-smi nvlink -s", sorted(links.gpus), gpus)
    if problems and links.stray:
        problems[0] += f"; it printed: {one_line(links.stray[0], 160, '...')}"
    problems += link_problems(links, gpus, links_per_gpu)
    return problems, sum(len(links.gpus[index].up) for index in range(gpus) if index in links.gpus)


def _count_problems(tool: str, listed: Sequence[int], gpus: int) -> List[str]:
    """What ``tool`` leaves unread of the tray's ``gpus`` GPUs (0 to gpus - 1): each one it does not list, and
    any it lists that the tray does not have."""
    problems = []
    absent = [index for index in range(gpus) if index not in listed]
    if absent:
        problems.append(
            f"{tool} lists {len(listed)} of the tray's {gpus} GPUs: "
            + "GPU "
            + ", ".join(str(index) for index in absent)
            + " missing (fallen off the bus, or not bound to the driver: check the tray's kernel log)"
        )
    extra = sorted(set(listed) - set(range(gpus)))
    if extra:
        problems.append(
            f"{tool} lists GPU " + ", ".join(str(index) for index in extra) + f", which the tray does not have "
            f"(it has {gpus} GPUs, gpu_fabric_gpus_per_tray or the Node's nvidia.com/gpu)"
        )
    return problems


CHECK = GpuHealthCheck
