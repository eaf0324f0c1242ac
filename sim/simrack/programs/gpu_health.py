# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a ``gpu_health`` pod prints on a simulated GB200 tray, and its faults.

The pod's script (``checks/gpu_health.py``) prints four sections between markers: the clock and uptime,
``nvidia-smi -q -x``, ``nvidia-smi nvlink -e`` and ``dmesg``. Here:

* ``nvidia-smi -q -x`` is the GB200 report of ``tests/fixtures/nvidia-smi/synth-gb200-nvidia-smi-q.xml`` (rebuilt
  from a real capture of the same driver branch), with the tray's own clique (its ``nvidia.com/gpu.clique``
  label: cluster UUID and clique id) in every GPU's fabric section;
* ``nvidia-smi nvlink -e`` lists, for each of the 4 GPUs, the Blackwell counters of its 18 links as the driver
  prints them (``GPU 0: NVIDIA GB200 (UUID: ...)``, then ``\\t Link 0: Malformed packet Errors: 0``); FEC bin 0
  counts clean code words and is large on a healthy link;
* ``dmesg`` is the driver's boot lines as a real kernel prints them, then the faults' Xid lines.

Faults (``sim/rack fault <knob> node=<tray> [gpu=...]``): ``xid`` (an Xid, ``code`` 79 by default, on the GPUs
named, 10 minutes before the read), ``nvlink-errors`` (``count`` failed link recoveries on link ``link``, default
3 on link 7), ``row-remap-pending`` (an uncorrectable error whose row remapping waits for a GPU reset).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from simrack import REPO_ROOT, programs
from simrack.nodes import CLIQUE_LABEL, GPUS_PER_TRAY

CHECK = "gpu_health"
FAULTS = {
    "xid": ("node", "gpu", "code"),
    "nvlink-errors": ("node", "gpu", "link", "count"),
    "row-remap-pending": ("node", "gpu"),
}
FAULT_HELP = {
    "xid": "the kernel log of tray node= shows NVRM Xid code= (default 79) on GPUs gpu= (default all)",
    "nvlink-errors": "GPUs gpu= of tray node= count count= (3) failed recoveries on NVLink link= (7)",
    "row-remap-pending": "GPUs gpu= of tray node= have an uncorrectable ECC error and a row remapping pending",
}
XML = REPO_ROOT / "tests" / "fixtures" / "nvidia-smi" / "synth-gb200-nvidia-smi-q.xml"
MARK = "#### gpu-fabric"
UPTIME = 86400.0  # the tray booted a day ago
LINKS = 18
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


def validate_fault(name: str, params: dict[str, str]) -> dict[str, str]:
    defaults = {"xid": {"code": "79"}, "nvlink-errors": {"link": "7", "count": "3"}}.get(name, {})
    for key, value in defaults.items():
        params.setdefault(key, value)
    for key in ("code", "count", "link"):
        if key in params and not str(params[key]).isdigit():
            raise ValueError(f"{name}: {key}={params[key]} is not a whole number")
    if int(params.get("link", 0)) >= LINKS:
        raise ValueError(f"{name}: link={params['link']}: a GB200 GPU has links 0..{LINKS - 1}")
    return params


def _bus_ids(xml: str) -> list[str]:
    return re.findall(r'<gpu id="([^"]+)">', xml)


def smi_xml(node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    xml = Path(XML).read_text()
    clique = ((node.get("metadata") or {}).get("labels") or {}).get(CLIQUE_LABEL, "")
    if "." in clique:
        cluster, clique_id = clique.rsplit(".", 1)
        xml = re.sub(r"<cluster_uuid>[^<]*</cluster_uuid>", f"<cluster_uuid>{cluster}</cluster_uuid>", xml)
        xml = re.sub(r"<clique_id>[^<]*</clique_id>", f"<clique_id>{clique_id}</clique_id>", xml)
    remap = programs.fault_on(faults, "row-remap-pending", node)
    if remap is not None:
        parts = xml.split("<gpu id=")
        for gpu in programs.tray_gpus(remap):
            part = parts[gpu + 1]
            for tag, old, new in (
                ("dram_uncorrectable", "0", "1"),
                ("remapped_row_unc", "0", "1"),
                ("remapped_row_pending", "No", "Yes"),
            ):
                part = part.replace(f"<{tag}>{old}</{tag}>", f"<{tag}>{new}</{tag}>", 1)
            parts[gpu + 1] = part
        xml = "<gpu id=".join(parts)
    return xml


def nvlink_errors(xml: str, node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    uuids = re.findall(r"<uuid>([^<]+)</uuid>", xml)
    bad = programs.fault_on(faults, "nvlink-errors", node)
    failed_gpus = programs.tray_gpus(bad) if bad is not None else []
    lines = []
    for gpu in range(GPUS_PER_TRAY):
        lines.append(f"GPU {gpu}: NVIDIA GB200 (UUID: {uuids[gpu] if gpu < len(uuids) else 'N/A'})")
        for link in range(LINKS):
            for counter in COUNTERS:
                value = "0"
                if counter == "FEC Errors - 0":
                    value = str(1_834_521_339_877 + 7919 * (gpu * LINKS + link))
                elif counter.endswith("BER"):
                    value = "15e-255"
                elif (
                    bad is not None
                    and gpu in failed_gpus
                    and link == int(bad["link"])
                    and counter in ("Link recovery failed events", "Total link recovery events")
                ):
                    value = str(bad["count"])
                lines.append(f"\t Link {link}: {counter}: {value}")
    return "\n".join(lines)


def dmesg(xml: str, node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    lines = [BOOT]
    xid = programs.fault_on(faults, "xid", node)
    if xid is not None:
        bus = _bus_ids(xml)
        uuids = re.findall(r"<uuid>([^<]+)</uuid>", xml)
        text = XID_TEXT.get(int(xid["code"]), "pid='<unknown>', name=<unknown>, see NVIDIA's Xid catalogue")
        for gpu in programs.tray_gpus(xid):
            domain, rest = bus[gpu].split(":", 1)
            pci = f"{int(domain, 16):04x}:{rest.split('.')[0]}"
            stamp = f"[{UPTIME - 600 + gpu:12.6f}]"
            lines.append(f"{stamp} NVRM: GPU at PCI:{pci}: {uuids[gpu]}")
            lines.append(f"{stamp} NVRM: Xid (PCI:{pci}): {xid['code']}, {text}")
    return "\n".join(lines)


def log(pod: dict[str, Any], node: dict[str, Any], faults: dict[str, dict[str, Any]]) -> str:
    xml = smi_xml(node, faults)
    outputs = [
        ("clock", f"1796479200\n{UPTIME:.2f} {UPTIME * 70:.2f}"),
        ("nvidia-smi -q -x", xml.rstrip("\n")),
        ("nvidia-smi nvlink -e", nvlink_errors(xml, node, faults)),
        ("dmesg", dmesg(xml, node, faults)),
    ]
    return "".join(f"{MARK} begin {name}\n{text}\n{MARK} end {name} rc=0\n" for name, text in outputs)
