# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""ComputeDomain logic that needs no cluster: the desired object, spec comparison, readiness.

A ComputeDomain (``resource.nvidia.com/v1beta1``, NVIDIA DRA driver 25.8.0) has an immutable spec
(CEL ``self == oldSelf``). Its ``status.status`` is only an aggregate that the driver documents as
"for debugging"; readiness is therefore read per node from ``status.nodes[].status``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.dra import DRA_API_VERSIONS
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiException,
    DynamicApiError,
    api_error_text,
    first_served_resource,
    get_object,
    json_page,
    list_all,
    pod_summary,
    to_dict,
    workload_summary,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key

API_VERSION = "resource.nvidia.com/v1beta1"
KIND = "ComputeDomain"
ALLOCATION_MODES = ("Single", "All")
DEFAULT_ALLOCATION_MODE = "Single"
READY = "Ready"
NOT_READY = "NotReady"


@dataclass(frozen=True)
class ComputeDomainSpec:
    """The user-settable part of a ComputeDomain."""

    num_nodes: int
    channel_template_name: str
    allocation_mode: str = DEFAULT_ALLOCATION_MODE

    def to_api(self) -> Dict[str, Any]:
        return {
            "numNodes": self.num_nodes,
            "channel": {
                "resourceClaimTemplate": {"name": self.channel_template_name},
                "allocationMode": self.allocation_mode,
            },
        }


@dataclass(frozen=True)
class NodeState:
    """One entry of ``status.nodes[]``: a node whose ComputeDomain daemon joined."""

    name: str
    status: str
    clique_id: str
    ip_address: str

    def to_dict(self) -> Dict[str, str]:
        return {"name": self.name, "status": self.status, "clique_id": self.clique_id, "ip_address": self.ip_address}


@dataclass
class Readiness:
    """Verdict on a ComputeDomain's status against what the caller waits for."""

    ready: bool
    aggregate: str
    nodes: List[NodeState] = field(default_factory=list)
    not_ready_nodes: List[str] = field(default_factory=list)
    missing_nodes: List[str] = field(default_factory=list)
    reasons: List[str] = field(default_factory=list)


def some(names: Sequence[str], limit: int = 5) -> str:
    """``a, b, c, d, e and 13 more``: a rack's worth of names kept to one readable line."""
    names = list(names)
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def default_channel_template_name(name: str) -> str:
    return f"{name}-channel"


def validate_spec(spec: ComputeDomainSpec) -> List[str]:
    """Problems with a requested spec, as messages a user can act on."""
    problems = []
    if spec.num_nodes < 0:
        problems.append(f"num_nodes is {spec.num_nodes}; it must be zero or greater (0 is recommended with 25.8.0)")
    if spec.allocation_mode not in ALLOCATION_MODES:
        problems.append(
            f"channel_allocation_mode is {spec.allocation_mode!r}; expected one of {', '.join(ALLOCATION_MODES)}"
        )
    if not spec.channel_template_name:
        problems.append("channel_template_name is empty; give the ResourceClaimTemplate a name")
    return problems


def desired_object(
    name: str, namespace: str, spec: ComputeDomainSpec, labels: Optional[Dict[str, str]] = None
) -> Dict[str, Any]:
    """The ComputeDomain manifest to create."""
    metadata: Dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec.to_api()}


def spec_from_object(obj: Dict[str, Any]) -> ComputeDomainSpec:
    """Read the spec of an existing ComputeDomain, filling the API server's defaults."""
    spec = obj.get("spec") or {}
    channel = spec.get("channel") or {}
    template = channel.get("resourceClaimTemplate") or {}
    return ComputeDomainSpec(
        num_nodes=int(spec.get("numNodes", 0) or 0),
        channel_template_name=str(template.get("name", "")),
        allocation_mode=str(channel.get("allocationMode") or DEFAULT_ALLOCATION_MODE),
    )


def spec_differences(existing: ComputeDomainSpec, desired: ComputeDomainSpec) -> List[str]:
    """Fields whose value differs, as ``path: existing -> desired`` strings (empty when equal)."""
    pairs = (
        ("spec.numNodes", existing.num_nodes, desired.num_nodes),
        ("spec.channel.resourceClaimTemplate.name", existing.channel_template_name, desired.channel_template_name),
        ("spec.channel.allocationMode", existing.allocation_mode, desired.allocation_mode),
    )
    return [f"{path}: {old!r} -> {new!r}" for path, old, new in pairs if old != new]


