# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write the verification verdict back onto the Nodes: labels, an annotation, optionally a taint and a condition.

The trays come in as the report gives them (``tray_verdict.parse_trays``); what each node needs is planned from the
Node as read (``node_plan``: the labels and annotation, the taint of ``node_taint``, the condition of
``node_condition``). The run's time and every time read from the Nodes it merges into are checked before the first
patch (``tray_verdict.time_problems``, ``node_plan.node_time_problems``): nothing is patched when one cannot be read.
``state=refreshed`` writes what the entries give now, no check running; ``state=absent`` removes what this module
writes from every node.

A node's plan is sent only when it changes something:

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

import time as _time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.api_unreachable import ADVICE, unreachable_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    NotFoundError,
    Urllib3Error,
    api_error_text,
    api_failure_text,
    api_retry,
    is_transient,
    list_all,
    resource_api,
    to_dict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import (
    NodePlan,
    Settings,
    moment_or_now,
    node_outcome,
    node_time_problems,
    plan_expired,
    plan_node,
    plan_refresh,
    plan_removal,
    settings_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import Backoff
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_verdict import (
    WRITTEN_VERDICTS,
    TrayVerdict,
    parse_trays,
    time_problems,
)

try:
    from kubernetes.dynamic.exceptions import ConflictError
except ImportError:  # reported by AnsibleK8SModule's requires("kubernetes")
    ConflictError = DynamicApiError  # type: ignore[assignment,misc]


STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_MERGE_PATCH = "application/merge-patch+json"

# API calls (k8s.api_retry): attempts per call on a transient error, and the pauses between them (0.5, 1, 2 s).
API_ATTEMPTS = 4
API_BACKOFF = Backoff(0.5, 2.0, 2.0)
# Reads and rewrites of one node's taints when other writers keep changing the node: a conflict is answered by a
# fresh read at once, not waited out.
CONFLICT_ATTEMPTS = 5
ERROR_TEXT_LIMIT = 300


class NodeVerdictError(Exception):
    """A failure the module reports with ``fail_json``; ``result`` holds what was done before it."""

    def __init__(self, message: str, result: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result or {}


# ---------------------------------------------------------------------------------------------
# Errors of API calls
# ---------------------------------------------------------------------------------------------


def error_line(exc: BaseException) -> str:
    """One line for a failed call: the status and the API server's message, or where the call went and why nothing
    answered (``k8s.api_failure_text``); never headers, urllib3's objects or a traceback."""
    if isinstance(exc, DynamicApiError):
        return api_error_text(exc, ERROR_TEXT_LIMIT)
    return one_line(api_failure_text(exc), ERROR_TEXT_LIMIT, "...")


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
        now = moment_or_now(self.request.now)
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
        now = moment_or_now(self.request.now)
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
    if not isinstance(exc, DynamicApiError):  # no answer: the collection's one wording, then what was tried
        return unreachable_line(f"{error_line(exc)} ({what}{tries})")
    return f"cannot {what}{tries}: {error_line(exc)}; {ADVICE}"
