# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the Kubeflow MPI operator controller (v0.6.0, v0.8.0 and v0.8.2: same objects), as seen from the API.

The real controller does not build from the Go module proxy (a dependency is not served), so
this one creates what it creates for a ``kubeflow.org/v2beta1`` MPIJob, with the same names and
labels: Secret ``<job>-ssh``, ConfigMap ``<job>-config`` (hostfile, discover_hosts.sh), headless
Service ``<job>``, worker Pods ``<job>-worker-<i>`` and the launcher ``batch/v1`` Job
``<job>-launcher`` (after the workers are Ready with ``launcherCreationPolicy:
WaitForWorkersReady``); every object is owned by the MPIJob, so deleting it lets the real
garbage collector remove them. ``status`` carries the conditions Created / Running /
Restarting / Succeeded / Failed and ``replicaStatuses``; ``runPolicy.cleanPodPolicy`` is
applied once the job is finished. It acts only while the operator Deployment installed from
the manifest has a ready replica.

Fault ``launcher-fails`` (param ``code``, default 1): the launcher pod template carries the
annotation ``gpu-fabric.sim/exit-code``, which the kwok stages turn into a Failed pod.
"""

from __future__ import annotations

import copy
import logging
from datetime import datetime, timezone
from typing import Any, Optional

from simrack.controllers.base import Controller, is_ready, is_running, labels_of
from simrack.controllers.kube import (
    CONFIGMAPS,
    DEPLOYMENTS,
    JOBS,
    MPIJOBS,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    ApiError,
    owner_reference,
)

log = logging.getLogger("simrack")

OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
EXIT_CODE_ANNOTATION = "gpu-fabric.sim/exit-code"
# On a running launcher pod: the worker (and its tray) that went away under it; mpirun then ends as
# Open MPI does when it loses a remote daemon (the kwok stages finish the pod as Failed, exit code 1).
WORKER_LOST_ANNOTATION = "gpu-fabric.sim/worker-lost"
LOG_WRITTEN = "gpu-fabric.sim/log-written"  # on Job pods: the kwok stages finish them only then (podlogs.py)
OPERATOR_SELECTOR = "app.kubernetes.io/name=mpi-operator"


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """The v0.6.0 defaults (``default.go``): note cleanPodPolicy defaults to None in code."""
    spec = copy.deepcopy(spec)
    spec.setdefault("slotsPerWorker", 1)
    spec.setdefault("sshAuthMountPath", "/root/.ssh")
    spec.setdefault("launcherCreationPolicy", "AtStartup")
    spec.setdefault("mpiImplementation", "OpenMPI")
    run_policy = spec.setdefault("runPolicy", {})
    run_policy.setdefault("cleanPodPolicy", "None")
    replicas = spec.setdefault("mpiReplicaSpecs", {})
    if "Launcher" in replicas:
        replicas["Launcher"].setdefault("replicas", 1)
        replicas["Launcher"].setdefault("restartPolicy", "OnFailure")
    if "Worker" in replicas:
        replicas["Worker"].setdefault("replicas", 0)
        replicas["Worker"].setdefault("restartPolicy", "Never")
    return spec


def base_labels(job_name: str, role: str) -> dict[str, str]:
    return {OPERATOR_NAME: "mpi-operator", JOB_NAME: job_name, JOB_ROLE: role}


def hostfile(job: dict[str, Any], spec: dict[str, Any]) -> str:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    workers = int(spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0))
    slots = int(spec["slotsPerWorker"])
    return "".join(f"{name}-worker-{i}.{name}.{ns}.svc slots={slots}\n" for i in range(workers))


def config_map(job: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    workers = int(spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0))
    discover = "#!/bin/sh\n" + "".join(f"echo {name}-worker-{i}.{name}.{ns}.svc\n" for i in range(workers))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{name}-config",
            "namespace": ns,
            "labels": {"app": name},
            "ownerReferences": [owner_reference(job)],
        },
        "data": {"hostfile": hostfile(job, spec), "discover_hosts.sh": discover},
    }


def ssh_secret(job: dict[str, Any]) -> dict[str, Any]:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    private, public = ssh_keypair()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": {
            "name": f"{name}-ssh",
            "namespace": ns,
            "labels": {"app": name},
            "ownerReferences": [owner_reference(job)],
        },
        "stringData": {"ssh-privatekey": private, "ssh-publickey": public},
    }


def ssh_keypair() -> tuple[str, str]:
    """An ECDSA P-521 key pair like the real operator's (PEM private key, OpenSSH public key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public + "\n"


