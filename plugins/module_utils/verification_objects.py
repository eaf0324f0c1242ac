# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Kubernetes objects a check creates on one rack: namespace, IMEX channel pods, MPIJobs.

Pure functions from a rack's trays and the check's settings to manifests (dicts), so what the
collection creates is unit-tested and written once for every check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_taint import UNVERIFIED_TOLERATION
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import pod_priority

PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "gpu-fabric-verify"
CHECK_LABEL = "gpu-fabric.nvidia.com/check"
RACK_LABEL = "gpu-fabric.nvidia.com/rack"
RUN_LABEL = "gpu-fabric.nvidia.com/run-id"
MPIJOB_API_VERSION = "kubeflow.org/v2beta1"

# The checks' pods tolerate the taint this collection puts on failed trays, so a failed tray is
# measured again and can pass.
TOLERATIONS: List[Dict[str, str]] = [dict(UNVERIFIED_TOLERATION)]


def pod_tolerations(gpu_node_tolerations: Sequence[Mapping[str, Any]] = ()) -> List[Dict[str, Any]]:
    """The collection's own toleration, then the GPU nodes' (``gpu_fabric_gpu_tolerations``), each once."""
    out: List[Dict[str, Any]] = [dict(t) for t in TOLERATIONS]
    for toleration in gpu_node_tolerations:
        if dict(toleration) not in out:
            out.append(dict(toleration))
    return out


# The launcher prefers the control plane, as in NVIDIA's nvbandwidth demo; clusters without one still run it.
DEFAULT_LAUNCHER_AFFINITY: Dict[str, Any] = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]
                },
            }
        ]
    }
}


# What every container of the checks runs with (Pod Security Standard "restricted"): no privilege, no
# privilege escalation (no_new_privs), no Linux capability, the runtime's default seccomp profile. No pod
# of the checks uses hostPath, hostNetwork, hostPID or hostIPC, and none mounts a service account token:
# they never call the API.
CONTAINER_SECURITY: Dict[str, Any] = {
    "privileged": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}

# The one exception, on the MPI workers: their sshd. The mpi-operator v0.6.0 base images
# (build/base/Dockerfile) run sshd as the unprivileged mpiuser (uid 1000) on port 2222, with its host key
# and config under /home/mpiuser, and mark /usr/sbin/sshd with the file capability
# CAP_NET_BIND_SERVICE=+eip. The kernel refuses to execute a binary whose file capabilities are not in
# the container's bounding set (EPERM), so with every capability dropped sshd would not start.
# NET_BIND_SERVICE is therefore kept in the bounding set; with allowPrivilegeEscalation false the
# process does not gain it (no_new_privs), and port 2222 needs none. "restricted" allows exactly this
# one capability.
SSHD_CAPABILITIES: Dict[str, List[str]] = {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}

# On OpenShift the MPI pods keep their fixed user (uid 1000) although restricted-v2 admits only the
# namespace's range: in those images mpiuser is the only account (``useradd -m mpiuser``), its home and
# sshd config (PidFile, HostKey under /home/mpiuser) belong to it, and OpenSSH needs a passwd entry for the
# user it runs as (the launcher's ssh exits with "No user exists for uid N", sshd refuses an unknown user).
# The namespace's service account must be allowed SCC nonroot-v2 (docs/openshift.md).


def _user(run_as_user: Optional[int]) -> Dict[str, Any]:
    """runAsNonRoot, and the user and group; ``None``: no fixed user, the namespace decides (OpenShift's SCC
    assigns the first ID of the namespace's range)."""
    if run_as_user is None:
        return {"runAsNonRoot": True}
    return {"runAsNonRoot": True, "runAsUser": int(run_as_user), "runAsGroup": int(run_as_user)}


def container_security(
    run_as_user: Optional[int], capabilities: Optional[Mapping[str, List[str]]] = None
) -> Dict[str, Any]:
    security = {key: (dict(value) if isinstance(value, dict) else value) for key, value in CONTAINER_SECURITY.items()}
    security.update(_user(run_as_user))
    if capabilities is not None:
        security["capabilities"] = {key: list(value) for key, value in capabilities.items()}
    return security


def pod_security(run_as_user: Optional[int]) -> Dict[str, Any]:
    return dict(_user(run_as_user), seccompProfile={"type": "RuntimeDefault"})


def common_labels(check: str, rack: str, run_id: str = "") -> Dict[str, str]:
    labels = {PART_OF_LABEL: PART_OF, CHECK_LABEL: check, RACK_LABEL: dns_label(rack)}
    if run_id:
        labels[RUN_LABEL] = label_value(run_id)
    return labels


