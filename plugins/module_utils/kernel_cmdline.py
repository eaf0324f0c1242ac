# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kernel command-line settings: what the running kernel was booted with, and what is still missing."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

# NVIDIA Grace CPU Benchmarking Guide, "Platform Configuration" (the Grace CPUs of a GB200 tray): the kernel
# command-line options recommended for performance. https://nvidia.github.io/grace-cpu-benchmarking-guide/platform/
GRACE_KERNEL_ARGS = ("init_on_alloc=0", "acpi_power_meter.force_cap_on=y", "numa_balancing=disable")
# The same page's example command line keeps nouveau away from the GPUs.
NOUVEAU_KERNEL_ARGS = ("rd.driver.blacklist=nouveau", "modprobe.blacklist=nouveau")


def parse_cmdline(text: str) -> Dict[str, Optional[str]]:
    """``/proc/cmdline`` -> {name: value}; a bare flag has the value None; the last occurrence wins."""
    args: Dict[str, Optional[str]] = {}
    for word in text.split():
        name, sep, value = word.partition("=")
        args[name] = value if sep else None
    return args


def missing_kernel_args(cmdline: str, wanted: Sequence[str]) -> List[str]:
    """The ``wanted`` arguments (``name=value`` or a bare ``name``) that ``cmdline`` does not have, in order."""
    booted = parse_cmdline(cmdline)
    missing = []
    for arg in wanted:
        name, sep, value = arg.partition("=")
        if name not in booted or booted[name] != (value if sep else None):
            missing.append(arg)
    return missing


def grub_dropin(args: Sequence[str]) -> str:
    """A ``/etc/default/grub.d/*.cfg`` file that appends ``args`` to GRUB_CMDLINE_LINUX."""
    for arg in args:
        if not arg or any(ch.isspace() or ch in "\"'$`\\" for ch in arg):
            raise ValueError(f"kernel argument {arg!r} is empty or has a blank, a quote, '$', '`' or '\\'")
    return (
        "# Written by gpu_fabric.mnnvl.nvidia_driver (nvidia_driver_kernel_args); run update-grub after a change.\n"
        f'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX {" ".join(args)}"\n'
    )
