# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write the verification verdict back onto the Nodes: labels, an annotation, optionally a taint and a condition.

The format is ``tray_state``'s: each tray keeps per check its outcome, run, time and ``valid_until`` (the annotation's
``checks``). The run's outcomes (the report's per-tray ``checks``) are merged in, forward only: an entry newer than the
run is kept (``kept_newer`` in the node's result). The tray's verdict is ``tray_state.standing`` of the merged entries
and the site's ``required_checks`` at the moment the nodes are read: ``<label_key>=passed|failed|incomplete``, and
``<valid_until_label_key>=<Unix seconds>`` only while it passed. A ``skipped`` tray keeps its labels; when the run
skipped it for its own state (a reason that is not ``tray_state.is_selection_skip``) and it carries a verdict, the
annotation keeps its entries and gains ``"skipped": {"time", "run", "reason", "checks"}`` (a tray never verified is
due anyway and is left unwritten). With ``taint_failed`` a failed tray also gets ``<taint_key>=true:NoSchedule`` and
a tray that passed loses that taint; every other taint keeps its place. The run's time and every time read from the
Nodes it merges into are checked before the first patch (``time_problems``, ``node_time_problems``): nothing is
patched when one cannot be read. ``state=refreshed`` (``plan_refresh``) writes what the entries give now, no check
running: an expiry shows between runs.

With ``condition`` each tray's ``status.conditions`` carries one condition of the collection's own type
(``GPUFabricVerified``): ``True``/``Passed``, ``False``/``CheckFailed`` (the message names the failing checks
and what they blamed), ``Unknown``/``ChecksMissing`` while a required check never verified the tray, or
``Unknown``/``VerdictExpired`` (also for every node whose verdict expired and that this run did not verify).
``lastHeartbeatTime`` is the newest entry's time (the expiry for ``VerdictExpired``), ``lastTransitionTime``
changes only when the status does: the same verdict written again changes nothing.

The patch for a node is computed first, from the Node as read (``plan_node``, ``plan_expired``, ``plan_refresh``,
``plan_removal``: pure functions), and sent only when it changes something:

- labels and annotations: a strategic merge patch naming only the keys that change;
- taints: the whole new ``spec.taints`` list in a JSON merge patch that carries the
  ``metadata.resourceVersion`` it was computed from, so a concurrent writer (the node lifecycle
  controller, an operator) makes the API server answer 409 Conflict instead of losing its taint;
  on a conflict the node is read again and the patch recomputed;
- the condition: a strategic merge patch of the ``status`` subresource naming only our condition
  (``conditions`` merge by ``type``, so the kubelet's conditions and a node problem detector's are kept);
  removed with ``$patch: delete`` on that type.
"""

from __future__ import annotations

import json
import re
import time as _time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    NotFoundError,
    Urllib3Error,
    api_error_text,
    api_retry,
    is_transient,
    list_all,
    resource_api,
    to_dict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import FAILED, PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import Backoff
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import rfc3339
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    ANNOTATION_KEY,
    DEFAULT_REQUIRED_CHECKS,
    DEFAULT_VALID_HOURS,
    LABEL_KEY,
    VALID_UNTIL_LABEL_KEY,
    Standing,
    TrayState,
    check_fields,
    check_state_fields,
    epoch_label,
    is_selection_skip,
    later,
    read_state,
    read_time,
    standing,
    tray_record,
)

try:
    from kubernetes.dynamic.exceptions import ConflictError
except ImportError:  # reported by AnsibleK8SModule's requires("kubernetes")
    ConflictError = DynamicApiError  # type: ignore[assignment,misc]


DEFAULT_LABEL_KEY = LABEL_KEY
DEFAULT_VALID_UNTIL_LABEL_KEY = VALID_UNTIL_LABEL_KEY
DEFAULT_ANNOTATION_KEY = ANNOTATION_KEY
DEFAULT_TAINT_KEY = "gpu-fabric.nvidia.com/unverified"
# The Node condition's type: positive like Ready (True when the tray passed), so that Unknown can say "the
# verdict expired" as Ready's Unknown says "no news from the kubelet"; CamelCase like the kubelet's and node
# problem detector's types; kube-state-metrics exports it as kube_node_status_condition{condition="GPUFabricVerified"}.
DEFAULT_CONDITION_TYPE = "GPUFabricVerified"
CONDITION_PASSED = "Passed"
CONDITION_FAILED = "CheckFailed"
CONDITION_EXPIRED = "VerdictExpired"
CONDITION_MISSING = "ChecksMissing"
CONDITION_MESSAGE_LIMIT = 1000

SKIPPED = "skipped"
VERDICTS = (PASSED, FAILED, SKIPPED)
WRITTEN_VERDICTS = (PASSED, FAILED)
# NodePlan.verdict of the nodes the run did not verify: a condition turned Unknown, the uninstall's removal.
EXPIRED = "expired"
REMOVED = "removed"
REFRESHED = "refreshed"

SUMMARY_LIMIT = 500
STATUS_OF = {PASSED: "True", FAILED: "False"}
# a check's outcome in the report's per-tray ``checks`` that skipped the tray
CHECK_SKIPPED = "skipped"
CHECK_SUMMARY_LIMIT = 300
TAINT_VALUE = "true"
TAINT_EFFECT = "NoSchedule"

TAINT_ADDED = "added"
TAINT_REMOVED = "removed"
TAINT_UNCHANGED = "unchanged"

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_MERGE_PATCH = "application/merge-patch+json"

# RFC 3339 date-time: 2026-12-01T10:15:00Z, 2026-12-01T10:15:00.123456+01:00
_RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

# API calls (k8s.api_retry): attempts per call on a transient error, and the pauses between them (0.5, 1, 2 s).
API_ATTEMPTS = 4
API_BACKOFF = Backoff(0.5, 2.0, 2.0)
# Reads and rewrites of one node's taints when other writers keep changing the node: a conflict is answered by a
# fresh read at once, not waited out.
CONFLICT_ATTEMPTS = 5
ERROR_TEXT_LIMIT = 300


@dataclass(frozen=True)
class Settings:
    """What to write and under which keys (the module's options)."""

    label: bool = True
    taint_failed: bool = False
    condition: bool = False
    valid_hours: float = DEFAULT_VALID_HOURS
    label_key: str = DEFAULT_LABEL_KEY
    valid_until_label_key: str = DEFAULT_VALID_UNTIL_LABEL_KEY
    annotation_key: str = DEFAULT_ANNOTATION_KEY
    taint_key: str = DEFAULT_TAINT_KEY
    condition_type: str = DEFAULT_CONDITION_TYPE
    # the checks that must have passed within their validity for a tray to read ``passed``
    required_checks: Tuple[str, ...] = DEFAULT_REQUIRED_CHECKS


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


@dataclass(frozen=True)
class Stamp:
    """The run a verdict is written for: its finish time (RFC 3339), its id, and the moment expiries are judged at."""

    time: str
    run: str = ""
    now: Optional[datetime] = None


@dataclass(frozen=True)
class NodePlan:
    """What a node needs: the patch bodies (None: nothing to send) and the views for ``--diff``."""

    node: str
    verdict: str
    metadata_patch: Optional[Dict[str, Any]]
    taints_patch: Optional[Dict[str, Any]]
    taint: str
    before: Dict[str, Any]
    after: Dict[str, Any]
    label: Optional[str]
    status_patch: Optional[Dict[str, Any]] = None
    condition: Optional[str] = None
    # check -> the time of the newer entry the Node holds, which this run's older verdict did not replace
    kept_newer: Dict[str, str] = field(default_factory=dict)

    @property
    def needed(self) -> bool:
        return self.metadata_patch is not None or self.taints_patch is not None or self.status_patch is not None


class NodeVerdictError(Exception):
    """A failure the module reports with ``fail_json``; ``result`` holds what was done before it."""

    def __init__(self, message: str, result: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result or {}


# ---------------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# The desired state of one node (pure)
# ---------------------------------------------------------------------------------------------


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


def held_skip(node: Mapping[str, Any], settings: Settings) -> Any:
    """The ``skipped`` mark of the Node's annotation as written, or None."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(settings.annotation_key)
    try:
        return json.loads(raw).get("skipped")
    except (TypeError, ValueError, AttributeError):
        return None


def _compact(record: Mapping[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def verdict_taint(key: str) -> Dict[str, str]:
    return {"key": key, "value": TAINT_VALUE, "effect": TAINT_EFFECT}


def desired_taints(taints: Sequence[Mapping[str, Any]], verdict: str, key: str) -> Tuple[List[Dict[str, Any]], str]:
    """The node's taint list after the verdict, and whether our taint was added, removed or left.

    A taint is identified by key and effect (as the API server does): a failed tray carrying
    ``<key>:NoSchedule`` with another value gets it replaced in place; taints of the key with other
    effects are kept on a failure and removed on a pass (a pass clears every taint of the key).
    """
    current = [dict(taint) for taint in taints]
    wanted = verdict_taint(key)
    if verdict == FAILED:
        ours = [t for t in current if t.get("key") == key and t.get("effect") == TAINT_EFFECT]
        if len(ours) == 1 and (ours[0].get("value") or "") == TAINT_VALUE:
            return current, TAINT_UNCHANGED
        result: List[Dict[str, Any]] = []
        placed = False
        for taint in current:
            if taint.get("key") == key and taint.get("effect") == TAINT_EFFECT:
                if not placed:
                    result.append(wanted)
                    placed = True
                continue
            result.append(taint)
        if not placed:
            result.append(wanted)
        return result, TAINT_ADDED
    if verdict == PASSED:
        result = [t for t in current if t.get("key") != key]
        return result, (TAINT_REMOVED if len(result) != len(current) else TAINT_UNCHANGED)
    return current, TAINT_UNCHANGED


# --- the condition -----------------------------------------------------------------------------


def find_condition(conditions: Sequence[Mapping[str, Any]], condition_type: str) -> Optional[Dict[str, Any]]:
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return dict(condition)
    return None


def state_condition(
    state: TrayState, now: datetime, condition_type: str, required: Sequence[str] = DEFAULT_REQUIRED_CHECKS
) -> Optional[Dict[str, Any]]:
    """The condition a tray's state asks for at ``now``, without ``lastTransitionTime``; None for a tray that
    carries no verdict (nothing is said of it)."""
    if not state.verified:
        return None
    return standing_condition(standing(state, required, now), condition_type)


def standing_condition(stand: Standing, condition_type: str) -> Dict[str, Any]:
    """``True``/``Passed`` and ``False``/``CheckFailed`` carry the tray's summary (which names the failing checks and
    the pairs or trays they blamed) and its newest entry's time as ``lastHeartbeatTime``; a required check whose
    verdict expired gives ``Unknown``/``VerdictExpired`` with the expiry as ``lastHeartbeatTime``, a required check
    that never verified the tray ``Unknown``/``ChecksMissing``."""
    time = rfc3339(stand.time) if stand.time else ""
    if stand.verdict == PASSED:
        return _condition(condition_type, "True", CONDITION_PASSED, stand.summary or "every check passed", time)
    if stand.verdict == FAILED:
        return _condition(
            condition_type, "False", CONDITION_FAILED, stand.summary or "a check failed on the tray", time
        )
    if stand.expired_at is not None:
        message = f"{stand.summary}; verify the tray again"
        return _condition(condition_type, "Unknown", CONDITION_EXPIRED, message, rfc3339(stand.expired_at))
    message = f"{stand.summary}; run the missing checks on the tray"
    return _condition(condition_type, "Unknown", CONDITION_MISSING, message, time)


def _condition(condition_type: str, status: str, reason: str, message: str, heartbeat: str) -> Dict[str, Any]:
    condition = {
        "type": condition_type,
        "status": status,
        "reason": reason,
        "message": one_line(message, CONDITION_MESSAGE_LIMIT, "..."),
    }
    if heartbeat:
        condition["lastHeartbeatTime"] = heartbeat
    return condition


def with_transition(current: Optional[Mapping[str, Any]], wanted: Dict[str, Any]) -> Dict[str, Any]:
    """``wanted`` with its ``lastTransitionTime``: the current one while the status stays, else the heartbeat (the
    verdict's time, or the expiry)."""
    kept = current is not None and current.get("status") == wanted["status"] and current.get("lastTransitionTime")
    since = current.get("lastTransitionTime") if kept and current else wanted.get("lastHeartbeatTime")
    return {**wanted, **({"lastTransitionTime": since} if since else {})}


def condition_differs(current: Optional[Mapping[str, Any]], wanted: Mapping[str, Any]) -> bool:
    return current is None or any(current.get(key) != value for key, value in wanted.items())


def condition_patch(condition: Dict[str, Any]) -> Dict[str, Any]:
    """The strategic merge patch of ``status``: ``conditions`` merge by ``type``, every other condition is kept."""
    return {"status": {"conditions": [condition]}}


def condition_removal_patch(condition_type: str) -> Dict[str, Any]:
    return {"status": {"conditions": [{"type": condition_type, "$patch": "delete"}]}}


# --- one node ----------------------------------------------------------------------------------


def verdict_view(
    labels: Mapping[str, Any],
    annotations: Mapping[str, Any],
    taints: Sequence[Any],
    settings: Settings,
    condition: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """What ``--diff`` shows of a node: our labels, our annotation, the whole taint list and (with ``condition``
    on) our condition."""
    view = {
        "labels": {key: labels[key] for key in (settings.label_key, settings.valid_until_label_key) if key in labels},
        "annotations": (
            {settings.annotation_key: annotations[settings.annotation_key]}
            if settings.annotation_key in annotations
            else {}
        ),
        "taints": [dict(taint) for taint in taints],
    }
    if settings.condition:
        view["condition"] = dict(condition) if condition else None
    return view


@dataclass
class _NodeState:
    """A Node as read, in the parts this module writes, and the changes planned to them."""

    name: str
    resource_version: str
    labels: Dict[str, Any]
    annotations: Dict[str, Any]
    taints: List[Dict[str, Any]]
    condition: Optional[Dict[str, Any]]
    settings: Settings
    before: Dict[str, Any] = field(default_factory=dict)
    metadata_changes: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    new_taints: Optional[List[Dict[str, Any]]] = None
    taint: str = TAINT_UNCHANGED
    status_patch: Optional[Dict[str, Any]] = None
    new_condition: Optional[Dict[str, Any]] = None

    @classmethod
    def read(cls, node: Mapping[str, Any], settings: Settings) -> _NodeState:
        metadata = node.get("metadata") or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        state = cls(
            name=str(metadata.get("name") or ""),
            resource_version=str(metadata.get("resourceVersion") or ""),
            labels=dict(metadata.get("labels") or {}),
            annotations=dict(metadata.get("annotations") or {}),
            taints=[dict(t) for t in (node.get("spec") or {}).get("taints") or []],
            condition=find_condition(conditions, settings.condition_type),
            settings=settings,
        )
        state.before = verdict_view(state.labels, state.annotations, state.taints, settings, state.condition)
        state.new_condition = state.condition
        return state

    def set_meta(self, kind: str, key: str, value: Optional[str]) -> None:
        current = self.labels if kind == "labels" else self.annotations
        if value is None and key not in current:
            return
        if value is not None and current.get(key) == value:
            return
        self.metadata_changes.setdefault(kind, {})[key] = value

    def set_taints(self, verdict: str) -> None:
        self.new_taints, self.taint = desired_taints(self.taints, verdict, self.settings.taint_key)

    def set_condition(self, wanted: Optional[Dict[str, Any]]) -> None:
        if wanted is None:
            return
        wanted = with_transition(self.condition, wanted)
        if condition_differs(self.condition, wanted):
            self.status_patch = condition_patch(wanted)
            self.new_condition = wanted

    def apply_standing(self, stand: Standing, annotation: str) -> None:
        """The labels, the annotation, the taint and the condition of the tray's standing (as the options ask)."""
        if self.settings.label:
            until = epoch_label(stand.valid_until) if stand.verdict == PASSED and stand.valid_until else None
            self.set_meta("labels", self.settings.label_key, stand.verdict)
            self.set_meta("labels", self.settings.valid_until_label_key, until)
            self.set_meta("annotations", self.settings.annotation_key, annotation)
        if self.settings.taint_failed:
            self.set_taints(stand.verdict)
        if self.settings.condition:
            self.set_condition(standing_condition(stand, self.settings.condition_type))

    def remove_condition(self) -> None:
        if self.condition is not None:
            self.status_patch = condition_removal_patch(self.settings.condition_type)
            self.new_condition = None

    def plan(self, verdict: str, kept_newer: Optional[Dict[str, str]] = None) -> NodePlan:
        metadata_patch = {"metadata": self.metadata_changes} if self.metadata_changes else None
        taints_patch: Optional[Dict[str, Any]] = None
        taints = self.taints
        if self.taint != TAINT_UNCHANGED and self.new_taints is not None:
            taints = self.new_taints
            taints_patch = {"spec": {"taints": taints}}
            if self.resource_version:
                # a precondition: the API server refuses the patch (409) if the node changed since it was read
                taints_patch = {"metadata": {"resourceVersion": self.resource_version}, **taints_patch}
        labels = _applied(self.labels, self.metadata_changes.get("labels", {}))
        annotations = _applied(self.annotations, self.metadata_changes.get("annotations", {}))
        return NodePlan(
            node=self.name,
            verdict=verdict,
            metadata_patch=metadata_patch,
            taints_patch=taints_patch,
            taint=self.taint,
            before=self.before,
            after=verdict_view(labels, annotations, taints, self.settings, self.new_condition),
            label=labels.get(self.settings.label_key),
            status_patch=self.status_patch,
            condition=(self.new_condition or {}).get("status") if self.settings.condition else None,
            kept_newer=dict(kept_newer or {}),
        )


def _applied(current: Mapping[str, Any], changes: Mapping[str, Optional[str]]) -> Dict[str, Any]:
    result = dict(current)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def _now(now: Optional[datetime]) -> datetime:
    return now if now is not None else datetime.now(timezone.utc)


def plan_node(
    node: Mapping[str, Any],
    tray: TrayVerdict,
    time: str,
    settings: Settings,
    run: str = "",
    now: Optional[datetime] = None,
) -> NodePlan:
    """Compare a Node as read with the state the tray's outcomes in the run ``run``, finished at ``time``, ask for
    (``now``: when the tray's standing and expiries are judged; by default ``time``). The time has passed
    ``time_problems``."""
    state = _NodeState.read(node, settings)
    current = read_state(node, settings.annotation_key)
    moment = read_time(time)[0] or _now(now)
    at = now if now is not None else moment  # by default the tray is judged when the run finished
    entries, kept = merged_entries(current, tray, moment, run, settings.valid_hours)
    written = [outcome[0] for outcome in tray.outcomes if outcome[0] not in kept]
    skip = merged_skip(current, held_skip(node, settings), tray, moment, run, written)
    if not written and not tray.own_skip_reason:
        # nothing measured or skipped for the tray's own state: the run learnt nothing of it
        if settings.condition:
            state.set_condition(state_condition(current, at, settings.condition_type, settings.required_checks))
        return state.plan(tray.verdict, kept)
    if not entries and current.verified and not current.per_check and not written:
        # a verdict written before verdicts were per check, skipped: kept, with the mark
        record: Dict[str, Any] = dict(json.loads(state.annotations[settings.annotation_key]))
        if skip:
            record["skipped"] = skip
        stand = standing(current, settings.required_checks, at)
    elif not entries and not current.verified:
        # a tray never verified and skipped: due anyway, nothing to write
        return state.plan(tray.verdict, kept)
    else:
        record, stand = tray_record(entries, skip, settings.required_checks, at)
        record["summary"] = one_line(record["summary"], SUMMARY_LIMIT, "...")
    state.apply_standing(stand, _compact(record))
    return state.plan(tray.verdict, kept)


def plan_expired(node: Mapping[str, Any], now: datetime, settings: Settings) -> Optional[NodePlan]:
    """For a node this run did not verify: ``Unknown`` when its verdict expired (or a required check is missing) and
    its condition does not say so yet; None otherwise."""
    current = read_state(node, settings.annotation_key)
    wanted = state_condition(current, now, settings.condition_type, settings.required_checks)
    if wanted is None or wanted["status"] != "Unknown":
        return None
    state = _NodeState.read(node, settings)
    state.set_condition(wanted)
    plan = state.plan(EXPIRED)
    return plan if plan.needed else None


def plan_refresh(node: Mapping[str, Any], now: datetime, settings: Settings) -> Optional[NodePlan]:
    """The state a node's own check entries give at ``now``, without any check running: a required check whose
    verdict expired turns the label from ``passed`` to ``incomplete``, drops ``verified-until`` and (with the
    condition) turns it ``Unknown``/``VerdictExpired``. A node without per-check state gets only the condition;
    one without a verdict nothing. None when the node already says so."""
    current = read_state(node, settings.annotation_key)
    if not current.verified:
        return None
    state = _NodeState.read(node, settings)
    if current.per_check:
        entries = {name: check_state_fields(entry) for name, entry in current.checks.items() if not entry.problem}
        record, stand = tray_record(entries, held_skip(node, settings), settings.required_checks, now)
        record["summary"] = one_line(record["summary"], SUMMARY_LIMIT, "...")
        state.apply_standing(stand, _compact(record))
    elif settings.condition:
        state.set_condition(state_condition(current, now, settings.condition_type, settings.required_checks))
    plan = state.plan(REFRESHED)
    return plan if plan.needed else None


def plan_removal(node: Mapping[str, Any], settings: Settings) -> Optional[NodePlan]:
    """What the uninstall removes from a node: both labels, the annotation, every taint of ``taint_key`` and the
    condition; None when the node carries none of them."""
    state = _NodeState.read(node, settings)
    for key in (settings.label_key, settings.valid_until_label_key):
        state.set_meta("labels", key, None)
    state.set_meta("annotations", settings.annotation_key, None)
    state.set_taints(PASSED)  # a pass removes every taint of the key
    state.remove_condition()
    plan = state.plan(REMOVED)
    return plan if plan.needed else None


def desired_patch(
    node: Mapping[str, Any], tray: TrayVerdict, time: str, settings: Settings, run: str = ""
) -> Optional[NodePlan]:
    """The patch a node needs for the tray's verdict, or None when it already carries it."""
    plan = plan_node(node, tray, time, settings, run)
    return plan if plan.needed else None


def node_outcome(plan: Optional[NodePlan], changed: bool, settings: Settings) -> Dict[str, Any]:
    """A node's entry in the module's ``nodes`` result (``condition``: our condition's status, with the option)."""
    outcome: Dict[str, Any] = (
        {"label": None, "taint": TAINT_UNCHANGED, "changed": False}  # the node does not exist
        if plan is None
        else {"label": plan.label, "taint": plan.taint, "changed": changed}
    )
    if settings.condition:
        outcome["condition"] = plan.condition if plan is not None else None
    if plan is not None and plan.kept_newer:
        outcome["kept_newer"] = dict(plan.kept_newer)
    return outcome


# ---------------------------------------------------------------------------------------------
# Errors of API calls
# ---------------------------------------------------------------------------------------------


def error_line(exc: BaseException) -> str:
    """One line for a failed call: the status and the API server's message, never headers or a traceback."""
    if isinstance(exc, DynamicApiError):
        return api_error_text(exc, ERROR_TEXT_LIMIT)
    return f"{type(exc).__name__}: {one_line(exc, ERROR_TEXT_LIMIT, '...')}"


class _NodeGone(Exception):
    """The node was deleted while its verdict was written."""


# ---------------------------------------------------------------------------------------------
# Against a cluster. ``client`` is kubernetes.core's K8SClient.
# ---------------------------------------------------------------------------------------------


@dataclass
class Request:
    trays: Dict[str, Any]
    time: str
    settings: Settings = field(default_factory=Settings)
    check_mode: bool = False
    run_id: str = ""
    # when expiries are judged (the condition's Unknown); None: the moment the nodes are read
    now: Optional[datetime] = None
    # "absent": remove everything this module writes from every node (the uninstall); "refreshed": bring every
    # node's labels and condition to what its check entries say at ``now`` (expiries), no check running; trays and
    # time unused by both
    state: str = "present"


def settings_problems(settings: Settings) -> List[str]:
    problems = []
    if not settings.valid_hours > 0:
        problems.append(f"valid_hours is {settings.valid_hours!r}; expected a number of hours above 0")
    if not settings.required_checks:
        problems.append(
            "required_checks is empty; name the checks a tray must have passed to read passed "
            "(gpu_fabric_verify_required_checks)"
        )
    return problems


def node_time_problems(nodes: Mapping[str, Mapping[str, Any]], names: Sequence[str], settings: Settings) -> List[str]:
    """One line per node of ``names`` whose per-check state holds a time (or entry) that cannot be read."""
    problems = []
    for name in sorted(names, key=str):
        if name in nodes:
            unreadable = read_state(nodes[name], settings.annotation_key).unreadable()
            if unreadable:
                problems.append(f"node {name}: {'; '.join(unreadable)}")
    return problems


def refuse_unreadable(problems: Sequence[str], settings: Settings) -> None:
    """Stop before the first patch when a node's state cannot be read: its entries are what the run merges into."""
    if problems:
        raise NodeVerdictError(
            f"nothing was written: the annotation {settings.annotation_key} of {'; '.join(problems)}; correct it or "
            f"remove it (kubectl annotate node <node> {settings.annotation_key}-, the tray is then due for every "
            "check) and run again"
        )


def write_verdicts(client: Any, request: Request, sleep: Callable[[float], None] = _time.sleep) -> Dict[str, Any]:
    """Bring every tray's node to its verdict (with ``state=absent``: remove it from every node); the module result
    (``diff`` and ``warnings`` included)."""
    if request.state == "absent":
        return _Writer(client, request, sleep).remove()
    if request.state == "refreshed":
        problems = settings_problems(request.settings)
        if problems:
            raise NodeVerdictError("; ".join(problems))
        return _Writer(client, request, sleep).refresh()
    trays, problems = parse_trays(request.trays)
    problems = (
        time_problems(request.time, request.settings.valid_hours) + settings_problems(request.settings) + problems
    )
    if problems:
        raise NodeVerdictError("; ".join(problems))
    return _Writer(client, request, sleep).run(trays)


class _Writer:
    def __init__(self, client: Any, request: Request, sleep: Callable[[float], None]) -> None:
        self.client = client
        self.request = request
        self.settings = request.settings
        self.sleep = sleep
        self.resource: Any = None
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.changed_nodes: List[str] = []
        self.diff: Dict[str, Dict[str, Any]] = {"before": {}, "after": {}}
        self.warnings: List[str] = []

    def _list(self) -> Dict[str, Dict[str, Any]]:
        self.resource = self._call("look up the Node API", lambda: resource_api(self.client, "v1", "Node"))
        return {
            (item.get("metadata") or {}).get("name"): item
            for item in self._call("list the nodes", lambda: list_all(self.client, "v1", "Node"))
        }

    def run(self, trays: List[TrayVerdict]) -> Dict[str, Any]:
        if not trays and not self.settings.condition:
            return self.result()
        current = self._list()
        now = _now(self.request.now)
        refuse_unreadable(node_time_problems(current, [tray.node for tray in trays], self.settings), self.settings)
        for tray in trays:
            node = current.get(tray.node)
            if node is None:
                self._missing(tray)
                continue

            def replan(fresh: Mapping[str, Any], tray: TrayVerdict = tray) -> NodePlan:
                return plan_node(fresh, tray, self.request.time, self.settings, self.request.run_id, now)

            self._bring(tray.node, replan(node), replan, lambda tray=tray: self._missing(tray))
        if self.settings.condition:
            # the nodes this run did not verify: a verdict that expired turns the condition Unknown
            given = {tray.node for tray in trays}
            for name in sorted(set(current) - given, key=str):
                plan = plan_expired(current[name], now, self.settings)
                if plan is not None:
                    self._bring(name, plan, lambda fresh: plan_expired(fresh, now, self.settings))
        return self.result()

    def refresh(self) -> Dict[str, Any]:
        current = self._list()
        now = _now(self.request.now)
        if self.settings.label:
            refuse_unreadable(node_time_problems(current, list(current), self.settings), self.settings)
        for name in sorted(current, key=str):
            plan = plan_refresh(current[name], now, self.settings)
            if plan is not None:
                self._bring(name, plan, lambda fresh: plan_refresh(fresh, now, self.settings))
        return self.result()

    def remove(self) -> Dict[str, Any]:
        current = self._list()
        for name in sorted(current, key=str):
            plan = plan_removal(current[name], self.settings)
            if plan is not None:
                self._bring(name, plan, lambda fresh: plan_removal(fresh, self.settings))
        return self.result()

    def _bring(
        self,
        name: str,
        plan: NodePlan,
        replan: Callable[[Mapping[str, Any]], Optional[NodePlan]],
        gone: Optional[Callable[[], None]] = None,
    ) -> None:
        """Send the plan (not in check mode) and record it; a node deleted meanwhile is ``gone()`` or dropped."""
        if plan.needed and not self.request.check_mode:
            try:
                plan = self._apply(name, plan, replan)
            except _NodeGone:
                if gone is not None:
                    gone()
                return
        self._record(plan)

    def result(self) -> Dict[str, Any]:
        return {
            "changed": bool(self.changed_nodes),
            "nodes": self.nodes,
            "changed_nodes": sorted(self.changed_nodes),
            "diff": self.diff,
            "warnings": self.warnings,
        }

    def _record(self, plan: NodePlan) -> None:
        self.nodes[plan.node] = node_outcome(plan, plan.needed, self.settings)
        if plan.needed:
            self.changed_nodes.append(plan.node)
            self.diff["before"][plan.node] = plan.before
            self.diff["after"][plan.node] = plan.after

    def _missing(self, tray: TrayVerdict) -> None:
        self.nodes[tray.node] = node_outcome(None, False, self.settings)
        if tray.verdict in WRITTEN_VERDICTS:
            self.warnings.append(f"node {tray.node} does not exist; its verdict ({tray.verdict}) was not written")

    def _apply(self, name: str, plan: NodePlan, replan: Callable[[Mapping[str, Any]], Optional[NodePlan]]) -> NodePlan:
        """Send the plan's patches; on a conflict read the node again and send the patches recomputed from it
        (``k8s.api_retry``, no pause, ``CONFLICT_ATTEMPTS`` tries)."""

        def send() -> NodePlan:
            nonlocal plan
            try:
                # taints first: the labels patch would move resourceVersion past the taints' precondition
                if plan.taints_patch is not None:
                    self._patch(name, plan.taints_patch, JSON_MERGE_PATCH)
                if plan.metadata_patch is not None:
                    self._patch(name, plan.metadata_patch, STRATEGIC_MERGE_PATCH)
                if plan.status_patch is not None:
                    self._patch(name, plan.status_patch, STRATEGIC_MERGE_PATCH, status=True)
                return plan
            except ConflictError:
                fresh = replan(self._get(name))
                if fresh is None or not fresh.needed:
                    return plan
                plan = fresh
                raise

        try:
            return api_retry(send, None, 0.0, self.sleep, transient=_is_conflict, attempts=CONFLICT_ATTEMPTS)
        except ConflictError:
            raise NodeVerdictError(
                f"cannot write the verdict to node {name}: the node changed {CONFLICT_ATTEMPTS} times while "
                "its taints were rewritten (409 Conflict each time); run again once whatever updates it has settled",
                self.result(),
            ) from None

    def _patch(self, name: str, body: Dict[str, Any], content_type: str, status: bool = False) -> None:
        resource = self.resource.subresources["status"] if status else self.resource
        try:
            self._call(
                f"patch node {name}{'/status' if status else ''}",
                lambda: self.client.patch(resource, body, name=name, content_type=content_type),
                reraise=(ConflictError, NotFoundError),
            )
        except NotFoundError as exc:
            raise _NodeGone(name) from exc

    def _get(self, name: str) -> Dict[str, Any]:
        try:
            return to_dict(
                self._call(
                    f"read node {name}",
                    lambda: self.client.get(self.resource, name=name),
                    reraise=(NotFoundError,),
                )
            )
        except NotFoundError as exc:
            raise _NodeGone(name) from exc

    def _call(self, what: str, call: Callable[[], Any], reraise: Tuple[type, ...] = ()) -> Any:
        try:
            return call_with_retries(what, call, self.sleep, reraise)
        except NodeVerdictError as exc:
            raise NodeVerdictError(exc.message, self.result()) from None


def call_with_retries(
    what: str,
    call: Callable[[], Any],
    sleep: Callable[[float], None] = _time.sleep,
    reraise: Tuple[type, ...] = (),
) -> Any:
    """``call()``, retried on transient errors; a final failure is one line naming ``what``.

    Exceptions in ``reraise`` (a conflict, a node that is gone) go to the caller at once; anything
    that is not an API or connection error is a bug and propagates as it is.
    """
    tries = []

    def counted() -> Any:
        tries.append(call)
        return call()

    try:
        return api_retry(counted, None, API_BACKOFF, sleep, attempts=API_ATTEMPTS)
    except reraise:
        raise
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:
        raise NodeVerdictError(failure_message(what, exc, len(tries))) from None


def _is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, ConflictError)


def failure_message(what: str, exc: BaseException, attempts: int) -> str:
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    status = getattr(exc, "status", None) or 0
    if isinstance(exc, DynamicApiError) and status >= 400 and not is_transient(exc):
        return f"the API server refused to {what}: {error_line(exc)}"
    return (
        f"cannot {what}{tries}: {error_line(exc)}; "
        "check that the API server is reachable (kubeconfig/host options or K8S_AUTH_KUBECONFIG)"
    )
