# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The state a tray carries on its Node between runs, per check, and whether the tray is due for a check.

A run that writes its verdicts to the Nodes (``node_verdict``) leaves on each tray it measured the annotation
``gpu-fabric.nvidia.com/verification``, compact JSON::

    {"verdict", "time", "run", "summary", ["valid_until"],
     "checks": {"<check>": {"outcome", "time", "run", "valid_until", ["summary"]}, ...},
     ["skipped": {"time", "run", "reason", "checks"}]}

Each entry of ``checks`` is what one check last said of the tray: ``passed`` or ``failed``, by which run, when, and
until when it holds (``time`` and ``valid_until`` RFC 3339, UTC). A run replaces the entries of the checks it
measured the tray with (never one newer than the run) and keeps the others. The tray's verdict follows from the
entries and the checks the site requires (``standing``):

- ``failed`` when a check's entry failed (a failure is evidence, required or not);
- ``passed`` only while every required check passed within its validity; ``valid_until`` is then the earliest
  expiry among the required checks;
- ``incomplete`` otherwise: a required check never passed on the tray, or its verdict expired.

The labels follow: ``gpu-fabric.nvidia.com/verified`` = the verdict, and ``gpu-fabric.nvidia.com/verified-until``
= ``valid_until`` in Unix seconds (node affinity compares integers) only while the tray passed. A tray the run
skipped for its own state (GPUs held by a job, cordoned, not ready, tainted) gains ``skipped`` naming the checks
that skipped it; their next entries remove it.

An annotation written before verdicts were per check (no ``checks``) reads as "no per-check state": its verdict
is shown as it was, and the tray is due for every check.

A tray is due for a check (``due_reason``) when the check never verified it, its entry failed, expired (or expires
within the window a run is given) or cannot be read, or the last run skipped the tray for that check. A run told to
verify only the due trays skips the others with ``not_due_reason``; such a skip, like every skip the run chose
(``rack_plan.is_selection_skip``), says nothing of the tray and is not written to it.

Every time read from a Node goes through ``read_time``: a value that is no RFC 3339 date-time, or one outside
1970-9998 (far past or future, or an offset that moves it out of range), is unreadable, never a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import FAILED, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import NOT_DUE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time, rfc3339

LABEL_KEY = "gpu-fabric.nvidia.com/verified"
VALID_UNTIL_LABEL_KEY = "gpu-fabric.nvidia.com/verified-until"
ANNOTATION_KEY = "gpu-fabric.nvidia.com/verification"

# One week: the weekly active checks on idle nodes that fleet operators schedule.
DEFAULT_VALID_HOURS = 168.0

# Not passed and not failed: a required check never passed on the tray, or its verdict expired.
INCOMPLETE = "incomplete"
TRAY_VERDICTS = (PASSED, FAILED, INCOMPLETE)
CHECK_OUTCOMES = (PASSED, FAILED)

# The checks a default verify.yml run measures (playbooks/verify.yml: verify_cliques, verify_imex_channel,
# verify_nvbandwidth; NCCL and the registry's other checks only when a site asks): the default of
# gpu_fabric_verify_required_checks (roles/gpu_fabric/defaults/main.yml, held equal by a unit test).
DEFAULT_REQUIRED_CHECKS: Tuple[str, ...] = ("cliques", "imex_channel", "nvbandwidth")

# The times the collection reads and writes: from the Unix epoch (a label value is unsigned Unix seconds) to
# before the year 9999 (what a verdict's validity is added to).
EARLIEST_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST_TIME = datetime(9999, 1, 1, tzinfo=timezone.utc)


def read_time(value: Any) -> Tuple[Optional[datetime], str]:
    """A time as the collection reads it: (the moment in UTC, '') or (None, why it cannot be read)."""
    moment = parse_time(value)
    if moment is None:
        return None, f"{value!r} is not an RFC 3339 date-time"
    try:
        moment = moment.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None, f"{value!r} is out of range"
    if not EARLIEST_TIME <= moment < LATEST_TIME:
        return None, f"{value!r} is out of range ({EARLIEST_TIME.year} to {LATEST_TIME.year - 1})"
    return moment, ""


def later(moment: datetime, hours: float) -> Optional[datetime]:
    """``moment`` plus ``hours``; None when that is past LATEST_TIME (or the hours are no number)."""
    try:
        result = moment + timedelta(hours=hours)
    except (OverflowError, ValueError, TypeError):
        return None
    return result if result < LATEST_TIME else None


