# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a ``gpu_health`` pod prints on a simulated GB200 tray, rendered from the tray's hardware model.

The pod's script (``checks/gpu_health.py``) prints its sections between markers, each with its exit status: the
clock and uptime, ``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``, ``nvidia-smi nvlink -e`` and ``dmesg``. Here,
from ``simrack.hardware.tray`` (the faults are the sim's hardware faults: ``sim/rack fault --list``):

* ``nvidia-smi -q -x`` is the GB200 report of ``tests/fixtures/nvidia-smi/synth-gb200-nvidia-smi-q.xml`` (rebuilt
  from a real capture of the same driver branch), with the tray's own clique (its ``nvidia.com/gpu.clique``
  label: cluster UUID and clique id) in every GPU's fabric section, only the GPUs the driver enumerates
  (``attached_gpus`` counts them; nvidia-smi numbers them 0.. in bus order, so the ones after a missing GPU move
  up), each GPU's uncorrectable DRAM error and pending row remap, and its fabric state, status and health;
* ``nvidia-smi nvlink -s``: per enumerated GPU its 18 links, ``53.125 GB/s`` each (what a real GB200 prints,
  NVIDIA/k8s-test-infra issue 371) or ``<inactive>``;
* ``nvidia-smi nvlink -e`` lists, for each enumerated GPU, the Blackwell counters of its 18 links as the driver
  prints them (``GPU 0: NVIDIA GB200 (UUID: ...)``, then ``\\t Link 0: Malformed packet Errors: 0``); FEC bin 0
  counts clean code words and is large on a healthy link; failed recoveries where the model has them;
* ``dmesg`` is the driver's boot lines as a real kernel prints them, then each GPU's Xid lines.

A GPU off the bus (Xid 79) leaves nvidia-smi without a handle for it: every nvidia-smi command prints only
``Unable to determine the device handle for GPU 0000:<bus>: Unknown Error`` and exits 255 (NVML_ERROR_UNKNOWN, as
reported on real GPUs that fell off the bus), and the kernel log shows the Xid 79.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from simrack import REPO_ROOT, hardware, programs
from simrack.nodes import CLIQUE_LABEL

CHECK = "gpu_health"
FAULTS: dict[str, tuple[str, ...]] = {}  # its faults are hardware faults of the sim's (simrack/hardware.py)
XML = REPO_ROOT / "tests" / "fixtures" / "nvidia-smi" / "synth-gb200-nvidia-smi-q.xml"
MARK = "#### gpu-fabric"
UPTIME = 86400.0  # the tray booted a day ago
LINKS = hardware.LINKS_PER_GPU
COUNTERS = (
    "Malformed packet Errors",
    "Buffer overrun Errors",
    "Rx Errors",
    "Rx remote Errors",
    "Rx General Errors",
    "Local link integrity Errors",
    "Tx discards",
    "Link recovery successful events",
    "Link recovery failed events",
    "Total link recovery events",
    "Effective Errors",
    "Effective BER",
    "Symbol Errors",
    "Symbol BER",
    *(f"FEC Errors - {n}" for n in range(16)),
)
# The text after the code, as drivers print it (real lines: NVIDIA/open-gpu-kernel-modules issue 1151 for 79; a GB200's
# kernel log for 149 and 154; tests/fixtures/nvidia-smi/h100-device-dmesg-nvrm-xid.txt for 31 and 43).
XID_TEXT = {
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    149: "NETIR_LINK_EVT  Fatal   XC0 i0 Link 07 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
    154: "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
    31: "pid=688, name=python3, channel 0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_8 "
    "faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
    43: "pid=718, name=python3, channel 0x0000000a",
}
BOOT = "\n".join(
    (
        "[    0.311341] nvidia: loading out-of-tree module taints kernel.",
        "[    0.373164] nvidia-nvlink: Nvlink Core is being initialized, major device number 240",
        "[    0.373172] NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build  "
        "(dvs-builder@U22-I3-AF03-09-1)  Sat Sep 27 01:37:06 UTC 2025",
        "[    3.390262] NVRM: Persistence mode is deprecated and will be removed in a future release. Please use "
        "nvidia-persistenced instead.",
    )
)


LINK_GBPS = hardware.LINK_GBPS
NO_HANDLE_RC = 255  # nvidia-smi's exit status for an NVML error it has no code for (Unknown Error)


def _blocks(xml: str) -> tuple[str, list[str], str]:
    """The report cut in three: what comes before the first GPU, each GPU's element, what comes after the last."""
    parts = re.split(r"(?=\t<gpu id=)", xml)
    head, gpus = parts[0], parts[1:]
    tail = ""
    if gpus:
        last, sep, tail = gpus[-1].rpartition("\t</gpu>\n")
        gpus[-1] = last + sep
    return head, gpus, tail


def _set(block: str, tag: str, value: str) -> str:
    return re.sub(f"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", block, count=1)


def _gpu_block(block: str, gpu: hardware.Gpu) -> str:
    if gpu.dram_uncorrectable:
        block = block.replace(
            "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>1</dram_uncorrectable>", 1
        )
    if gpu.remapped_rows_uncorrectable:
        block = _set(block, "remapped_row_unc", str(gpu.remapped_rows_uncorrectable))
    if gpu.remap_pending:
        block = _set(block, "remapped_row_pending", "Yes")
    fabric_start = block.find("<fabric>")
    if fabric_start >= 0 and not gpu.fabric_ok:
        fabric = block[fabric_start:]
        fabric = _set(
            _set(_set(fabric, "state", gpu.fabric_state), "status", gpu.fabric_status), "summary", gpu.fabric_health
        )
        block = block[:fabric_start] + fabric
    return block


