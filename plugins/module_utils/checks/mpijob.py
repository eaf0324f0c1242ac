# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the MPIJob checks (``nvbandwidth``, ``nccl``) share: one MPIJob per rack over every usable tray, its
launcher's log judged, the job and its pods deleted in every case."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch, openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import (
    Check,
    CheckFailed,
    NotRun,
    Result,
    by_name,
    skipped_note,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import pod_summary
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import preempted, preemption_of
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rights import grant
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    MPIJOB_API_VERSION,
    mpijob_manifest,
)

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun

ERROR_LINE = re.compile(
    r"_ERROR_|Error:|NCCL WARN|Test NCCL failure|MPI_ABORT was invoked|lost communication with a remote daemon"
)

# The option group ``mpi`` of every MPIJob check: how the launcher and the workers run.
MPI_OPTIONS = dict(
    type="dict",
    default={},
    options=dict(
        run_as_user=dict(type="int", default=1000),
        ssh_auth_mount_path=dict(type="str", default="/home/mpiuser/.ssh"),
        worker_command=dict(
            type="list", elements="str", default=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
        ),
        launcher_affinity=dict(type="dict", default={}),
        backoff_limit=dict(type="int", default=0),
    ),
)

# Seconds between reads of a namespace's events while an MPIJob runs on OpenShift, where SCC admission
# refusing its pods changes nothing the job's watch sees.
SCC_WINDOW = 15.0


