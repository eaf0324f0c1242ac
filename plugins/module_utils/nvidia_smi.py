# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Facts about an NVIDIA GPU host, read from nvidia-smi and /proc (standard library only).

Sources, machine-readable first:

- ``nvidia-smi -q -x``: driver and CUDA version, each GPU's name, UUID, PCI bus id, memory and
  fabric state/status/cliqueId/clusterUuid;
- ``nvidia-smi nvlink -s``: each GPU's NVLink links and their speed;
- ``/proc/driver/nvidia/version``: the kernel module flavour (open or proprietary);
- ``/proc/driver/nvidia/params``: ``CreateImexChannel0`` and ``ImexChannelCount``;
- ``/proc/devices``: the major number of ``nvidia-caps-imex-channels``;
- ``/dev/nvidia-caps-imex-channels/``: the IMEX channel device nodes.

The parsers are pure functions of text; ``collect_gpu_facts`` ties them together and takes a
command runner, so it works inside an Ansible module and in tests alike.
"""

from __future__ import annotations

import os
import re
import stat
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.versions import version_at_least

# (rc, stdout, stderr) of a command given as an argument list.
CommandRunner = Callable[[List[str]], Tuple[int, str, str]]

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
IMEX_CHANNELS_DEVICE = "nvidia-caps-imex-channels"

# What nvidia-smi prints when it cannot do its job, and what the user should do about it.
_NO_DRIVER = "couldn't communicate with the NVIDIA driver"
_NO_DEVICES = "No devices were found"
_VERSION_MISMATCH = "Driver/library version mismatch"


class GpuFactsError(Exception):
    """A failure the user can act on; the message says what was found and what to do."""


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


@dataclass
class ImexInfo:
    channel_devices: List[str] = field(default_factory=list)
    create_imex_channel0: Optional[bool] = None
    channel_count: Optional[int] = None
    channel_major: Optional[int] = None


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


def parse_query_xml(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q -x``. Raises ``ValueError`` when the text is not that XML.

    Also raises ``ValueError`` when the ``<gpu>`` elements are fewer or more than ``<attached_gpus>`` says: a
    report that lost a GPU must not be judged as a host whose GPUs are all fine.
    """
    # The DOCTYPE names an external DTD; ElementTree does not fetch it, but drop it anyway so
    # that nothing depends on how a future parser treats it.
    body = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"not XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"root element is <{root.tag}>, expected <nvidia_smi_log>")
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


_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): .*?(?:\(UUID: ([^)]+)\))?\s*$")
_NVLINK_LINK_RE = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
_SPEED_RE = re.compile(r"^(\d+(?:\.\d+)?) GB/s$")


def parse_nvlink_status(text: str) -> Dict[str, NvLinkStatus]:
    """Parse ``nvidia-smi nvlink -s``: GPU UUID (or ``"index:N"`` without one) -> link summary.

    Active links print a speed (``Link 0: 26.562 GB/s``), inactive ones ``<inactive>``.
    ``gbps_per_link`` is the slowest active link, so one degraded link shows.
    """
    result: Dict[str, NvLinkStatus] = {}
    speeds: Dict[str, List[float]] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        gpu_match = _NVLINK_GPU_RE.match(line)
        if gpu_match:
            current = gpu_match.group(2) or f"index:{gpu_match.group(1)}"
            result[current] = NvLinkStatus()
            speeds[current] = []
            continue
        link_match = _NVLINK_LINK_RE.match(line)
        if link_match and current is not None:
            speed = _SPEED_RE.match(link_match.group(2))
            if speed:
                speeds[current].append(float(speed.group(1)))
            else:
                result[current].inactive_links += 1
    for key, values in speeds.items():
        status = result[key]
        status.active_links = len(values)
        status.gbps_per_link = min(values) if values else None
        status.total_gbps = round(sum(values), 3)
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


