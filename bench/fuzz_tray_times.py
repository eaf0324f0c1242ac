# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fuzzer of the times a tray's state holds on its Node (seeded, deterministic).

Each case writes one odd value where a run or a person may leave a time: the annotation's tray-wide ``time`` and
``valid_until``, a check entry's ``time``, ``valid_until`` or ``outcome``, the ``skipped`` mark's ``time``, the
whole ``checks`` object, the run's own time, and the window of an only-due run. The values are far past and far
future dates, offsets that move a date out of range (``0001-01-01T00:00:00+01:00``), offsets of 24 h and more,
seconds in an offset, leap seconds, the other forms Python 3.11 reads as ISO 8601 (``20261206T174000Z``,
``2026-W49-1``), numbers (Unix seconds, NaN, infinities, a 400-digit integer), booleans, lists, objects, ``None``,
empty and huge strings, non-ASCII digits. The case goes through every reader of the state:

- ``tray_state.read_state``, ``due_reason`` (the tray, and each check), ``not_due_reason``, ``standing``;
- ``verification.select_due`` over a rack of three trays (the broken one and two sound ones);
- ``node_verdict``'s planning: ``tray_verdict.time_problems`` of the run's time, ``node_plan``'s
  ``node_time_problems``, ``plan_node``, ``plan_refresh``, ``plan_expired``, and ``node_verdict.write_verdicts`` in
  check mode against an in-memory API.

A crash is an exception other than the documented refusal (``NodeVerdictError`` with one clean line), a refusal
whose message is not one line, a label value that is not Unix seconds, or an annotation written that does not read
back whole. The table counts, per entry point, the cases, the refusals and the crashes; the exit status is 1 when
any crash was seen.

    python bench/fuzz_tray_times.py                    # 3000 cases, seed 0
    python bench/fuzz_tray_times.py --cases 20000 --seed 7 --show 5
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from module_process import import_collection

REPO_ROOT = Path(__file__).resolve().parent.parent


