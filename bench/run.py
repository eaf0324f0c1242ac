# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/run: every benchmark of the collection, one after the other, each printing its table.

This is the code behind the shell wrapper bench/run.

    bench/run                      # the sizes docs/PERFORMANCE.md reports (an hour or more on 2 cores)
    bench/run --smoke              # each at its smallest size, to prove they still run (make bench-smoke)
    bench/run parser clique_scale  # only these
    bench/run --list               # the benchmarks and their arguments

Each benchmark brings up its own simulated rack on ports of its own (a rack on the default ports,
such as the one the tests use, is not touched) and takes it down at the end. The tables go to
stdout; with --json DIR each benchmark also writes DIR/<name>.json. Exit status: the first
benchmark that failed, or 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent

# name -> (script, full arguments, smoke arguments)
BENCHMARKS = {
    "parser": ("parser_throughput.py", [], ["--runs", "5", "--outputs", "20", "--processes", "1"]),
    "fuzz_outputs": ("fuzz_outputs.py", [], ["--cases", "200"]),
    "fuzz_configs": ("fuzz_configs.py", [], ["--count", "20"]),
    "sim_up": ("sim_up.py", ["1x18", "8x18", "64x18", "512x18"], ["1x4", "--settle", "2"]),
    "clique_scale": ("clique_scale.py", ["18", "144", "1152", "9216"], ["18", "--repeats", "1"]),
    "rerun": ("rerun.py", ["1x4", "1x18", "--profile", "10"], ["1x4"]),
    "host_rerun": ("host_rerun.py", ["1", "4", "8", "--profile", "12"], ["1"]),
    "fleet_verify": ("fleet_verify.py", [], ["1x4", "--serial", "no"]),
    "containerd_check_mode": ("containerd_check_mode.py", [], ["50", "--processes", "1"]),
    "nvbandwidth_runtime": ("nvbandwidth_runtime.py", [], []),  # the model alone: well under 2 s
    "api_load": ("api_load.py", ["1x18", "8x18"], ["1x4", "--checks", "cliques"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default all: {', '.join(BENCHMARKS)})")
    parser.add_argument("--smoke", action="store_true", help="each at its smallest size")
    parser.add_argument("--json", type=Path, help="directory for one JSON file per benchmark")
    parser.add_argument("--list", action="store_true", help="print the benchmarks and their arguments")
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
    status, summary = 0, []
    for name in args.names or BENCHMARKS:
        script, full, smoke = BENCHMARKS[name]
        cmd = [str(python if python.exists() else sys.executable), str(HERE / script), *(smoke if args.smoke else full)]
        if args.json and name not in ("fuzz_outputs", "fuzz_configs"):
            cmd += ["--json", str(args.json / f"{name}.json")]
        print(f"=== {name}: {' '.join(cmd[1:])}", flush=True)
        start = time.monotonic()
        rc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, check=False).returncode
        seconds = time.monotonic() - start
        summary.append(f"{name:<13} {'passed' if rc == 0 else f'FAILED (exit {rc})':<16} {seconds:7.1f} s")
        if rc and not status:
            status = rc
    print("\n" + "\n".join(summary))
    return status


if __name__ == "__main__":
    sys.exit(main())