@dataclass(frozen=True)
class CheckState:
    """What one check last said of the tray. ``problem``: why the entry cannot be read."""

    outcome: str = ""
    time: Optional[datetime] = None
    run: str = ""
    valid_until: Optional[datetime] = None
    summary: str = ""
    problem: str = ""


@dataclass(frozen=True)
class TrayState:
    """What a Node says of its tray. ``problem``: why the annotation could not be read; ``per_check``: the
    annotation holds per-check state (``checks``)."""

    verdict: str = ""
    time: Optional[datetime] = None
    run: str = ""
    valid_until: Optional[datetime] = None
    summary: str = ""
    skipped: bool = False  # the last run skipped the tray (the annotation holds ``skipped``)
    skipped_time: Optional[datetime] = None
    skipped_reason: str = ""
    skipped_checks: Tuple[str, ...] = ()  # empty: every check (a skip written before skips named checks)
    problem: str = ""
    per_check: bool = False
    checks: Mapping[str, CheckState] = field(default_factory=dict)
    skipped_problem: str = ""

    @property
    def verified(self) -> bool:
        return self.verdict in TRAY_VERDICTS

    def unreadable(self) -> List[str]:
        """The parts of a per-check annotation that cannot be read (the writer refuses to merge into them)."""
        found = [entry.problem for entry in self.checks.values() if entry.problem]
        return found + ([self.skipped_problem] if self.skipped_problem else [])

    def skip_applies(self, check: Optional[str]) -> bool:
        return self.skipped and (check is None or not self.skipped_checks or check in self.skipped_checks)


@dataclass(frozen=True)
class Standing:
    """A tray's verdict at a moment, from its check entries and the checks the site requires."""

    verdict: str
    summary: str
    valid_until: Optional[datetime] = None  # passed: the earliest expiry among the required checks
    expired_at: Optional[datetime] = None  # incomplete because a required check's verdict expired at this moment
    time: Optional[datetime] = None  # the newest entry's time


def epoch_label(moment: datetime) -> str:
    """The label value of a moment: Unix seconds (node affinity compares label values as integers)."""
    return str(int(moment.timestamp()))


def valid_until(time: datetime, hours: float) -> datetime:
    """The end of a verdict's validity: its time plus ``hours``."""
    return time + timedelta(hours=hours)


def annotation_fields(time: datetime, verdict: str, summary: str, run: str, hours: float) -> Dict[str, str]:
    """The fields of a tray-wide verdict (the annotation written before verdicts were per check)."""
    return {
        "time": rfc3339(time),
        "verdict": verdict,
        "summary": summary,
        "run": run,
        "valid_until": rfc3339(valid_until(time, hours)),
    }


def check_fields(outcome: str, time: datetime, run: str, until: datetime, summary: str = "") -> Dict[str, str]:
    """One entry of the annotation's ``checks``: what a check said of the tray, by which run, when, until when."""
    fields = {"outcome": outcome, "time": rfc3339(time), "run": run, "valid_until": rfc3339(until)}
    if summary:
        fields["summary"] = summary
    return fields


def check_state_fields(entry: CheckState) -> Dict[str, str]:
    """A readable entry as the annotation holds it."""
    return check_fields(entry.outcome, entry.time, entry.run, entry.valid_until, entry.summary)  # type: ignore[arg-type]


def _read_check(name: str, raw: Any) -> CheckState:
    if not isinstance(raw, dict):
        return CheckState(problem=f"checks.{name} is {type(raw).__name__}, not a JSON object")
    outcome = raw.get("outcome")
    if outcome not in CHECK_OUTCOMES:
        return CheckState(problem=f"checks.{name}.outcome is {outcome!r}, not one of {', '.join(CHECK_OUTCOMES)}")
    time, time_problem = read_time(raw.get("time"))
    until, until_problem = read_time(raw.get("valid_until"))
    problems = [
        f"checks.{name}.{key} {problem}"
        for key, problem in (("time", time_problem), ("valid_until", until_problem))
        if problem
    ]
    return CheckState(
        outcome=str(outcome),
        time=time,
        run=str(raw.get("run") or ""),
        valid_until=until,
        summary=str(raw.get("summary") or ""),
        problem="; ".join(problems),
    )


