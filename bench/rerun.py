# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idempotent re-run: `cluster.yml` on a fresh simulated rack, then again (must change nothing).

For each size a simulated rack of its own (own state directory and ports) is brought up, then
`playbooks/cluster.yml` runs `--runs` times. The first run installs; every later one must report
changed=0. Printed per run: wall time, the recap's ok/changed counts, and the second run's time
as a fraction of the first (the goal is at most 1/3). With `--profile N`, the N slowest tasks of
the last run (ansible.posix's profile_tasks) show where a no-op still spends its time.

With `--playbook site.yml` the whole path runs instead (on the simulated rack: the cluster stage,
then the verify stage; the trays have no SSH, so the host stage and the GPU checks find no host).
The verify stage runs its checks and writes a new record and report on every run by design, so its
later runs report what they wrote as changed; only cluster.yml is held to changed=0.

    python bench/rerun.py                          # 1x4 (with .venv/bin on PATH)
    python bench/rerun.py 1x4 1x18 --runs 3 --profile 10 --json .tmp/bench-rerun.json
    python bench/rerun.py 1x4 --playbook site.yml
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from playbook_runs import enable_profile, own_fleet, rack_down, rack_up, run, slowest_table, slowest_tasks

REPO_ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = REPO_ROOT / ".venv" / "bin" / "ansible-playbook"
# Ports apart from a rack on the defaults (6443, ...) and from the other benchmarks'.
BENCH_PORTS = {
    "GPU_FABRIC_SIM_APISERVER_PORT": "47443",
    "GPU_FABRIC_SIM_ETCD_PORT": "47379",
    "GPU_FABRIC_SIM_ETCD_PEER_PORT": "47380",
    "GPU_FABRIC_SIM_KWOK_PORT": "47247",
    "GPU_FABRIC_SIM_KCM_PORT": "47257",
    "GPU_FABRIC_SIM_SCHEDULER_PORT": "47259",
}
RECAP = re.compile(r"^localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def measure(size: str, runs: int, profile: int, playbook: str = "cluster.yml") -> dict:
    racks, trays = (int(x) for x in size.lower().split("x"))
    state, env = own_fleet(f"rerun-bench-{size}", BENCH_PORTS)
    enable_profile(env, profile)
    print(f"--- {size}: {racks * trays} trays, state {state}", flush=True)
    result: dict = {"size": size, "playbook": playbook, "runs": []}
    try:
        rack_up(env, racks, trays)
        output = ""
        for index in range(runs):
            seconds, output = run([str(PLAYBOOK), "-i", "inventories/sim", f"playbooks/{playbook}"], env, playbook)
            recap = RECAP.search(output)
            ok, changed = (int(recap.group(1)), int(recap.group(2))) if recap else (None, None)
            result["runs"].append({"run": index + 1, "wall_s": round(seconds, 1), "ok": ok, "changed": changed})
        if profile:
            result["slowest_tasks"] = slowest_tasks(output, profile)
    finally:
        rack_down(env)
    first = result["runs"][0]["wall_s"]
    for entry in result["runs"]:
        entry["x_first"] = round(entry["wall_s"] / first, 2)
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict]) -> str:
    lines = ["| size | playbook | run | wall (s) | ok | changed | x first run |", "|---|---|---|---|---|---|---|"]
    for r in results:
        for entry in r["runs"]:
            lines.append(
                f"| {r['size']} | {r['playbook']} | {entry['run']} | {entry['wall_s']} | {entry['ok']} |"
                f" {entry['changed']} | {entry['x_first']:.2f} |"
            )
    for r in results:
        if r.get("slowest_tasks"):
            lines += slowest_table(f"Slowest tasks of the last run, {r['size']}:", r["slowest_tasks"])
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", default=["1x4"], help="RACKSxTRAYS (default 1x4)")
    parser.add_argument("--runs", type=int, default=2, help="playbook runs per size (default 2)")
    parser.add_argument(
        "--playbook",
        choices=["cluster.yml", "site.yml"],
        default="cluster.yml",
        help="what to run (default cluster.yml)",
    )
    parser.add_argument("--profile", type=int, default=0, help="show the N slowest tasks of the last run")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    results = [measure(size, max(2, args.runs), args.profile, args.playbook) for size in args.sizes]
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    bad = [r["size"] for r in results if args.playbook == "cluster.yml" and any(e["changed"] for e in r["runs"][1:])]
    if bad:
        print(
            f"\na later run changed something at {', '.join(bad)}: cluster.yml is not idempotent there", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
