# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The record of one (check, rack): its type, written here and read as this type everywhere.

A check writes one record per rack (``fabric_verify``); the history keeps them, the report, the node
verdict and the fleet rules read them. Every field is listed once, in ``Record``; a record is made by
``record_for`` and completed by ``completed``; a rule that fails a finished record makes a new one with
``failed_by``, so that the outcome, the verdict and ``passed`` never disagree.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, TypedDict

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import outcomes
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import CheckView, valid_view
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import MIN_TRAYS, RackPlan, is_not_due
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import by_name, natural_key, one_line, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

# the outcomes under the names the writers use (their one home: ``outcomes``)
OUTCOME_PASSED = outcomes.PASSED
OUTCOME_FAILED = outcomes.FAILED
OUTCOME_INCOMPLETE = outcomes.INCOMPLETE
OUTCOME_ERROR = outcomes.ERROR
OUTCOMES = outcomes.OUTCOMES
verdict_of = outcomes.verdict_of

# The skip reasons of a rack whose check a tenant's pod preempted (tray_state: not the run's choice, so both stay due).
PREEMPTED = "preempted by a higher-priority pod"
PREEMPTED_ELSEWHERE = "not measured: the check was preempted on another tray"


class Record(TypedDict, total=False):
    """One (check, rack) as written to ``<records dir>/<check>/<rack>.json`` and kept in the history."""

    check: str
    rack: str
    clique: str
    run_id: str
    outcome: str  # passed, failed, incomplete or error
    verdict: str  # what a pipeline acts on: passed, failed (the rack) or error (the check could not run)
    passed: bool
    summary: str  # one line
    nodes: List[str]  # the trays measured
    failed_nodes: List[str]
    node_problems: Dict[str, str]  # tray -> one line
    # expected, found, skipped [{node, reason}]; an only-due run's also due [{node, reason}] and partners [node]
    trays: Dict[str, Any]
    details: Dict[str, Any]  # the check's own: measurements, violations, timings of its steps
    view: CheckView  # what the check shows of it, in the one shape every reader renders (check_view)
    started: str  # RFC 3339, UTC
    finished: str
    cluster: Dict[str, str]  # server_version, host, openshift
    objects_left: Optional[int]  # None: they could not be counted
    objects_uncounted: List[str]  # kinds that could not be counted
    cleanup_error: str
    timings: Dict[str, float]  # step -> seconds


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_for(
    check: str,
    plan: RackPlan,
    outcome: str,
    summary: str,
    details: Mapping[str, Any],
    failed_nodes: Sequence[str] = (),
    node_problems: Optional[Mapping[str, str]] = None,
    run_id: str = "",
    allow_incomplete: bool = False,
    preempted: Sequence[str] = (),
) -> Record:
    """The record of one (check, rack) of ``plan``; ``passed`` follows the outcome
    (and allow_incomplete), ``verdict`` is what a pipeline acts on: passed, failed (the racks have a problem) or
    error (the check could not run).

    ``preempted``: the trays where a tenant's pod preempted the check's (outcome ``incomplete``). The check measured
    none of the rack's trays to the end, so each is skipped (the preempted ones for that reason, which keeps them
    due) and the verdict, unless incomplete racks are allowed, is ``error``: it says nothing of the fabric.
    """
    passed = outcome == OUTCOME_PASSED or (outcome == OUTCOME_INCOMPLETE and allow_incomplete)
    verdict = verdict_of(outcome, passed)
    nodes, trays = list(plan.nodes), plan.trays()
    if preempted and outcome == OUTCOME_INCOMPLETE:
        verdict = OUTCOME_PASSED if passed else OUTCOME_ERROR
        trays["skipped"] = sorted(
            trays["skipped"]
            + [
                {"node": node, "reason": PREEMPTED if node in preempted else PREEMPTED_ELSEWHERE} for node in plan.nodes
            ],
            key=lambda s: natural_key(s["node"]),
        )
        nodes = []
    return Record(
        check=check,
        rack=plan.name,
        clique=plan.clique,
        run_id=run_id,
        outcome=outcome,
        verdict=verdict,
        passed=passed,
        summary=one_line(summary),
        nodes=nodes,
        failed_nodes=by_name(failed_nodes),
        node_problems={k: one_line((node_problems or {})[k]) for k in by_name(node_problems or {})},
        trays=trays,
        details=dict(details),
    )


# The record of a check that did not get as far as the racks (no GPU node, or no answer from the API server).
FLEET = RackPlan(name="fleet", cliques=[], found=[], nodes=[], skipped=[], gpus_per_tray=0, gpu_product="")


def error_records(check: str, plans: Sequence[RackPlan], message: str, run_id: str) -> List[Record]:
    """An ``error`` record (the check could not run; nothing said of the fabric) for each of ``plans``."""
    return [
        record_for(
            check,
            plan,
            OUTCOME_ERROR,
            message if plan is FLEET else f"rack {plan.name}: {message}",
            {"violations": [message]},
            run_id=run_id,
        )
        for plan in plans
    ]


