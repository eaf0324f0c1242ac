# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a Node needs for its tray's verdict: the patches, computed from the Node as read (pure).

The format is ``tray_state``'s: each tray keeps per check its outcome, run, time and ``valid_until`` (the annotation's
``checks``), the run's outcomes merged in forward only (``tray_verdict.merged_entries``). The tray's verdict is
``tray_state.standing`` of the merged entries and the site's ``required_checks`` at the moment the nodes are read:
``<label_key>=passed|failed|incomplete``, and ``<valid_until_label_key>=<Unix seconds>`` only while it passed. A
``skipped`` tray keeps its labels; when the run skipped it for its own state and it carries a verdict, the annotation
keeps its entries and gains ``"skipped": {"time", "run", "reason", "checks"}`` (a tray never verified is due anyway
and is left unwritten). With ``taint_failed`` the taint follows the verdict (``node_taint``), with ``condition`` the
Node condition (``node_condition``).

``plan_node`` (a tray of the run), ``plan_expired`` (a node the run did not verify), ``plan_refresh`` (what the
entries give now, no check running: an expiry shows between runs) and ``plan_removal`` (the uninstall) give a
``NodePlan``: the bodies to send, none where nothing changes, and the views for ``--diff``. ``node_verdict`` sends
them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_condition import (
    DEFAULT_CONDITION_TYPE,
    condition_differs,
    condition_patch,
    condition_removal_patch,
    find_condition,
    standing_condition,
    state_condition,
    with_transition,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_taint import (
    DEFAULT_TAINT_KEY,
    TAINT_UNCHANGED,
    desired_taints,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.outcomes import PASSED
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    ANNOTATION_KEY,
    DEFAULT_REQUIRED_CHECKS,
    DEFAULT_VALID_HOURS,
    LABEL_KEY,
    VALID_UNTIL_LABEL_KEY,
    Standing,
    check_state_fields,
    epoch_label,
    read_state,
    read_time,
    standing,
    tray_record,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_verdict import (
    SUMMARY_LIMIT,
    TrayVerdict,
    merged_entries,
    merged_skip,
)

DEFAULT_LABEL_KEY = LABEL_KEY
DEFAULT_VALID_UNTIL_LABEL_KEY = VALID_UNTIL_LABEL_KEY
DEFAULT_ANNOTATION_KEY = ANNOTATION_KEY

# NodePlan.verdict of the nodes the run did not verify: a condition turned Unknown, the uninstall's removal.
EXPIRED = "expired"
REMOVED = "removed"
REFRESHED = "refreshed"


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


def held_skip(node: Mapping[str, Any], settings: Settings) -> Any:
    """The ``skipped`` mark of the Node's annotation as written, or None."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(settings.annotation_key)
    try:
        return json.loads(raw).get("skipped")
    except (TypeError, ValueError, AttributeError):
        return None


def _compact(record: Mapping[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


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


def moment_or_now(now: Optional[datetime]) -> datetime:
    """``now`` when the caller gives the moment expiries are judged at, else the clock's (UTC)."""
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
    moment = read_time(time)[0] or moment_or_now(now)
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