def label_value(text: str) -> str:
    """``text`` as a label value (at most 63 characters of ``[A-Za-z0-9._-]``, alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


# The Secret types a pod's imagePullSecrets may name (kubelet reads no other).
PULL_SECRET_TYPES = ("kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg")


def pull_secret_copy(
    secret: Mapping[str, Any], namespace: str, check: str, rack: str, run_id: str = ""
) -> Dict[str, Any]:
    """The copy of an image pull Secret for a check's own namespace: its name, type and data only (no
    ownerReferences, resourceVersion, uid, annotations or labels of the source), labelled as the check's
    other objects so that it goes with the namespace and the uninstall finds it."""
    meta = secret.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": meta["name"], "namespace": namespace, "labels": common_labels(check, rack, run_id)},
        "type": secret.get("type"),
        "data": dict(secret.get("data") or {}),
    }


def own_selector(check: str, rack: str) -> str:
    """The label selector of the objects one check creates on one rack.

    The run id is not part of it: objects an interrupted earlier run of the same check on the same rack
    left behind carry the same names, so they are this check's to delete and to count as well.
    """
    labels = common_labels(check, rack)
    return ",".join(f"{key}={labels[key]}" for key in (PART_OF_LABEL, CHECK_LABEL, RACK_LABEL))


def owned_by_pods(objects: Sequence[Mapping[str, Any]], is_own_pod: Callable[[str], bool]) -> List[Mapping[str, Any]]:
    """The objects (ResourceClaims made from a template) that a pod of ours owns.

    A claim made for a pod's ``resourceClaimTemplateName`` carries the labels of the template, which the
    DRA controller writes, not ours; its owner reference names the pod.
    """
    return [
        obj
        for obj in objects
        if any(
            ref.get("kind") == "Pod" and is_own_pod(str(ref.get("name") or ""))
            for ref in ((obj.get("metadata") or {}).get("ownerReferences") or [])
        )
    ]


def namespace_manifest(name: str, check: str, rack: str, pod_security_level: str) -> Dict[str, Any]:
    labels = common_labels(check, rack)
    labels["pod-security.kubernetes.io/enforce"] = pod_security_level
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


# The ClusterRole of docs/rbac/verify-stage.yaml that reads pods' logs: the verify account holds it in no namespace,
# and binds it to itself in each namespace it creates (``log_reader_binding``); the binding goes with the namespace.
LOG_READER_ROLE = "gpu-fabric-verify-logs"
_SERVICE_ACCOUNT_USER = "system:serviceaccount:"


def rbac_subject(username: str) -> Dict[str, str]:
    """The RBAC subject that is the user ``username``: a ServiceAccount for ``system:serviceaccount:<ns>:<name>``,
    else a User of that name."""
    if username.startswith(_SERVICE_ACCOUNT_USER):
        namespace, _sep, name = username[len(_SERVICE_ACCOUNT_USER) :].partition(":")
        if namespace and name and ":" not in name:
            return {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": username}


def log_reader_binding(namespace: str, username: str, labels: Mapping[str, str]) -> Dict[str, Any]:
    """The RoleBinding that lets ``username`` read the logs of the pods in ``namespace``, one of the checks' own
    (the policy gpu-fabric-verify-own-namespaces admits it there and for the account itself only)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": LOG_READER_ROLE, "namespace": namespace, "labels": dict(labels)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": LOG_READER_ROLE},
        "subjects": [rbac_subject(username)],
    }


def _pin_to(node: str) -> Dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }


def imex_pod_name(node: str) -> str:
    """``imex-channel-<node>``: a tray is in one rack only, so racks sharing a namespace never collide."""
    return dns_label("imex-channel", node)


def imex_pod_manifest(
    node: str,
    namespace: str,
    rack: str,
    claim_template: str,
    image: str,
    run_as_user: Optional[int],
    run_id: str = "",
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str = "",
) -> Dict[str, Any]:
    """A pod on ``node`` that claims the rack's IMEX channel and lists the channel directory.

    ``run_as_user`` None: no fixed user (on OpenShift, the namespace's SCC range decides; ``ls`` runs as any).
    ``priority_class``: the checks' PriorityClass ('': none).
    """
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": imex_pod_name(node),
            "namespace": namespace,
            "labels": dict(
                common_labels("imex_channel", rack, run_id), **{"app.kubernetes.io/name": "imex-channel-injection"}
            ),
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": pod_security(run_as_user),
            "affinity": _pin_to(node),
            "tolerations": pod_tolerations(tolerations),
            **pod_priority(priority_class),
            "containers": [
                {
                    "name": "ctr",
                    "image": image,
                    "command": ["ls", "-la", "/dev/nvidia-caps-imex-channels"],
                    "securityContext": container_security(run_as_user),
                    "resources": {"claims": [{"name": "imex-channel"}]},
                }
            ],
            "resourceClaims": [{"name": "imex-channel", "resourceClaimTemplateName": claim_template}],
        },
    }