def immutable_spec_message(name: str, namespace: str, differences: Sequence[str]) -> str:
    return (
        f"ComputeDomain {namespace}/{name} exists with a different spec ({'; '.join(differences)}); "
        "a ComputeDomain's spec is immutable. Delete it first (state=absent), or set force=true to "
        "delete and recreate it (workloads using its channel lose it)."
    )


def parse_nodes(status: Optional[Dict[str, Any]]) -> List[NodeState]:
    """``status.nodes[]`` as records; a missing per-node status counts as NotReady (the CRD default)."""
    nodes = []
    for entry in (status or {}).get("nodes") or []:
        nodes.append(
            NodeState(
                name=str(entry.get("name", "")),
                status=str(entry.get("status") or NOT_READY),
                clique_id=str(entry.get("cliqueID", "")),
                ip_address=str(entry.get("ipAddress", "")),
            )
        )
    return nodes


def evaluate_readiness(
    obj: Optional[Dict[str, Any]],
    num_nodes: int = 0,
    wait_nodes: Optional[Sequence[str]] = None,
) -> Readiness:
    """Decide whether a ComputeDomain is ready for what the caller waits for.

    - ``wait_nodes`` given: each named node is in ``status.nodes[]`` with status Ready (per-node
      readiness is what the 25.8.0 kubelet plugin checks before it releases a workload pod).
    - else ``num_nodes`` > 0: at least ``num_nodes`` nodes Ready and the aggregate ``status.status``
      Ready (the controller sets it when that many daemons are ready).
    - else (``numNodes: 0``, the 25.8.0 recommendation): no node has to join before a workload is
      scheduled, so the domain is ready once the controller has written a status; every node that
      did join must be Ready.
    """
    if not obj:
        return Readiness(ready=False, aggregate="", reasons=["the ComputeDomain does not exist"])
    status = obj.get("status") or {}
    aggregate = str(status.get("status") or "")
    nodes = parse_nodes(status)
    by_name = {node.name: node for node in nodes}
    not_ready = sorted((node.name for node in nodes if node.status != READY), key=natural_key)
    ready_count = len(nodes) - len(not_ready)
    reasons: List[str] = []
    missing: List[str] = []

    if wait_nodes:
        missing = sorted((n for n in wait_nodes if n not in by_name), key=natural_key)
        waited_not_ready = sorted(
            (n for n in wait_nodes if n in by_name and by_name[n].status != READY), key=natural_key
        )
        if missing:
            reasons.append(f"nodes not yet in status.nodes: {some(missing)}")
        if waited_not_ready:
            reasons.append(f"nodes not Ready: {some(waited_not_ready)}")
        not_ready = waited_not_ready
    elif num_nodes > 0:
        if ready_count < num_nodes:
            reasons.append(f"{ready_count} of {num_nodes} nodes Ready")
        if aggregate != READY:
            reasons.append(f"status.status is {aggregate or 'unset'}, expected Ready")
    else:
        if not aggregate:
            reasons.append("the controller has not written a status yet")
        if not_ready:
            reasons.append(f"nodes not Ready: {some(not_ready)}")

    return Readiness(
        ready=not reasons,
        aggregate=aggregate,
        nodes=nodes,
        not_ready_nodes=not_ready,
        missing_nodes=missing,
        reasons=reasons,
    )


