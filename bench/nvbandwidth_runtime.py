# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Modelled rack times: the nvbandwidth run-time model's per-pair cost and a rack's run per testcase and mode.

No GPU and no cluster: it prints what ``plugins/module_utils/nvbandwidth_runtime.py`` says, the numbers the
verify stage's wait comes from (docs/verification.md, "Modelled rack times"):

- the per-pair cost of the default testcase, taken apart (copies, step set-up, buffers, MPI);
- per fleet mode: the pairs, the steps, one step's seconds, the whole run and the check's wait on a rack
  of ``--gpus`` GPUs (default 72, a GB200 NVL72);
- the one-H200 timings stored in tests/fixtures/nvbandwidth/h200x1-timings (timings.tsv, each process timed),
  next to what the model gives for the same runs;
- the two 2x H200 runs the model was fitted to, with their whole-process times as noted with the captures
  (tests/fixtures/nvbandwidth/h200x2-*): those times were read off by hand, and no timing file of them is kept.

    python bench/nvbandwidth_runtime.py                  # with .venv/bin on PATH
    python bench/nvbandwidth_runtime.py --gpus 8 --product NVIDIA-GB200 --json .tmp/bench-runtime.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "plugins" / "module_utils" / "nvbandwidth_runtime.py"
TIMINGS = REPO / "tests" / "fixtures" / "nvbandwidth" / "h200x1-timings" / "timings.tsv"


def load_model() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nvbandwidth_runtime", MODEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def stored_timings(path: Path, testcase: str) -> list:
    """``(buffer MiB, samples, [seconds of each process])`` of ``testcase`` run alone, from the stored timings."""
    runs: dict = {}
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t")))
        if row["label"].startswith(f"{testcase}-b") and row["rc"] == "0":
            runs.setdefault((int(row["buffer_mib"]), int(row["samples"])), []).append(float(row["seconds"]))
    return [(buffer, samples, seconds) for (buffer, samples), seconds in sorted(runs.items())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=72, help="GPUs of the rack (default 72)")
    parser.add_argument("--product", default="NVIDIA-GB200", help="nvidia.com/gpu.product (default NVIDIA-GB200)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = parser.parse_args()
    rt = load_model()

    default = rt.estimate_for("multinode_device_to_device_memcpy_read_ce", args.gpus, (), args.product)
    inputs = default.inputs
    buffers = 2 * (rt.DEVICE_BUFFER_SETUP_S + rt.MPI_PER_BUFFER_S)
    print(f"per-pair cost, multinode_device_to_device_memcpy_read_ce on {args.product}:")
    print(
        f"  copies  {inputs['copies_per_pair']} x {inputs['buffer_mib']:.0f} MiB / {inputs['pair_gbps']:.0f} GB/s"
        f" = {inputs['copy_s']:.4f} s"
    )
    print(f"  step    {rt.STEP_SETUP_S:.4f} s")
    print(f"  buffers 2 x ({rt.DEVICE_BUFFER_SETUP_S} set-up + {rt.MPI_PER_BUFFER_S} MPI) = {buffers:.4f} s")
    print(f"  total   {default.per_pair_s:.4f} s per pair; start-up {inputs['startup_s']} s once")
    print()
    rows = rt.mode_table(args.gpus, args.product)
    print(f"{'mode':<30} {'testcase':<58} {'pairs':>6} {'step s':>8} {'run':>14} {'wait':>14}")
    for row in rows:
        print(
            f"{row['mode']:<30} {row['testcase']:<58} {row['pairs']:>6} {row['per_pair_s']:>8.4f} "
            f"{rt.duration_text(row['seconds']):>14} {rt.duration_text(row['wait_s']):>14}"
        )
    print()
    testcase = "host_to_device_memcpy_ce"
    print(f"stored: one H200 (driver 580.159.04, nvbandwidth v0.7), {testcase}, whole process ({TIMINGS.name}):")
    print(f"  {'buffer MiB':>10} {'samples':>7} {'measured s':>14} {'modelled s':>10}")
    for buffer, samples, seconds in stored_timings(TIMINGS, testcase):
        modelled = rt.modelled_seconds(testcase, 1, buffer_mib=buffer, iterations=samples, pair_gbps=rt.HOST_GBPS)
        measured = ", ".join(f"{value:.3f}" for value in seconds)
        print(f"  {buffer:>10} {samples:>7} {measured:>14} {modelled.seconds:>10.3f}")
    print()
    # the fit's two runs: their times were read off by hand with the captures; no timing file of them is kept
    fitted = [
        ("device_to_device_memcpy_read_ce", 394.0, "1.0-1.2 s"),
        ("host_to_device_memcpy_ce", 0.0, "2.5 s"),
    ]
    print("fitted to 2x H200 (driver 580, nvbandwidth v0.8, 512 MiB), whole process; noted by hand, not stored:")
    for name, gbps, noted in fitted:
        estimate = rt.modelled_seconds(name, 2, pair_gbps=gbps)
        print(f"  {name:<34} modelled {estimate.seconds:.2f} s, noted {noted}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"per_pair": default.to_dict(), "modes": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
