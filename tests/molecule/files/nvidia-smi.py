#!/usr/bin/env python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in nvidia-smi for the Molecule test image.

Replays the outputs captured on a real 2x H200 machine (files next to this script), changed
only where a scenario asks through /etc/gpu-fabric-sim/nvidia-smi.env (KEY=VALUE lines):

  DRIVER_VERSION   driver version printed everywhere (captured: 580.159.04)
  GPU_COUNT        number of GPUs (captured: 2; more are copies of the captured ones)
  FABRIC_STATE     fabric state of every GPU (captured: Completed), FABRIC_STATE_<index> for one GPU
  FABRIC_STATUS    fabric status of every GPU (captured: Success), FABRIC_STATUS_<index> for one GPU
  CLIQUE_ID        fabric clique id (captured: 0), CLIQUE_ID_<index> for one GPU
  CLUSTER_UUID     fabric cluster UUID (captured: all zeros), CLUSTER_UUID_<index> for one GPU
  DRIVER_LOADED    "no" makes every call fail as nvidia-smi does without a loaded driver
  FABRIC_PENDING_READS  the first N `-q -x` reads (counted in /run/gpu-fabric-sim, so a reboot starts
                   over) show every GPU's fabric "In Progress", as right after a boot

Unknown options and query fields fail the way the real tool does (message, exit status 2).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV_FILE = Path(os.environ.get("GPU_FABRIC_SIM_NVIDIA_SMI_ENV", "/etc/gpu-fabric-sim/nvidia-smi.env"))
READS_FILE = Path("/run/gpu-fabric-sim/fabric-reads")
CAPTURED_DRIVER = "580.159.04"
CAPTURED_BUS_IDS = ("00000000:00:06.0", "00000000:00:07.0")
CAPTURED_UUIDS = ("GPU-6f4c9d12-3e8b-4a70-b5d2-9e1a7c4b3f02", "GPU-1b0e2f50-7c2a-4d9e-9a61-0c3f5e8d2a01")
CAPTURED_SERIALS = ("1650000000001", "1650000000002")
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


@dataclass
class Gpu:
    index: int
    source: int
    bus_id: str
    uuid: str
    serial: str
    fabric_state: str
    fabric_status: str
    clique_id: str
    cluster_uuid: str


def read_settings() -> dict[str, str]:
    settings: dict[str, str] = {}
    if ENV_FILE.is_file():
        for line in ENV_FILE.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                settings[key.strip()] = value.strip().strip('"')
    return settings


def gpus_from(settings: dict[str, str]) -> list[Gpu]:
    count = int(settings.get("GPU_COUNT", "2"))
    gpus = []
    for i in range(count):
        src = i % len(CAPTURED_BUS_IDS)

        def pick(key: str, default: str, i: int = i) -> str:
            return settings.get(f"{key}_{i}", settings.get(key, default))

        gpus.append(
            Gpu(
                index=i,
                source=src,
                bus_id=CAPTURED_BUS_IDS[src] if i < 2 else f"00000000:00:{6 + i:02X}.0",
                uuid=CAPTURED_UUIDS[src] if i < 2 else CAPTURED_UUIDS[src][:-4] + f"{i:04x}",
                serial=CAPTURED_SERIALS[src] if i < 2 else f"16500000000{i + 1:02d}",
                fabric_state=pick("FABRIC_STATE", "Completed"),
                fabric_status=pick("FABRIC_STATUS", "Success"),
                clique_id=pick("CLIQUE_ID", "0"),
                cluster_uuid=pick("CLUSTER_UUID", "00000000-0000-0000-0000-000000000000"),
            )
        )
    return gpus


def identity(text: str, gpu: Gpu) -> str:
    """Give a copied GPU block the identity of the GPU it stands for."""
    text = text.replace(CAPTURED_BUS_IDS[gpu.source], gpu.bus_id)
    text = text.replace(CAPTURED_UUIDS[gpu.source], gpu.uuid)
    return text.replace(CAPTURED_SERIALS[gpu.source], gpu.serial)