def service(job: dict[str, Any]) -> dict[str, Any]:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}, "ownerReferences": [owner_reference(job)]},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {OPERATOR_NAME: "mpi-operator", JOB_NAME: name},
        },
    }


def _pod_spec(
    job: dict[str, Any], spec: dict[str, Any], role: str, hostname: str, restart: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(template metadata, pod spec) for one replica, as the operator mutates the user's template."""
    name = job["metadata"]["name"]
    template = copy.deepcopy(spec["mpiReplicaSpecs"][role.capitalize()].get("template") or {})
    meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    pod_spec["hostname"] = hostname
    pod_spec["subdomain"] = name
    pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    volumes = pod_spec.setdefault("volumes", [])
    volumes.append(
        {
            "name": "ssh-auth",
            "secret": {
                "secretName": f"{name}-ssh",
                "defaultMode": 0o600,
                "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa"},
                    {"key": "ssh-publickey", "path": "id_rsa.pub"},
                    {"key": "ssh-publickey", "path": "authorized_keys"},
                ],
            },
        }
    )
    env = [{"name": "K_MPI_JOB_ROLE", "value": role}]
    mounts = [{"name": "ssh-auth", "mountPath": spec["sshAuthMountPath"]}]
    if role == "launcher":
        volumes.append(
            {
                "name": "mpi-job-config",
                "configMap": {
                    "name": f"{name}-config",
                    "items": [
                        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
                    ],
                },
            }
        )
        mounts.append({"name": "mpi-job-config", "mountPath": "/etc/mpi"})
        env += [
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
            {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
            {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
            {"name": "OMPI_MCA_orte_set_default_slots", "value": str(spec["slotsPerWorker"])},
        ]
        if not spec.get("runLauncherAsWorker"):
            env += [
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
            ]
    for container in pod_spec.get("containers") or []:
        container["env"] = [*(container.get("env") or []), *env]
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), *mounts]
    return meta, pod_spec


def worker_pod(job: dict[str, Any], spec: dict[str, Any], index: int) -> dict[str, Any]:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    pod_name = f"{name}-worker-{index}"
    meta, pod_spec = _pod_spec(job, spec, "worker", pod_name, spec["mpiReplicaSpecs"]["Worker"]["restartPolicy"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": ns,
            "labels": {**(meta.get("labels") or {}), **base_labels(name, "worker"), REPLICA_INDEX: str(index)},
            "annotations": meta.get("annotations") or {},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": pod_spec,
    }


def launcher_job(job: dict[str, Any], spec: dict[str, Any], exit_code: Optional[int]) -> dict[str, Any]:
    name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    meta, pod_spec = _pod_spec(
        job, spec, "launcher", f"{name}-launcher", spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"]
    )
    annotations = dict(meta.get("annotations") or {})
    if exit_code is not None:
        annotations[EXIT_CODE_ANNOTATION] = str(exit_code)
    run_policy = spec["runPolicy"]
    job_spec: dict[str, Any] = {
        "template": {
            "metadata": {
                "labels": {**(meta.get("labels") or {}), **base_labels(name, "launcher")},
                "annotations": annotations,
            },
            "spec": pod_spec,
        }
    }
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        if run_policy.get(key) is not None:
            job_spec[key] = run_policy[key]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-launcher",
            "namespace": ns,
            "labels": {"app": name},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": job_spec,
    }


def lost_worker(workers: list[Optional[dict[str, Any]]], node_names: set[str]) -> Optional[str]:
    """``<worker pod>@<tray>`` of the first worker that ran and is gone: its tray deleted, or the pod being
    deleted or failed; None while every worker that was placed is still there."""
    for worker in workers:
        if worker is None:
            continue
        node = (worker.get("spec") or {}).get("nodeName")
        if not node:
            continue
        gone = node not in node_names or worker["metadata"].get("deletionTimestamp")
        if gone or (worker.get("status") or {}).get("phase") == "Failed":
            return f"{worker['metadata']['name']}@{node}"
    return None


