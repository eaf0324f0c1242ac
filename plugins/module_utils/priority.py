# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The checks' own PriorityClass, and what a preempted check pod means for the verdict.

The checks' pods run at the collection's PriorityClass, the lowest by default and never preempting, so that a
tenant's job takes a tray from a running check rather than waiting for it. The scheduler then deletes the check's
pod; since Kubernetes 1.26 it first sets the pod condition ``DisruptionTarget`` with reason
``PreemptionByScheduler`` (message ``<scheduler>: preempting to accommodate a higher priority pod``). A check
that lost a pod so measured nothing about that tray: it ends ``incomplete`` (the tray stays due), never
``failed``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural

PRIORITY_CLASS = "gpu-fabric-verify"
# Below every pod without a class (0) and far below any a site gives its tenants; the API accepts down to -2^31.
PRIORITY_VALUE = -1000000
PRIORITY_API_VERSION = "scheduling.k8s.io/v1"

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_REASON = "PreemptionByScheduler"


class Preempted(Exception):
    """A pod of the check was preempted: the rack's record is ``incomplete`` (message: one line)."""

    def __init__(self, summary: str, nodes: Iterable[str] = ()) -> None:
        super().__init__(summary)
        self.summary = one_line(summary)
        self.nodes = sorted(set(nodes))


def priority_class_manifest(name: str = PRIORITY_CLASS, value: int = PRIORITY_VALUE) -> Dict[str, Any]:
    """The checks' PriorityClass: ``preemptionPolicy: Never`` (a check never preempts anything), never the default
    (``globalDefault`` left out: false, as the API server shows it, so that a compare finds no difference)."""
    return {
        "apiVersion": PRIORITY_API_VERSION,
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gpu-fabric-verify"}},
        "value": int(value),
        "preemptionPolicy": "Never",
        "description": "The gpu_fabric.mnnvl verification checks' pods, the lowest: any other pod preempts them",
    }


def pod_priority(priority_class: str) -> Dict[str, Any]:
    """The pod spec fields for ``priority_class`` ('' : none, the pod runs at the cluster's default)."""
    return {"priorityClassName": priority_class} if priority_class else {}


def preemption_of(pod: Mapping[str, Any]) -> Optional[str]:
    """Why ``pod`` is going, when the scheduler preempted it: one line naming the pod, its tray and the
    scheduler's message; None for any other pod (running, failed on its own, deleted by someone else)."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == DISRUPTION_TARGET
            and condition.get("status") == "True"
            and condition.get("reason") == PREEMPTION_REASON
        ):
            return _preemption_text(pod, condition.get("message") or "")
    if status.get("reason") == "Preempted":  # a kubelet's own preemption (critical pods) says so in the status
        return _preemption_text(pod, status.get("message") or "")
    return None


def _preemption_text(pod: Mapping[str, Any], message: str) -> str:
    meta = pod.get("metadata") or {}
    node = (pod.get("spec") or {}).get("nodeName") or ""
    where = f" on tray {node}" if node else ""
    said = f" ({one_line(message)})" if message.strip() else ""
    return f"pod {meta.get('name', '?')}{where} was preempted by a pod of higher priority{said}"


def preempted_pods(pods: Iterable[Mapping[str, Any]]) -> Dict[str, str]:
    """Pod name -> preemption text, for each of ``pods`` the scheduler preempted."""
    found: Dict[str, str] = {}
    for pod in pods:
        text = preemption_of(pod)
        if text:
            found[(pod.get("metadata") or {}).get("name", "?")] = text
    return found


def preempted_nodes(pods: Iterable[Mapping[str, Any]]) -> Dict[str, str]:
    """Tray -> pod name, for each preempted pod of ``pods`` that had been scheduled."""
    return {
        (pod.get("spec") or {})["nodeName"]: (pod.get("metadata") or {}).get("name", "?")
        for pod in pods
        if preemption_of(pod) and (pod.get("spec") or {}).get("nodeName")
    }


def preempted(what: str, pods: Iterable[Mapping[str, Any]]) -> Optional[Preempted]:
    """A :class:`Preempted` for the check ``what`` when one of ``pods`` was preempted, else None."""
    pods = list(pods)
    found = preempted_pods(pods)
    if not found:
        return None
    texts = [found[name] for name in sorted(found)]
    return Preempted(
        f"{what}: incomplete, {plural(len(found), 'pod')} preempted: {'; '.join(texts[:3])}"
        + (f" and {len(texts) - 3} more" if len(texts) > 3 else "")
        + "; the trays stay due and are measured again on the next run",
        preempted_nodes(pods),
    )
