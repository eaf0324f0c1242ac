# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fuzzer of the figures the nvbandwidth rule reads: no bad figure, no route, lets a degraded rack pass (seeded).

The input of every case is a degraded rack, from the real captures in tests/fixtures/nvbandwidth (the GB200 run of
2 trays x 4 GPUs, and the generated 18-tray rack drawn from its range): k of its n GPUs lost one NVLink of 18, so
every pair with one of them at either end runs at 17/18 of its figure. Each case puts one figure that is no number
into one place the judge reads and runs the verifier's entry point:

- ``product_references`` (an entry's ``gbps`` or ``driver_branch``), the peak table (``peak_gbps``), the module's
  ``baseline`` (``median_gbps`` or a matrix cell): ``nvbandwidth.check_nvbandwidth`` with the table or
  ``bandwidth_thresholds.Baseline.from_record`` of the record, as ``nvbandwidth_check`` calls them;
- a kept record of the history (``details.median_gbps`` or a matrix cell, of a pinned run or of a last passing one
  held against a product reference): ``checks.nvbandwidth`` reading the rack's baseline from a history directory
  and judging the launcher's log, as ``fabric_verify`` runs the check;
- the ``min_gbps`` route: ``min_gbps`` set, no ``gpu_product``, every figure valid: the product the output's
  ``Process`` lines name must still hold the rack.

The figures: NaN, infinities, booleans, ``None``, strings (``"nan"``, ``"fast"``, a numeric one), 0, negative
numbers, lists and mappings. Each case is tallied as one of:

- **refused**: the entry point's documented error (``ValueError``; ``NotRun`` for the check), one clean line that
  names where the figure came from (the table, record or option and its entry);
- **failed**: judged, and the verdict fails (a numeric string is read as its number: the rack still fails);
- **crashed**: any other exception, or a refusal that is not one line or does not name where;
- **wrongly passed**: the degraded rack passed.

The exit status is 1 when any case crashed or wrongly passed.

    python bench/fuzz_references.py                   # 2000 cases, seed 0
    python bench/fuzz_references.py --cases 200 --seed 0 --show 5
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from module_process import import_collection

REPO_ROOT = Path(__file__).resolve().parent.parent
NVBW = REPO_ROOT / "tests" / "fixtures" / "nvbandwidth"
SEEDS = (
    "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt",
    "generated-gb200-18node-multinode_device_to_device_memcpy_read_ce.txt",
)
TESTCASE = "multinode_device_to_device_memcpy_read_ce"
GPUS_PER_TRAY = 4
ONE_LOST_LINK = 17 / 18


import_collection()

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history_runs, nvbandwidth  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import Baseline  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import NotRun  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan  # noqa: E402

# Figures that are no bandwidth; "821.41" is a number as a template renders it (read, and the rack still fails).
NOT_FIGURES: Tuple[Any, ...] = (
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
    None,
    "nan",
    "inf",
    "fast",
    "",
    0,
    0.0,
    -821.41,
    -1,
    [821.41],
    {"gbps": 821.41},
    "821.41",
)

REFUSED = "refused"
FAILED = "failed"
CRASHED = "crashed"
WRONGLY_PASSED = "wrongly passed"
OUTCOMES = (REFUSED, FAILED, CRASHED, WRONGLY_PASSED)


# --------------------------------------------------------------------------------------------
# The degraded rack
# --------------------------------------------------------------------------------------------


@dataclass
class Rack:
    """A real capture: its lines, where its matrix rows are, its cells and its trays."""

    name: str
    lines: List[str]
    first_row: int
    rows: List[List[Optional[float]]]
    label_width: int

    @property
    def gpus(self) -> int:
        return len(self.rows)

    @property
    def trays(self) -> List[str]:
        return [f"tray{n}" for n in range(self.gpus // GPUS_PER_TRAY)]

    def degraded(self, lost: Sequence[int]) -> str:
        """The capture with every pair of a GPU in ``lost`` at 17/18, and a SUM line that agrees."""
        lost_set = set(lost)
        rows = [
            [
                v if v is None or (r not in lost_set and c not in lost_set) else round(v * ONE_LOST_LINK, 2)
                for c, v in enumerate(row)
            ]
            for r, row in enumerate(self.rows)
        ]
        lines = list(self.lines)
        for r, row in enumerate(rows):
            cells = "".join(f"{'N/A':>10}" if v is None else f"{v:>10.2f}" for v in row)
            lines[self.first_row + r] = f"{r:>{self.label_width}}{cells}"
        total = sum(v for row in rows for v in row if v is not None)
        return "\n".join(
            f"SUM {TESTCASE} {total:.2f}" if line.startswith(f"SUM {TESTCASE} ") else line for line in lines
        )


def load_rack(name: str) -> Rack:
    lines = (NVBW / name).read_text(encoding="utf-8").split("\n")
    header = next(n for n, line in enumerate(lines) if re.match(r"^\s+0\s+1\s", line))
    columns = len(lines[header].split())
    rows = []
    for line in lines[header + 1 : header + 1 + columns]:
        tokens = line.split()
        rows.append([None if t == "N/A" else float(t) for t in tokens[1:]])
    label_width = len(lines[header + 1]) - 10 * columns
    return Rack(name, lines, header + 1, rows, label_width)


# --------------------------------------------------------------------------------------------
# Where a bad figure goes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


@dataclass(frozen=True)
class Place:
    """One place the judge reads a figure: its name, the words a refusal must name, and the run with it there."""

    name: str
    names: Tuple[str, ...]
    run: Callable[[Rack, str, Any, random.Random], Verdict]
    refusal: Tuple[type, ...] = (ValueError,)


def _judge(content: str, rack: Rack, **kwargs: Any) -> Verdict:
    verdict = nvbandwidth.check_nvbandwidth(
        content,
        testcase=TESTCASE,
        gpu_product=kwargs.pop("gpu_product", "NVIDIA-GB200"),
        nodes=rack.trays,
        gpus_per_node=GPUS_PER_TRAY,
        **kwargs,
    )
    return Verdict(verdict.passed, verdict.summary)


def _healthy_median(rack: Rack) -> float:
    cells = sorted(v for row in rack.rows for v in row if v is not None)
    return cells[len(cells) // 2]


def in_product_reference(key: str) -> Callable[[Rack, str, Any, random.Random], Verdict]:
    def run(rack: Rack, content: str, bad: Any, rng: random.Random) -> Verdict:
        entry = {"match": "GB200", "testcase": "read_ce$", "gbps": 821.41, "source": "site acceptance"}
        entry[key] = bad
        table = [{"match": "H200$", "testcase": "read_ce$", "gbps": 393.67}] * rng.randrange(2) + [entry]
        return _judge(content, rack, product_references=table)

    return run


def in_peak_table(rack: Rack, content: str, bad: Any, rng: random.Random) -> Verdict:
    table = [{"match": "H100|H200", "peak_gbps": 450.0}] * rng.randrange(2) + [{"match": "GB200", "peak_gbps": bad}]
    return _judge(content, rack, peak_table=table)


def _baseline_record(rack: Rack, bad: Any, where: str, rng: random.Random) -> Dict[str, Any]:
    matrix = [list(row) for row in rack.rows]
    record: Dict[str, Any] = {"median_gbps": _healthy_median(rack), "matrix": matrix, "rank_nodes": rack.trays}
    if where == "median_gbps":
        record["median_gbps"] = bad
    else:
        r = rng.randrange(rack.gpus)
        c = (r + 1 + rng.randrange(rack.gpus - 1)) % rack.gpus
        matrix[r][c] = bad
    return record


def in_baseline(where: str) -> Callable[[Rack, str, Any, random.Random], Verdict]:
    def run(rack: Rack, content: str, bad: Any, rng: random.Random) -> Verdict:
        record = dict(_baseline_record(rack, bad, where, rng), source="pinned run r1")
        # a product without a figure: the baseline is the one reference that holds the rack
        return _judge(content, rack, gpu_product="NVIDIA-GB300", baseline=Baseline.from_record(record))

    return run


def in_kept_record(where: str) -> Callable[[Rack, str, Any, random.Random], Verdict]:
    def run(rack: Rack, content: str, bad: Any, rng: random.Random) -> Verdict:
        details = _baseline_record(rack, bad, where, rng)
        details.update(testcase=TESTCASE, driver_version="580.95.05", gpus_per_node=GPUS_PER_TRAY)
        details["references"] = [{"kind": "product", "gbps": 821.41, "source": "GB200 NVL72"}]
        pinned = rng.random() < 0.5
        with tempfile.TemporaryDirectory(prefix="fuzz-references-") as history_dir:
            record = {"check": "nvbandwidth", "rack": "rack0", "verdict": "passed", "details": details}
            history_runs.record_run(history_dir, "r1", [dict(record, started="2026-12-01T10:00:00Z")])
            if pinned:
                history_runs.pin_run(history_dir, "r1")
            params = {
                "history_dir": history_dir,
                "run_id": "r2",
                "mpi": {},
                "nvbandwidth": {"image": "nvbandwidth:fuzz", "testcase": TESTCASE, "extra_args": []},
            }
            check = nvbandwidth_check.NvbandwidthCheck.from_params(params)
            plan = RackPlan(
                name="rack0",
                cliques=[],
                found=[],
                nodes=rack.trays,
                skipped=[],
                gpus_per_tray=GPUS_PER_TRAY,
                gpu_product="NVIDIA-GB300",  # no figure: the kept baseline is the one reference
            )
            verdict = check.judge_log(content, plan, rack.trays)
        return Verdict(bool(verdict["passed"]), str(verdict["summary"]))

    return run


PLACES: Tuple[Place, ...] = (
    Place("product_references gbps", ("product reference entry", "gbps"), in_product_reference("gbps")),
    Place(
        "product_references driver_branch",
        ("product reference entry", "driver_branch"),
        in_product_reference("driver_branch"),
    ),
    Place("peak table peak_gbps", ("peak table entry", "peak_gbps"), in_peak_table),
    Place("baseline median_gbps", ("site baseline", "median_gbps"), in_baseline("median_gbps")),
    Place("baseline matrix cell", ("site baseline", "matrix row"), in_baseline("cell")),
    Place(
        "kept record median_gbps",
        ("kept record", "r1/nvbandwidth/rack0.json", "median_gbps"),
        in_kept_record("median_gbps"),
        (NotRun,),
    ),
    Place(
        "kept record matrix cell",
        ("kept record", "r1/nvbandwidth/rack0.json", "matrix row"),
        in_kept_record("cell"),
        (NotRun,),
    ),
)
MIN_GBPS_ROUTE = "min_gbps route, no gpu_product"


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    outcomes: Dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    examples: List[str] = field(default_factory=list)

    def bad(self) -> int:
        return self.outcomes[CRASHED] + self.outcomes[WRONGLY_PASSED]


def _outcome(run: Callable[[], Verdict], refusal: Tuple[type, ...], names: Sequence[str]) -> Tuple[str, str]:
    """(outcome, what was seen) of one run."""
    try:
        verdict = run()
    except refusal as exc:  # pylint: disable=catching-non-exception  # a tuple of exception classes
        line = str(exc)
        if not line.strip() or "\n" in line:
            return CRASHED, f"a refusal that is not one line: {line[:120]!r}"
        missing = [name for name in names if name not in line]
        if missing:
            return CRASHED, f"a refusal that does not name {', '.join(missing)}: {line[:160]}"
        return REFUSED, line
    except Exception as exc:  # anything else is a crash: the tally says where
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return CRASHED, f"{type(exc).__name__}: {str(exc)[:100]} at {where.name}:{where.lineno}"
    if verdict.passed:
        return WRONGLY_PASSED, verdict.reason[:160]
    return FAILED, verdict.reason[:160]


def run_case(racks: Sequence[Rack], rng: random.Random) -> Tuple[str, str, str, str]:
    """One case: (place, what the case was, outcome, what was seen)."""
    rack = rng.choice(racks)
    lost = sorted(rng.sample(range(rack.gpus), rng.randint(1, rack.gpus)))
    content = rack.degraded(lost)
    choices = [place.name for place in PLACES] + [MIN_GBPS_ROUTE]
    where = rng.choice(choices)
    described = f"{rack.name}, {len(lost)} of {rack.gpus} GPUs one link down"
    if where == MIN_GBPS_ROUTE:
        floor = round(rng.uniform(700.0, 775.0), 2)  # below a lost link's ~776 GB/s: the floor alone passes it
        outcome, seen = _outcome(lambda: _min_gbps_route(content, floor), (), ())
        return where, f"{described}, min_gbps {floor}", outcome, seen
    place = next(p for p in PLACES if p.name == where)
    bad = rng.choice(NOT_FIGURES)
    outcome, seen = _outcome(lambda: place.run(rack, content, bad, rng), place.refusal, place.names)
    return where, f"{described}, {bad!r}", outcome, seen


def _min_gbps_route(content: str, floor: float) -> Verdict:
    """As ``nvbandwidth_check`` runs with ``min_gbps`` and neither ``gpu_product`` nor ``nodes``."""
    thresholds = nvbandwidth.Thresholds(min_gbps=floor)
    verdict = nvbandwidth.check_nvbandwidth(content, testcase=TESTCASE, thresholds=thresholds)
    return Verdict(verdict.passed, verdict.summary)


def run_fuzz(cases: int = 2000, seed: int = 0) -> Dict[str, Tally]:
    """Run ``cases`` seeded cases; the tally per place (and the ``min_gbps`` route)."""
    racks = [load_rack(name) for name in SEEDS]
    tallies = {name: Tally() for name in [p.name for p in PLACES] + [MIN_GBPS_ROUTE]}
    for number in range(cases):
        where, described, outcome, seen = run_case(racks, random.Random(f"{seed}:{number}"))
        tally = tallies[where]
        tally.cases += 1
        tally.outcomes[outcome] += 1
        if outcome in (CRASHED, WRONGLY_PASSED):
            tally.examples.append(f"case {number}: {described}: {outcome}: {seen}")
    return tallies


def table(tallies: Dict[str, Tally]) -> str:
    rows = [
        "| where | cases | refused with a line | failed | crashed | wrongly passed |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    total = Tally()
    for name, t in tallies.items():
        counts = " | ".join(str(t.outcomes[o]) for o in OUTCOMES)
        rows.append(f"| {name} | {t.cases} | {counts} |")
        total.cases += t.cases
        for outcome in OUTCOMES:
            total.outcomes[outcome] += t.outcomes[outcome]
    rows.append(f"| all | {total.cases} | {' | '.join(str(total.outcomes[o]) for o in OUTCOMES)} |")
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000, help="number of cases (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--show", type=int, default=3, help="examples to print per place with problems")
    args = parser.parse_args(argv)
    tallies = run_fuzz(args.cases, args.seed)
    print(f"python bench/fuzz_references.py --cases {args.cases} --seed {args.seed}\n")
    print(table(tallies))
    for name, tally in tallies.items():
        for example in tally.examples[: args.show]:
            print(f"  {name}: {example}")
    return 1 if any(t.bad() for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