def set_condition(
    conditions: list[dict[str, Any]], ctype: str, status: str, reason: str, message: str
) -> list[dict[str, Any]]:
    """Conditions with ``ctype`` set; timestamps move only when the status changes."""
    out = [dict(c) for c in conditions]
    for cond in out:
        if cond.get("type") == ctype:
            if cond.get("status") != status:
                cond.update(status=status, reason=reason, message=message, lastTransitionTime=now())
                cond["lastUpdateTime"] = cond["lastTransitionTime"]
            return out
    stamp = now()
    out.append(
        {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    return out


def condition_true(conditions: list[dict[str, Any]], ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def job_condition(job: Optional[dict[str, Any]], ctype: str) -> Optional[dict[str, Any]]:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


class MPIOperatorController(Controller):
    name = "mpi-operator"
    watched = (MPIJOBS, PODS, JOBS)
    resync = 3.0

    def operator_ready(self) -> bool:
        return any(
            (d.get("status") or {}).get("readyReplicas", 0) >= 1
            for d in self.kube.list(DEPLOYMENTS, label_selector=OPERATOR_SELECTOR)
        )

    def reconcile(self) -> None:
        jobs = self.kube.list(MPIJOBS)
        if not jobs or not self.operator_ready():
            return
        pods = self.list(PODS, label_selector=f"{OPERATOR_NAME}=mpi-operator")
        self.node_names = {n["metadata"]["name"] for n in self.kube.list(NODES)}
        for job in jobs:
            if job["metadata"].get("deletionTimestamp"):
                continue
            try:
                self.sync(job, pods)
            except ApiError as err:
                if err.status == 403 and "NamespaceTerminating" in err.body:
                    continue
                log.warning("MPIJob %s/%s: %s", job["metadata"]["namespace"], job["metadata"]["name"], err)
            except Exception as err:
                log.warning("MPIJob %s/%s: %s", job["metadata"]["namespace"], job["metadata"]["name"], err)

    def sync(self, job: dict[str, Any], all_pods: list[dict[str, Any]]) -> None:
        meta = job["metadata"]
        name, ns, uid = meta["name"], meta["namespace"], meta["uid"]
        spec = defaults(job.get("spec") or {})
        status = job.get("status") or {}
        conditions = list(status.get("conditions") or [])
        finished = condition_true(conditions, "Succeeded") or condition_true(conditions, "Failed")
        pods = [
            p
            for p in all_pods
            if p["metadata"].get("namespace") == ns
            and any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]
        workers = {p["metadata"]["name"]: p for p in pods if labels_of(p).get(JOB_ROLE) == "worker"}
        n_workers = int(spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0))

        if not finished:
            if self.kube.get(SECRETS, f"{name}-ssh", ns) is None:
                self.kube.create(SECRETS, ssh_secret(job), ns)
            self.kube.create(CONFIGMAPS, config_map(job, spec), ns)
            self.kube.create(SERVICES, service(job), ns)
            for i in range(n_workers):
                if f"{name}-worker-{i}" not in workers:
                    created = self.kube.create(PODS, worker_pod(job, spec, i), ns)
                    if created:
                        workers[created["metadata"]["name"]] = created
                        log.info("MPIJob %s/%s: created worker %d", ns, name, i)

        launcher = self.kube.get(JOBS, f"{name}-launcher", ns)
        wanted_workers = [workers.get(f"{name}-worker-{i}") for i in range(n_workers)]
        workers_ready = all(w is not None and is_ready(w) for w in wanted_workers)
        if (
            launcher is None
            and not finished
            and (spec["launcherCreationPolicy"] != "WaitForWorkersReady" or workers_ready)
        ):
            fault = self.faults.get("launcher-fails")
            exit_code = int(fault.get("code", 1)) if fault is not None else None
            launcher = self.kube.create(JOBS, launcher_job(job, spec, exit_code), ns)
            log.info("MPIJob %s/%s: created launcher%s", ns, name, f" (exit code {exit_code})" if exit_code else "")

        if not finished and launcher is not None:
            self.lose_launcher(name, ns, all_pods, wanted_workers)
        conditions = self.conditions(job, conditions, launcher, pods, wanted_workers)
        replica_statuses = self.replica_statuses(launcher, list(workers.values()))
        new_status: dict[str, Any] = {"conditions": conditions, "replicaStatuses": replica_statuses}
        new_status["startTime"] = status.get("startTime") or now()
        if condition_true(conditions, "Succeeded") or condition_true(conditions, "Failed"):
            new_status["completionTime"] = status.get("completionTime") or now()
            self.clean_pods(spec, list(workers.values()))
        if any(new_status.get(k) != status.get(k) for k in new_status):
            self.kube.merge_patch(MPIJOBS, name, {"status": new_status}, ns, sub="status")

    def lose_launcher(
        self, name: str, ns: str, all_pods: list[dict[str, Any]], workers: list[Optional[dict[str, Any]]]
    ) -> None:
        """A worker gone from under a running launcher (its tray deleted, the pod deleted or failed): the
        launcher's mpirun loses that daemon and fails, as it does on a real cluster."""
        lost = lost_worker(workers, getattr(self, "node_names", set()))
        if lost is None:
            return
        for pod in all_pods:
            meta = pod["metadata"]
            if (
                meta.get("namespace") == ns
                and labels_of(pod).get(JOB_NAME) == name
                and labels_of(pod).get(JOB_ROLE) == "launcher"
                and is_running(pod)
                and not (meta.get("annotations") or {}).get(WORKER_LOST_ANNOTATION)
            ):
                # the log is written again (failed) before the kwok stages may finish the pod; only while the
                # pod is as it was listed, running (the resourceVersion a precondition): an mpirun that already
                # finished cannot lose a daemon any more
                annotations = {WORKER_LOST_ANNOTATION: lost, EXIT_CODE_ANNOTATION: "1", LOG_WRITTEN: None}
                patch = {"metadata": {"annotations": annotations, "resourceVersion": meta.get("resourceVersion")}}
                try:
                    patched = self.kube.merge_patch(PODS, meta["name"], patch, ns)  # None: the pod is gone
                except ApiError as err:
                    if err.status != 409:
                        raise
                    patched = None
                if patched is None:
                    log.info("MPIJob %s/%s: launcher %s changed before its worker was lost", ns, name, meta["name"])
                    continue
                log.info("MPIJob %s/%s: worker %s lost under launcher %s", ns, name, lost, meta["name"])

    def conditions(
        self,
        job: dict[str, Any],
        conditions: list[dict[str, Any]],
        launcher: Optional[dict[str, Any]],
        pods: list[dict[str, Any]],
        workers: list[Optional[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        ref = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        if not any(c.get("type") == "Created" for c in conditions):
            conditions = set_condition(conditions, "Created", "True", "MPIJobCreated", f"MPIJob {ref} is created.")
        if condition_true(conditions, "Succeeded") or condition_true(conditions, "Failed"):
            return conditions
        complete = job_condition(launcher, "Complete")
        failed = job_condition(launcher, "Failed")
        if complete:
            conditions = set_condition(
                conditions, "Running", "False", "MPIJobSucceeded", f"MPIJob {ref} successfully completed."
            )
            return set_condition(
                conditions, "Succeeded", "True", "MPIJobSucceeded", f"MPIJob {ref} successfully completed."
            )
        if failed:
            reason = failed.get("reason") or "MPIJobFailed"
            message = (
                "Job has reached the specified backoff limit"
                if reason == "BackoffLimitExceeded"
                else (failed.get("message") or "launcher failed")
            )
            conditions = set_condition(conditions, "Running", "False", "MPIJobFailed", f"MPIJob {ref} has failed.")
            return set_condition(conditions, "Failed", "True", reason, message)
        evicted = [w for w in workers if w is not None and (w.get("status") or {}).get("phase") == "Failed"]
        if evicted:
            msg = f"{evicted[0]['metadata']['name']} failed: {(evicted[0].get('status') or {}).get('reason', 'Error')}"
            conditions = set_condition(conditions, "Running", "False", "MPIJobFailed", msg)
            return set_condition(conditions, "Failed", "True", "MPIJobFailed", msg)
        if launcher is not None and ((launcher.get("status") or {}).get("failed") or 0) > 0:
            conditions = set_condition(
                conditions, "Restarting", "True", "MPIJobRestarting", f"Launcher for job {ref} failed, restarting"
            )
        launcher_running = any(labels_of(p).get(JOB_ROLE) == "launcher" and is_running(p) for p in pods)
        if launcher_running and all(w is not None and is_running(w) for w in workers):
            conditions = set_condition(conditions, "Running", "True", "MPIJobRunning", f"MPIJob {ref} is running.")
        return conditions

    @staticmethod
    def replica_statuses(launcher: Optional[dict[str, Any]], workers: list[dict[str, Any]]) -> dict[str, Any]:
        lst = (launcher or {}).get("status") or {}
        phases = [(w.get("status") or {}).get("phase") for w in workers]
        return {
            "Launcher": {
                "active": lst.get("active", 0),
                "succeeded": lst.get("succeeded", 0),
                "failed": lst.get("failed", 0),
            },
            "Worker": {
                "active": sum(1 for w in workers if is_running(w)),
                "succeeded": phases.count("Succeeded"),
                "failed": phases.count("Failed"),
            },
        }

    def clean_pods(self, spec: dict[str, Any], workers: list[dict[str, Any]]) -> None:
        policy = spec["runPolicy"]["cleanPodPolicy"]
        for pod in workers:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            phase = (pod.get("status") or {}).get("phase")
            if policy == "All" or (policy == "Running" and phase in ("Running", "Pending")):
                self.kube.delete(PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])
                log.info(
                    "cleanPodPolicy %s: deleted %s/%s", policy, pod["metadata"]["namespace"], pod["metadata"]["name"]
                )
