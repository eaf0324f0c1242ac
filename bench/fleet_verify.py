# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wall time of playbooks/verify.yml on a simulated fleet of 1, 3 and 8 racks, racks in parallel and one by one.

Each size gets a simulated fleet of its own (own state directory, own ports, so a rack already up for
tests is not disturbed): `sim/rack up`, `playbooks/cluster.yml`, then `playbooks/verify.yml` with
gpu_fabric_verify_parallel_racks 8 (the default) and 1 (one rack after the other). Per check the time
is taken from its records (first start to last finish over the racks), so the table shows what the
parallel run saves where it is spent. A second table gives the CPU seconds of the parallel run by process:
the collection's (ansible-playbook, its modules, Helm, kubectl: the benchmark's children) apart from the
simulated control plane's and the stand-ins' (read from /proc by their pid files), so that the collection's
CPU per tray is a figure of its own.

    python bench/fleet_verify.py                  # 1x18 3x18 8x18 (with .venv/bin on PATH)
    python bench/fleet_verify.py 2x4 --serial no  # the smoke size, parallel only
    python bench/fleet_verify.py 1x18 8x18 --json .tmp/bench-fleet.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
from datetime import datetime
from pathlib import Path

from playbook_runs import cluster_stage, own_fleet, rack_down, rack_up, run

REPO_ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = REPO_ROOT / ".venv" / "bin" / "ansible-playbook"
CHECKS = ("cliques", "imex_channel", "nvbandwidth")
# The simulated job's own run time: a Job's pod (the nvbandwidth launcher) runs this long before KWOK
# completes it; the rest of verify.yml's wall time is the collection's and the simulated controllers'.
JOB_STAGE = REPO_ROOT / "sim" / "kwok" / "stages" / "gb200-job-pod-succeeded.yaml"


def job_seconds() -> float:
    match = re.search(r"durationMilliseconds:\s*(\d+)", JOB_STAGE.read_text())
    return int(match.group(1)) / 1000 if match else 0.0


# Ports apart from a rack on the defaults (6443, 2379, ...) and from bench/sim_up.py's.
BENCH_PORTS = {
    "GPU_FABRIC_SIM_APISERVER_PORT": "26443",
    "GPU_FABRIC_SIM_ETCD_PORT": "26379",
    "GPU_FABRIC_SIM_ETCD_PEER_PORT": "26380",
    "GPU_FABRIC_SIM_KWOK_PORT": "26247",
    "GPU_FABRIC_SIM_KCM_PORT": "26257",
    "GPU_FABRIC_SIM_SCHEDULER_PORT": "26259",
}


def _time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def step_times(report_dir: Path) -> dict[str, dict[str, float]]:
    """check -> step -> the slowest rack's seconds (the records' ``timings``): where the time went."""
    steps: dict[str, dict[str, float]] = {}
    for check in CHECKS:
        for path in (report_dir / "records" / check).glob("*.json"):
            for step, seconds in (json.loads(path.read_text()).get("timings") or {}).items():
                step = step.split(" gpu-fabric-verify")[0].split(" nvbandwidth-")[0].split(" imex-channel-")[0]
                steps.setdefault(check, {})[step] = max(steps.get(check, {}).get(step, 0.0), seconds)
    return steps


def check_spans(report_dir: Path) -> dict[str, float]:
    """check -> seconds from its first rack's start to its last rack's finish."""
    spans = {}
    for check in CHECKS:
        records = [json.loads(p.read_text()) for p in (report_dir / "records" / check).glob("*.json")]
        if not records or not all(r["passed"] for r in records):
            sys.exit(f"{check} did not pass on every rack: {[r['summary'] for r in records if not r['passed']]}")
        spans[check] = max(_time(r["finished"]) for r in records) - min(_time(r["started"]) for r in records)
    return spans


