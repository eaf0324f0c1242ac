# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the benchmarks that run playbooks share: a timed command that ends the benchmark when it fails,
and the slowest tasks of a run (ansible.posix's profile_tasks). Not a benchmark of its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RACK = REPO_ROOT / "sim" / "rack"
# profile_tasks: "<role> : <task name> ------- 12.34s"
PROFILE = re.compile(r"^(.+?) -{2,} (\d+\.\d+)s$", re.M)


def run(cmd: list[str], env: dict[str, str], what: str) -> tuple[float, str]:
    """Run ``cmd`` from the repository root; its wall time and stdout, or exit naming ``what`` and its output."""
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    elapsed = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"{what} failed (exit {result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    return elapsed, result.stdout


def enable_profile(env: dict[str, str], count: int) -> None:
    """Have ``ansible-playbook`` print its ``count`` slowest tasks (nothing when ``count`` is 0)."""
    if count:
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
        env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = str(count)


def slowest_tasks(output: str, count: int) -> list[tuple[str, float]]:
    """The ``count`` slowest tasks that profile_tasks printed at the end of ``output``."""
    return [(name.strip(), float(seconds)) for name, seconds in PROFILE.findall(output)][:count]


def slowest_table(title: str, tasks: list) -> list[str]:
    """A Markdown table of ``slowest_tasks``, under ``title``."""
    return ["", title, "", "| task | s |", "|---|---|", *(f"| {name} | {seconds} |" for name, seconds in tasks)]


def own_fleet(prefix: str, ports: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """A state directory under .tmp and the environment of a simulated fleet of the benchmark's own, on
    ``ports`` (GPU_FABRIC_SIM_*_PORT), apart from a rack of the tests on the defaults."""
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=REPO_ROOT / ".tmp"))
    env = dict(os.environ, GPU_FABRIC_SIM_STATE=str(state), ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), **ports)
    env["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return state, env


def rack_up(env: dict[str, str], racks: int, trays: int) -> float:
    """`sim/rack up` at that size, then what `sim/rack env` exports put into ``env``; the start's seconds."""
    seconds, _output = run([str(RACK), "up", "--racks", str(racks), "--trays-per-rack", str(trays)], env, "sim/rack up")
    for line in run([str(RACK), "env"], env, "sim/rack env")[1].splitlines():
        key, value = line.removeprefix("export ").split("=", 1)
        env[key] = value.replace("$PATH", env["PATH"]) if key == "PATH" else value
    return seconds


def rack_down(env: dict[str, str]) -> None:
    subprocess.run([str(RACK), "down"], env=env, capture_output=True, check=False)


# The sim inventory waits 180 s for each chart to be ready, enough for the tests' racks; on two cores a
# fleet of 64 racks of 18 trays takes longer for the DRA driver's kubelet plugin to run on every tray.
CLUSTER_WAITS = {f"{role}_wait_timeout": 1800 for role in ("gpu_operator", "dra_driver", "mpi_operator")}


def cluster_stage(env: dict[str, str], what: str = "cluster.yml") -> float:
    """``playbooks/cluster.yml`` on the benchmark's fleet (as admin), with room to wait on a large one; its seconds."""
    playbook = str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook")
    cmd = [playbook, "-i", "inventories/sim", "playbooks/cluster.yml", "-e", json.dumps(CLUSTER_WAITS)]
    return run(cmd, env, what)[0]