def query_text(settings: dict[str, str], gpus: list[Gpu]) -> str:
    raw = (HERE / "h200x2-nvidia-smi-q.txt").read_text()
    starts = [m.start() for m in re.finditer(r"^GPU [0-9A-F]{8}:", raw, re.M)]
    header, blocks = raw[: starts[0]], [raw[a:b] for a, b in zip(starts, [*starts[1:], len(raw)])]
    header = re.sub(r"(Attached GPUs\s+: )\d+", lambda m: m.group(1) + str(len(gpus)), header)
    out = [header]
    for gpu in gpus:
        block = identity(blocks[gpu.source], gpu)
        block = re.sub(r"(Minor Number\s+: )\d+", lambda m, g=gpu: m.group(1) + str(g.index), block)
        fabric = block.index("\n    Fabric\n")
        head, tail = block[:fabric], block[fabric:]
        for label, value in (
            ("State", gpu.fabric_state),
            ("Status", gpu.fabric_status),
            ("CliqueId", gpu.clique_id),
            ("ClusterUUID", gpu.cluster_uuid),
        ):
            tail = re.sub(rf"(\n        {label}\s+: )[^\n]*", lambda m, v=value: m.group(1) + v, tail, count=1)
        out.append(head + tail)
    return "".join(out).replace(CAPTURED_DRIVER, settings.get("DRIVER_VERSION", CAPTURED_DRIVER))


def query_xml(settings: dict[str, str], gpus: list[Gpu]) -> str:
    raw = (HERE / "h200x2-nvidia-smi-q.xml").read_text()
    blocks = re.findall(r"\t<gpu id=.*?\n\t</gpu>\n", raw, re.S)
    head = raw[: raw.index(blocks[0])]
    tail = raw[raw.index(blocks[-1]) + len(blocks[-1]) :]
    head = re.sub(r"<attached_gpus>\d+<", f"<attached_gpus>{len(gpus)}<", head)
    out = [head]
    for gpu in gpus:
        block = identity(blocks[gpu.source], gpu)
        block = re.sub(r"<minor_number>\d+<", f"<minor_number>{gpu.index}<", block)
        for tag, value in (
            ("state", gpu.fabric_state),
            ("status", gpu.fabric_status),
            ("cliqueId", gpu.clique_id),
            ("clusterUuid", gpu.cluster_uuid),
        ):
            block = re.sub(
                rf"(<fabric>.*?<{tag}>)[^<]*(</{tag}>)",
                lambda m, v=value: m.group(1) + v + m.group(2),
                block,
                count=1,
                flags=re.S,
            )
        out.append(block)
    out.append(tail)
    return "".join(out).replace(CAPTURED_DRIVER, settings.get("DRIVER_VERSION", CAPTURED_DRIVER))


def query_gpu(settings: dict[str, str], gpus: list[Gpu], fields: list[str], fmt: set[str]) -> tuple[str, int]:
    names = {
        "index": lambda g: str(g.index),
        "name": lambda g: "NVIDIA H200",
        "driver_version": lambda g: settings.get("DRIVER_VERSION", CAPTURED_DRIVER),
        "pci.bus_id": lambda g: g.bus_id,
        "memory.total": lambda g: "143771" if "nounits" in fmt else "143771 MiB",
        "uuid": lambda g: g.uuid,
        "persistence_mode": lambda g: "Enabled",
        "mig.mode.current": lambda g: "Disabled",
        "compute_cap": lambda g: "9.0",
        "fabric.state": lambda g: g.fabric_state,
        "fabric.status": lambda g: g.fabric_status,
    }
    for field in fields:
        if field not in names:
            return f'Field "{field}" is not a valid field to query.\n\n', 2
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join("memory.total [MiB]" if f == "memory.total" else f for f in fields))
    for gpu in gpus:
        lines.append(", ".join(names[f](gpu) for f in fields))
    return "\n".join(lines) + "\n", 0