import_collection()

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import (  # noqa: E402
    node_plan,
    node_verdict,
    tray_state,
    tray_verdict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import select_due  # noqa: E402

NOW = datetime(2026, 12, 6, 17, 40, tzinfo=timezone.utc)
RUN_TIME = "2026-12-06T17:30:00Z"
CHECKS = ("cliques", "imex_channel", "nvbandwidth")
KEY = tray_state.ANNOTATION_KEY

# The odd values: where a time is expected, anything a person, a script or an older writer may leave.
ODD_VALUES: Tuple[Any, ...] = (
    "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:59:59+01:00",
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T23:59:59Z",
    "9998-12-31T23:00:00Z",
    "1969-12-31T23:59:59Z",
    "1970-01-01T00:00:00Z",
    "1970-01-01T00:00:00+00:01",
    "2026-12-06T17:40:00+23:59",
    "2026-12-06T17:40:00-23:59",
    "2026-12-06T17:40:00+24:00",
    "2026-12-06T17:40:00+99:99",
    "2026-12-06T17:40:00+00:00:30",
    "2026-12-06T17:40:00+05:30:15.5",
    "2026-12-06T23:59:60Z",
    "2026-02-30T00:00:00Z",
    "2026-12-06T17:40:00.999999999Z",
    "2026-12-06T17:40:00",
    "2026-12-06",
    "20261206T174000Z",
    "2026-W49-1",
    "2026-12-06t17:40:00z",
    " 2026-12-06T17:40:00Z ",
    "\uff12\uff10\uff12\uff16-\uff11\uff12-\uff10\uff16T17:40:00Z",  # fullwidth digits
    "+275760-09-13T00:00:00Z",
    "-0001-01-01T00:00:00Z",
    "yesterday",
    "",
    " ",
    "Z",
    "T" * 100000,
    1796578800,
    -1,
    10**400,
    1.5e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    None,
    [],
    ["2026-12-06T17:40:00Z"],
    {},
    {"time": "2026-12-06T17:40:00Z"},
)
ODD_OUTCOMES: Tuple[Any, ...] = ("passed", "failed", "incomplete", "skipped", "", None, 1, True, ["passed"], {})
ODD_WINDOWS: Tuple[Any, ...] = (0.0, 24.0, 1e308, float("inf"), float("nan"), -1.0, 1e12)


@dataclass
class Tally:
    cases: int = 0
    refusals: int = 0
    crashes: int = 0
    examples: List[str] = field(default_factory=list)


class Crash(Exception):
    """An entry point broke its contract (not an exception of its own)."""


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def sound_record(time: datetime = NOW - timedelta(days=1)) -> Dict[str, Any]:
    """A tray every required check passed a day before NOW, as node_verdict writes it."""
    entries = {name: tray_state.check_fields("passed", time, "r1", time + timedelta(hours=168)) for name in CHECKS}
    record = tray_state.tray_record(entries, None, CHECKS, NOW)[0]
    return record


def tray_node(name: str, annotation: Optional[str]) -> Dict[str, Any]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "7", "labels": {"nvidia.com/gpu.present": "true"}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    if annotation is not None:
        node["metadata"]["annotations"] = {KEY: annotation}
    return node


PLACES = (
    "time",
    "valid_until",
    "checks.time",
    "checks.valid_until",
    "checks.outcome",
    "skipped.time",
    "checks",
    "old format",
    "run time",
)


@dataclass
class Case:
    place: str
    value: Any
    annotation: Optional[str]
    run_time: Any
    window: Any

    def describe(self) -> str:
        shown = repr(self.value)
        return f"{self.place} = {shown[:80]}{'...' if len(shown) > 80 else ''} (window {self.window!r})"


def _dumps(record: Any) -> str:
    return json.dumps(record, default=str, allow_nan=True)


def make_case(rnd: random.Random) -> Case:
    place = rnd.choice(PLACES)
    value = rnd.choice(ODD_OUTCOMES if place == "checks.outcome" else ODD_VALUES)
    record = sound_record()
    check = rnd.choice(CHECKS)
    run_time: Any = RUN_TIME
    if place in ("time", "valid_until"):
        record[place] = value
    elif place.startswith("checks."):
        record["checks"][check][place.split(".", 1)[1]] = value
    elif place == "skipped.time":
        record["skipped"] = {"time": value, "run": "r2", "reason": "cordoned", "checks": [check]}
    elif place == "checks":
        record["checks"] = value
    elif place == "old format":
        record = {"verdict": "passed", "time": value, "summary": "passed", "run": "r0", "valid_until": value}
    else:
        run_time = value
    return Case(place, value, _dumps(record), run_time, rnd.choice(ODD_WINDOWS))


# --------------------------------------------------------------------------------------------
# The entry points
# --------------------------------------------------------------------------------------------


class FakeNodes:
    """Enough of kubernetes.core's K8SClient for node_verdict in check mode: list and get."""

    def __init__(self, nodes: Sequence[Dict[str, Any]]) -> None:
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}

    def resource(self, kind: str, api_version: str) -> str:
        return "nodes"

    def get(self, resource: Any, name: Optional[str] = None, **params: Any) -> Dict[str, Any]:
        if name is None:
            return {"metadata": {}, "items": [copy.deepcopy(n) for n in self.nodes.values()]}
        return copy.deepcopy(self.nodes[name])

    def patch(self, *args: Any, **kwargs: Any) -> None:
        raise Crash("check mode patched a node")


def _one_line(message: str) -> None:
    if not message.strip() or "\n" in message:
        raise Crash(f"refusal that is not one clean line: {message[:200]!r}")


def _plan_sound(plan: Optional[node_plan.NodePlan]) -> None:
    """What a plan writes is what the Nodes accept and what the readers read back."""
    if plan is None or plan.metadata_patch is None:
        return
    changes = plan.metadata_patch["metadata"]
    until = (changes.get("labels") or {}).get(tray_state.VALID_UNTIL_LABEL_KEY)
    if until is not None and not (until.isdigit() and len(until) <= 63):
        raise Crash(f"verified-until label {until!r} is not Unix seconds")
    written = (changes.get("annotations") or {}).get(KEY)
    if written is not None:
        state = tray_state.read_state({"metadata": {"annotations": {KEY: written}}})
        if state.problem or state.unreadable():
            raise Crash(f"the annotation written does not read back: {state.problem or state.unreadable()}")


def run_state_readers(case: Case) -> int:
    node = tray_node("gb200-r0-t0", case.annotation)
    state = tray_state.read_state(node)
    for check in (None, *CHECKS):
        reason = tray_state.due_reason(state, NOW, case.window, check)
        if not isinstance(reason, str) or "\n" in reason:
            raise Crash(f"due reason {reason!r}")
        tray_state.not_due_reason(state, check)
    tray_state.standing(state, CHECKS, NOW)
    return 0