def completed(
    record: Record,
    started: str,
    finished: str,
    cluster: Mapping[str, str],
    objects_left: Optional[int] = 0,
    objects_uncounted: Sequence[str] = (),
    cleanup_error: str = "",
    timings: Optional[Mapping[str, float]] = None,
) -> Record:
    """``record`` with the facts of its run: when, where, and what its cleanup left (fields already set stay)."""
    facts = Record(
        started=started,
        finished=finished,
        cluster=dict(cluster),
        objects_left=objects_left,
        objects_uncounted=list(objects_uncounted),
        cleanup_error=cleanup_error,
    )
    if timings is not None:
        facts["timings"] = dict(timings)
    done = Record(**facts)  # type: ignore[typeddict-item]
    done.update(record)
    return done


def with_view(record: Record, view: CheckView) -> Record:
    """A copy of ``record`` carrying ``view``, the check's view of it; a view of the wrong shape raises ValueError."""
    viewed = Record(**record)  # type: ignore[typeddict-item]
    viewed["view"] = valid_view(view)
    return viewed


def failed_by(record: Record, violation: str, **details: Any) -> Record:
    """A copy of ``record`` failed by a rule applied after the check (one line): the violation is added to its
    summary and violations; ``details`` are merged into its details."""
    text = one_line(violation)
    new_details = dict(record.get("details") or {}, **details)
    new_details["violations"] = [*(new_details.get("violations") or []), text]
    failed = Record(**record)  # type: ignore[typeddict-item]
    failed.update(
        details=new_details,
        summary=f"{record.get('summary', '')}; {text}",
        outcome=OUTCOME_FAILED,
        passed=False,
        verdict=verdict_of(OUTCOME_FAILED, False),
    )
    return failed


def incomplete_summary(check: str, plan: RackPlan) -> str:
    skipped = "; ".join(f"{s['node']}: {s['reason']}" for s in plan.skipped[:4])
    more = f" and {len(plan.skipped) - 4} more" if len(plan.skipped) > 4 else ""
    return (
        f"rack {plan.name}: {plural(len(plan.nodes), 'usable tray')} of {len(plan.found)}; the {check} check needs at "
        f"least {MIN_TRAYS}"
        + (f" (skipped {skipped}{more})" if skipped else "")
        + "; free or uncordon trays, or set gpu_fabric_verify_allow_incomplete: true"
    )


def incomplete_record(check: str, plan: RackPlan, run_id: str, allow_incomplete: bool) -> Record:
    """The record of a rack the check did not run on: it measured no tray."""
    record = record_for(
        check,
        plan,
        OUTCOME_INCOMPLETE,
        incomplete_summary(check, plan),
        {"violations": [incomplete_summary(check, plan)]},
        run_id=run_id,
        allow_incomplete=allow_incomplete,
    )
    # the usable trays were not measured either: the run did not cover them
    reason = f"rack incomplete: the {check} check needs {MIN_TRAYS} usable trays"
    record["trays"]["skipped"] = sorted(
        record["trays"]["skipped"] + [{"node": node, "reason": reason} for node in plan.nodes],
        key=lambda s: natural_key(s["node"]),
    )
    record["nodes"] = []
    return record


def nothing_due_summary(plan: RackPlan) -> str:
    """``rack rack2: nothing due (4 of 4 trays not due)``, naming the trays skipped for their state."""
    not_due = [s for s in plan.skipped if is_not_due(s["reason"])]
    others = [s for s in plan.skipped if not is_not_due(s["reason"])]
    text = f"rack {plan.name}: nothing due ({len(not_due)} of {plural(len(plan.found), 'tray')} not due"
    if others:
        text += "; skipped " + "; ".join(f"{s['node']}: {s['reason']}" for s in others[:3])
        text += f" and {len(others) - 3} more" if len(others) > 3 else ""
    return text + ")"


def nothing_due_record(check: str, plan: RackPlan, run_id: str) -> Record:
    """The record of a rack where an only-due run found no usable due tray: the check did not run there, which
    fails nothing (the trays' verdicts still hold); every tray is skipped with its reason."""
    summary = nothing_due_summary(plan)
    record = record_for(check, plan, OUTCOME_PASSED, summary, {"nothing_due": True, "violations": []}, run_id=run_id)
    record["nodes"] = []
    return record


def superseded(old: Optional[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a record of a rack this run did not cover is an earlier run's, to be removed from the records.

    Only when that run had finished before this one started (the earliest ``started`` of ``records``): a run
    that overlaps this one (two runs started at once, each on its own racks) keeps its record, or its report
    would lose its own verdict. A record whose times cannot be read is an earlier run's.
    """
    started = [t for t in (parse_time(r.get("started")) for r in records) if t is not None]
    finished = parse_time((old or {}).get("finished"))
    if not started or finished is None:
        return True
    return finished < min(started)
