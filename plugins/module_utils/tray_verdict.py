# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The trays of a verification run as ``node_verdict`` takes them in, and their outcomes merged into a tray's state.

The input is the report's per-tray view (``report_model.tray_verdicts``): each tray's verdict, summary and per
check what the run said of it (``checks``; without it ``checks_failed`` and ``checks_passed``). ``parse_trays``
makes records of them and names every entry that cannot be used; ``time_problems`` refuses a run time that cannot
be written. The run's outcomes are merged into the tray's per-check entries (``tray_state``'s format), forward only:
an entry newer than the run is kept (``merged_entries``); a skip for the tray's own state (a reason that is not
``rack_plan.is_selection_skip``) becomes the ``skipped`` mark (``merged_skip``). Pure: no Kubernetes client.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import FAILED, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import is_selection_skip
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import rfc3339
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    DEFAULT_VALID_HOURS,
    TrayState,
    check_fields,
    check_state_fields,
    later,
    read_time,
)

SKIPPED = "skipped"
VERDICTS = (PASSED, FAILED, SKIPPED)
WRITTEN_VERDICTS = (PASSED, FAILED)

SUMMARY_LIMIT = 500
# a check's outcome in the report's per-tray ``checks`` that skipped the tray
CHECK_SKIPPED = "skipped"
CHECK_SUMMARY_LIMIT = 300

# RFC 3339 date-time: 2026-12-01T10:15:00Z, 2026-12-01T10:15:00.123456+01:00
_RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class TrayVerdict:
    """One tray's outcome of a verification run, as the caller hands it in."""

    node: str
    verdict: str
    summary: str = ""
    rack: str = ""
    checks_failed: Tuple[str, ...] = ()
    skip_reasons: Tuple[str, ...] = ()
    # (check, outcome, summary) of every check that passed or failed the tray in this run
    outcomes: Tuple[Tuple[str, str, str], ...] = ()
    # the checks that skipped the tray for its own state (empty with own_skip_reason: every check)
    skipped_checks: Tuple[str, ...] = ()

    @property
    def own_skip_reason(self) -> str:
        """The reasons of a skip for the tray's own state (busy, cordoned, ...), joined; '' for a skip the run
        chose (not selected, not due) or none."""
        return "; ".join(reason for reason in self.skip_reasons if not is_selection_skip(reason))


def time_problems(value: Any, hours: float = DEFAULT_VALID_HOURS) -> List[str]:
    """Why the run's time cannot be written (strict RFC 3339, 1970 to 9998, its validity before 9999)."""
    expected = "expected an RFC 3339 date-time such as 2026-12-01T10:15:00Z (the run's finish)"
    if not isinstance(value, str) or not _RFC3339_RE.match(value):
        return [f"time is {value!r}; {expected}"]
    moment, problem = read_time(value)
    if moment is None:
        return [f"time {problem}; {expected}"]
    if later(moment, hours) is None:
        return [f"time {value!r} plus valid_hours {hours:g} is past the year 9998; {expected}"]
    return []


def _names(value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value or []] if isinstance(value, (list, tuple)) else []


def _outcomes(entry: Mapping[str, Any]) -> Tuple[List[Tuple[str, str, str]], List[str], List[str]]:
    """(check, outcome, summary) of the checks that passed or failed the tray, the checks that skipped it, and the
    problems: from ``checks`` (the report's per-check view), else from ``checks_failed`` and ``checks_passed``."""
    checks = entry.get("checks")
    outcomes: List[Tuple[str, str, str]] = []
    skipped: List[str] = []
    problems: List[str] = []
    if isinstance(checks, Mapping):
        for name in sorted(checks, key=str):
            view = checks[name] if isinstance(checks[name], Mapping) else {"outcome": checks[name]}
            outcome = view.get("outcome")
            if outcome in (PASSED, FAILED):
                summary = "" if outcome == PASSED else one_line(view.get("summary") or "", CHECK_SUMMARY_LIMIT, "...")
                outcomes.append((str(name), str(outcome), summary))
            elif outcome == CHECK_SKIPPED:
                if not is_selection_skip(str(view.get("reason") or "")):
                    skipped.append(str(name))
            else:
                problems.append(f"checks[{name!r}].outcome is {outcome!r}; expected passed, failed or skipped")
        return outcomes, skipped, problems
    if checks is not None:
        problems.append(f"checks is {type(checks).__name__}; expected a dict of check -> outcome")
    failed = _names(entry.get("checks_failed"))
    # without the per-check view, each failed check carries the tray's summary (which names them all)
    summary = one_line(entry.get("summary") or "", CHECK_SUMMARY_LIMIT, "...")
    outcomes += [(name, FAILED, summary) for name in failed]
    outcomes += [(name, PASSED, "") for name in _names(entry.get("checks_passed")) if name not in failed]
    return sorted(outcomes), skipped, problems