@dataclass(frozen=True)
class _MpiPods:
    """What the launcher and the workers of one MPIJob share: the check's labels, the key of the replica label,
    the user, the image, the tolerations and the PriorityClass."""

    labels: Dict[str, str]
    replica: str
    user: int
    image: str
    tolerations: Sequence[Mapping[str, Any]]
    priority_class: str

    def template(self, role: str, affinity: Dict[str, Any], container: Dict[str, Any], **more: Any) -> Dict[str, Any]:
        """The pod template of ``role`` (mpi-launcher, mpi-worker): no API token, the restricted user, one
        container named after the role."""
        return {
            "metadata": {"labels": dict(self.labels, **{self.replica: role})},
            "spec": {
                "automountServiceAccountToken": False,
                "securityContext": pod_security(self.user),
                "affinity": affinity,
                "tolerations": pod_tolerations(self.tolerations),
                **pod_priority(self.priority_class),
                "containers": [{"name": role, "image": self.image, **container}],
                **more,
            },
        }

    def launcher(self, args: List[str], affinity: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
        """The launcher: ``mpirun`` with ``args``, where ``affinity`` puts it (else near the control plane)."""
        container = {"securityContext": container_security(self.user), "command": ["mpirun"], "args": args}
        return self.template("mpi-launcher", dict(affinity or DEFAULT_LAUNCHER_AFFINITY), container)

    def worker(self, command: List[str], nodes: Sequence[str], slots: int, claim_template: str) -> Dict[str, Any]:
        """A worker: one per tray of ``nodes``, every GPU of it (``slots``) and the ComputeDomain's channel, its
        sshd running ``command``."""
        container = {
            "securityContext": container_security(self.user, SSHD_CAPABILITIES),
            "command": command[:1],
            "args": command[1:],
            "resources": {"limits": {"nvidia.com/gpu": slots}, "claims": [{"name": "compute-domain-channel"}]},
        }
        claims = [{"name": "compute-domain-channel", "resourceClaimTemplateName": claim_template}]
        return self.template("mpi-worker", self.one_per_tray(nodes), container, resourceClaims=claims)

    def one_per_tray(self, nodes: Sequence[str]) -> Dict[str, Any]:
        """The workers' affinity: on the rack's trays only, never two on one tray."""
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}
                            ]
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [{"key": self.replica, "operator": "In", "values": ["mpi-worker"]}]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            },
        }


def mpijob_manifest(
    name: str,
    namespace: str,
    check: str,
    rack: str,
    nodes: Sequence[str],
    slots: int,
    claim_template: str,
    image: str,
    launcher_args: Sequence[str],
    mpi: Mapping[str, Any],
    run_id: str = "",
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str = "",
) -> Dict[str, Any]:
    """An MPIJob with one worker per tray (every GPU of it) and a launcher running ``launcher_args``.

    ``mpi``: run_as_user, ssh_auth_mount_path, worker_command, launcher_affinity, backoff_limit.
    ``tolerations``: the GPU nodes' taints the launcher and workers tolerate (beside the collection's own).
    ``priority_class``: the PriorityClass of the launcher and workers ('': none).
    ``launcher_args`` come after ``mpirun --bind-to core --map-by ppr:<slots>:node -np <ranks>``.
    The pod templates carry the check's labels too (the MPI operator copies them onto its pods), so the
    launcher and workers of one rack are found by label in a namespace that other racks share.
    """
    labels = common_labels(check, rack, run_id)
    user = int(mpi["run_as_user"])
    pods = _MpiPods(labels, f"{dns_label(check)}-replica", user, image, tolerations, priority_class)
    mpirun = ["--bind-to", "core", "--map-by", f"ppr:{slots}:node", "-np", str(slots * len(nodes))]
    worker_command = list(mpi["worker_command"])
    return {
        "apiVersion": MPIJOB_API_VERSION,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "slotsPerWorker": slots,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": int(mpi["backoff_limit"])},
            "sshAuthMountPath": mpi["ssh_auth_mount_path"],
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    # Never, not the operator's OnFailure: with OnFailure and backoffLimit 0 the Job controller
                    # deletes the failed launcher pod, and with it the log the failure message quotes.
                    "restartPolicy": "Never",
                    "template": pods.launcher(mpirun + list(launcher_args), mpi.get("launcher_affinity")),
                },
                "Worker": {
                    "replicas": len(nodes),
                    "template": pods.worker(worker_command, nodes, slots, claim_template),
                },
            },
        },
    }