def _lenient_time(value: Any) -> Optional[datetime]:
    return read_time(value)[0]


def read_state(node: Mapping[str, Any], annotation_key: str = ANNOTATION_KEY) -> TrayState:
    """The tray's state from its Node; an annotation that is not ours to read gives ``problem``, a check entry
    that cannot be read its ``CheckState.problem``."""
    metadata = node.get("metadata") if isinstance(node, Mapping) else None
    annotations = (metadata.get("annotations") if isinstance(metadata, Mapping) else None) or {}
    raw = annotations.get(annotation_key) if isinstance(annotations, Mapping) else None
    if raw is None:
        return TrayState()
    try:
        data = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return TrayState(problem=f"annotation {annotation_key} is not JSON")
    if not isinstance(data, dict):
        return TrayState(problem=f"annotation {annotation_key} is not a JSON object")
    verdict = data.get("verdict")
    if verdict not in TRAY_VERDICTS:
        return TrayState(problem=f"annotation {annotation_key} has verdict {verdict!r}")
    per_check = "checks" in data
    checks: Dict[str, CheckState] = {}
    if per_check:
        if not isinstance(data["checks"], dict):
            return TrayState(problem=f"annotation {annotation_key} has checks that are not a JSON object")
        checks = {str(name): _read_check(str(name), entry) for name, entry in data["checks"].items()}
    skipped = data.get("skipped") if isinstance(data.get("skipped"), dict) else {}
    skipped_time, skipped_problem = read_time(skipped["time"]) if skipped.get("time") is not None else (None, "")
    skipped_checks = skipped.get("checks") if isinstance(skipped.get("checks"), list) else []
    return TrayState(
        verdict=verdict,
        time=_lenient_time(data.get("time")),
        run=str(data.get("run") or ""),
        valid_until=_lenient_time(data.get("valid_until")),
        summary=str(data.get("summary") or ""),
        skipped=bool(skipped),
        skipped_time=skipped_time,
        skipped_reason=str(skipped.get("reason") or ""),
        skipped_checks=tuple(str(check) for check in skipped_checks),
        problem="",
        per_check=per_check,
        checks=checks,
        skipped_problem=f"skipped.time {skipped_problem}" if skipped_problem else "",
    )


def standing(state: TrayState, required: Sequence[str], now: datetime) -> Standing:
    """The tray's verdict at ``now``: ``failed`` when a check's entry failed, ``passed`` while every required check
    passed within its validity (until the earliest of their expiries), else ``incomplete``.

    An annotation without per-check state keeps the verdict it holds until its ``valid_until`` (then it is
    ``incomplete``, expired): it is shown as it was written, while every check is due on it.
    """
    if not state.per_check:
        if state.verdict == PASSED and (state.valid_until is None or state.valid_until <= now):
            return Standing(INCOMPLETE, _expired_words(state.valid_until), None, state.valid_until, state.time)
        return Standing(state.verdict or INCOMPLETE, state.summary, state.valid_until, None, state.time)
    entries = state.checks
    newest = max((entry.time for entry in entries.values() if entry.time), default=None)
    failed = sorted(name for name, entry in entries.items() if entry.outcome == FAILED and not entry.problem)
    if failed:
        words = [
            f"{name} failed: {entries[name].summary}" if entries[name].summary else f"{name} failed" for name in failed
        ]
        return Standing(FAILED, "; ".join(words), None, None, newest)
    wanted = list(dict.fromkeys(required)) or sorted(name for name, entry in entries.items() if not entry.problem)
    missing: List[str] = []
    expired: List[Tuple[str, datetime]] = []
    for name in wanted:
        entry = entries.get(name)
        if entry is None or entry.problem or entry.outcome != PASSED or entry.valid_until is None:
            missing.append(
                f"{name} never verified the tray"
                if entry is None or not entry.problem
                else f"{name} unreadable ({entry.problem})"
            )
        elif entry.valid_until <= now:
            expired.append((name, entry.valid_until))
    if not wanted:
        return Standing(INCOMPLETE, "incomplete: no check verified the tray", None, None, newest)
    if missing or expired:
        words = missing + [f"{name} expired at {rfc3339(until)}" for name, until in expired]
        first_expiry = min((entry[1] for entry in expired), default=None)
        return Standing(INCOMPLETE, "incomplete: " + "; ".join(words), None, None if missing else first_expiry, newest)
    until = min(entries[name].valid_until for name in wanted)  # type: ignore[type-var]
    passed = sorted(name for name, entry in entries.items() if entry.outcome == PASSED and not entry.problem)
    return Standing(PASSED, f"passed {', '.join(passed)}", until, None, newest)


