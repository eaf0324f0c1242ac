# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/run: every benchmark of the collection, one after the other, each printing its table.

This is the code behind the shell wrapper bench/run.

    bench/run                      # the sizes docs/PERFORMANCE.md reports (an hour or more on 2 cores)
    bench/run --smoke              # each at its smallest size, to prove they still run (make bench-smoke)
    bench/run parser clique_scale  # only these
    bench/run --list               # the benchmarks and their arguments
    bench/run --smoke --jobs 2     # two at a time (make bench-smoke): each proves it runs, nothing more

Each benchmark brings up its own simulated rack on ports of its own (a rack on the default ports,
such as the one the tests use, is not touched) and takes it down at the end. The tables go to
stdout; with --json DIR each benchmark also writes DIR/<name>.json. Exit status: the first
benchmark that failed, or 0.

With --jobs N, N benchmarks run at once, the longest first, each with Helm repository settings of
its own (the cluster stage runs `helm repo add`); a benchmark's output is printed whole when it
ends. Two at a time share the cores, so their figures are not the ones to report: full-size runs
for docs/PERFORMANCE.md keep the default, one at a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent

# name -> (script, full arguments, smoke arguments)
BENCHMARKS = {
    "parser": ("parser_throughput.py", [], ["--runs", "5", "--outputs", "20", "--processes", "1"]),
    "fuzz_outputs": ("fuzz_outputs.py", [], ["--cases", "200"]),
    "fuzz_configs": ("fuzz_configs.py", [], ["--count", "20"]),
    "fuzz_references": ("fuzz_references.py", [], ["--cases", "200", "--seed", "0"]),
    "fuzz_history": ("fuzz_history.py", [], ["--cases", "60", "--seed", "0"]),
    "fuzz_host_outputs": ("fuzz_host_outputs.py", [], ["--cases", "200"]),
    "fuzz_tray_times": ("fuzz_tray_times.py", [], ["--cases", "300"]),
    "sim_up": ("sim_up.py", ["1x18", "8x18", "64x18", "512x18"], ["1x4", "--settle", "2"]),
    "clique_scale": ("clique_scale.py", ["18", "144", "1152", "9216"], ["18", "--repeats", "1"]),
    "rerun": ("rerun.py", ["1x4", "1x18", "--profile", "10"], ["1x4"]),
    "host_rerun": ("host_rerun.py", ["1", "4", "8", "--profile", "12"], ["1"]),
    "fleet_verify": ("fleet_verify.py", [], ["1x4", "--serial", "no"]),
    "containerd_check_mode": ("containerd_check_mode.py", [], ["50", "--processes", "1"]),
    "nvbandwidth_runtime": ("nvbandwidth_runtime.py", [], []),  # the model alone: well under 2 s
    "api_load": ("api_load.py", ["1x18", "8x18"], ["1x4", "--checks", "cliques"]),
}

# The smoke run's seconds of each benchmark that brings up a rack or trays (the CI log of 2026-12-06): with
# --jobs, the longest start first, so that the last to end is a short one; the rest take a second or two.
SMOKE_SECONDS = {"api_load": 74, "fleet_verify": 72, "rerun": 67, "host_rerun": 54, "clique_scale": 20, "sim_up": 12}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default all: {', '.join(BENCHMARKS)})")
    parser.add_argument("--smoke", action="store_true", help="each at its smallest size")
    parser.add_argument("--json", type=Path, help="directory for one JSON file per benchmark")
    parser.add_argument("--list", action="store_true", help="print the benchmarks and their arguments")
    parser.add_argument("--jobs", type=int, default=1, help="benchmarks run at once (default 1: timings to report)")
    args = parser.parse_args()
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    if args.list:
        for name, (script, full, smoke) in BENCHMARKS.items():
            print(f"{name:<13} bench/{script} {' '.join(full) or '(defaults)'}   smoke: {' '.join(smoke)}")
        return 0
    python = REPO_ROOT / ".venv" / "bin" / "python"
    env = dict(os.environ, PATH=f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if args.json:
        args.json.mkdir(parents=True, exist_ok=True)
    names = args.names or list(BENCHMARKS)
    commands = {}
    for name in names:
        script, full, smoke = BENCHMARKS[name]
        cmd = [str(python if python.exists() else sys.executable), str(HERE / script), *(smoke if args.smoke else full)]
        if args.json and not name.startswith("fuzz_"):  # the fuzzers print their tallies and write no JSON
            cmd += ["--json", str(args.json / f"{name}.json")]
        commands[name] = cmd
    results = run_all(commands, env, args.jobs) if args.jobs > 1 else run_each(commands, env)
    summary = [
        f"{name:<13} {'passed' if rc == 0 else f'FAILED (exit {rc})':<16} {results[name][1]:7.1f} s"
        for name, rc in ((name, results[name][0]) for name in names)
    ]
    print("\n" + "\n".join(summary))
    return next((results[name][0] for name in names if results[name][0]), 0)


def run_each(commands: dict[str, list[str]], env: dict[str, str]) -> dict[str, tuple[int, float]]:
    """One after the other, the output as it comes: name -> (exit code, seconds)."""
    results = {}
    for name, cmd in commands.items():
        print(f"=== {name}: {' '.join(cmd[1:])}", flush=True)
        start = time.monotonic()
        rc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, check=False).returncode
        results[name] = (rc, time.monotonic() - start)
    return results


def run_all(commands: dict[str, list[str]], env: dict[str, str], jobs: int) -> dict[str, tuple[int, float]]:
    """``jobs`` at a time, the longest first; each benchmark's output printed whole when it ends."""
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    helm = Path(tempfile.mkdtemp(prefix="bench-helm-", dir=REPO_ROOT / ".tmp"))

    def one(name: str) -> tuple[int, float, str]:
        own = dict(
            env,
            HELM_REPOSITORY_CONFIG=str(helm / name / "repositories.yaml"),
            HELM_REPOSITORY_CACHE=str(helm / name / "repository"),
        )
        start = time.monotonic()
        proc = subprocess.run(
            commands[name],
            cwd=REPO_ROOT,
            env=own,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        return proc.returncode, time.monotonic() - start, proc.stdout

    results = {}
    order = sorted(commands, key=lambda name: -SMOKE_SECONDS.get(name, 0))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = {pool.submit(one, name): name for name in order}
        for done in as_completed(running):
            name = running[done]
            rc, seconds, output = done.result()
            print(
                f"=== {name}: {' '.join(commands[name][1:])} ({seconds:.1f} s, {jobs} at a time)\n{output}",
                end="",
                flush=True,
            )
            results[name] = (rc, seconds)
    shutil.rmtree(helm, ignore_errors=True)
    return results


if __name__ == "__main__":
    sys.exit(main())
