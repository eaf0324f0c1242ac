# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verdict a tray carries on its Node between runs, and whether the tray is due for a new one.

A run that writes its verdicts to the Nodes (``node_verdict``) leaves on each tray it verified:

- the label ``gpu-fabric.nvidia.com/verified`` = ``passed`` or ``failed``;
- the label ``gpu-fabric.nvidia.com/verified-until`` = the end of the verdict's validity in Unix seconds, a
  number, so that a workload's node affinity can ask for ``Gt <now>``;
- the annotation ``gpu-fabric.nvidia.com/verification``, compact JSON:
  ``{"time", "verdict", "summary", "run", "valid_until"}`` (``time`` and ``valid_until`` RFC 3339, UTC);
  a tray the run skipped for its own state (GPUs held by a job, cordoned, not ready, tainted) keeps the
  verdict it had and gains ``"skipped": {"time", "run", "reason"}``, which the next verdict removes.

A tray is due (``due_reason``) when it was never verified, its verdict failed, the verdict expired (or expires
within the window a run is given), its annotation cannot be read, or the last run skipped it. A run told to
verify only the due trays skips the others with ``not_due_reason``; such a skip, like every skip the run
chose (``is_selection_skip``), says nothing of the tray and is not written to it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, Mapping, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time, rfc3339

LABEL_KEY = "gpu-fabric.nvidia.com/verified"
VALID_UNTIL_LABEL_KEY = "gpu-fabric.nvidia.com/verified-until"
ANNOTATION_KEY = "gpu-fabric.nvidia.com/verification"

# One week: the weekly active checks on idle nodes that fleet operators schedule.
DEFAULT_VALID_HOURS = 168.0

PASSED = "passed"
FAILED = "failed"

# The skips a run chooses (what the site narrowed the run to, or a tray that is not due): not the tray's state.
NOT_DUE = "not due"
SELECTION_SKIP_PREFIXES = ("not selected", NOT_DUE)


@dataclass(frozen=True)
class TrayState:
    """What a Node says of its tray's last verdict. ``problem``: why the annotation could not be read."""

    verdict: str = ""
    time: Optional[datetime] = None
    run: str = ""
    valid_until: Optional[datetime] = None
    summary: str = ""
    skipped: bool = False  # the last run skipped the tray (the annotation holds ``skipped``)
    skipped_time: Optional[datetime] = None
    skipped_reason: str = ""
    problem: str = ""

    @property
    def verified(self) -> bool:
        return self.verdict in (PASSED, FAILED)


def epoch_label(moment: datetime) -> str:
    """The label value of a moment: Unix seconds (node affinity compares label values as integers)."""
    return str(int(moment.timestamp()))


def valid_until(time: datetime, hours: float) -> datetime:
    """The end of a verdict's validity: its time plus ``hours``."""
    return time + timedelta(hours=hours)


def annotation_fields(time: datetime, verdict: str, summary: str, run: str, hours: float) -> Dict[str, str]:
    """The annotation's fields for a verdict written now (the caller serialises them)."""
    return {
        "time": rfc3339(time),
        "verdict": verdict,
        "summary": summary,
        "run": run,
        "valid_until": rfc3339(valid_until(time, hours)),
    }


def read_state(node: Mapping[str, Any], annotation_key: str = ANNOTATION_KEY) -> TrayState:
    """The tray's state from its Node; an annotation that is not ours to read gives ``problem``."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(annotation_key)
    if raw is None:
        return TrayState()
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return TrayState(problem=f"annotation {annotation_key} is not JSON")
    if not isinstance(data, dict):
        return TrayState(problem=f"annotation {annotation_key} is not a JSON object")
    verdict = data.get("verdict")
    if verdict not in (PASSED, FAILED):
        return TrayState(problem=f"annotation {annotation_key} has verdict {verdict!r}")
    skipped = data.get("skipped") if isinstance(data.get("skipped"), dict) else {}
    return TrayState(
        verdict=verdict,
        time=parse_time(data.get("time")),
        run=str(data.get("run") or ""),
        valid_until=parse_time(data.get("valid_until")),
        summary=str(data.get("summary") or ""),
        skipped=bool(skipped),
        skipped_time=parse_time(skipped.get("time")),
        skipped_reason=str(skipped.get("reason") or ""),
    )


def due_reason(state: TrayState, now: datetime, within_hours: float = 0.0) -> str:
    """Why the tray is due for a verification at ``now`` (or within ``within_hours`` of it); '' when it is not."""
    if state.problem:
        return f"unreadable verdict ({state.problem})"
    if not state.verified:
        return "never verified"
    # a skip older than the verdict was left by a writer that did not remove it: the newer verdict counts
    if state.skipped and not (state.skipped_time and state.time and state.skipped_time < state.time):
        when = f" at {rfc3339(state.skipped_time)}" if state.skipped_time else ""
        return f"skipped{when}: {state.skipped_reason or 'no reason given'}"
    if state.verdict == FAILED:
        return f"failed at {rfc3339(state.time)}" if state.time else "failed"
    if state.valid_until is None:
        return "verdict without an expiry (written before verdicts expired)"
    if state.valid_until <= now:
        return f"expired at {rfc3339(state.valid_until)}"
    if state.valid_until <= now + timedelta(hours=within_hours):
        return f"expires at {rfc3339(state.valid_until)}, within {within_hours:g} h"
    return ""


def not_due_reason(state: TrayState) -> str:
    """The skip reason of a tray an only-due run leaves: ``not due (passed until 2026-12-13T17:40:00Z)``."""
    until = rfc3339(state.valid_until) if state.valid_until else "no expiry"
    return f"{NOT_DUE} ({state.verdict} until {until})"


def is_not_due(reason: str) -> bool:
    """Whether a plan's skip reason is ``not_due_reason``'s."""
    return str(reason).startswith(NOT_DUE)


def is_selection_skip(reason: str) -> bool:
    """Whether a plan's skip reason is the run's choice (narrowed, not due) rather than the tray's state."""
    return str(reason).startswith(SELECTION_SKIP_PREFIXES)
