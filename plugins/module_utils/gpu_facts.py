# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The facts of one GPU host, collected and checked: the logic of the ``nvidia_gpu_info`` module.

Collecting: find nvidia-smi (on the host, or in the GPU Operator's driver root) and how to start it,
run ``-q -x`` and ``nvlink -s``, read ``/proc/driver/nvidia`` and ``/proc/devices``, and list the IMEX
channel nodes under ``/dev/nvidia-caps-imex-channels/``; ``nvidia_smi`` parses what they print. Checking:
the driver floor, the tray (GPU count, kernel module, NVLinks per GPU) and the fabric
(``nvidia_smi.fabric_verdict``). ``gpu_info`` does all of it for the module; commands run through an
injected runner, so it works inside an Ansible module and in tests alike. Standard library only: this
file runs on GPU hosts.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvidia_smi import (
    KERNEL_MODULE_OPEN,
    Gpu,
    NvLinkStatus,
    clique_label,
    fabric_failure_message,
    fabric_pending_message,
    fabric_verdict,
    gpu_name,
    parse_driver_params,
    parse_driver_version_file,
    parse_nvlink_status,
    parse_proc_devices,
    parse_query_xml,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.versions import parse_version, version_at_least

# (rc, stdout, stderr) of a command given as an argument list.
CommandRunner = Callable[[List[str]], Tuple[int, str, str]]

IMEX_CHANNELS_DEVICE = "nvidia-caps-imex-channels"

# What nvidia-smi prints when it cannot do its job, and what the user should do about it.
_NO_DRIVER = "couldn't communicate with the NVIDIA driver"
_NO_DEVICES = "No devices were found"
_VERSION_MISMATCH = "Driver/library version mismatch"


class GpuFactsError(Exception):
    """A failure the user can act on; the message says what was found and what to do."""


@dataclass
class ImexInfo:
    channel_devices: List[str] = field(default_factory=list)
    create_imex_channel0: Optional[bool] = None
    channel_count: Optional[int] = None
    channel_major: Optional[int] = None


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


# --------------------------------------------------------------------------- checks


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
                    f"{gpu_name(gpu)}: NVLink state unknown ('nvidia-smi nvlink -s' failed),"
                    f" expected {min_active_nvlinks} active links"
                )
            elif links.active_links < min_active_nvlinks:
                problems.append(
                    f"{gpu_name(gpu)}: {links.active_links} active NVLinks ({links.inactive_links} inactive),"
                    f" expected {min_active_nvlinks}"
                )
    return problems


def tray_failure_message(problems: Sequence[str]) -> str:
    return (
        "The GPUs are not those of a complete tray: "
        + "; ".join(problems)
        + ". Fix the tray, or change expected_gpus, min_active_nvlinks or require_open_kernel_module."
    )


def driver_floor_message(found: str, floor: str) -> Optional[str]:
    """The failure message when ``found`` is below ``floor``; None when it is not."""
    if version_at_least(found, floor):
        return None
    return (
        f"driver {found} is below the floor {floor} required by ComputeDomains;"
        " upgrade the driver or set nvidia_driver_min_version"
    )


# --------------------------------------------------------------------------- the module's run


@dataclass
class GpuInfo:
    """What ``nvidia_gpu_info`` returns: its result keys, its warnings, and why it fails (None when it does not)."""

    result: Dict[str, Any]
    warnings: List[str] = field(default_factory=list)
    failure: Optional[str] = None


def gpu_info(
    params: Mapping[str, Any],
    run_command: Callable[[List[str], Dict[str, str]], Tuple[int, str, str]],
    which: Callable[[str], Optional[str]],
    is_root: bool,
) -> GpuInfo:
    """Collect this host's facts and check them against ``params`` (the module's options).

    ``run_command(args, environ)`` runs a command with ``environ`` added to its environment; ``which(name)``
    is the path of an executable on PATH, or None; ``is_root``: whether this process runs as root (it may
    then chroot into a driver container's root). The checks run in order, and the first that fails says why:
    ``min_driver_version``, the tray (``expected_gpus``, ``min_active_nvlinks``,
    ``require_open_kernel_module``), then the fabric (``require_fabric``).
    """
    floor = params["min_driver_version"]
    if floor is not None:
        try:
            parse_version(floor)
        except ValueError as exc:
            return GpuInfo(result={}, failure=f"min_driver_version: {exc}")
    try:
        smi = find_nvidia_smi(params["nvidia_smi_path"], params["driver_root"], which)
        launch = smi_launch(smi, params["driver_root"], is_root, which("chroot"))

        def run(args: List[str]) -> Tuple[int, str, str]:
            return run_command(launch.command(args), launch.environ)

        facts = collect_gpu_facts(run, smi, proc_root=params["proc_root"], dev_root=params["dev_root"])
    except GpuFactsError as exc:
        return GpuInfo(result={"fabric_pending": False}, failure=str(exc))

    info = GpuInfo(result=dict(changed=False, fabric_pending=False, nvidia_gpu=facts.as_dict()))
    info.warnings.extend(facts.warnings)
    if floor is not None:
        info.failure = _driver_floor_failure(smi, facts.driver_version, floor)
        if info.failure:
            return info
    problems = tray_problems(
        facts,
        expected_gpus=params["expected_gpus"],
        min_active_nvlinks=params["min_active_nvlinks"],
        require_open_kernel_module=params["require_open_kernel_module"],
    )
    if problems:
        info.failure = tray_failure_message(problems)
        return info
    if params["require_fabric"]:
        verdict = fabric_verdict(facts.gpus)
        info.warnings.extend(verdict.warnings)
        if verdict.problems:
            info.failure = fabric_failure_message(verdict.problems + verdict.pending)
        elif verdict.pending:
            info.result["fabric_pending"] = True
            info.failure = fabric_pending_message(verdict.pending)
    return info


def _driver_floor_failure(smi: str, found: Optional[str], floor: str) -> Optional[str]:
    """Why the driver ``smi`` reported (``found``) does not meet ``floor``; None when it does."""
    if found is None:
        return f"{smi} reported no driver version; cannot check the floor {floor}"
    try:
        return driver_floor_message(found, floor)
    except ValueError as exc:
        return f"{smi} reported a driver version that cannot be compared: {exc}"
