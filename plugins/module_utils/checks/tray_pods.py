# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the checks that run one pod on every tray share (``gpu_health``, ``dcgm_diag``): the pod pinned to its
tray, the wait until every pod finished, each tray judged from its pod's log, the pods deleted in every case.

A check of this kind says what its pod runs (``container``) and how one tray's output is judged (``judge_tray``);
the rest is here. A pod that ends ``Failed`` is judged by its output too (``dcgmi diag`` exits non-zero when a
test fails: ``fails_with_findings``); otherwise a failed pod fails its tray, naming the pod and its exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import (
    CheckView,
    TrayFindings,
    check_view,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import (
    Check,
    Result,
    by_name,
    skipped_note,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import detail_facts
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import GPU_PRESENT_LABEL
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    pod_summary,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import pod_priority, preempted
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import natural_key, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    common_labels,
    pod_tolerations,
)

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun

FINISHED = ("Succeeded", "Failed")


@dataclass
class TrayFinding:
    """One tray's verdict: ``problems`` (one line each, naming the GPU) fail it; ``notes`` do not."""

    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    details: Dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems


def findings_text(bad: Dict[str, List[str]], limit: int = 3) -> str:
    """``t3: GPU 2 ...; t7: ...`` for the first ``limit`` trays, then how many more."""
    parts = [f"{node}: {'; '.join(problems[:2])}" for node, problems in list(bad.items())[:limit]]
    more = f"; {plural(len(bad) - limit, 'more tray')}" if len(bad) > limit else ""
    return "; ".join(parts) + more


class TrayPodCheck(Check):
    """A tool run in one pod on every usable tray of the rack, each tray judged from what its pod printed."""

    pod_prefix = ""  # the pods are <pod_prefix>-<tray>
    what = ""  # what the pods do, for messages: "read the GPU health signals"
    fails_with_findings = False  # the tool exits non-zero when it finds a problem (its output says which)

    @classmethod
    def view(cls, record: Mapping[str, Any]) -> CheckView:
        """The facts and each tray's findings as its pod's output gave them: the problems (naming the GPU) that
        fail the tray and the notes that do not; a tray with neither is left out."""
        details = record.get("details") or {}
        trays = details.get("trays") if isinstance(details.get("trays"), dict) else {}
        findings = [
            TrayFindings(
                tray=node,
                problems=[str(line) for line in trays[node].get("problems") or []],
                notes=[str(line) for line in trays[node].get("notes") or []],
            )
            for node in sorted(trays, key=natural_key)
            if isinstance(trays[node], dict) and (trays[node].get("problems") or trays[node].get("notes"))
        ]
        return check_view(facts=detail_facts(details), findings=findings)

    def pod_name(self, node: str) -> str:
        return dns_label(self.pod_prefix, node)

    def container(self, run: RackRun, node: str) -> Dict[str, Any]:
        """The pod's one container (image, command, security context, resources)."""
        raise NotImplementedError

    def pod_spec(self, run: RackRun, node: str) -> Dict[str, Any]:
        """More of the pod's spec (e.g. ``runtimeClassName``, ``hostPID``)."""
        return {}

    def judge_tray(self, node: str, log: str, gpus: int) -> TrayFinding:
        """One tray's verdict from its pod's log; ``gpus``: the GPUs the tray has (the rack plan's), which the
        output must account for, each one."""
        raise NotImplementedError

    def passed_summary(self, run: RackRun, findings: Dict[str, TrayFinding]) -> str:
        nodes = run.plan.nodes
        return f"{self.what}: no problem on {len(nodes)} of {len(nodes)} trays ({nodes[0]} .. {nodes[-1]})"

    def manifest(self, run: RackRun, node: str) -> Dict[str, Any]:
        labels = dict(common_labels(self.name, run.plan.name, run.settings.run_id))
        labels["app.kubernetes.io/name"] = self.pod_prefix
        spec: Dict[str, Any] = {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                }
            },
            # a GPU tray's label besides its name: the host-check grant's admission policy admits a privileged pod
            # only with it (docs/rbac/verify-stage.yaml), as it cannot read the Node a name points to
            "nodeSelector": {GPU_PRESENT_LABEL: "true"},
            "tolerations": pod_tolerations(run.settings.tolerations),
            **pod_priority(run.settings.priority_class),
            "containers": [dict(self.container(run, node), name="ctr")],
        }
        spec.update(self.pod_spec(run, node))
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.pod_name(node), "namespace": run.namespace, "labels": labels},
            "spec": spec,
        }

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        return {
            "namespace": run.namespace,
            "nodes": list(run.plan.nodes),
            "pods": [self.pod_name(n) for n in run.plan.nodes],
        }

    def owns_pod(self, run: RackRun, name: str) -> bool:
        return name in {self.pod_name(node) for node in run.plan.nodes}

    def measure(self, run: RackRun) -> Result:
        nodes = run.plan.nodes
        names = {node: self.pod_name(node) for node in nodes}
        run.create_namespace()
        for node in nodes:
            run.create_pod(self.manifest(run, node))

        def pods() -> Dict[str, Dict[str, Any]]:
            return {p["metadata"]["name"]: p for p in run.api.list("Pod", "v1", run.namespace, run.selector)}

        def describe() -> str:
            seen = pods()
            waiting = [
                pod_summary(seen[names[n]])
                for n in nodes
                if names[n] in seen and _phase(seen[names[n]]) not in FINISHED
            ]
            return f"{len(waiting)} pod(s) not finished: " + "; ".join(waiting[:3]) if waiting else "every pod finished"

        def finished(objects: kube_watch.Objects) -> bool:
            seen = by_name(objects)
            lost = preempted(self.what, seen.values())
            if lost:  # the scheduler deletes the pod: its tray measured nothing
                raise lost
            return all(_phase(seen.get(names[n]) or {}) in FINISHED for n in nodes)

        run.watch_for(f"the {self.pod_prefix} pods to finish", "Pod", "v1", finished, describe)
        seen = pods()
        findings: Dict[str, TrayFinding] = {}
        for node in nodes:
            finding = self.judge_tray(node, run.read_log(names[node]), run.plan.gpus_per_tray)
            if (
                _phase(seen.get(names[node]) or {}) == "Failed"
                and not finding.problems
                and not self.fails_with_findings
            ):
                finding.problems.append(f"pod {names[node]} failed: {pod_summary(seen[names[node]])}")
            findings[node] = finding
        bad = {node: f.problems for node, f in findings.items() if f.problems}
        details = {
            "trays": {node: dict(f.details, problems=f.problems, notes=f.notes) for node, f in findings.items()},
            "violations": [f"{node}: {problem}" for node, problems in bad.items() for problem in problems],
        }
        if bad:
            return Result(
                False,
                f"{self.what}: problems on {len(bad)} of {len(nodes)} trays: {findings_text(bad)}",
                details,
                list(bad),
                {node: "; ".join(problems) for node, problems in bad.items()},
            )
        return Result(True, self.passed_summary(run, findings) + skipped_note(run.plan), details)

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        def delete_pods() -> None:
            for node in run.plan.nodes:
                run.api.delete("Pod", "v1", self.pod_name(node), run.namespace)
            run.watch_for(f"the {self.pod_prefix} pods to be deleted", "Pod", "v1", lambda objects: not objects)

        return [(f"delete the {self.pod_prefix} pods", delete_pods)]


def _phase(pod: Dict[str, Any]) -> Optional[str]:
    return (pod.get("status") or {}).get("phase")