def nvlink_status(gpus: list[Gpu]) -> str:
    raw = (HERE / "h200x2-nvidia-smi-nvlink-s.txt").read_text()
    starts = [m.start() for m in re.finditer(r"^GPU \d+: ", raw, re.M)]
    blocks = [raw[a:b] for a, b in zip(starts, [*starts[1:], len(raw)])]
    out = []
    for gpu in gpus:
        block = identity(blocks[gpu.source], gpu)
        out.append(re.sub(r"^GPU \d+:", f"GPU {gpu.index}:", block))
    return "".join(out)


def summary(settings: dict[str, str], gpus: list[Gpu]) -> str:
    raw = (HERE / "h200x2-nvidia-smi.txt").read_text()
    lines = raw.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("|   0  NVIDIA"))
    rows = [lines[first : first + 4], lines[first + 4 : first + 8]]
    out = lines[:first]
    for gpu in gpus:
        row = identity("".join(rows[gpu.source]), gpu)
        out.append(re.sub(r"^\|\s+\d+  NVIDIA", f"|{gpu.index:>4}  NVIDIA", row))
    out.extend(lines[first + 8 :])
    return "".join(out).replace(CAPTURED_DRIVER, settings.get("DRIVER_VERSION", CAPTURED_DRIVER))


def fabric_still_pending(settings: dict[str, str]) -> bool:
    """Count this read; True while it is one of the first FABRIC_PENDING_READS."""
    pending = int(settings.get("FABRIC_PENDING_READS", "0"))
    if pending <= 0:
        return False
    READS_FILE.parent.mkdir(parents=True, exist_ok=True)
    reads = int(READS_FILE.read_text()) if READS_FILE.is_file() else 0
    READS_FILE.write_text(str(reads + 1))
    return reads < pending


def main(argv: list[str]) -> int:
    settings = read_settings()
    if settings.get("DRIVER_LOADED", "yes").lower() in ("no", "false", "0"):
        sys.stdout.write(NO_DRIVER)
        return 9
    gpus = gpus_from(settings)
    args = list(argv)
    fmt: set[str] = set()
    fields: list[str] = []
    for arg in list(args):
        if arg.startswith("--format="):
            fmt = set(arg.split("=", 1)[1].split(","))
            args.remove(arg)
        elif arg.startswith("--query-gpu="):
            fields = [f.strip() for f in arg.split("=", 1)[1].split(",") if f.strip()]
            args.remove(arg)
    if fields:
        if "csv" not in fmt or args:
            sys.stdout.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n")
            return 2
        text, rc = query_gpu(settings, gpus, fields, fmt)
        sys.stdout.write(text)
        return rc
    if not args:
        sys.stdout.write(summary(settings, gpus))
        return 0
    if args == ["-L"]:
        sys.stdout.write("".join(f"GPU {g.index}: NVIDIA H200 (UUID: {g.uuid})\n" for g in gpus))
        return 0
    if sorted(args) in (["-q"], ["--query"]):
        sys.stdout.write(query_text(settings, gpus))
        return 0
    if sorted(args) in (["-q", "-x"], ["--query", "--xml-format"], ["-q", "--xml-format"], ["--query", "-x"]):
        if fabric_still_pending(settings):
            for gpu in gpus:
                gpu.fabric_state, gpu.fabric_status = "In Progress", "N/A"
        sys.stdout.write(query_xml(settings, gpus))
        return 0
    if args == ["nvlink", "-s"]:
        sys.stdout.write(nvlink_status(gpus))
        return 0
    if args == ["topo", "-m"]:
        sys.stdout.write((HERE / "h200x2-nvidia-smi-topo-m.txt").read_text())
        return 0
    sys.stdout.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
