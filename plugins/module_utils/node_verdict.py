# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write the verification verdict back onto the Nodes: a label, an annotation, optionally a taint.

Every tray that ``passed`` or ``failed`` gets ``<label_key>=passed|failed`` and an annotation holding
``{"time", "verdict", "summary"}`` as compact JSON; a ``skipped`` tray is left as it is. With
``taint_failed`` a failed tray also gets ``<taint_key>=true:NoSchedule`` and a tray that passed loses
that taint; every other taint keeps its place.

The patch for a node is computed first, from the Node as read (``plan_node``/``desired_patch``, pure
functions), and sent only when it changes something:

- labels and annotations: a strategic merge patch naming only the keys that change;
- taints: the whole new ``spec.taints`` list in a JSON merge patch that carries the
  ``metadata.resourceVersion`` it was computed from, so a concurrent writer (the node lifecycle
  controller, an operator) makes the API server answer 409 Conflict instead of losing its taint;
  on a conflict the node is read again and the patch recomputed.
"""

from __future__ import annotations

import json
import re
import time as _time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    NotFoundError,
    Urllib3Error,
    api_error_text,
    is_transient,
    list_all,
    resource_api,
    to_dict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import Backoff, retry
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

try:
    from kubernetes.dynamic.exceptions import ConflictError
except ImportError:  # reported by AnsibleK8SModule's requires("kubernetes")
    ConflictError = DynamicApiError  # type: ignore[assignment,misc]


DEFAULT_LABEL_KEY = "gpu-fabric.nvidia.com/verified"
DEFAULT_ANNOTATION_KEY = "gpu-fabric.nvidia.com/verification"
DEFAULT_TAINT_KEY = "gpu-fabric.nvidia.com/unverified"

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
VERDICTS = (PASSED, FAILED, SKIPPED)
WRITTEN_VERDICTS = (PASSED, FAILED)

SUMMARY_LIMIT = 500
TAINT_VALUE = "true"
TAINT_EFFECT = "NoSchedule"

TAINT_ADDED = "added"
TAINT_REMOVED = "removed"
TAINT_UNCHANGED = "unchanged"

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_MERGE_PATCH = "application/merge-patch+json"

# RFC 3339 date-time: 2026-12-01T10:15:00Z, 2026-12-01T10:15:00.123456+01:00
_RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

# API calls (rollout.retry): attempts per call on a transient error, and the pauses between them (0.5, 1, 2 s).
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
    label_key: str = DEFAULT_LABEL_KEY
    annotation_key: str = DEFAULT_ANNOTATION_KEY
    taint_key: str = DEFAULT_TAINT_KEY


@dataclass(frozen=True)
class TrayVerdict:
    """One tray's outcome of a verification run, as the caller hands it in."""

    node: str
    verdict: str
    summary: str = ""
    rack: str = ""
    checks_failed: Tuple[str, ...] = ()


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

    @property
    def needed(self) -> bool:
        return self.metadata_patch is not None or self.taints_patch is not None


