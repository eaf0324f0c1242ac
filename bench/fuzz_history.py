# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fuzzer of the kept history of verification runs (seeded, deterministic): record, retention and the readers.

Each case builds a history in a temporary directory: 3 to 8 runs of two checks on one to three racks, with random
verdicts, their start times written in random time zones (``Z``, ``+09:00``, ``-05:00``, ``+05:30``) and recorded
in a shuffled order, and half the time a pinned run. It then applies one mutation of a family:

- **reordered**: nothing more; the time zones and the shuffled order are the test;
- **index**: the index cut short, emptied, removed, no JSON, or hand-edited into another shape (``runs`` not a
  list, an entry not an object, verdicts as text, a run id that is no directory name, ``pinned: "yes"``, a start
  that is a number, a run listed twice);
- **record**: one kept record cut short, a list, ``null``, a NaN or string median, an infinite matrix cell;
- **time**: one run's start in the index replaced by a text that names no time.

and records one more run (``verify_history``'s ``record_run``, random ``keep_runs`` and ``keep_days``), then reads
the history as the report, the metrics and the nvbandwidth check do (``history_trends.trends``,
``metrics.history_last_passes``, ``history_baseline.baseline_for``). Each case is judged on:

- **crashes**: any exception, but the HistoryError by which ``baseline_for`` refuses a bad record as a baseline;
- **lost what matters**: the pinned run, or a check's last passing run of a rack, gone from the disk or the index,
  or the pin gone from the run;
- **misordered**: the index not newest first by instant, or retention removing a run newer than one it kept
  for its age or count alone;
- **silent**: a mutation that no warning names (a rebuilt index, a bad record still kept, a start that names no
  time).

The table counts, per family, the cases and each of those; the exit status is 1 when any is not 0.

    python bench/fuzz_history.py                    # 300 cases, seed 0
    python bench/fuzz_history.py --cases 2000 --seed 7 --show 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from module_process import import_collection

REPO_ROOT = Path(__file__).resolve().parent.parent


import_collection()

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import (  # noqa: E402
    history,
    history_baseline,
    history_runs,
    history_trends,
    metrics,
)

FAMILIES = ("reordered", "index", "record", "time")
CHECKS = ("nvbandwidth", "cliques")
ZONES = (timezone.utc, timezone(timedelta(hours=9)), timezone(timedelta(hours=-5)), timezone(timedelta(hours=5.5)))
OLDEST = datetime.min.replace(tzinfo=timezone.utc)
START = datetime(2026, 11, 20, tzinfo=timezone.utc)
NEW_RUN = "r99"


def rfc3339_in(moment: datetime, zone: timezone) -> str:
    text = moment.astimezone(zone).isoformat()
    return text.replace("+00:00", "Z")


@dataclass
class Run:
    run_id: str
    instant: datetime  # when it started; OLDEST once its start names no time
    started: str
    verdicts: Dict[str, str]


@dataclass
class Case:
    """The history as built, what the mutation did, and what must hold after one more run is recorded."""

    directory: str
    runs: List[Run]
    pinned: str = ""
    mutation: str = ""
    warned_by: Tuple[str, ...] = ()  # the words one warning must hold after the mutation (empty: none needed)
    bad_record: str = ""  # the path of the record the mutation spoiled


def make_record(run: Run, key: str, rng: random.Random) -> Dict[str, Any]:
    check, rack = key.split("/", 1)
    verdict = run.verdicts[key]
    record: Dict[str, Any] = {
        "check": check,
        "rack": rack,
        "run_id": run.run_id,
        "verdict": verdict,
        "passed": verdict == "passed",
        "outcome": verdict,
        "summary": f"{check} of {rack}: {verdict}",
        "started": run.started,
        "finished": rfc3339_in(run.instant + timedelta(minutes=5), rng.choice(ZONES)),
        "nodes": ["tray0", "tray1"],
    }
    if check == "nvbandwidth":
        median = rng.choice((820.0, 818.5, 790.0))
        record["details"] = {
            "testcase": "device_to_device_memcpy_read_ce",
            "median_gbps": median,
            "min": median - 5,
            "matrix": [[None, median], [median, None]],
            "rank_nodes": ["tray0", "tray1"],
            "gpus_per_node": 1,
            "references": [{"kind": "product", "gbps": 820.0}],
        }
    return record


def build(rng: random.Random, directory: str) -> Case:
    racks = [f"rack{n}" for n in range(rng.randint(1, 3))]
    keys = [f"{check}/{rack}" for check in CHECKS for rack in racks]
    runs = []
    moment = START
    for number in range(rng.randint(3, 8)):
        moment += timedelta(minutes=rng.randint(20, 2000))
        verdicts = {key: rng.choice(("passed", "passed", "failed", "error")) for key in keys}
        runs.append(Run(f"r{number:02d}", moment, rfc3339_in(moment, rng.choice(ZONES)), verdicts))
    for run in rng.sample(runs, len(runs)):
        records = [make_record(run, key, rng) for key in run.verdicts]
        history_runs.record_run(directory, run.run_id, records, keep_runs=0, keep_days=0, now=moment)
    case = Case(directory, runs)
    if rng.random() < 0.5:
        case.pinned = rng.choice(runs).run_id
        history_runs.pin_run(directory, case.pinned)
    return case


# ----------------------------------------------------------------------------------------- mutations


def _index_path(case: Case) -> str:
    return os.path.join(case.directory, history.INDEX)


def _edit_index(case: Case, change: Callable[[Dict[str, Any]], Any]) -> None:
    with open(_index_path(case), encoding="utf-8") as handle:
        index = json.load(handle)
    with open(_index_path(case), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(change(index)))


def _first_entry(index: Dict[str, Any], **values: Any) -> Dict[str, Any]:
    index["runs"][0].update(values)
    return index


INDEX_MUTATIONS: Dict[str, Callable[[Case, random.Random], None]] = {
    "cut short": lambda c, r: Path(_index_path(c)).write_text(
        Path(_index_path(c)).read_text()[: r.randint(1, len(Path(_index_path(c)).read_text()) - 2)]
    ),
    "emptied": lambda c, r: Path(_index_path(c)).write_text(""),
    "removed": lambda c, r: os.unlink(_index_path(c)),
    "no JSON": lambda c, r: Path(_index_path(c)).write_text("runs: [r00]\n"),
    "runs not a list": lambda c, r: _edit_index(c, lambda i: dict(i, runs={"r00": {}})),
    "entry not an object": lambda c, r: _edit_index(c, lambda i: dict(i, runs=["r00", *i["runs"]])),
    "verdicts as text": lambda c, r: _edit_index(c, lambda i: _first_entry(i, verdicts="nvbandwidth/rack0: passed")),
    "run id no name": lambda c, r: _edit_index(c, lambda i: _first_entry(i, run_id="../" + i["runs"][0]["run_id"])),
    "pinned as text": lambda c, r: _edit_index(c, lambda i: _first_entry(i, pinned="yes")),
    "start a number": lambda c, r: _edit_index(c, lambda i: _first_entry(i, started=1796120251)),
    "run twice": lambda c, r: _edit_index(c, lambda i: dict(i, runs=i["runs"] + i["runs"][:1])),
}


def _spoil_record(text: str) -> Callable[[Dict[str, Any]], Any]:
    return lambda record: text


RECORD_MUTATIONS: Dict[str, Callable[[Dict[str, Any], random.Random], str]] = {
    "cut short": lambda rec, r: json.dumps(rec)[: r.randint(1, 40)],
    "a list": lambda rec, r: json.dumps([rec]),
    "null": lambda rec, r: "null",
    "NaN median": lambda rec, r: json.dumps(
        dict(rec, details=dict(rec.get("details") or {}, median_gbps=float("nan")))
    ),
    "string median": lambda rec, r: json.dumps(dict(rec, details=dict(rec.get("details") or {}, median_gbps="fast"))),
    "infinite cell": lambda rec, r: json.dumps(
        dict(rec, details=dict(rec.get("details") or {}, matrix=[[None, float("inf")], [820.0, None]]))
    ),
}


def mutate(case: Case, family: str, rng: random.Random) -> None:
    if family == "index":
        name = rng.choice(sorted(INDEX_MUTATIONS))
        INDEX_MUTATIONS[name](case, rng)
        case.mutation, case.warned_by = f"index {name}", ("rebuilt it from the",)
    elif family == "record":
        name = rng.choice(sorted(RECORD_MUTATIONS))
        run = rng.choice(case.runs)
        key = rng.choice(sorted(run.verdicts))
        check, rack = key.split("/", 1)
        path = os.path.join(case.directory, run.run_id, check, f"{rack}.json")
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
        Path(path).write_text(RECORD_MUTATIONS[name](record, rng))
        case.mutation, case.bad_record = f"record {name} ({run.run_id} {key})", path
    elif family == "time":
        run = rng.choice(case.runs)
        position = None

        def unparsable(index: Dict[str, Any]) -> Dict[str, Any]:
            nonlocal position
            position = next(n for n, e in enumerate(index["runs"]) if e["run_id"] == run.run_id)
            index["runs"][position]["started"] = "yesterday"
            return index

        _edit_index(case, unparsable)
        run.instant, run.started = OLDEST, "yesterday"
        case.mutation, case.warned_by = f"time ({run.run_id})", (f"run {run.run_id} of the history", "yesterday")
    else:
        case.mutation = "reordered"


# ----------------------------------------------------------------------------------------- the judgement


def _order_key(run: Run) -> Tuple[datetime, str]:
    return (run.instant, run.run_id)


def last_passes(runs: Sequence[Run]) -> Dict[str, str]:
    """<check>/<rack> -> the run id of its newest pass, by instant (a start that names no time: the oldest)."""
    found: Dict[str, str] = {}
    for run in sorted(runs, key=_order_key, reverse=True):
        for key, verdict in run.verdicts.items():
            if verdict == "passed":
                found.setdefault(key, run.run_id)
    return found


def judge(case: Case, result: Dict[str, Any], keep_runs: int, keep_days: int, now: datetime) -> List[str]:
    """What went wrong (each prefixed 'lost', 'misordered' or 'silent'), given the history after the last run."""
    problems = []
    index = history.read_index(case.directory)
    listed = {e["run_id"]: e for e in index["runs"]}
    on_disk = {name for name in os.listdir(case.directory) if os.path.isdir(os.path.join(case.directory, name))}
    by_id = {run.run_id: run for run in case.runs}
    protected = {NEW_RUN: "the run written"}
    if case.pinned:
        protected[case.pinned] = "the pinned run"
    for key, run_id in last_passes(case.runs).items():
        protected.setdefault(run_id, f"the last pass of {key}")
    for run_id, why in sorted(protected.items()):
        if run_id not in listed or run_id not in on_disk:
            problems.append(f"lost {why} ({run_id})")
    if case.pinned and case.pinned in listed and not listed[case.pinned].get("pinned"):
        problems.append(f"lost the pin of {case.pinned}")
    order = [e["run_id"] for e in index["runs"]]
    expected = [r.run_id for r in sorted((by_id[i] for i in order if i in by_id), key=_order_key, reverse=True)]
    if [i for i in order if i in by_id] != expected:
        problems.append(f"misordered index: {order}, expected {expected}")
    removed = set(result["removed_runs"])
    oldest_kept = now - timedelta(days=keep_days) if keep_days else None
    for run_id in removed:
        if run_id in protected:
            continue  # counted as lost above
        for kept in (by_id[i] for i in order if i in by_id and i not in protected):
            too_old = oldest_kept is not None and kept.instant != OLDEST and kept.instant < oldest_kept
            if not too_old and _order_key(kept) < _order_key(by_id[run_id]):
                problems.append(f"misordered retention: removed {run_id}, kept the older {kept.run_id}")
    for words in [case.warned_by] if case.warned_by else []:
        if not any(all(w in warning for w in words) for warning in result["warnings"]):
            problems.append(f"silent: no warning holds {words!r}")
    return problems


def read_as_the_readers_do(case: Case) -> List[str]:
    """The report's trend, the metrics' last pass and each baseline; the warnings they gave."""
    warnings: List[str] = []
    history_trends.trends(case.directory, warnings=warnings)
    metrics.history_last_passes(case.directory, warnings)
    for run in case.runs[:1]:
        for key in run.verdicts:
            check, rack = key.split("/", 1)
            # HistoryError: the check's refusal of a bad record as its baseline, one line by design
            with contextlib.suppress(history.HistoryError):
                history_baseline.baseline_for(case.directory, check, rack, exclude_run=NEW_RUN)
    return warnings


def run_case(family: str, rng: random.Random) -> Tuple[str, Optional[str]]:
    """One case: (the mutation, what went wrong or None)."""
    directory = tempfile.mkdtemp(prefix="fuzz-history-")
    mutation = family
    try:
        case = build(rng, os.path.join(directory, "runs"))
        mutate(case, family, rng)
        mutation = case.mutation
        newest = max(run.instant for run in case.runs)
        new = Run(NEW_RUN, newest + timedelta(hours=1), "", {})
        new.started = rfc3339_in(new.instant, rng.choice(ZONES))
        new.verdicts = {key: rng.choice(("passed", "failed")) for key in case.runs[0].verdicts}
        keep_runs, keep_days = rng.randint(1, 4), rng.choice((0, 0, 2))
        now = new.instant + timedelta(hours=1)
        records = [make_record(new, key, rng) for key in new.verdicts]
        result = history_runs.record_run(case.directory, NEW_RUN, records, keep_runs, keep_days, now=now)
        case.runs.append(new)
        problems = judge(case, result, keep_runs, keep_days, now)
        warnings = read_as_the_readers_do(case)
        named = any(case.bad_record in warning for warning in warnings)
        if case.bad_record and os.path.exists(case.bad_record) and not named:
            problems.append(f"silent: no reader named {case.bad_record}")
        return mutation, "; ".join(problems) or None
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return mutation, f"traceback: {type(exc).__name__}: {str(exc)[:100]} at {where.name}:{where.lineno}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ----------------------------------------------------------------------------------------- the run


@dataclass
class Tally:
    cases: int = 0
    crashes: int = 0
    lost: int = 0
    misordered: int = 0
    silent: int = 0
    examples: List[str] = field(default_factory=list)

    def bad(self) -> int:
        return self.crashes + self.lost + self.misordered + self.silent


@contextlib.contextmanager
def without_fsync():
    """``os.fsync`` a no-op while the cases run: they judge what is kept, not that the disk has it (a case is
    ten times faster)."""
    fsync = os.fsync
    os.fsync = lambda _fd: None
    try:
        yield
    finally:
        os.fsync = fsync


def run_fuzz(cases: int = 300, seed: int = 0) -> Dict[str, Tally]:
    """Run ``cases`` seeded cases over every family; the tally per family."""
    picker = random.Random(seed)
    tallies = {family: Tally() for family in FAMILIES}
    with without_fsync():
        _run_cases(cases, seed, picker, tallies)
    return tallies


def _run_cases(cases: int, seed: int, picker: random.Random, tallies: Dict[str, Tally]) -> None:
    for number in range(cases):
        family = picker.choice(FAMILIES)
        mutation, problem = run_case(family, random.Random(f"{seed}:{number}"))
        tally = tallies[family]
        tally.cases += 1
        if problem is None:
            continue
        tally.crashes += problem.startswith("traceback")
        tally.lost += "lost " in problem
        tally.misordered += "misordered " in problem
        tally.silent += "silent:" in problem
        tally.examples.append(f"case {number}: {mutation}: {problem}")


def table(tallies: Dict[str, Tally]) -> str:
    rows = [
        "| family | cases | crashes | lost what matters | misordered | silent |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    total = Tally()
    for name, t in tallies.items():
        rows.append(f"| {name} | {t.cases} | {t.crashes} | {t.lost} | {t.misordered} | {t.silent} |")
        for key in ("cases", "crashes", "lost", "misordered", "silent"):
            setattr(total, key, getattr(total, key) + getattr(t, key))
    rows.append(f"| all | {total.cases} | {total.crashes} | {total.lost} | {total.misordered} | {total.silent} |")
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300, help="number of cases (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--show", type=int, default=3, help="examples to print per family with problems")
    args = parser.parse_args(argv)
    tallies = run_fuzz(args.cases, args.seed)
    print(f"python bench/fuzz_history.py --cases {args.cases} --seed {args.seed}\n")
    print(table(tallies))
    for name, tally in tallies.items():
        for example in tally.examples[: args.show]:
            print(f"  {name}: {example}")
    return 1 if any(t.bad() for t in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