def _fixture() -> tuple[str, list[str], str]:
    return _blocks(Path(XML).read_text())


def _identity(blocks: list[str]) -> list[tuple[str, str]]:
    """(PCI bus id, UUID) of each of the tray's 4 GPUs, as the fixture has them."""
    return [
        (re.search(r'<gpu id="([^"]+)">', b).group(1), re.search(r"<uuid>([^<]+)</uuid>", b).group(1))  # type: ignore[union-attr]
        for b in blocks
    ]


def no_handle(tray: hardware.Tray) -> Optional[str]:
    """What every nvidia-smi command prints when the driver lost a GPU of the tray, else None."""
    _head, blocks, _tail = _fixture()
    for gpu in tray.present:
        if not gpu.on_bus:
            domain, rest = _identity(blocks)[gpu.index][0].split(":", 1)
            return f"Unable to determine the device handle for GPU {int(domain, 16):04X}:{rest.upper()}: Unknown Error"
    return None


def smi_xml(node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    """``nvidia-smi -q -x`` of the tray (its output when a GPU is off the bus: ``no_handle``)."""
    tray = hardware.tray(faults, programs.node_name(node))
    head, blocks, tail = _fixture()
    head = _set(head, "attached_gpus", str(tray.capacity))
    xml = head + "".join(_gpu_block(blocks[gpu.index], gpu) for gpu in tray.present) + tail
    clique = ((node.get("metadata") or {}).get("labels") or {}).get(CLIQUE_LABEL, "")
    if "." in clique:
        cluster, clique_id = clique.rsplit(".", 1)
        xml = re.sub(r"<clusterUuid>[^<]*</clusterUuid>", f"<clusterUuid>{cluster}</clusterUuid>", xml)
        xml = re.sub(r"<cliqueId>[^<]*</cliqueId>", f"<cliqueId>{clique_id}</cliqueId>", xml)
    return xml


def nvlink_status(tray: hardware.Tray) -> str:
    """``nvidia-smi nvlink -s``: per enumerated GPU, its links at 53.125 GB/s or ``<inactive>``."""
    _head, blocks, _tail = _fixture()
    identity = _identity(blocks)
    lines = []
    for shown, gpu in enumerate(tray.present):
        lines.append(f"GPU {shown}: NVIDIA GB200 (UUID: {identity[gpu.index][1]})")
        for link in range(LINKS):
            state = "<inactive>" if link in gpu.links_down else f"{LINK_GBPS} GB/s"
            lines.append(f"\t Link {link}: {state}")
    return "\n".join(lines)


def nvlink_errors(tray: hardware.Tray) -> str:
    """``nvidia-smi nvlink -e``: per enumerated GPU, the counters of its 18 links."""
    _head, blocks, _tail = _fixture()
    identity = _identity(blocks)
    lines = []
    for shown, gpu in enumerate(tray.present):
        lines.append(f"GPU {shown}: NVIDIA GB200 (UUID: {identity[gpu.index][1]})")
        for link in range(LINKS):
            for counter in COUNTERS:
                value = "0"
                if counter == "FEC Errors - 0":
                    value = str(1_834_521_339_877 + 7919 * (gpu.index * LINKS + link))
                elif counter.endswith("BER"):
                    value = "15e-255"
                elif link in gpu.recovery_failures and counter in (
                    "Link recovery failed events",
                    "Total link recovery events",
                ):
                    value = str(gpu.recovery_failures[link])
                lines.append(f"\t Link {link}: {counter}: {value}")
    return "\n".join(lines)


def dmesg(tray: hardware.Tray) -> str:
    """The kernel log: the driver's boot lines, then each GPU's Xid lines (10 minutes before the read)."""
    _head, blocks, _tail = _fixture()
    identity = _identity(blocks)
    lines = [BOOT]
    for gpu in tray.present:
        bus, uuid = identity[gpu.index]
        domain, rest = bus.split(":", 1)
        pci = f"{int(domain, 16):04x}:{rest.split('.')[0]}"
        stamp = f"[{UPTIME - 600 + gpu.index:12.6f}]"
        for code in gpu.xids:
            text = XID_TEXT.get(code, "pid='<unknown>', name=<unknown>, see NVIDIA's Xid catalogue")
            lines.append(f"{stamp} NVRM: GPU at PCI:{pci}: {uuid}")
            lines.append(f"{stamp} NVRM: Xid (PCI:{pci}): {code}, {text}")
    return "\n".join(lines)


def log(pod: dict[str, Any], node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    tray = hardware.tray(faults, programs.node_name(node))
    lost = no_handle(tray)
    smi = [
        ("nvidia-smi -q -x", smi_xml(node, faults).rstrip("\n")),
        ("nvidia-smi nvlink -s", nvlink_status(tray)),
        ("nvidia-smi nvlink -e", nvlink_errors(tray)),
    ]
    outputs = [("clock", f"1796479200\n{UPTIME:.2f} {UPTIME * 70:.2f}", 0)]
    outputs += [(name, lost, NO_HANDLE_RC) if lost else (name, text, 0) for name, text in smi]
    outputs.append(("dmesg", dmesg(tray), 0))
    return "".join(f"{MARK} begin {name}\n{text}\n{MARK} end {name} rc={rc}\n" for name, text, rc in outputs)