def list_imex_channels(directory: str) -> List[str]:
    """Paths of the ``channelN`` character devices in ``directory``, by channel number."""
    if not os.path.isdir(directory):
        return []
    channels = []
    for name in os.listdir(directory):
        match = re.fullmatch(r"channel(\d+)", name)
        path = os.path.join(directory, name)
        if match and os.path.exists(path) and stat.S_ISCHR(os.stat(path).st_mode):
            channels.append((int(match.group(1)), path))
    return [path for _number, path in sorted(channels)]


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


def _gpu_name(gpu: Gpu) -> str:
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
                f"{_gpu_name(gpu)}: fabric state {fabric.state}, status {fabric.status or 'N/A'} {expected}"
            )
        elif fabric.state is None and fabric.status is None:
            verdict.problems.append(
                f"{_gpu_name(gpu)}: no fabric state (N/A): the GPU is not registered with an NVLink fabric {expected}"
            )
        elif fabric.state != FABRIC_STATE_COMPLETED or fabric.status != FABRIC_STATUS_SUCCESS:
            verdict.problems.append(
                f"{_gpu_name(gpu)}: fabric state {fabric.state or 'N/A'}, status {fabric.status or 'N/A'} {expected}"
            )
        elif fabric.cluster_uuid in (None, ZERO_UUID):
            verdict.problems.append(
                f"{_gpu_name(gpu)}: fabric {fabric.state}/{fabric.status} but cluster UUID"
                f" {fabric.cluster_uuid or 'N/A'}: the GPU is not in a multi-node NVLink domain"
            )
        elif fabric.clique_id is None:
            # GPU Feature Discovery gives no nvidia.com/gpu.clique label without one: no ComputeDomain can use it.
            verdict.problems.append(
                f"{_gpu_name(gpu)}: fabric {fabric.state}/{fabric.status}, cluster UUID {fabric.cluster_uuid}, but no"
                " clique ID (N/A or empty): the GPU is in no NVLink partition (check the partition that holds this"
                " tray on the NVLink switch trays, NMX)"
            )
        elif fabric.health_summary == HEALTH_UNHEALTHY:
            verdict.problems.append(
                f"{_gpu_name(gpu)}: fabric {fabric.state}/{fabric.status} but health summary {HEALTH_UNHEALTHY}"
                " (see the Fabric Health rows of 'nvidia-smi -q')"
            )
        elif fabric.health_summary == HEALTH_LIMITED_CAPACITY:
            verdict.warnings.append(
                f"{_gpu_name(gpu)}: fabric health summary {HEALTH_LIMITED_CAPACITY}: NVLink bandwidth is degraded"
            )
    attached = [gpu for gpu in gpus if gpu.fabric.attached]
    cliques = sorted({f"{gpu.fabric.cluster_uuid}.{gpu.fabric.clique_id}" for gpu in attached})
    if len(cliques) > 1:
        members = "; ".join(
            f"{clique}: "
            + ", ".join(
                _gpu_name(gpu) for gpu in attached if f"{gpu.fabric.cluster_uuid}.{gpu.fabric.clique_id}" == clique
            )
            for clique in cliques
        )
        verdict.problems.append(f"GPUs are in {len(cliques)} cliques, expected one: {members}")
    return verdict


def fabric_problems(gpus: Sequence[Gpu]) -> List[str]:
    """Why this host's GPUs are not ready for multi-node NVLink now (pending ones included); empty when they are."""
    verdict = fabric_verdict(gpus)
    return verdict.pending + verdict.problems


