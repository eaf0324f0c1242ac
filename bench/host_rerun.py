# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Idempotent re-run of the host stage: `playbooks/hosts.yml` on N systemd trays, then again.

Each size gets trays of its own: N rootful podman containers of the Molecule tray image
(`tests/molecule/build-image.sh`: Debian with systemd, the stand-in nvidia-smi and IMEX package, a
containerd release served on 127.0.0.1 inside the tray), reached with the podman connection, the GPU
Operator owning the driver. `playbooks/hosts.yml` runs `--runs` times on all of them at once (one
fork per tray); the first run installs containerd, CDI and the IMEX policy, every later one must
report changed=0 on every tray. Printed per run: wall time, the recap's ok/changed counts summed
over the trays, and the time as a fraction of the first run (the goal is at most 1/3). With
`--profile N`, the N slowest tasks of the last run.

    python bench/host_rerun.py                     # 1, 4 and 8 trays (as root, podman installed)
    python bench/host_rerun.py 1 --runs 3 --profile 10 --json .tmp/bench-host-rerun.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playbook_runs import enable_profile, run, slowest_table, slowest_tasks

REPO_ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = REPO_ROOT / ".venv" / "bin" / "ansible-playbook"
BUILD_IMAGE = REPO_ROOT / "tests" / "molecule" / "build-image.sh"
IMAGE = "localhost/gpu-fabric-tray:latest"
# The Molecule hosts scenario's tray that installs containerd from the release tarball; the
# operator's driver is not up yet, so the GPU checks are left to playbooks/gpus.yml.
TRAY_VARS = {
    "ansible_connection": "containers.podman.podman",
    "ansible_become": False,
    "gpu_fabric_driver_owner": "operator",
    "nvidia_driver_check_fabric": True,
    "nvidia_driver_expected_gpus": 4,
    "containerd_version": "1.7.24",
    "containerd_release_base_url": "http://127.0.0.1:8711/containerd/containerd/releases/download",
    "containerd_service_resource_settings": {},
    "containerd_runc_version": "1.1.5",
    "containerd_runc_release_base_url": "http://127.0.0.1:8711/opencontainers/runc/releases/download",
    "nvidia_imex_mode": "dra",
}
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def podman_env() -> dict[str, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"))
    env["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # build-image.sh writes the OCI runtime the trays need (runc: crun refuses systemd on hybrid cgroups).
    conf = REPO_ROOT / ".cache" / "molecule" / "containers.conf"
    if conf.exists():
        env["CONTAINERS_CONF"] = str(conf)
    return env


def start_trays(names: list[str], env: dict[str, str]) -> None:
    for name in names:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], env=env, capture_output=True, check=False)
        run(
            ["podman", "run", "-d", "--name", name, "--hostname", name, "--systemd=always",
             "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", IMAGE, "/sbin/init"],
            env, f"podman run {name}",
        )  # fmt: skip
    # Up when systemd has booted far enough to run units (the tray's release server among them).
    deadline = time.monotonic() + 120
    for name in names:
        while True:
            state = subprocess.run(
                ["podman", "exec", name, "systemctl", "is-system-running"],
                env=env, capture_output=True, text=True, check=False,
            ).stdout.strip()  # fmt: skip
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                sys.exit(f"tray {name} did not boot within 120 s (systemd: {state or 'no answer'})")
            time.sleep(0.5)


def write_inventory(path: Path, names: list[str]) -> None:
    inventory = {
        "all": {
            "vars": {"gpu_fabric_racks": {"rack01": names}},
            "children": {"gpu_nodes": {"hosts": {name: None for name in names}, "vars": TRAY_VARS}},
        }
    }
    path.write_text(json.dumps(inventory, indent=2) + "\n")  # JSON is YAML: ansible's yaml plugin reads it


def measure(count: int, runs: int, profile: int) -> dict:
    env = podman_env()
    env["ANSIBLE_FORKS"] = str(max(5, count))
    enable_profile(env, profile)
    names = [f"gpu-fabric-bench-t{index + 1}" for index in range(count)]
    workdir = Path(tempfile.mkdtemp(prefix=f"host-rerun-bench-{count}-", dir=REPO_ROOT / ".tmp"))
    inventory = workdir / "inventory.yml"
    write_inventory(inventory, names)
    print(f"--- {count} tray(s): {', '.join(names)}", flush=True)
    result: dict = {"trays": count, "runs": []}
    try:
        start = time.monotonic()
        start_trays(names, env)
        result["trays_up_s"] = round(time.monotonic() - start, 1)
        output = ""
        for index in range(runs):
            seconds, output = run([str(PLAYBOOK), "-i", str(inventory), "playbooks/hosts.yml"], env, "hosts.yml")
            recaps = [m for m in RECAP.finditer(output) if m.group(1) in names]
            if len(recaps) != count:
                sys.exit(f"hosts.yml recap names {len(recaps)} of {count} trays:\n{output[-3000:]}")
            ok = sum(int(m.group(2)) for m in recaps)
            changed = sum(int(m.group(3)) for m in recaps)
            result["runs"].append({"run": index + 1, "wall_s": round(seconds, 1), "ok": ok, "changed": changed})
        if profile:
            result["slowest_tasks"] = slowest_tasks(output, profile)
    finally:
        for name in names:
            subprocess.run(["podman", "rm", "-f", "-t", "0", name], env=env, capture_output=True, check=False)
    first = result["runs"][0]["wall_s"]
    for entry in result["runs"]:
        entry["x_first"] = round(entry["wall_s"] / first, 2)
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict]) -> str:
    lines = [
        "| trays | trays up (s) | run | wall (s) | ok | changed | x first run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for entry in r["runs"]:
            lines.append(
                f"| {r['trays']} | {r['trays_up_s']} | {entry['run']} | {entry['wall_s']} | {entry['ok']} |"
                f" {entry['changed']} | {entry['x_first']:.2f} |"
            )
    for r in results:
        if r.get("slowest_tasks"):
            lines += slowest_table(f"Slowest tasks of the last run, {r['trays']} tray(s):", r["slowest_tasks"])
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[1, 4, 8], help="trays per run (default 1 4 8)")
    parser.add_argument("--runs", type=int, default=2, help="hosts.yml runs per size (default 2)")
    parser.add_argument("--profile", type=int, default=0, help="show the N slowest tasks of the last run")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/host_rerun.py runs rootful podman trays: run it as root")
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    run([str(BUILD_IMAGE)], podman_env(), "tests/molecule/build-image.sh")  # cheap when the image exists
    results = [measure(size, max(2, args.runs), args.profile) for size in args.sizes]
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    bad = [str(r["trays"]) for r in results if any(e["changed"] for e in r["runs"][1:])]
    if bad:
        print(
            f"\na later run changed something on {', '.join(bad)} tray(s): hosts.yml is not idempotent", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