def parse_trays(trays: Mapping[str, Any]) -> Tuple[List[TrayVerdict], List[str]]:
    """The trays as records, sorted by node name, and one problem line per entry that cannot be used."""
    records: List[TrayVerdict] = []
    problems: List[str] = []
    for node in sorted(trays):
        entry = trays[node]
        if not isinstance(entry, Mapping):
            problems.append(f"trays[{node!r}] is {type(entry).__name__}; expected a dict with verdict and summary")
            continue
        verdict = entry.get("verdict")
        if verdict not in VERDICTS:
            problems.append(f"trays[{node!r}].verdict is {verdict!r}; expected one of {', '.join(VERDICTS)}")
            continue
        outcomes, skipped_checks, entry_problems = _outcomes(entry)
        problems += [f"trays[{node!r}].{problem}" for problem in entry_problems]
        if verdict in WRITTEN_VERDICTS and not outcomes:
            problems.append(
                f"trays[{node!r}] is {verdict} but names no check that measured it; give its checks "
                "(the report's per-tray checks, or checks_passed / checks_failed)"
            )
            continue
        records.append(
            TrayVerdict(
                node=str(node),
                verdict=str(verdict),
                summary="" if entry.get("summary") is None else str(entry.get("summary")),
                rack="" if entry.get("rack") is None else str(entry.get("rack")),
                checks_failed=tuple(_names(entry.get("checks_failed"))),
                skip_reasons=tuple(_names(entry.get("skip_reasons"))),
                outcomes=tuple(outcomes),
                skipped_checks=tuple(skipped_checks),
            )
        )
    return records, problems


def merged_entries(
    current: TrayState, tray: TrayVerdict, moment: datetime, run: str, hours: float
) -> Tuple[Dict[str, Dict[str, str]], Dict[str, str]]:
    """The tray's check entries after this run (finished at ``moment``): the run's outcomes replace the entries of
    their checks unless the Node holds a newer one (forward only: check -> that newer time, the second value); every
    other entry is kept. An annotation without per-check state has none to keep."""
    entries = {name: check_state_fields(entry) for name, entry in current.checks.items() if not entry.problem}
    kept: Dict[str, str] = {}
    until = later(moment, hours)
    for name, outcome, summary in tray.outcomes:
        held = current.checks.get(name)
        if held is not None and held.time is not None and held.time > moment:
            kept[name] = entries[name]["time"]
            continue
        entries[name] = check_fields(outcome, moment, run, until, summary)  # type: ignore[arg-type]
    return entries, kept


def merged_skip(
    current: TrayState, held: Any, tray: TrayVerdict, moment: datetime, run: str, written: Sequence[str]
) -> Optional[Dict[str, Any]]:
    """The ``skipped`` mark after this run: the run's own skip of the tray (unless the Node holds a newer verdict),
    else the mark the Node holds (``held``) unless this run wrote an entry for each check it names."""
    reason = tray.own_skip_reason
    if reason and not (current.time and current.time > moment):
        mark: Dict[str, Any] = {"time": rfc3339(moment), "run": run, "reason": one_line(reason, SUMMARY_LIMIT, "...")}
        return dict(mark, checks=list(tray.skipped_checks)) if tray.skipped_checks else mark
    if not current.skipped or not isinstance(held, dict):
        return None
    named = current.skipped_checks
    if (named and set(named) <= set(written)) or (not named and written):
        return None
    return dict(held)
