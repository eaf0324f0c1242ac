# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""``nvidia-smi nvlink -s``: each GPU's NVLinks and their state, and what a tray's links lack (standard library only).

The layout nvidia-smi prints (real outputs: a GB200 of an NVL72 rack in NVIDIA/k8s-test-infra issue 371, a V100 with
inactive links in Azure/azhpc-diagnostics issue 73, the H200 captures of ``tests/fixtures/nvidia-smi``)::

    GPU 0: NVIDIA GB200 (UUID: GPU-d1b93026-...)
    \\t Link 0: 53.125 GB/s
    \\t Link 1: <inactive>

and, where NVML cannot tell, a message instead of the links, on the GPU's line or the next one::

    GPU 1: Quadro RTX 5000 (UUID: GPU-...) NVML: Unable to retrieve Nvlink information as all links are inActive
    GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-...)
    \\t NVML: Unable to retrieve NVLink information: Not Supported

A link is up only with a bandwidth figure: ``<inactive>``, ``N/A`` or any status without ``GB/s`` is not evidence of
a working link. No Kubernetes client here; the judgement (``link_problems``) is a pure function too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

INACTIVE = "<inactive>"
ALL_INACTIVE = "as all links are inactive"  # NVML's message (printed "inActive"), read case-insensitively

_GPU = re.compile(r"^\s*GPU (\d+):\s*(.*?)\s*$")
_UUID = re.compile(r"^(.*?)\s*\(UUID:\s*([^)]*)\)\s*(.*)$")
_LINK = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")
_BANDWIDTH = re.compile(r"^(\d+(?:\.\d+)?) GB/s$")


@dataclass
class GpuLinks:
    """One GPU of ``nvidia-smi nvlink -s``: each link's state as printed, and what was printed instead of links."""

    index: int
    name: Optional[str] = None
    uuid: Optional[str] = None
    links: Dict[int, str] = field(default_factory=dict)  # link -> "53.125 GB/s", "<inactive>", ...
    messages: List[str] = field(default_factory=list)  # "NVML: Unable to retrieve Nvlink information ..."

    def bandwidth(self, link: int) -> Optional[float]:
        """The link's figure in GB/s; None when it printed none (inactive, unknown)."""
        match = _BANDWIDTH.match(self.links.get(link, ""))
        return float(match.group(1)) if match else None

    @property
    def up(self) -> List[int]:
        return sorted(link for link in self.links if self.bandwidth(link) is not None)

    @property
    def inactive(self) -> List[int]:
        return sorted(link for link, state in self.links.items() if state == INACTIVE)

    @property
    def unread(self) -> Dict[int, str]:
        """Links with a state that is neither a bandwidth nor ``<inactive>``: link -> what was printed."""
        return {
            link: state
            for link, state in sorted(self.links.items())
            if state != INACTIVE and self.bandwidth(link) is None
        }


@dataclass
class NvlinkStatus:
    gpus: Dict[int, GpuLinks] = field(default_factory=dict)
    stray: List[str] = field(default_factory=list)  # lines before any GPU's ("No devices were found", an NVML error)


def parse_nvlink_status(text: str) -> NvlinkStatus:
    """``nvidia-smi nvlink -s`` as records; any text parses (what is not a GPU or link line is kept as a message)."""
    status = NvlinkStatus()
    gpu: Optional[GpuLinks] = None
    for line in text.splitlines():
        head = _GPU.match(line)
        if head:
            gpu = GpuLinks(int(head.group(1)))
            rest = head.group(2)
            named = _UUID.match(rest)
            if named:
                gpu.name, gpu.uuid, rest = named.group(1) or None, named.group(2).strip() or None, named.group(3)
            elif "NVML:" in rest:
                gpu.name, rest = rest[: rest.index("NVML:")].strip() or None, rest[rest.index("NVML:") :]
            else:
                gpu.name, rest = rest or None, ""
            if rest.strip():
                gpu.messages.append(rest.strip())
            status.gpus[gpu.index] = gpu
            continue
        link = _LINK.match(line)
        if link and gpu is not None:
            gpu.links[int(link.group(1))] = link.group(2)
        elif line.strip():
            (gpu.messages if gpu is not None else status.stray).append(line.strip())
    return status


def _numbers(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values)


def link_problems(status: NvlinkStatus, gpus: int, links_per_gpu: int) -> List[str]:
    """What stands between each listed GPU of the tray's ``gpus`` (0 to gpus - 1) and ``links_per_gpu`` NVLinks proven
    up, one line each, naming the GPU and the links: a message instead of its links, links inactive, links with a state
    but no bandwidth figure, links not listed or beyond the count expected. Which GPUs are listed at all is the
    caller's to judge, as for every tool of the tray."""
    tool = "nvidia-smi nvlink -s"
    problems: List[str] = []
    for index in range(gpus):
        gpu = status.gpus.get(index)
        if gpu is None:
            continue
        if not gpu.links:
            said = "; ".join(gpu.messages)[:200] or "nothing"
            if ALL_INACTIVE in said.lower():
                problems.append(f"GPU {index}: every NVLink inactive ({tool}: {said})")
            else:
                problems.append(f"GPU {index}: {tool} lists no NVLink, so none is proven up: {said}")
            continue
        if gpu.inactive:
            problems.append(
                f"GPU {index}: NVLink {_numbers(gpu.inactive)} inactive ({len(gpu.up)} of {links_per_gpu} links up)"
            )
        if gpu.unread:
            states = ", ".join(f"{link} {state!r}" for link, state in gpu.unread.items())
            problems.append(f"GPU {index}: NVLink {states} without a bandwidth figure: not proven up")
        missing = [link for link in range(links_per_gpu) if link not in gpu.links]
        if missing:
            problems.append(
                f"GPU {index}: {tool} lists {len(gpu.links)} of its {links_per_gpu} NVLinks: link "
                f"{_numbers(missing)} missing"
            )
        beyond = sorted(link for link in gpu.links if link >= links_per_gpu)
        if beyond:
            problems.append(
                f"GPU {index}: {tool} lists link {_numbers(beyond)}, beyond the {links_per_gpu} NVLinks expected "
                "(gpu_health.nvlinks_per_gpu)"
            )
    return problems