def tray_problems(
    facts: GpuHostFacts,
    expected_gpus: int = 0,
    min_active_nvlinks: int = 0,
    require_open_kernel_module: bool = False,
) -> List[str]:
    """What makes this host not the tray it should be: GPU count, kernel module, NVLinks per GPU."""
    problems = []
    if expected_gpus and len(facts.gpus) != expected_gpus:
        problems.append(
            f"{len(facts.gpus)} GPUs ({', '.join(gpu.pci_bus_id or gpu.uuid or '?' for gpu in facts.gpus)}),"
            f" expected {expected_gpus}: a GPU fell off the bus or is not bound to the driver (look at dmesg and"
            " 'nvidia-smi -q')"
        )
    if require_open_kernel_module and facts.kernel_module != KERNEL_MODULE_OPEN:
        found = (
            "the kernel module flavour is unknown (no /proc/driver/nvidia/version)"
            if facts.kernel_module is None
            else f"the {facts.kernel_module} kernel module is loaded"
        )
        problems.append(
            f"{found}, expected the open kernel module: Blackwell GPUs run only with it (the -open driver"
            " packages, or the GPU Operator's driver.kernelModuleType=open)"
        )
    if min_active_nvlinks:
        for gpu in facts.gpus:
            links = gpu.nvlink
            if links is None:
                problems.append(
                    f"{_gpu_name(gpu)}: NVLink state unknown ('nvidia-smi nvlink -s' failed),"
                    f" expected {min_active_nvlinks} active links"
                )
            elif links.active_links < min_active_nvlinks:
                problems.append(
                    f"{_gpu_name(gpu)}: {links.active_links} active NVLinks ({links.inactive_links} inactive),"
                    f" expected {min_active_nvlinks}"
                )
    return problems


def tray_failure_message(problems: Sequence[str]) -> str:
    return (
        "The GPUs are not those of a complete tray: "
        + "; ".join(problems)
        + ". Fix the tray, or change expected_gpus, min_active_nvlinks or require_open_kernel_module."
    )


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


def driver_floor_message(found: str, floor: str) -> Optional[str]:
    """The failure message when ``found`` is below ``floor``; None when it is not."""
    if version_at_least(found, floor):
        return None
    return (
        f"driver {found} is below the floor {floor} required by ComputeDomains;"
        " upgrade the driver or set nvidia_driver_min_version"
    )


# --------------------------------------------------------------------------- collection


def find_nvidia_smi(
    nvidia_smi_path: Optional[str], driver_root: str, path_lookup: Callable[[str], Optional[str]]
) -> str:
    """Where nvidia-smi is: the given path, else under ``driver_root``, else on PATH (root ``/`` only).

    A ``driver_root`` other than ``/`` (the GPU Operator's ``/run/nvidia/driver``) is searched
    alone: an nvidia-smi elsewhere could belong to another driver.
    """
    if nvidia_smi_path:
        if os.path.isfile(nvidia_smi_path) and os.access(nvidia_smi_path, os.X_OK):
            return nvidia_smi_path
        raise GpuFactsError(
            f"nvidia_smi_path {nvidia_smi_path} is not an executable file; point it at the driver's"
            " nvidia-smi or leave it unset to search driver_root and PATH"
        )
    candidate = os.path.join(driver_root, "usr", "bin", "nvidia-smi")
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    if os.path.normpath(driver_root) == "/":
        found = path_lookup("nvidia-smi")
        if found:
            return found
        raise GpuFactsError(
            "nvidia-smi was not found in /usr/bin or on PATH: no NVIDIA driver is installed on this"
            " host. Install the driver, or set driver_root=/run/nvidia/driver when the GPU Operator"
            " installs it, or nvidia_smi_path"
        )
    raise GpuFactsError(
        f"nvidia-smi was not found at {candidate} (driver_root={driver_root}): the driver container"
        " has not installed the driver yet, or driver_root is wrong; use driver_root=/ for a driver"
        " installed on the host"
    )


def library_path_for(driver_root: str) -> Optional[str]:
    """LD_LIBRARY_PATH that lets a driver root's nvidia-smi find its own libnvidia-ml."""
    if os.path.normpath(driver_root) == "/":
        return None
    dirs = [
        os.path.join(driver_root, sub)
        for sub in ("usr/lib64", "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib")
        if os.path.isdir(os.path.join(driver_root, sub))
    ]
    return ":".join(dirs) or None


