# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What nvidia-smi and the driver's /proc files say about a GPU host, as records (standard library only).

Sources, machine-readable first:

- ``nvidia-smi -q -x``: driver and CUDA version, each GPU's name, UUID, PCI bus id, memory and
  fabric state/status/cliqueId/clusterUuid;
- ``nvidia-smi nvlink -s``: each GPU's NVLink links and their speed;
- ``/proc/driver/nvidia/version``: the kernel module flavour (open or proprietary);
- ``/proc/driver/nvidia/params``: ``CreateImexChannel0`` and ``ImexChannelCount``;
- ``/proc/devices``: the major number of ``nvidia-caps-imex-channels``.

The parsers are pure functions of text, and so is the judgement of the GPUs' NVLink fabric state
(``fabric_verdict``, ``clique_label``). Running nvidia-smi and reading the files is ``gpu_facts``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvlink_status import parse_nvlink_status as parse_links

FABRIC_STATE_COMPLETED = "Completed"
FABRIC_STATUS_SUCCESS = "Success"
# NVML's GPU_FABRIC_STATE_NOT_STARTED and _IN_PROGRESS: after a boot or a driver load the GPU waits
# for the NVLink partition to become active; these states pass by themselves.
FABRIC_STATES_PENDING = ("Not Started", "In Progress")
# nvidia-smi's fabric health summary (NVML GPU_FABRIC_HEALTH_SUMMARY_*).
HEALTH_UNHEALTHY = "Unhealthy"
HEALTH_LIMITED_CAPACITY = "Limited Capacity"
# The kernel module that Blackwell GPUs need (the proprietary one does not support them).
KERNEL_MODULE_OPEN = "open"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass
class Fabric:
    state: Optional[str] = None
    status: Optional[str] = None
    clique_id: Optional[int] = None
    cluster_uuid: Optional[str] = None
    health_summary: Optional[str] = None

    @property
    def pending(self) -> bool:
        """Registration with the NVLink fabric is still under way (it ends by itself)."""
        return self.state in FABRIC_STATES_PENDING

    @property
    def attached(self) -> bool:
        """GPU Feature Discovery's notion of a fabric-attached GPU (go-nvlib IsFabricAttached)."""
        return (
            self.state == FABRIC_STATE_COMPLETED
            and self.status == FABRIC_STATUS_SUCCESS
            and self.cluster_uuid is not None
            and self.cluster_uuid != ZERO_UUID
        )


@dataclass
class NvLinkStatus:
    active_links: int = 0
    inactive_links: int = 0
    gbps_per_link: Optional[float] = None
    total_gbps: float = 0.0


@dataclass
class Gpu:
    index: int
    name: Optional[str]
    uuid: Optional[str]
    pci_bus_id: Optional[str]
    memory_total_mib: Optional[int]
    fabric: Fabric = field(default_factory=Fabric)
    nvlink: Optional[NvLinkStatus] = None


@dataclass
class SmiReport:
    driver_version: Optional[str]
    cuda_version: Optional[str]
    gpus: List[Gpu]


@dataclass
class KernelModule:
    flavour: str  # "open" or "proprietary"
    version: Optional[str]


# --------------------------------------------------------------------------- parsers