class MpiJobCheck(Check):
    """A benchmark in an MPIJob over every usable tray of the rack, judged from the launcher's log."""

    objects = (("MPIJob", MPIJOB_API_VERSION),)
    rights = grant("get list watch create delete", "kubeflow.org", "mpijobs")
    # Seconds an MPIJob may stay without any status condition: the MPI operator sets Created as soon as it
    # syncs the job, so none by then means no operator is running (or none watches the namespace).
    operator_grace = 60.0

    def __init__(self, image: str, mpi: Mapping[str, Any], judge: Callable[..., Dict[str, Any]]) -> None:
        self.image = image
        self.mpi = dict(mpi)
        self.judge_log = judge  # (log, rack plan, trays in rank order) -> verdict dict, see judges.py

    def job_name(self, run: RackRun) -> str:
        return dns_label(self.name.replace("_", "-"), run.plan.name, limit=40)

    def launcher_args(self, run: RackRun) -> List[str]:
        raise NotImplementedError

    def pod_selector(self, run: RackRun, role: str = "") -> str:
        """The MPI operator's labels of this job's pods (role: launcher or worker; empty - both)."""
        selector = f"training.kubeflow.org/job-name={self.job_name(run)}"
        return selector + (f",training.kubeflow.org/job-role={role}" if role else "")

    def owns_pod(self, run: RackRun, name: str) -> bool:
        return re.fullmatch(rf"{re.escape(self.job_name(run))}-(launcher(-[a-z0-9]+)?|worker-\d+)", name) is not None

    def judge(self, run: RackRun, log: str, nodes: Sequence[str]) -> Result:
        """The check's judge (``judges.py``) on the launcher's log; ``nodes``: the tray of each worker in rank order."""
        verdict = self.judge_log(log, run.plan, nodes)
        return Result(
            bool(verdict["passed"]),
            verdict["summary"] + skipped_note(run.plan),
            verdict.get("details", {}),
            verdict.get("failed_nodes", []),
            verdict.get("node_problems", {}),
        )

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        view.update(mpijob=self.job_name(run), ranks=run.plan.gpus_per_tray * len(run.plan.nodes))
        return view

    def manifest(self, run: RackRun) -> Dict[str, Any]:
        return mpijob_manifest(
            self.job_name(run),
            run.namespace,
            self.name,
            run.plan.name,
            run.plan.nodes,
            run.plan.gpus_per_tray,
            run.claim_template,
            self.image,
            self.launcher_args(run),
            self.mpi,
            run.settings.run_id,
            run.settings.tolerations,
            run.settings.priority_class,
        )

    def measure(self, run: RackRun) -> Result:
        job = self.job_name(run)
        run.create_namespace()
        run.create_compute_domain()
        run.api.create(run.with_pull_secrets(self.manifest(run)))

        placement: Dict[str, str] = {}  # worker pod -> tray, read while the workers start
        created = run.clock()
        synced = [False]  # the operator wrote a status: it runs and watches this namespace
        # pod -> the last read of a launcher or worker the scheduler preempted: the pod is deleted a moment later
        # and the job then fails; read at every change of the job and every watch window
        lost: Dict[str, Dict[str, Any]] = {}

        def finished(objects: kube_watch.Objects) -> Optional[Dict[str, str]]:
            if run.settings.openshift:
                self.raise_scc_refusal(run, job)
            for pod in run.api.list("Pod", "v1", run.namespace, self.pod_selector(run)):
                node = (pod.get("spec") or {}).get("nodeName")
                if node and pod["metadata"]["name"].startswith(f"{job}-worker-"):
                    placement[pod["metadata"]["name"]] = node
                if preemption_of(pod):
                    lost[pod["metadata"]["name"]] = pod
            obj = by_name(objects).get(job) or {}
            conditions = (obj.get("status") or {}).get("conditions") or []
            synced[0] = synced[0] or bool(conditions)
            for condition in conditions:
                if condition.get("type") in ("Succeeded", "Failed") and condition.get("status") == "True":
                    return condition
            if not conditions and run.clock() - created > self.operator_grace:
                raise NotRun(
                    f"MPIJob {run.namespace}/{job} has no status after {self.operator_grace:.0f} s: no MPI operator "
                    "is running (or none watches this namespace); check its Deployment (playbooks/cluster.yml "
                    "installs it: role mpi_operator)"
                )
            return None

        def window() -> float:
            """Until the operator writes a status, the watch ends when its grace does, for the judge to say so;
            on OpenShift SCC admission refuses pods with no change to the job: the events are read each
            ``SCC_WINDOW``."""
            if not synced[0]:
                return max(1.0, self.operator_grace - (run.clock() - created) + 1.0)
            return SCC_WINDOW if run.settings.openshift else kube_watch.WINDOW

        condition = run.watch_for(
            f"MPIJob {job} to finish", "MPIJob", MPIJOB_API_VERSION, finished, lambda: self.describe(run), job, window
        )
        launcher = self.launcher(run)
        log = run.read_log(launcher["metadata"]["name"]) if launcher else ""
        if condition["type"] == "Failed" and lost:  # a tenant's pod took a tray: the job says nothing of the fabric
            raise preempted(f"MPIJob {job}", lost.values()) or CheckFailed(f"MPIJob {job} failed")
        if condition["type"] == "Failed":
            gone = sorted({node for node in placement.values() if run.api.get("Node", "v1", node) is None})
            text = self.failure_text(job, condition, launcher, log)
            if gone:
                text += f"; {plural(len(gone), 'tray')} left the cluster during the run: {', '.join(gone)}"
            raise CheckFailed(
                text,
                {"job": job, "launcher": pod_summary(launcher) if launcher else None, "trays_gone": gone},
                failed_nodes=gone,
                node_problems={node: "left the cluster during the run" for node in gone},
            )
        result = self.judge(run, log, self.rank_nodes(run, job, placement))
        result.details.setdefault("job", job)
        return result

    def raise_scc_refusal(self, run: RackRun, job: str) -> None:
        """The MPI operator creates the pods: a refusal by SCC admission shows in its events (FailedCreate)."""
        for event in run.api.list("Event", "v1", run.namespace):
            if event.get("type") == "Warning" and openshift.is_scc_refusal(event.get("message") or ""):
                raise NotRun(
                    openshift.scc_refusal_message(
                        f"pods of MPIJob {run.namespace}/{job}",
                        event.get("message") or "",
                        run.namespace,
                        int(self.mpi["run_as_user"]),
                        "the mpiuser of the mpi-operator images: their sshd runs as no other user",
                    )
                )

    def rank_nodes(self, run: RackRun, job: str, placement: Mapping[str, str]) -> List[str]:
        """The tray of each worker in rank order: ranks fill worker 0 first (``ppr:<slots>:node``), and the
        scheduler, not the order of the trays, decides which tray worker N runs on."""
        nodes = [placement.get(f"{job}-worker-{index}") for index in range(len(run.plan.nodes))]
        if all(nodes) and sorted(nodes) == sorted(run.plan.nodes):
            return [str(node) for node in nodes]
        return list(run.plan.nodes)  # never seen running (a failed start): trays in name order

    def launcher(self, run: RackRun) -> Optional[Dict[str, Any]]:
        pods = run.api.list("Pod", "v1", run.namespace, self.pod_selector(run, "launcher"))
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")[-1] if pods else None

    def describe(self, run: RackRun) -> str:
        pods = run.api.list("Pod", "v1", run.namespace, self.pod_selector(run))
        waiting = [pod_summary(p) for p in pods if (p.get("status") or {}).get("phase") != "Running"]
        return (f"{len(pods)} pod(s); " + "; ".join(waiting[:3])) if pods else "no pod was created"

    def failure_text(self, job: str, condition: Mapping[str, Any], launcher: Optional[Dict[str, Any]], log: str) -> str:
        text = f"MPIJob {job} failed ({condition.get('reason', '')}: {one_line(condition.get('message', ''))})"
        if not launcher:
            return text + "; no launcher pod exists"
        statuses = (launcher.get("status") or {}).get("containerStatuses") or [{}]
        term = ((statuses[0].get("state") or {}).get("terminated")) or {}
        node = (launcher.get("spec") or {}).get("nodeName") or "(unscheduled)"
        text += (
            f"; launcher pod {launcher['metadata']['name']} on {node}"
            f" is {(launcher.get('status') or {}).get('phase')} (exit code {term.get('exitCode', 'none')}, "
            f"reason {term.get('reason', 'none')})"
        )
        lines = [line.strip() for line in log.splitlines() if line.strip()]
        errors = [line for line in lines if ERROR_LINE.search(line)]
        if errors:
            return text + "; error lines: " + " / ".join(errors[:3])
        return text + ("; last log lines: " + " / ".join(lines[-5:]) if lines else "")

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        job = self.job_name(run)

        def delete_job() -> None:
            if not run.api.served("MPIJob", MPIJOB_API_VERSION):
                return
            run.api.delete("MPIJob", MPIJOB_API_VERSION, job, run.namespace, propagation="Foreground")
            run.watch_for(
                f"MPIJob {job} and its pods to be deleted",
                "MPIJob",
                MPIJOB_API_VERSION,
                lambda objects: not objects,
                name=job,
            )

        return [(f"delete MPIJob {job}", delete_job)]