def is_root_filesystem(driver_root: str) -> bool:
    """Whether ``driver_root`` is a whole root filesystem (it has ``bin/sh`` or ``usr/lib``).

    The GPU Operator's driver container mounts its own root filesystem at ``/run/nvidia/driver``, so
    that ``chroot /run/nvidia/driver nvidia-smi`` runs the container's nvidia-smi with its libraries.
    A directory holding only the driver's files is not one.
    """
    return os.path.lexists(os.path.join(driver_root, "bin", "sh")) or os.path.isdir(
        os.path.join(driver_root, "usr", "lib")
    )


SMI_ON_HOST = "host"
SMI_IN_CHROOT = "chroot"
SMI_WITH_LIBRARY_PATH = "library_path"


@dataclass(frozen=True)
class SmiLaunch:
    """How nvidia-smi is started: ``method`` is one of ``host``, ``chroot`` and ``library_path``.

    ``command()`` turns ``[<nvidia-smi as found on the host>, args...]`` into the command line to run;
    ``environ`` is the environment to add.
    """

    method: str
    environ: Dict[str, str] = field(default_factory=dict)
    chroot: Optional[str] = None
    driver_root: Optional[str] = None
    smi_in_root: Optional[str] = None

    def command(self, args: Sequence[str]) -> List[str]:
        if self.method == SMI_IN_CHROOT and self.chroot and self.driver_root and self.smi_in_root:
            return [self.chroot, self.driver_root, self.smi_in_root, *args[1:]]
        return list(args)


def smi_launch(smi: str, driver_root: str, is_root: bool, chroot: Optional[str]) -> SmiLaunch:
    """How to run ``smi`` (found by ``find_nvidia_smi``) for ``driver_root``.

    A driver on the host (``/``) runs as it is. For another root: ``chroot <root> <nvidia-smi>``, as NVIDIA
    documents for the GPU Operator's driver, when running as root (``is_root``) with a ``chroot`` executable,
    the root is a whole root filesystem (``is_root_filesystem``) and ``smi`` lies in it; otherwise ``smi`` runs
    with the root's library directories on ``LD_LIBRARY_PATH``.
    """
    root = os.path.normpath(os.path.abspath(driver_root))
    if root == "/":
        return SmiLaunch(SMI_ON_HOST)
    path = os.path.normpath(os.path.abspath(smi))
    if is_root and chroot and path.startswith(root + os.sep) and is_root_filesystem(root):
        return SmiLaunch(SMI_IN_CHROOT, chroot=chroot, driver_root=root, smi_in_root="/" + os.path.relpath(path, root))
    library_path = library_path_for(driver_root)
    return SmiLaunch(SMI_WITH_LIBRARY_PATH, environ={"LD_LIBRARY_PATH": library_path} if library_path else {})


def smi_failure_message(smi: str, rc: int, stdout: str, stderr: str) -> str:
    """Turn a failed or unusable nvidia-smi run into a message that says what to do."""
    output = "\n".join(part.strip() for part in (stdout, stderr) if part.strip())
    first_line = output.splitlines()[0] if output else "no output"
    if _NO_DRIVER in output:
        return (
            f"{smi} could not communicate with the NVIDIA driver (rc {rc}): the kernel module is not"
            " loaded or does not match the installed tools. Load it (modprobe nvidia), read"
            " 'dmesg | grep -i nvrm', or reboot after a driver installation"
        )
    if _VERSION_MISMATCH in output:
        return (
            f"{smi} reports a driver/library version mismatch (rc {rc}): the loaded kernel module is"
            " not the version of the installed libraries, usually after an upgrade without a reboot;"
            " reboot the host or reload the nvidia kernel modules"
        )
    if _NO_DEVICES in output:
        return (
            f"{smi} found no NVIDIA GPU ('{_NO_DEVICES}', rc {rc}): the driver sees no device. Check"
            " 'lspci -d 10de:' for NVIDIA devices and that they are not bound to vfio-pci or"
            " excluded by NVreg_ExcludedGpus"
        )
    return f"{smi} -q -x failed (rc {rc}): {first_line}"


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def read_imex_info(proc_root: str, dev_root: str) -> ImexInfo:
    """IMEX driver parameters, the channel device major and the channel nodes present."""
    info = ImexInfo()
    params_text = _read(os.path.join(proc_root, "driver", "nvidia", "params"))
    if params_text is not None:
        params = parse_driver_params(params_text)
        if params.get("CreateImexChannel0", "").isdigit():
            info.create_imex_channel0 = params["CreateImexChannel0"] != "0"
        if params.get("ImexChannelCount", "").isdigit():
            info.channel_count = int(params["ImexChannelCount"])
    devices_text = _read(os.path.join(proc_root, "devices"))
    if devices_text is not None:
        info.channel_major = parse_proc_devices(devices_text).get(IMEX_CHANNELS_DEVICE)
    info.channel_devices = list_imex_channels(os.path.join(dev_root, IMEX_CHANNELS_DEVICE))
    return info