def diff_view(obj: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The part of a ComputeDomain shown in ``--diff``: identity and spec, not status or metadata noise."""
    if not obj:
        return {}
    metadata = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", API_VERSION),
        "kind": obj.get("kind", KIND),
        "metadata": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
        "spec": spec_from_object(obj).to_api(),
    }


def timeout_message(
    name: str,
    namespace: str,
    timeout: int,
    readiness: Readiness,
    diagnostics: Sequence[str],
) -> str:
    """Failure text for a wait that ran out: the CD status, the nodes not Ready, the driver's state."""
    by_status: Dict[str, List[str]] = {}
    for node in readiness.nodes:
        by_status.setdefault(node.status, []).append(node.name)
    node_text = "; ".join(f"{status}: {some(names)}" for status, names in by_status.items()) or "none joined"
    parts = [
        f"ComputeDomain {namespace}/{name} not ready after {timeout}s: {'; '.join(readiness.reasons)}.",
        f"status.status={readiness.aggregate or 'unset'}; status.nodes: {node_text}.",
    ]
    if diagnostics:
        parts.append("DRA driver: " + "; ".join(diagnostics) + ".")
    parts.append(
        "Check that the nvidia-dra-driver-gpu controller and kubelet plugin are Ready and that the "
        "ComputeDomain daemon pods on those nodes start (their logs name IMEX errors)."
    )
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Against a cluster: create/delete and wait. ``client`` is kubernetes.core's K8SClient.
# ---------------------------------------------------------------------------------------------

# Newest first, as the DRA driver picks them (Kubernetes 1.34+, 1.33, 1.32).
RESOURCE_CLAIM_TEMPLATE_VERSIONS = DRA_API_VERSIONS


# The label the DRA controller puts on each domain's daemon DaemonSet and its pods: the domain's UID.
DOMAIN_LABEL = "resource.nvidia.com/computeDomain"


def daemon_set_names(name: str, uid: str) -> str:
    """How the DRA driver names a domain's daemon DaemonSet: ``<name>-<random>`` up to 25.8 (generateName),
    ``computedomain-daemon-<uid>`` from 25.12."""
    return f"{name}-* (driver 25.8) or computedomain-daemon-{uid or '<uid>'} (driver 25.12)"


def of_domain(obj: Dict[str, Any], name: str, uid: str) -> bool:
    """Whether a DaemonSet or pod of the driver's namespace belongs to the ComputeDomain ``name`` with ``uid``:
    by its label (every driver version), else by the name each version gives it."""
    meta = obj.get("metadata") or {}
    if uid and (meta.get("labels") or {}).get(DOMAIN_LABEL) == uid:
        return True
    obj_name = str(meta.get("name") or "")
    return obj_name.startswith(f"{name}-") or bool(uid and obj_name.startswith(f"computedomain-daemon-{uid}"))


_CLAIM_TEMPLATES: Dict[int, Any] = {}
_CLAIM_TEMPLATES_LOCK = threading.Lock()


def served_claim_template(client: Any) -> Optional[Any]:
    """The ResourceClaimTemplate resource in the newest DRA version served, looked up once per client.

    A version the server does not serve (v1 on Kubernetes 1.33) makes the client rediscover the whole API,
    which is not thread-safe; the racks' threads poll this while they wait, so it is resolved once.
    """
    with _CLAIM_TEMPLATES_LOCK:
        if id(client) not in _CLAIM_TEMPLATES:
            found = first_served_resource(client, "ResourceClaimTemplate", RESOURCE_CLAIM_TEMPLATE_VERSIONS)
            if found is None:
                return None
            _CLAIM_TEMPLATES[id(client)] = found
        return _CLAIM_TEMPLATES[id(client)]


class ComputeDomainError(Exception):
    """A failure the module reports with ``fail_json``; ``result`` holds what was learnt so far."""

    def __init__(self, message: str, result: Optional[Dict[str, Any]] = None, not_run: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.result = result or {}
        # True: the cluster refused or lacks what the call needs (an API error, no CRD), nothing of the
        # fabric was learnt; False: the domain itself did not become what was asked (its daemons, its nodes)
        self.not_run = not_run


@dataclass
class Request:
    name: str
    namespace: str
    state: str
    spec: ComputeDomainSpec
    wait: bool = True
    wait_timeout: int = 300
    wait_sleep: float = 2.0
    wait_nodes: List[str] = field(default_factory=list)
    force: bool = False
    driver_namespace: str = "nvidia-dra-driver-gpu"
    check_mode: bool = False
    labels: Dict[str, str] = field(default_factory=dict)


def ensure(
    client: Any,
    request: Request,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Any]:
    """Bring the ComputeDomain to ``request.state``; return the module result (without ``msg``)."""
    try:
        return _ensure(client, request, sleep, clock)
    except (DynamicApiError, ApiException) as exc:
        req = request
        raise ComputeDomainError(
            f"the API server refused a call for ComputeDomain {req.namespace}/{req.name}: {api_error_text(exc)}",
            not_run=True,
        ) from exc


def _ensure(
    client: Any,
    request: Request,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> Dict[str, Any]:
    resource = first_served_resource(client, KIND, [API_VERSION])
    if resource is None and request.state == "absent":
        # Without the CRD no ComputeDomain can exist: it is already absent (a cleanup after a
        # failed or removed DRA driver install must not fail on that).
        return _Session(client, None, request, sleep, clock).absent(None)
    if resource is None:
        raise ComputeDomainError(
            f"the API server does not serve {KIND} in {API_VERSION}: the CRD computedomains.resource.nvidia.com "
            "is missing. Install the NVIDIA DRA driver 25.8.0 (role gpu_fabric.mnnvl.dra_driver) first.",
            not_run=True,
        )
    existing = get_object(client, resource, request.name, request.namespace)
    session = _Session(client, resource, request, sleep, clock)
    if request.state == "absent":
        return session.absent(existing)
    return session.present(existing)


class _Session:
    def __init__(self, client: Any, resource: Any, request: Request, sleep: Any, clock: Any) -> None:
        self.client = client
        self.resource = resource
        self.request = request
        self.sleep = sleep
        self.clock = clock

    # -- state=present -------------------------------------------------------------------------
    def present(self, existing: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        req = self.request
        problems = validate_spec(req.spec)
        if problems:
            raise ComputeDomainError("; ".join(problems))
        desired = desired_object(req.name, req.namespace, req.spec, req.labels)
        diff = {"before": diff_view(existing), "after": diff_view(desired)}
        changed = False
        current = existing

        if existing and (existing.get("metadata") or {}).get("deletionTimestamp"):
            changed = True
            if not req.check_mode:
                self._wait_gone()
            current = None
        elif existing:
            differences = spec_differences(spec_from_object(existing), req.spec)
            if differences and not req.force:
                raise ComputeDomainError(
                    immutable_spec_message(req.name, req.namespace, differences), {"diff": diff, "changed": False}
                )
            if differences:
                changed = True
                if not req.check_mode:
                    self.client.delete(self.resource, name=req.name, namespace=req.namespace)
                    self._wait_gone()
                current = None

        if current is None:
            changed = True
            if not req.check_mode:
                current = to_dict(self.client.create(self.resource, desired, namespace=req.namespace))

        if current and req.wait and not req.check_mode:
            current = self._wait_ready()
        return self._result(current or desired, changed, diff)

    def _wait_ready(self) -> Dict[str, Any]:
        req = self.request
        # the controller creates the template once and keeps it while the domain exists: read until it is seen
        template_seen = [False]
        last: Dict[str, Any] = {}

        def ready(objects: kube_watch.Objects) -> bool:
            current = next(iter(objects.values()), None)
            readiness = evaluate_readiness(current, req.spec.num_nodes, req.wait_nodes)
            if current is not None and not template_seen[0]:
                template_seen[0] = self._channel_template_exists()
            if current is not None and not template_seen[0]:
                readiness.ready = False
                readiness.reasons.append(
                    f"ResourceClaimTemplate {req.namespace}/{req.spec.channel_template_name} not created by the "
                    "controller yet"
                )
            last.update(current=current, readiness=readiness)
            return readiness.ready

        def window() -> float:
            """The template is another object, whose creation the domain's watch does not see: until it is
            seen, each window lasts ``wait_sleep``."""
            return kube_watch.WINDOW if template_seen[0] else max(req.wait_sleep, 1.0)

        if self._watch(ready, window).value:
            return last["current"] or {}
        current = last.get("current")
        diagnostics = self._diagnostics(current)
        message = timeout_message(req.name, req.namespace, req.wait_timeout, last["readiness"], diagnostics)
        raise ComputeDomainError(message, self._result(current or {}, True, None))

    def _watch(
        self, judge: Callable[[kube_watch.Objects], Any], window: Callable[[], float] = lambda: kube_watch.WINDOW
    ) -> kube_watch.Outcome:
        """Wait on this domain until ``judge`` of it (the domain alone, or nothing when it is gone) answers
        something truthy, or ``wait_timeout`` passes: one read and one watch per ``window``, not a read per poll."""
        req = self.request
        name = f"metadata.name={req.name}"

        def list_objects() -> kube_watch.Listing:
            page = json_page(
                self.client.get(self.resource, namespace=req.namespace, field_selector=name, serialize=False)
            )
            return kube_watch.pages_with_version([page])

        def watch(version: str, seconds: int) -> Any:
            return kube_watch.watch_of(self.client)(
                self.resource, namespace=req.namespace, name=req.name, resource_version=version or None, timeout=seconds
            )

        deadline = self.clock() + req.wait_timeout
        return kube_watch.until(list_objects, watch, judge, deadline, self.clock, self.sleep, window)

    def _channel_template_exists(self) -> bool:
        rct = served_claim_template(self.client)
        if rct is None:
            return False
        req = self.request
        return get_object(self.client, rct, req.spec.channel_template_name, req.namespace) is not None

    # -- state=absent --------------------------------------------------------------------------
    def absent(self, existing: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        req = self.request
        diff = {"before": diff_view(existing), "after": {}}
        if not existing:
            return {
                "changed": False,
                "compute_domain": {},
                "status": "",
                "nodes": [],
                "channel_template_name": req.spec.channel_template_name,
                "diff": diff,
            }
        if not req.check_mode:
            if not (existing.get("metadata") or {}).get("deletionTimestamp"):
                self.client.delete(self.resource, name=req.name, namespace=req.namespace)
            if req.wait:
                self._wait_gone()
        result = self._result(existing, True, diff)
        result["compute_domain"] = {} if not req.check_mode else existing
        return result

    def _wait_gone(self) -> None:
        req = self.request
        outcome = self._watch(lambda objects: not objects)
        if outcome.value:
            return
        current = next(iter(outcome.objects.values()), {})
        finalizers = (current.get("metadata") or {}).get("finalizers") or []
        raise ComputeDomainError(
            f"ComputeDomain {req.namespace}/{req.name} still exists {req.wait_timeout}s after deletion "
            f"(finalizers: {', '.join(finalizers) or 'none'}). The DRA controller removes its finalizer "
            f"after cleaning up; DRA driver: {'; '.join(self._diagnostics(current)) or 'no workloads found'}. "
            "Delete ComputeDomains before uninstalling the driver."
        )

    # -- shared --------------------------------------------------------------------------------
    def _diagnostics(self, domain: Optional[Dict[str, Any]] = None) -> List[str]:
        """The DRA driver's Deployments, this domain's DaemonSet and their pods, best effort."""
        req = self.request
        lines: List[str] = []
        uid = str(((domain or {}).get("metadata") or {}).get("uid") or "")
        try:
            deployments = list_all(self.client, "apps/v1", "Deployment", namespace=req.driver_namespace)
            daemonsets = list_all(self.client, "apps/v1", "DaemonSet", namespace=req.driver_namespace)
            pods = list_all(self.client, "v1", "Pod", namespace=req.driver_namespace)
        except Exception as exc:  # diagnostics must never hide the original failure
            return [f"could not read namespace {req.driver_namespace}: {exc}"]
        if not deployments:
            lines.append(f"no Deployment in namespace {req.driver_namespace} (is the DRA driver installed?)")
        lines.extend(workload_summary(obj) for obj in deployments)
        domain_sets = [obj for obj in daemonsets if of_domain(obj, req.name, uid)]
        if not domain_sets:
            lines.append(f"no daemon DaemonSet of this ComputeDomain ({daemon_set_names(req.name, uid)})")
        lines.extend(workload_summary(obj) for obj in domain_sets)
        controller_names = [(d.get("metadata") or {}).get("name", "") for d in deployments]
        for pod in pods:
            name = (pod.get("metadata") or {}).get("name", "")
            if of_domain(pod, req.name, uid) or any(c and name.startswith(c) for c in controller_names):
                lines.append(pod_summary(pod))
        return lines

    def _result(self, obj: Dict[str, Any], changed: bool, diff: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        status = obj.get("status") or {}
        result: Dict[str, Any] = {
            "changed": changed,
            "compute_domain": obj,
            "status": str(status.get("status") or ""),
            "nodes": [node.to_dict() for node in parse_nodes(status)],
            "channel_template_name": self.request.spec.channel_template_name,
        }
        if diff is not None:
            result["diff"] = diff
        return result