# The simulated control plane and stand-ins, by their pid files; everything else the run costs is the
# collection's (ansible-playbook, its modules, Helm and kubectl: this process's children).
SIM_PROCESSES = {
    "kube-apiserver": ("kube-apiserver",),
    "etcd": ("etcd",),
    "kube-controller-manager": ("kube-controller-manager",),
    "kube-scheduler": ("kube-scheduler",),
    "kwok": ("kwok",),
    "stand-ins": (
        "standin-compute-domain-controller",
        "standin-dra-kubelet-plugin",
        "standin-gpu-operator",
        "standin-mpi-operator",
        "standin-podlogs",
        "addons-http",
    ),
}


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/<pid>/stat), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(state: Path) -> dict[str, float]:
    """CPU seconds so far: each group of SIM_PROCESSES, and ``collection`` (this process's reaped children)."""
    totals = {}
    for group, names in SIM_PROCESSES.items():
        total = 0.0
        for name in names:
            try:
                total += process_cpu_seconds(int((state / "pids" / f"{name}.pid").read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                continue
        totals[group] = total
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    totals["collection"] = children.ru_utime + children.ru_stime
    return totals


def verify(env: dict[str, str], parallel: int, state: Path) -> dict:
    report_dir = state / f"report-p{parallel}"
    extra = {"gpu_fabric_report_dir": str(report_dir), "gpu_fabric_verify_parallel_racks": parallel}
    before = cpu_seconds(state)
    wall, _output = run(
        [str(PLAYBOOK), "-i", "inventories/sim", "playbooks/verify.yml", "-e", json.dumps(extra)],
        env,
        f"verify.yml (parallel {parallel})",
    )
    after = cpu_seconds(state)
    cpu = {group: round(after[group] - before[group], 1) for group in after}
    spans = {f"{k}_s": round(v, 1) for k, v in check_spans(report_dir).items()}
    report = json.loads((report_dir / "report.json").read_text())
    matrices = [
        len(entry["details"].get("matrix") or []) for entry in report["checks"] if entry["check"] == "nvbandwidth"
    ]
    return {
        "wall_s": round(wall, 1),
        # one launcher per rack runs in parallel with the other racks': the job's time is paid once
        "overhead_s": round(wall - job_seconds(), 1),
        **spans,
        "coverage": report["coverage"]["counts"],
        "matrices": matrices,
        "steps": step_times(report_dir),
        "cpu_s": cpu,
    }


def measure(size: str, serial: bool) -> dict:
    racks, trays = (int(x) for x in size.lower().split("x"))
    state, env = own_fleet(f"fleet-bench-{size}", BENCH_PORTS)
    print(f"--- {size}: {racks * trays} trays, state {state}", flush=True)
    try:
        up_s = rack_up(env, racks, trays)
        cluster_s = cluster_stage(env)
        result = {
            "size": size,
            "racks": racks,
            "trays": racks * trays,
            "up_s": round(up_s, 1),
            "cluster_s": round(cluster_s, 1),
            "parallel": verify(env, 8, state),
        }
        if serial and racks > 1:
            result["serial"] = verify(env, 1, state)
    finally:
        rack_down(env)
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict]) -> str:
    base = results[0]["parallel"]["wall_s"] if results else 0
    head = [
        "size",
        "trays",
        "GPUs",
        "verify.yml, racks in parallel (s)",
        "x first size",
        "one rack at a time (s)",
        "overhead: wall minus the job's own time (s)",
        "overhead per rack (s)",
        *[f"{c}, parallel (s)" for c in CHECKS],
        "trays verified",
        "nvbandwidth matrices",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        p = r["parallel"]
        cells = [
            r["size"],
            r["trays"],
            r["trays"] * 4,
            p["wall_s"],
            f"{p['wall_s'] / base:.2f}",
            r.get("serial", {}).get("wall_s", "-"),
            p["overhead_s"],
            round(p["overhead_s"] / r["racks"], 1),
            *[p[f"{c}_s"] for c in CHECKS],
            f"{p['coverage']['verified']} of {p['coverage']['trays']}",
            " ".join(f"{n}x{n}" for n in p["matrices"]),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def cpu_table(results: list[dict]) -> str:
    """CPU seconds of the parallel verify.yml by process group, and the collection's per tray."""
    groups = ["collection", *SIM_PROCESSES]
    head = [
        "size",
        "trays",
        "wall (s)",
        *[f"{g} CPU (s)" for g in groups],
        "all CPU (s)",
        "cores busy",
        "collection CPU per tray (s)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        p = r["parallel"]
        cpu = p["cpu_s"]
        total = sum(cpu.values())
        cells = [
            r["size"],
            r["trays"],
            p["wall_s"],
            *[cpu.get(g, 0.0) for g in groups],
            round(total, 1),
            f"{total / p['wall_s']:.2f}" if p["wall_s"] else "-",
            f"{cpu.get('collection', 0.0) / r['trays']:.3f}",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", default=["1x18", "3x18", "8x18"], help="RACKSxTRAYS")
    parser.add_argument("--serial", choices=["yes", "no"], default="yes", help="also run one rack at a time")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    results = [measure(size, args.serial == "yes") for size in args.sizes]
    print()
    print(table(results))
    print()
    print(cpu_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