class NodeVerdictError(Exception):
    """A failure the module reports with ``fail_json``; ``result`` holds what was done before it."""

    def __init__(self, message: str, result: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result or {}


# ---------------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------------


def time_problems(value: Any) -> List[str]:
    if not isinstance(value, str) or not _RFC3339_RE.match(value):
        return [f"time is {value!r}; expected an RFC 3339 date-time such as 2026-12-01T10:15:00Z (the run's finish)"]
    return []


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
        checks_failed = entry.get("checks_failed") or []
        if isinstance(checks_failed, str):
            checks_failed = [checks_failed]
        records.append(
            TrayVerdict(
                node=str(node),
                verdict=str(verdict),
                summary="" if entry.get("summary") is None else str(entry.get("summary")),
                rack="" if entry.get("rack") is None else str(entry.get("rack")),
                checks_failed=tuple(str(check) for check in checks_failed),
            )
        )
    return records, problems


# ---------------------------------------------------------------------------------------------
# The desired state of one node (pure)
# ---------------------------------------------------------------------------------------------


def verdict_annotation(time: str, verdict: str, summary: str) -> str:
    """The annotation value: compact JSON, summary on one line and at most SUMMARY_LIMIT characters."""
    record = {"time": time, "verdict": verdict, "summary": one_line(summary, SUMMARY_LIMIT, "...")}
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


def verdict_view(
    labels: Mapping[str, Any], annotations: Mapping[str, Any], taints: Sequence[Any], settings: Settings
) -> Dict[str, Any]:
    """What ``--diff`` shows of a node: our label, our annotation and the whole taint list."""
    return {
        "labels": {settings.label_key: labels[settings.label_key]} if settings.label_key in labels else {},
        "annotations": (
            {settings.annotation_key: annotations[settings.annotation_key]}
            if settings.annotation_key in annotations
            else {}
        ),
        "taints": [dict(taint) for taint in taints],
    }


def plan_node(node: Mapping[str, Any], tray: TrayVerdict, time: str, settings: Settings) -> NodePlan:
    """Compare a Node as read with the state the tray's verdict asks for."""
    metadata = node.get("metadata") or {}
    labels = dict(metadata.get("labels") or {})
    annotations = dict(metadata.get("annotations") or {})
    taints = list((node.get("spec") or {}).get("taints") or [])
    before = verdict_view(labels, annotations, taints, settings)

    changes: Dict[str, Dict[str, str]] = {}
    new_taints = taints
    taint_action = TAINT_UNCHANGED
    if tray.verdict in WRITTEN_VERDICTS:
        if settings.label:
            if labels.get(settings.label_key) != tray.verdict:
                changes.setdefault("labels", {})[settings.label_key] = tray.verdict
            annotation = verdict_annotation(time, tray.verdict, tray.summary)
            if annotations.get(settings.annotation_key) != annotation:
                changes.setdefault("annotations", {})[settings.annotation_key] = annotation
        if settings.taint_failed:
            new_taints, taint_action = desired_taints(taints, tray.verdict, settings.taint_key)

    metadata_patch = {"metadata": changes} if changes else None
    taints_patch: Optional[Dict[str, Any]] = None
    if taint_action != TAINT_UNCHANGED:
        taints_patch = {"spec": {"taints": new_taints}}
        resource_version = metadata.get("resourceVersion")
        if resource_version:
            # a precondition: the API server refuses the patch (409) if the node changed since it was read
            taints_patch = {"metadata": {"resourceVersion": resource_version}, **taints_patch}

    labels.update(changes.get("labels", {}))
    annotations.update(changes.get("annotations", {}))
    return NodePlan(
        node=tray.node,
        verdict=tray.verdict,
        metadata_patch=metadata_patch,
        taints_patch=taints_patch,
        taint=taint_action,
        before=before,
        after=verdict_view(labels, annotations, new_taints, settings),
        label=labels.get(settings.label_key),
    )


def desired_patch(node: Mapping[str, Any], tray: TrayVerdict, time: str, settings: Settings) -> Optional[NodePlan]:
    """The patch a node needs for the tray's verdict, or None when it already carries it."""
    plan = plan_node(node, tray, time, settings)
    return plan if plan.needed else None


def node_outcome(plan: Optional[NodePlan], changed: bool) -> Dict[str, Any]:
    """A node's entry in the module's ``nodes`` result."""
    if plan is None:  # the node does not exist
        return {"label": None, "taint": TAINT_UNCHANGED, "changed": False}
    return {"label": plan.label, "taint": plan.taint, "changed": changed}


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


def write_verdicts(client: Any, request: Request, sleep: Callable[[float], None] = _time.sleep) -> Dict[str, Any]:
    """Bring every tray's node to its verdict; the module result (``diff`` and ``warnings`` included)."""
    trays, problems = parse_trays(request.trays)
    problems = time_problems(request.time) + problems
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

    def run(self, trays: List[TrayVerdict]) -> Dict[str, Any]:
        if not trays:
            return self.result()
        self.resource = self._call("look up the Node API", lambda: resource_api(self.client, "v1", "Node"))
        current = {
            (item.get("metadata") or {}).get("name"): item
            for item in self._call("list the nodes", lambda: list_all(self.client, "v1", "Node"))
        }
        for tray in trays:
            node = current.get(tray.node)
            if node is None:
                self._missing(tray)
                continue
            plan = plan_node(node, tray, self.request.time, self.settings)
            if plan.needed and not self.request.check_mode:
                try:
                    plan = self._apply(tray, plan)
                except _NodeGone:
                    self._missing(tray)
                    continue
            self._record(plan)
        return self.result()

    def result(self) -> Dict[str, Any]:
        return {
            "changed": bool(self.changed_nodes),
            "nodes": self.nodes,
            "changed_nodes": sorted(self.changed_nodes),
            "diff": self.diff,
            "warnings": self.warnings,
        }

    def _record(self, plan: NodePlan) -> None:
        self.nodes[plan.node] = node_outcome(plan, plan.needed)
        if plan.needed:
            self.changed_nodes.append(plan.node)
            self.diff["before"][plan.node] = plan.before
            self.diff["after"][plan.node] = plan.after

    def _missing(self, tray: TrayVerdict) -> None:
        self.nodes[tray.node] = node_outcome(None, False)
        if tray.verdict in WRITTEN_VERDICTS:
            self.warnings.append(f"node {tray.node} does not exist; its verdict ({tray.verdict}) was not written")

    def _apply(self, tray: TrayVerdict, plan: NodePlan) -> NodePlan:
        """Send the plan's patches; on a conflict read the node again and send the patches recomputed from it
        (``rollout.retry``, no pause, ``CONFLICT_ATTEMPTS`` tries)."""

        def send() -> NodePlan:
            nonlocal plan
            try:
                # taints first: the labels patch would move resourceVersion past the taints' precondition
                if plan.taints_patch is not None:
                    self._patch(tray.node, plan.taints_patch, JSON_MERGE_PATCH)
                if plan.metadata_patch is not None:
                    self._patch(tray.node, plan.metadata_patch, STRATEGIC_MERGE_PATCH)
                return plan
            except ConflictError:
                plan = plan_node(self._get(tray.node), tray, self.request.time, self.settings)
                if not plan.needed:
                    return plan
                raise

        try:
            return retry(send, None, 0.0, self.sleep, transient=_is_conflict, attempts=CONFLICT_ATTEMPTS)
        except ConflictError:
            raise NodeVerdictError(
                f"cannot write the verdict to node {tray.node}: the node changed {CONFLICT_ATTEMPTS} times while "
                "its taints were rewritten (409 Conflict each time); run again once whatever updates it has settled",
                self.result(),
            ) from None

    def _patch(self, name: str, body: Dict[str, Any], content_type: str) -> None:
        try:
            self._call(
                f"patch node {name}",
                lambda: self.client.patch(self.resource, body, name=name, content_type=content_type),
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
        return retry(counted, None, API_BACKOFF, sleep, attempts=API_ATTEMPTS)
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