def _text(element: Optional[ET.Element], path: str) -> Optional[str]:
    """Text at ``path`` below ``element``; None when absent, empty or ``N/A``."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if value in ("", "N/A"):
        return None
    return value


def _leading_int(value: Optional[str]) -> Optional[int]:
    """``"143771 MiB"`` -> 143771; None when there is no leading number."""
    if value is None:
        return None
    match = re.match(r"\s*(\d+)", value)
    return int(match.group(1)) if match else None


def parse_fabric(element: Optional[ET.Element]) -> Fabric:
    """The ``<fabric>`` element of one GPU; absent (older drivers) or ``N/A`` gives Nones."""
    if element is None:
        return Fabric()
    clique = _text(element, "cliqueId")
    return Fabric(
        state=_text(element, "state"),
        status=_text(element, "status"),
        clique_id=int(clique) if clique is not None and re.fullmatch(r"[0-9]+", clique) else None,
        cluster_uuid=_text(element, "clusterUuid"),
        health_summary=_text(element, "health/summary"),
    )


def query_xml_root(text: str) -> ET.Element:
    """The root of ``nvidia-smi -q -x``; ``ValueError`` (one line) when the text is not that XML."""
    # The DOCTYPE names an external DTD; ElementTree does not fetch it, but drop it anyway so
    # that nothing depends on how a future parser treats it.
    body = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"not XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"root element is <{root.tag}>, expected <nvidia_smi_log>")
    return root


# nvidia-smi's fabric health rows (``<fabric><health>``, NVML's GPU fabric health mask) other than the summary:
# element -> what a fault there means. The bandwidth row reads ``Full`` on a healthy GPU; the flags read ``True`` on a
# fault; ``N/A`` is a GPU or driver without the row. DCGM's NVLink health watch raises the same two as incidents
# (NVIDIA/DCGM testing/python3/tests/test_health.py: "Route Unhealthy", "Bandwidth Degraded").
FABRIC_HEALTH_ROWS = (
    ("bandwidth", "fabric bandwidth {value} (expected Full): NVLink bandwidth is lost"),
    ("route_unhealthy", "fabric route unhealthy: traffic to some GPUs of the domain has no healthy route"),
    ("route_recovery_in_progress", "fabric route recovery in progress: the fabric is not settled"),
    ("access_timeout_recovery", "fabric access timeout recovery: the GPU recovered from an NVLink access timeout"),
    ("incorrect_configuration", "fabric configuration incorrect ({value}): the GPU's fabric is misconfigured"),
)
_FABRIC_HEALTH_FINE = {"bandwidth": ("Full",), "incorrect_configuration": ("None", "False")}


def fabric_health_faults(text: str) -> Dict[int, List[str]]:
    """Per GPU index (its place in ``nvidia-smi -q -x``), one line per fabric health row that shows a fault; the
    summary is ``fabric_verdict``'s. ``ValueError`` (one line) when the text is not that XML."""
    faults: Dict[int, List[str]] = {}
    for index, gpu in enumerate(query_xml_root(text).findall("gpu")):
        health = gpu.find("fabric/health")
        for row, meaning in FABRIC_HEALTH_ROWS:
            value = _text(health, row)
            if value is None or value in _FABRIC_HEALTH_FINE.get(row, ("False",)):
                continue
            faults.setdefault(index, []).append(meaning.format(value=value))
    return faults


