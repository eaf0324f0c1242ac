# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load the collection puts on an API server, counted by the API server: requests per verified tray.

On a real cluster the API server is shared with every tenant, so what a verification asks of it matters as
much as its wall time. Each size gets a simulated fleet of its own (own state and ports): `sim/rack up`,
`playbooks/cluster.yml` as admin, then, each with the shipped RBAC (docs/rbac/) and a ServiceAccount token
as the README tells sites to run them:

- `cluster.yml` again as `gpu-fabric/gpu-fabric-cluster` on the unchanged cluster (the no-op);
- `verify.yml --tags <check>` as `gpu-fabric/gpu-fabric-verify`, once per check.

The sim's API server keeps an audit log of every request a ServiceAccount makes (sim/simrack/audit.py), and
none of its own components' traffic, so each row counts exactly the collection's requests: Helm's, the
modules' and kubernetes.core's, by verb. The goal: requests per tray flat as the fleet grows (one list or
watch per rack per wait, no per-pod or per-tray polling), and no write in the no-op.

    python bench/api_load.py                 # 1x18 8x18 (with .venv/bin on PATH)
    python bench/api_load.py 1x4 --checks cliques   # the smoke run
    python bench/api_load.py 1x18 64x18 --json .tmp/bench-api-load.json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

from fleet_verify import BENCH_PORTS as FLEET_VERIFY_PORTS
from playbook_runs import cluster_stage, own_fleet, rack_down, rack_up, run

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import StatePaths, accounts, audit  # noqa: E402

PLAYBOOK = REPO_ROOT / ".venv" / "bin" / "ansible-playbook"
RBAC = REPO_ROOT / "docs" / "rbac"
NAMESPACE = accounts.NAMESPACE
CHECKS = ("cliques", "imex_channel", "nvbandwidth")
READ_VERBS = ("get", "list", "watch")

# Ports of its own, 1000 above bench/fleet_verify.py's: `bench/run --jobs 2` may run both at once.
BENCH_PORTS = {variable: str(int(port) + 1000) for variable, port in FLEET_VERIFY_PORTS.items()}


def summarize(rows: Iterable[audit.Request], trays: int) -> dict[str, Any]:
    """The requests of one run: totals by verb, per tray, the stored writes and the busiest resources."""
    rows = list(rows)
    verbs = collections.Counter(row.verb for row in rows)
    resources = collections.Counter(
        f"{row.verb} {row.resource}{'/' + row.subresource if row.subresource else ''}" for row in rows if row.resource
    )
    writes = audit.writes(rows)
    return {
        "requests": len(rows),
        "per_tray": round(len(rows) / trays, 2) if trays else 0.0,
        **{verb: verbs.get(verb, 0) for verb in READ_VERBS},
        "other_reads": sum(
            n for verb, n in verbs.items() if verb not in READ_VERBS and verb not in audit.MUTATING_VERBS
        ),
        "writes": len(writes),
        "dry_runs": sum(1 for row in rows if row.dry_run),
        "top": resources.most_common(5),
    }


def service_account_kubeconfig(env: dict[str, str], name: str, rbac_file: Path, path: Path) -> Path:
    """ServiceAccount gpu-fabric/<name> bound by the shipped file, and a kubeconfig holding only its token."""

    def kubectl(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            ["kubectl", *args], capture_output=True, text=True, env=env, input=stdin, check=False, timeout=120
        )
        if result.returncode != 0:
            sys.exit(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    return accounts.service_account_kubeconfig(kubectl, Path(env["KUBECONFIG"]), name, path, rbac_file, "2h")[0]


def as_account(
    env: dict[str, str], kubeconfig: Path, user: str, log: Path, trays: int, args: list[str], what: str
) -> dict[str, Any]:
    """Run a playbook with the account's kubeconfig; its wall time and the API server's count of its requests."""
    account_env = dict(env, K8S_AUTH_KUBECONFIG=str(kubeconfig), KUBECONFIG=str(kubeconfig))
    extra = json.dumps({"gpu_fabric_kubeconfig": str(kubeconfig)})
    started = datetime.datetime.now(datetime.timezone.utc)
    wall, _output = run([str(PLAYBOOK), "-i", "inventories/sim", *args, "-e", extra], account_env, what)
    return {"wall_s": round(wall, 1), **summarize(audit.requests(log, user=user, since=started), trays)}


def measure(size: str, checks: tuple[str, ...] = CHECKS) -> dict[str, Any]:
    racks, trays_per_rack = (int(x) for x in size.lower().split("x"))
    trays = racks * trays_per_rack
    state, env = own_fleet(f"api-load-{size}", BENCH_PORTS)
    log = StatePaths(state).audit_log
    print(f"--- {size}: {trays} trays, state {state}", flush=True)
    try:
        rack_up(env, racks, trays_per_rack)
        cluster_stage(env, "cluster.yml (admin)")
        cluster_kc = service_account_kubeconfig(
            env, "gpu-fabric-cluster", RBAC / "cluster-stage.yaml", state / "cluster-kc"
        )
        verify_kc = service_account_kubeconfig(
            env, "gpu-fabric-verify", RBAC / "verify-stage.yaml", state / "verify-kc"
        )
        result: dict[str, Any] = {"size": size, "racks": racks, "trays": trays}
        result["cluster.yml again"] = as_account(
            env,
            cluster_kc,
            audit.service_account_user(NAMESPACE, "gpu-fabric-cluster"),
            log,
            trays,
            ["playbooks/cluster.yml"],
            "cluster.yml again",
        )
        for check in checks:
            extra = json.dumps({"gpu_fabric_report_dir": str(state / f"report-{check}")})
            result[check] = as_account(
                env,
                verify_kc,
                audit.service_account_user(NAMESPACE, "gpu-fabric-verify"),
                log,
                trays,
                ["playbooks/verify.yml", "--tags", check, "-e", extra],
                f"verify.yml --tags {check}",
            )
    finally:
        rack_down(env)
    print(json.dumps(result), flush=True)
    return result


RUNS = ("cluster.yml again", *CHECKS)


def table(results: list[dict[str, Any]]) -> str:
    head = ["size", "trays", "run", "wall (s)", "requests", "per tray", "get", "list", "watch", "writes", "busiest"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        for name in (run_name for run_name in RUNS if run_name in r):
            m = r[name]
            busiest = ", ".join(f"{what} {n}" for what, n in m["top"][:3])
            cells = [
                r["size"],
                r["trays"],
                name,
                m["wall_s"],
                m["requests"],
                m["per_tray"],
                m["get"],
                m["list"],
                m["watch"],
                m["writes"],
                busiest,
            ]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", default=["1x18", "8x18"], help="RACKSxTRAYS")
    parser.add_argument("--checks", default=",".join(CHECKS), help="the checks to count, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    checks = tuple(c for c in args.checks.split(",") if c)
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}")
    results = [measure(size, checks) for size in args.sizes]
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