def _expired_words(until: Optional[datetime]) -> str:
    return f"the verdict expired at {rfc3339(until)}" if until else "the verdict has no expiry"


def _horizon(now: datetime, within_hours: float) -> datetime:
    """``now`` plus the window; the end of time when that cannot be counted (every verdict expires within it)."""
    return later(now, within_hours) or LATEST_TIME


def due_reason(state: TrayState, now: datetime, within_hours: float = 0.0, check: Optional[str] = None) -> str:
    """Why the tray is due for ``check`` at ``now`` (or within ``within_hours`` of it); '' when it is not.

    Without ``check``: why the tray as a whole is due (its verdict is not a pass that holds).
    """
    if state.problem:
        return f"unreadable verdict ({state.problem})"
    if not state.verified:
        return "never verified"
    if check is not None and not state.per_check:
        return "no per-check state (a verdict written before verdicts were per check)"
    entry = state.checks.get(check) if check is not None else None
    if check is not None and entry is None:
        return f"never verified by {check}"
    if entry is not None and entry.problem:
        return f"unreadable {check} state ({entry.problem})"
    time = entry.time if entry is not None else state.time
    # a skip older than the verdict was left by a writer that did not remove it: the newer verdict counts
    if state.skip_applies(check) and not (state.skipped_time and time and state.skipped_time < time):
        when = f" at {rfc3339(state.skipped_time)}" if state.skipped_time else ""
        return f"skipped{when}: {state.skipped_reason or 'no reason given'}"
    outcome = entry.outcome if entry is not None else state.verdict
    until = entry.valid_until if entry is not None else state.valid_until
    if outcome == FAILED:
        return f"failed at {rfc3339(time)}" if time else "failed"
    if outcome == INCOMPLETE:
        return state.summary or "incomplete"
    if until is None:
        return "verdict without an expiry (written before verdicts expired)"
    if until <= now:
        return f"expired at {rfc3339(until)}"
    if until <= _horizon(now, within_hours):
        return f"expires at {rfc3339(until)}, within {within_hours:g} h"
    return ""


def not_due_reason(state: TrayState, check: Optional[str] = None) -> str:
    """The skip reason of a tray an only-due run leaves: ``not due (nvbandwidth passed until 2026-12-13T17:40:00Z)``
    (without ``check``: ``not due (passed until ...)``)."""
    entry = state.checks.get(check) if check is not None else None
    outcome = f"{check} {entry.outcome}" if entry is not None else state.verdict
    moment = entry.valid_until if entry is not None else state.valid_until
    until = rfc3339(moment) if moment else "no expiry"
    return f"{NOT_DUE} ({outcome} until {until})"


def tray_record(
    entries: Mapping[str, Mapping[str, str]],
    skipped: Optional[Mapping[str, Any]],
    required: Sequence[str],
    now: datetime,
) -> Tuple[Dict[str, Any], Standing]:
    """The annotation's record of a tray with these check entries (``check_fields``) and skip mark at ``now``, and
    the tray's standing: ``verdict``, ``time`` and ``run`` of the newest entry, ``summary``, ``valid_until`` (while
    it passed), ``checks`` by name, ``skipped``."""
    checks = {name: dict(entries[name]) for name in sorted(entries)}
    state = TrayState(
        verdict=INCOMPLETE,
        per_check=True,
        checks={name: _read_check(name, entry) for name, entry in checks.items()},
    )
    stand = standing(state, required, now)
    newest = max(
        (name for name, entry in state.checks.items() if entry.time),
        key=lambda name: (state.checks[name].time, name),
        default=None,
    )
    record: Dict[str, Any] = {
        "verdict": stand.verdict,
        "time": checks[newest]["time"] if newest else "",
        "run": checks[newest].get("run", "") if newest else "",
        "summary": stand.summary,
    }
    if stand.valid_until is not None:
        record["valid_until"] = rfc3339(stand.valid_until)
    record["checks"] = checks
    if skipped:
        record["skipped"] = dict(skipped)
    return record, stand