@dataclass
class GpuHostFacts:
    driver_version: Optional[str]
    cuda_version: Optional[str]
    kernel_module: Optional[str]
    nvidia_smi_path: str
    gpus: List[Gpu]
    clique_label: Optional[str]
    imex: ImexInfo
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """The ``nvidia_gpu`` fact (without warnings, which the module reports its own way)."""
        data = asdict(self)
        data.pop("warnings")
        data["gpu_count"] = len(self.gpus)
        for gpu_data, gpu in zip(data["gpus"], self.gpus):
            gpu_data["fabric"]["attached"] = gpu.fabric.attached
            gpu_data["fabric"]["pending"] = gpu.fabric.pending
        return data


def collect_gpu_facts(run: CommandRunner, smi: str, proc_root: str = "/proc", dev_root: str = "/dev") -> GpuHostFacts:
    """Run nvidia-smi, read /proc and /dev, and put the facts together.

    Raises ``GpuFactsError`` when there is no usable driver or no GPU.
    """
    rc, stdout, stderr = run([smi, "-q", "-x"])
    if rc != 0:
        raise GpuFactsError(smi_failure_message(smi, rc, stdout, stderr))
    try:
        report = parse_query_xml(stdout)
    except ValueError as exc:
        if _NO_DEVICES in stdout or _NO_DRIVER in stdout:
            raise GpuFactsError(smi_failure_message(smi, rc, stdout, stderr)) from None
        raise GpuFactsError(
            f"{smi} -q -x printed no usable XML ({exc}); expected <nvidia_smi_log>. Run it by hand to see why"
        ) from None
    if not report.gpus:
        raise GpuFactsError(smi_failure_message(smi, rc, _NO_DEVICES, ""))

    warnings = []
    rc, stdout, stderr = run([smi, "nvlink", "-s"])
    if rc == 0:
        links = parse_nvlink_status(stdout)
        for gpu in report.gpus:
            gpu.nvlink = links.get(gpu.uuid or "") or links.get(f"index:{gpu.index}") or NvLinkStatus()
    else:
        detail = (stdout.strip() or stderr.strip() or "no output").splitlines()[0]
        warnings.append(f"{smi} nvlink -s failed (rc {rc}): {detail}; NVLink state is not reported")

    kernel_module = None
    version_text = _read(os.path.join(proc_root, "driver", "nvidia", "version"))
    if version_text is None:
        warnings.append(f"{proc_root}/driver/nvidia/version is missing: the kernel module flavour is not reported")
    else:
        try:
            kernel_module = parse_driver_version_file(version_text).flavour
        except ValueError:
            warnings.append(f"{proc_root}/driver/nvidia/version has no 'NVRM version:' line")

    return GpuHostFacts(
        driver_version=report.driver_version,
        cuda_version=report.cuda_version,
        kernel_module=kernel_module,
        nvidia_smi_path=smi,
        gpus=report.gpus,
        clique_label=clique_label(report.gpus),
        imex=read_imex_info(proc_root, dev_root),
        warnings=warnings,
    )