def parse_query_xml(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q -x``. Raises ``ValueError`` when the text is not that XML.

    Also raises ``ValueError`` when the ``<gpu>`` elements are fewer or more than ``<attached_gpus>`` says: a
    report that lost a GPU must not be judged as a host whose GPUs are all fine.
    """
    root = query_xml_root(text)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        gpus.append(
            Gpu(
                index=index,
                name=_text(gpu, "product_name"),
                uuid=_text(gpu, "uuid"),
                pci_bus_id=_text(gpu, "pci/pci_bus_id") or gpu.get("id"),
                memory_total_mib=_leading_int(_text(gpu, "fb_memory_usage/total")),
                fabric=parse_fabric(gpu.find("fabric")),
            )
        )
    attached = _text(root, "attached_gpus")
    if attached is not None and (not re.fullmatch(r"[0-9]+", attached) or int(attached) != len(gpus)):
        raise ValueError(
            f"the XML lists {len(gpus)} <gpu> element(s) but <attached_gpus> says {attached}: the output is damaged"
        )
    return SmiReport(
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        gpus=gpus,
    )


def parse_nvlink_status(text: str) -> Dict[str, NvLinkStatus]:
    """Parse ``nvidia-smi nvlink -s``: GPU UUID (or ``"index:N"`` without one) -> link summary.

    Read by ``nvlink_status.parse_nvlink_status`` (one reader of the layout): a link is active only with a speed
    (``Link 0: 26.562 GB/s``); ``<inactive>`` and any other state count as inactive. ``gbps_per_link`` is the slowest
    active link, so one degraded link shows.
    """
    result: Dict[str, NvLinkStatus] = {}
    for index, gpu in parse_links(text).gpus.items():
        speeds = [speed for speed in (gpu.bandwidth(link) for link in gpu.links) if speed is not None]
        result[gpu.uuid or f"index:{index}"] = NvLinkStatus(
            active_links=len(speeds),
            inactive_links=len(gpu.links) - len(speeds),
            gbps_per_link=min(speeds) if speeds else None,
            total_gbps=round(sum(speeds), 3),
        )
    return result


def parse_driver_version_file(text: str) -> KernelModule:
    """Parse ``/proc/driver/nvidia/version`` (the ``NVRM version:`` line)."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            flavour = "open" if "Open Kernel Module" in line else "proprietary"
            version = re.search(r"\s(\d+\.\d+(?:\.\d+)*)\s", line + " ")
            return KernelModule(flavour=flavour, version=version.group(1) if version else None)
    raise ValueError("no 'NVRM version:' line")


def parse_driver_params(text: str) -> Dict[str, str]:
    """Parse ``/proc/driver/nvidia/params`` (``Name: value`` lines; quotes removed)."""
    params = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            params[name.strip()] = value.strip().strip('"')
    return params


def parse_proc_devices(text: str) -> Dict[str, int]:
    """Character devices in ``/proc/devices``: name -> major (the first major of a name)."""
    majors: Dict[str, int] = {}
    in_char = False
    for line in text.splitlines():
        if line.startswith("Character devices:"):
            in_char = True
            continue
        if line.startswith("Block devices:"):
            in_char = False
            continue
        parts = line.split(None, 1)
        if in_char and len(parts) == 2 and parts[0].isdigit():
            majors.setdefault(parts[1].strip(), int(parts[0]))
    return majors


# --------------------------------------------------------------------------- evaluation


def clique_label(gpus: Sequence[Gpu]) -> Optional[str]:
    """``<clusterUUID>.<cliqueId>`` as GPU Feature Discovery sets ``nvidia.com/gpu.clique``.

    Like GFD, only fabric-attached GPUs count (Completed, Success, non-zero cluster UUID), and
    there is no label when none is attached or when they disagree.
    """
    attached = [gpu.fabric for gpu in gpus if gpu.fabric.attached]
    uuids = {fabric.cluster_uuid for fabric in attached}
    cliques = {fabric.clique_id for fabric in attached}
    if len(uuids) != 1 or len(cliques) != 1 or None in cliques:
        return None
    return f"{uuids.pop()}.{cliques.pop()}"


def gpu_name(gpu: Gpu) -> str:
    """How a message names a GPU: "GPU 1 (00000000:00:07.0)", its bus id or else its UUID."""
    return f"GPU {gpu.index} ({gpu.pci_bus_id or gpu.uuid or 'unknown bus id'})"


@dataclass
class FabricVerdict:
    """What stands between this host's GPUs and multi-node NVLink.

    ``problems`` fail now; ``pending`` name GPUs whose fabric registration is still under way
    (waiting may clear them); ``warnings`` do not fail.
    """

    problems: List[str] = field(default_factory=list)
    pending: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.problems and not self.pending


def fabric_verdict(gpus: Sequence[Gpu]) -> FabricVerdict:
    """Judge every GPU's fabric registration and health, and the host's clique.

    A GPU is ready when its fabric is attached (state Completed, status Success, a non-zero cluster
    UUID), it has a clique id and its health summary is not ``Unhealthy``; all ready GPUs must share
    one cluster UUID and clique id, and a host without GPUs is no tray of a fabric. ``Not Started``/
    ``In Progress`` is pending, not a failure: NVML's status is only meaningful once the state is
    Completed, so a status other than Success fails only then.
    """
    verdict = FabricVerdict()
    expected = f"(expected {FABRIC_STATE_COMPLETED}/{FABRIC_STATUS_SUCCESS})"
    if not gpus:
        verdict.problems.append(
            "nvidia-smi reported no GPU: there is no fabric to check (is the driver bound to the GPUs? see dmesg)"
        )
    for gpu in gpus:
        fabric = gpu.fabric
        if fabric.pending:
            verdict.pending.append(
                f"{gpu_name(gpu)}: fabric state {fabric.state}, status {fabric.status or 'N/A'} {expected}"
            )
        elif fabric.state is None and fabric.status is None:
            verdict.problems.append(
                f"{gpu_name(gpu)}: no fabric state (N/A): the GPU is not registered with an NVLink fabric {expected}"
            )
        elif fabric.state != FABRIC_STATE_COMPLETED or fabric.status != FABRIC_STATUS_SUCCESS:
            verdict.problems.append(
                f"{gpu_name(gpu)}: fabric state {fabric.state or 'N/A'}, status {fabric.status or 'N/A'} {expected}"
            )
        elif fabric.cluster_uuid in (None, ZERO_UUID):
            verdict.problems.append(
                f"{gpu_name(gpu)}: fabric {fabric.state}/{fabric.status} but cluster UUID"
                f" {fabric.cluster_uuid or 'N/A'}: the GPU is not in a multi-node NVLink domain"
            )
        elif fabric.clique_id is None:
            # GPU Feature Discovery gives no nvidia.com/gpu.clique label without one: no ComputeDomain can use it.
            verdict.problems.append(
                f"{gpu_name(gpu)}: fabric {fabric.state}/{fabric.status}, cluster UUID {fabric.cluster_uuid}, but no"
                " clique ID (N/A or empty): the GPU is in no NVLink partition (check the partition that holds this"
                " tray on the NVLink switch trays, NMX)"
            )
        elif fabric.health_summary == HEALTH_UNHEALTHY:
            verdict.problems.append(
                f"{gpu_name(gpu)}: fabric {fabric.state}/{fabric.status} but health summary {HEALTH_UNHEALTHY}"
                " (see the Fabric Health rows of 'nvidia-smi -q')"
            )
        elif fabric.health_summary == HEALTH_LIMITED_CAPACITY:
            verdict.warnings.append(
                f"{gpu_name(gpu)}: fabric health summary {HEALTH_LIMITED_CAPACITY}: NVLink bandwidth is degraded"
            )
    attached = [gpu for gpu in gpus if gpu.fabric.attached]
    cliques = sorted({f"{gpu.fabric.cluster_uuid}.{gpu.fabric.clique_id}" for gpu in attached})
    if len(cliques) > 1:
        members = "; ".join(
            f"{clique}: "
            + ", ".join(
                gpu_name(gpu) for gpu in attached if f"{gpu.fabric.cluster_uuid}.{gpu.fabric.clique_id}" == clique
            )
            for clique in cliques
        )
        verdict.problems.append(f"GPUs are in {len(cliques)} cliques, expected one: {members}")
    return verdict


def fabric_problems(gpus: Sequence[Gpu]) -> List[str]:
    """Why this host's GPUs are not ready for multi-node NVLink now (pending ones included); empty when they are."""
    verdict = fabric_verdict(gpus)
    return verdict.pending + verdict.problems


def fabric_pending_message(pending: Sequence[str]) -> str:
    return (
        "GPU fabric registration is still under way: "
        + "; ".join(pending)
        + ". The NVLink partition of this tray is not active yet: right after a boot this passes by itself; if it"
        " stays, check the NVLink switch trays (NMX) and the partition that holds this tray."
    )


def fabric_failure_message(problems: Sequence[str]) -> str:
    return (
        "GPU fabric is not ready for multi-node NVLink: "
        + "; ".join(problems)
        + ". Check the NVLink fabric manager (nvidia-fabricmanager or NMX for NVL72 racks) and"
        " 'nvidia-smi -q' Fabric section on this host, or set require_fabric=false for hosts"
        " outside a multi-node NVLink domain."
    )