def run_select_due(case: Case) -> int:
    states = {
        "gb200-r0-t0": tray_state.read_state(tray_node("gb200-r0-t0", case.annotation)),
        "gb200-r0-t1": tray_state.read_state(tray_node("gb200-r0-t1", _dumps(sound_record()))),
        "gb200-r0-t2": tray_state.read_state(tray_node("gb200-r0-t2", None)),
    }
    for check in (None, *CHECKS):
        due, partners, not_due = select_due(states, NOW, case.window, check=check)
        seen = sorted([d["node"] for d in due] + partners + [n["node"] for n in not_due])
        if seen != sorted(states):
            raise Crash(f"select_due lost or doubled a tray: {seen}")
    return 0


def _tray(outcome: str = "passed") -> tray_verdict.TrayVerdict:
    return tray_verdict.TrayVerdict(
        node="gb200-r0-t0", verdict=outcome, outcomes=tuple((name, outcome, "") for name in CHECKS)
    )


def run_planning(case: Case) -> int:
    settings = node_plan.Settings(taint_failed=True, condition=True)
    node = tray_node("gb200-r0-t0", case.annotation)
    refused = 0
    time_problems = tray_verdict.time_problems(case.run_time, settings.valid_hours)
    node_problems = node_plan.node_time_problems({"gb200-r0-t0": node}, ["gb200-r0-t0"], settings)
    for problem in time_problems + node_problems:
        _one_line(problem)
    if time_problems or node_problems:
        refused = 1
    else:  # what write_verdicts would plan after its checks passed
        for outcome in ("passed", "failed"):
            _plan_sound(node_plan.plan_node(node, _tray(outcome), case.run_time, settings, "r9", NOW))
        skipped = tray_verdict.TrayVerdict("gb200-r0-t0", "skipped", skip_reasons=("cordoned",))
        _plan_sound(node_plan.plan_node(node, skipped, case.run_time, settings, "r9", NOW))
    if not node_problems:
        _plan_sound(node_plan.plan_refresh(node, NOW + timedelta(days=30), settings))
    node_plan.plan_expired(node, NOW + timedelta(days=30), settings)
    return refused


def run_write_verdicts(case: Case) -> int:
    nodes = [tray_node("gb200-r0-t0", case.annotation), tray_node("gb200-r0-t1", _dumps(sound_record()))]
    trays = {
        name: {"verdict": "passed", "checks": {check: {"outcome": "passed"} for check in CHECKS}}
        for name in ("gb200-r0-t0", "gb200-r0-t1")
    }
    settings = node_plan.Settings(taint_failed=True, condition=True)
    refused = 0
    for state in ("present", "refreshed"):
        request = node_verdict.Request(trays, case.run_time, settings, check_mode=True, now=NOW, state=state)
        try:
            result = node_verdict.write_verdicts(FakeNodes(nodes), request, sleep=lambda _seconds: None)
        except node_verdict.NodeVerdictError as exc:
            _one_line(exc.message)
            refused = 1
            continue
        if not isinstance(result.get("nodes"), dict):
            raise Crash(f"result without nodes: {result}")
    return refused


ENTRY_POINTS: Dict[str, Callable[[Case], int]] = {
    "read_state, due_reason, standing": run_state_readers,
    "select_due": run_select_due,
    "node_verdict planning": run_planning,
    "write_verdicts (check mode)": run_write_verdicts,
}


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def run_fuzz(cases: int = 3000, seed: int = 0, show: int = 3) -> Dict[str, Tally]:
    rnd = random.Random(seed)
    tallies = {name: Tally() for name in ENTRY_POINTS}
    for _case in range(cases):
        case = make_case(rnd)
        for name, entry in ENTRY_POINTS.items():
            tally = tallies[name]
            tally.cases += 1
            try:
                tally.refusals += entry(case)
            except Exception as exc:
                tally.crashes += 1
                if len(tally.examples) < show:
                    where = traceback.extract_tb(exc.__traceback__)[-1]
                    tally.examples.append(
                        f"{case.describe()}: {type(exc).__name__}: {str(exc)[:200]} "
                        f"({Path(where.filename).name}:{where.lineno})"
                    )
    return tallies


def table(tallies: Dict[str, Tally]) -> str:
    width = max(len(name) for name in tallies)
    lines = [f"{'entry point':<{width}}  {'cases':>7}  {'refused':>7}  {'crashes':>7}"]
    for name, tally in tallies.items():
        lines.append(f"{name:<{width}}  {tally.cases:>7}  {tally.refusals:>7}  {tally.crashes:>7}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000, help="number of cases (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--show", type=int, default=3, help="crashes to print per entry point")
    args = parser.parse_args(argv)
    tallies = run_fuzz(args.cases, args.seed, args.show)
    print(table(tallies))
    for name, tally in tallies.items():
        for example in tally.examples:
            print(f"{name}: {example}")
    return 1 if any(tally.crashes for tally in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
