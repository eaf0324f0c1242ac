# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module timed as Ansible runs it: a process of its own, Python's start-up and imports included; and the
collection made importable in the benchmark's own process.

Shared by the benchmarks that time a module process (parser_throughput.py, containerd_check_mode.py) and by the
fuzzers, which call the collection's functions in process (``import_collection``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO_ROOT / ".tmp" / "collections"


def import_collection() -> None:
    """Make ``ansible_collections.gpu_fabric.mnnvl`` importable: the layout tests/conftest.py makes, without make."""
    link = COLLECTIONS / "ansible_collections" / "gpu_fabric" / "mnnvl"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink("../../../..", link)
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))


def ensure_layout() -> None:
    """The module code as the collection lays it out (`make layout` links the clone there)."""
    if not (COLLECTIONS / "ansible_collections" / "gpu_fabric" / "mnnvl").exists():
        subprocess.run(["make", "-s", "layout"], cwd=REPO_ROOT, check=True)


def time_module(
    module: Path, module_args: dict[str, Any], processes: int, succeeded: Callable[[dict[str, Any]], bool]
) -> tuple[list[float], dict[str, Any]]:
    """``processes`` runs of ``module`` with ``module_args``: the seconds of each and the last result.
    Exits with the module's output when a run fails or its result is not ``succeeded``."""
    times: list[float] = []
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        args = Path(tmp) / "args.json"
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
        env = {"PYTHONPATH": str(COLLECTIONS), "PATH": "/usr/bin:/bin"}
        for _run in range(processes):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, str(module), str(args)], capture_output=True, text=True, env=env, check=False
            )
            times.append(time.perf_counter() - start)
            result = json.loads(done.stdout or "{}")
            if done.returncode != 0 or not succeeded(result):
                sys.exit(f"the module failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return times, result
