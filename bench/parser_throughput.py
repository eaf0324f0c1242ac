# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser throughput: nvbandwidth_check's work on a full NVL72 output (72 x 72), and 1,000 of them.

Three measurements of the same 18-tray output (tests/fixtures/nvbandwidth, 72 GPUs):

- `parse + judge`: what the module does between reading its arguments and exiting: parse the
  output, judge every cell, build the result and serialise it as JSON (median and worst of
  `--runs`, after one warm-up run);
- `1,000 outputs in a loop`: 1,000 distinct outputs (every cell scaled by a seeded factor, the SUM
  line recomputed, so each is healthy and none is the same text) parsed and judged one after the
  other, in one process;
- `the module process`: `python plugins/modules/nvbandwidth_check.py ARGS` as Ansible runs it on
  the controller, Python's start-up and imports included (median of `--processes`).

    python bench/parser_throughput.py               # with .venv/bin on PATH
    python bench/parser_throughput.py --runs 200 --outputs 1000 --json .tmp/bench-parser.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

from module_process import COLLECTIONS, ensure_layout, time_module

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = (
    REPO_ROOT
    / "tests"
    / "fixtures"
    / "nvbandwidth"
    / "generated-gb200-18node-multinode_device_to_device_memcpy_read_ce.txt"
)
MODULE = REPO_ROOT / "plugins" / "modules" / "nvbandwidth_check.py"
ARGS = {"testcase": "multinode_device_to_device_memcpy_read_ce", "gpu_product": "NVIDIA GB200", "expected_gpus": 72}
_CELL = re.compile(r"\d+\.\d\d")
_SUM = re.compile(r"^SUM (\S+) [\d.]+$", re.M)


def _import_collection() -> None:
    ensure_layout()
    sys.path.insert(0, str(COLLECTIONS))


def variant(text: str, rng: random.Random) -> str:
    """The output with every matrix cell scaled by one factor (0.97-1.03) and the SUM line recomputed."""
    lines = text.splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines) if line.rstrip().endswith("bandwidth (GB/s)"))
    factor = rng.uniform(0.97, 1.03)
    total = 0.0

    def scaled(match: re.Match) -> str:
        nonlocal total
        value = round(float(match.group(0)) * factor, 2)
        total += value
        return f"{value:.2f}"

    index = header + 2  # the line after the header holds the column numbers
    while index < len(lines) and lines[index].strip():
        lines[index] = _CELL.sub(scaled, lines[index])
        index += 1
    return _SUM.sub(lambda m: f"SUM {m.group(1)} {total:.2f}", "".join(lines), count=1)


def judge(text: str) -> dict:
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import Thresholds, check_nvbandwidth

    verdict = check_nvbandwidth(
        text,
        testcase=ARGS["testcase"],
        thresholds=Thresholds(expected_gpus=ARGS["expected_gpus"]),
        gpu_product=ARGS["gpu_product"],
    )
    result = verdict.to_result()
    json.dumps(result)
    return result


def in_process(text: str, runs: int) -> dict:
    judge(text)  # warm-up: imports, compiled regular expressions
    times = []
    for _run in range(runs):
        start = time.perf_counter()
        result = judge(text)
        times.append((time.perf_counter() - start) * 1000)
    if not result.get("passed"):
        sys.exit(f"the healthy 72 x 72 output did not pass: {result.get('errors') or result.get('failures')}")
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1), "runs": runs}


def loop(text: str, outputs: int, seed: int) -> dict:
    rng = random.Random(seed)
    texts = [variant(text, rng) for _index in range(outputs)]
    start = time.perf_counter()
    passed = sum(1 for t in texts if judge(t).get("passed"))
    seconds = time.perf_counter() - start
    if passed != outputs:
        sys.exit(f"{outputs - passed} of {outputs} healthy variants did not pass")
    return {"outputs": outputs, "total_s": round(seconds, 2), "per_output_ms": round(seconds / outputs * 1000, 1)}


def module_process(text: str, processes: int) -> dict:
    times, _result = time_module(MODULE, dict(ARGS, content=text), processes, lambda result: result.get("passed"))
    return {"median_ms": round(statistics.median(times) * 1000, 1), "processes": processes}


def table(results: dict) -> str:
    one, many, proc = results["parse_judge"], results["loop"], results["module_process"]
    return "\n".join(
        [
            "| measurement | output | result |",
            "|---|---|---|",
            f"| parse + judge, in the module | 72 x 72 (18 trays) | median {one['median_ms']} ms,"
            f" worst {one['max_ms']} ms of {one['runs']} |",
            f"| {many['outputs']:,} outputs in a loop | 72 x 72, each distinct | {many['total_s']} s,"
            f" {many['per_output_ms']} ms per output |",
            f"| the module process (Python start-up and imports included) | 72 x 72 | median {proc['median_ms']} ms"
            f" of {proc['processes']} |",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100, help="in-process runs of the one output (default 100)")
    parser.add_argument("--outputs", type=int, default=1000, help="distinct outputs in the loop (default 1000)")
    parser.add_argument("--processes", type=int, default=5, help="module processes started (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    _import_collection()
    text = FIXTURE.read_text()
    results = {
        "parse_judge": in_process(text, args.runs),
        "loop": loop(text, args.outputs, args.seed),
        "module_process": module_process(text, args.processes),
    }
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
