# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The NVIDIA driver's error events in a kernel log (``dmesg``), as records (standard library only).

Line forms, as the driver prints them (NVIDIA's open kernel modules, ``krcErrorSendEventNotifications``'s
``NVRM: Xid`` prints; NVIDIA's Xid catalogue and A100 memory-error guide; the captures of
``tests/fixtures/nvidia-smi/h100-device-dmesg-*``):

* ``NVRM: Xid (PCI:0000:01:00): 79, pid=..., name=..., <text>``: the form of current drivers;
* ``NVRM: Xid (0000:03:00): 14, Channel 00000001``: older drivers, without ``PCI:``;
* ``NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...``: a MIG GPU, the event attributed to GPU instance 5;
* ``NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, ...``: and to compute instance 2 (``GPU-C:`` read alike);
* ``nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM Fault Up``: an NVSwitch's event
  with its severity; the ``Data {...}`` lines that follow one carry no severity and are not events.

A line may start with the raw ``[seconds]`` stamp of ``dmesg`` (read), ``dmesg -T``'s wall-clock stamp (no
seconds since boot: None) or nothing. The parser is a pure function of text: no Kubernetes client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

PciKey = Tuple[int, int, int]  # (domain, bus, device): what an Xid line names

_STAMP = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]")
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-9a-fA-F])?"
    r"((?:\s+GPU-[A-Z]{1,2}:\s*\d+)*)\s*\):\s*(\d+)\s*,?\s*(.*?)\s*$"
)
_INSTANCE = re.compile(r"GPU-([A-Z]{1,2}):\s*(\d+)")
_SXID = re.compile(
    r"(nvidia-nvswitch\d+): SXid \((?:PCI:)?([0-9a-fA-F:.]+)\):\s*(\d+),\s*(Fatal|Non-fatal),?\s*(.*?)\s*$"
)


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid`` line: its code, the GPU by PCI address, the MIG instances it names, its text."""

    code: int
    pci: PciKey
    text: str
    seconds: Optional[float] = None  # since boot, from the raw stamp; None when the line has none
    gpu_instance: Optional[int] = None  # MIG: ``GPU-I``
    compute_instance: Optional[int] = None  # MIG: ``GPU-CI`` (``GPU-C``)

    @property
    def instances(self) -> str:
        """`` GPU-I 5 GPU-CI 2`` on a MIG GPU (what the driver attributed the event to), else ''."""
        text = f" GPU-I {self.gpu_instance}" if self.gpu_instance is not None else ""
        return text + (f" GPU-CI {self.compute_instance}" if self.compute_instance is not None else "")

    @property
    def where(self) -> str:
        """``0009:01:00`` and, on a MIG GPU, its instances: ``0009:01:00 GPU-I 5 GPU-CI 2``."""
        return "{:04x}:{:02x}:{:02x}".format(*self.pci) + self.instances


@dataclass(frozen=True)
class SxidEvent:
    """One NVSwitch ``SXid`` line that carries a severity."""

    switch: str
    pci: str
    code: int
    fatal: bool
    text: str
    seconds: Optional[float] = None


@dataclass
class KernelLog:
    xids: List[XidEvent]
    sxids: List[SxidEvent]


def pci_key(text: str) -> PciKey:
    """``00000009:01:00.0`` (nvidia-smi's) and ``0009:01:00`` (an Xid line's) as one key; ValueError otherwise."""
    parts = text.strip().split(".")[0].split(":")
    if len(parts) < 3:
        raise ValueError(f"{text!r} is not a PCI address (domain:bus:device)")
    return int(parts[-3], 16), int(parts[-2], 16), int(parts[-1], 16)


def _instances(text: str) -> Tuple[Optional[int], Optional[int]]:
    gpu_instance = compute_instance = None
    for kind, number in _INSTANCE.findall(text):
        if kind == "I":
            gpu_instance = int(number)
        elif kind in ("CI", "C"):
            compute_instance = int(number)
    return gpu_instance, compute_instance


def parse_kernel_log(text: str) -> KernelLog:
    """The Xid and SXid events of a kernel log, in order."""
    xids: List[XidEvent] = []
    sxids: List[SxidEvent] = []
    for line in text.splitlines():
        stamp = _STAMP.match(line)
        seconds = float(stamp.group(1)) if stamp else None
        xid = _XID.search(line)
        if xid:
            domain, bus, device, instances, code, rest = xid.groups()
            gpu_instance, compute_instance = _instances(instances)
            xids.append(
                XidEvent(
                    int(code),
                    (int(domain, 16), int(bus, 16), int(device, 16)),
                    rest,
                    seconds,
                    gpu_instance,
                    compute_instance,
                )
            )
            continue
        sxid = _SXID.search(line)
        if sxid:
            switch, pci, code, severity, rest = sxid.groups()
            sxids.append(SxidEvent(switch, pci, int(code), severity == "Fatal", rest, seconds))
    return KernelLog(xids, sxids)
