# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm `sim/rack up` time and memory for several rack sizes.

Each size gets a rack of its own (own state directory, own ports) so a rack already up for tests
is not disturbed: `up` from nothing with the binaries already built (warm), a second `up` (must
change nothing), the resident memory of every process once the rack has settled, then `down`.

    python bench/sim_up.py                      # 1x4 1x18 8x18 100x18 (with .venv/bin on PATH)
    python bench/sim_up.py 1x18 --settle 30 --json .tmp/bench-sim-up.json
    GPU_FABRIC_SIM_ADDONS=0 python bench/sim_up.py   # the control plane alone, without the stand-ins
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RACK = REPO_ROOT / "sim" / "rack"
# Ports apart from a rack on the defaults (6443, 2379, ...).
BENCH_PORTS = {
    "GPU_FABRIC_SIM_APISERVER_PORT": "16443",
    "GPU_FABRIC_SIM_ETCD_PORT": "16379",
    "GPU_FABRIC_SIM_ETCD_PEER_PORT": "16380",
    "GPU_FABRIC_SIM_KWOK_PORT": "16247",
    "GPU_FABRIC_SIM_KCM_PORT": "16257",
    "GPU_FABRIC_SIM_SCHEDULER_PORT": "16259",
}


def rack(env: dict[str, str], *args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    result = subprocess.run([str(RACK), *args], capture_output=True, text=True, env=env, check=False)
    elapsed = time.monotonic() - start
    if result.returncode not in (0,) and args[0] != "status":
        sys.exit(f"sim/rack {' '.join(args)} failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}")
    return elapsed, result


def measure(size: str, settle: float) -> dict:
    racks, trays = (int(x) for x in size.lower().split("x"))
    state = Path(tempfile.mkdtemp(prefix=f"sim-bench-{size}-", dir=REPO_ROOT / ".tmp"))
    env = dict(os.environ, GPU_FABRIC_SIM_STATE=str(state), **BENCH_PORTS)
    env["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    print(f"--- {size}: {racks * trays} trays, state {state}", flush=True)
    try:
        up_s = rack(env, "up", "--racks", str(racks), "--trays-per-rack", str(trays))[0]
        again_s, again = rack(env, "up")
        time.sleep(settle)
        status = rack(env, "status", "--json")[1]
        info = json.loads(status.stdout)
        if not info.get("up") or info.get("nodes_ready") != racks * trays + 1:
            sys.exit(f"{size}: rack not fully up after `up`: {status.stdout}")
    finally:
        down_s = rack(env, "down")[0]
    processes = {name: p["rss_mib"] for name, p in info["processes"].items()}
    control_plane = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    result = {
        "size": size,
        "trays": racks * trays,
        "gpus": racks * trays * 4,
        "up_s": round(up_s, 1),
        "up_again_s": round(again_s, 1),
        "up_again_noop": "already up, nothing to start" in again.stdout,
        "down_s": round(down_s, 1),
        "rss_mib": processes,
        "rss_mib_control_plane": round(sum(v for k, v in processes.items() if k in control_plane), 1),
        "rss_mib_total": info["rss_mib_total"],
    }
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict]) -> str:
    names = sorted({n for r in results for n in r["rss_mib"]}, key=lambda n: (n not in ("etcd", "kube-apiserver"), n))
    head = ["size", "trays", "GPUs", "up (s)", "up again (s)", "down (s)", *[f"{n} MiB" for n in names], "total MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r["size"], r["trays"], r["gpus"], r["up_s"], r["up_again_s"], r["down_s"]]
        cells += [r["rss_mib"].get(n, "") for n in names] + [r["rss_mib_total"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", default=["1x4", "1x18", "8x18", "100x18"], help="RACKSxTRAYS")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds between up and the memory reading")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    results = [measure(size, args.settle) for size in args.sizes]
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
