# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pods the checks create run unprivileged: every pod and every container of the IMEX channel check and
of the MPIJobs (launcher and workers), built with the module's own defaults, against the Pod Security
Standard "restricted" (https://kubernetes.io/docs/concepts/security/pod-security-standards/)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    imex_pod_manifest,
    mpijob_manifest,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.modules.fabric_verify import ARGUMENT_SPEC

NODES = [f"gb200-r0-t{i}" for i in range(18)]
# the module's defaults, as a run without mpi settings gets them
MPI = {name: option.get("default") for name, option in ARGUMENT_SPEC["mpi"]["options"].items()}
IMEX_USER = ARGUMENT_SPEC["imex_channel"]["options"]["run_as_user"]["default"]
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC", "hostUsers")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def pods() -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(name, pod spec) of every pod a check creates."""
    imex = imex_pod_manifest(NODES[0], "ns", "rack0", "imex-channel-rack0-channel", "ubuntu:22.04", IMEX_USER)
    yield "imex-channel", imex["spec"]
    for check, args in (("nvbandwidth", ["nvbandwidth"]), ("nccl", ["all_reduce_perf"])):
        job = mpijob_manifest(f"{check}-rack0", "ns", check, "rack0", NODES, 4, "cd-channel", "img", args, MPI)
        for role, replica in job["spec"]["mpiReplicaSpecs"].items():
            yield f"{check}-{role.lower()}", replica["template"]["spec"]


def containers(spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [c for key in CONTAINER_LISTS for c in spec.get(key) or []]


def effective(spec: Dict[str, Any], container: Dict[str, Any], key: str) -> Any:
    """A security setting as the kubelet applies it: the container's, else the pod's."""
    own = (container.get("securityContext") or {}).get(key)
    return own if own is not None else (spec.get("securityContext") or {}).get(key)


def restricted_violations(spec: Dict[str, Any]) -> List[str]:
    """What the "restricted" profile refuses in a pod spec (the checks of the standard, field by field)."""
    found = []
    for key in HOST_NAMESPACES:
        if spec.get(key) is True and key != "hostUsers":
            found.append(f"{key}: true")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            found.append(f"hostPath volume {volume.get('name')}")
    if ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", None):
        found.append("pod seccompProfile is not RuntimeDefault")
    for container in containers(spec):
        name = container["name"]
        security = container.get("securityContext") or {}
        if security.get("privileged"):
            found.append(f"{name}: privileged")
        if security.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        if effective(spec, container, "runAsNonRoot") is not True:
            found.append(f"{name}: runAsNonRoot is not true")
        if effective(spec, container, "runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        if (effective(spec, container, "seccompProfile") or {}).get("type") != "RuntimeDefault":
            found.append(f"{name}: seccompProfile is not RuntimeDefault")
        capabilities = security.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: adds {sorted(capabilities['add'])}")
        if container.get("ports") and any(p.get("hostPort") for p in container["ports"]):
            found.append(f"{name}: hostPort")
    return found


@pytest.mark.parametrize("name,spec", list(pods()), ids=[name for name, _spec in pods()])
def test_every_pod_of_the_checks_meets_pod_security_restricted(name, spec):
    assert containers(spec), name
    assert restricted_violations(spec) == []
    assert spec["automountServiceAccountToken"] is False  # no pod of the checks calls the API
    assert not [v for v in spec.get("volumes") or [] if "hostPath" in v]
    assert not any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))
    for container in containers(spec):
        security = container["securityContext"]
        assert security["privileged"] is False
        assert security["allowPrivilegeEscalation"] is False
        assert security["runAsNonRoot"] is True
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert security["capabilities"]["drop"] == ["ALL"]


def test_only_the_mpi_workers_sshd_keeps_net_bind_service_in_the_bounding_set():
    added = {
        name: [c.get("securityContext", {}).get("capabilities", {}).get("add") for c in containers(spec)]
        for name, spec in pods()
    }
    assert added == {
        "imex-channel": [None],
        "nvbandwidth-launcher": [None],
        "nvbandwidth-worker": [["NET_BIND_SERVICE"]],
        "nccl-launcher": [None],
        "nccl-worker": [["NET_BIND_SERVICE"]],
    }


def test_the_pods_run_as_the_configured_users():
    users = {name: {effective(spec, c, "runAsUser") for c in containers(spec)} for name, spec in pods()}
    assert users["imex-channel"] == {65534}
    # mpiuser of the mpi-operator base images: its home holds sshd's config and host key
    assert users["nvbandwidth-worker"] == users["nvbandwidth-launcher"] == {1000}
    job = mpijob_manifest("j", "ns", "nccl", "rack0", NODES, 4, "t", "img", [], dict(MPI, run_as_user=1234))
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["securityContext"]["runAsUser"] == worker["containers"][0]["securityContext"]["runAsUser"] == 1234


def test_the_restricted_check_catches_what_it_is_meant_to():
    """The check above is not vacuous: a privileged container with a hostPath is refused, field by field."""
    spec = {
        "hostNetwork": True,
        "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
        "containers": [
            {"name": "ctr", "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}
        ],
    }
    assert restricted_violations(spec) == [
        "hostNetwork: true",
        "hostPath volume dev",
        "ctr: privileged",
        "ctr: allowPrivilegeEscalation is not false",
        "ctr: runAsNonRoot is not true",
        "ctr: seccompProfile is not RuntimeDefault",
        "ctr: capabilities do not drop ALL",
        "ctr: adds ['SYS_ADMIN']",
    ]


def test_the_launcher_is_never_restarted_so_its_failed_pod_and_log_stay():
    # The MPI operator v0.6.0 defaults the launcher to OnFailure; with the checks' backoffLimit 0 the Job
    # controller then deletes the failed launcher pod and its log. Never keeps both for the failure message.
    job = mpijob_manifest("j", "ns", "nvbandwidth", "rack0", NODES, 4, "t", "img", [], MPI)
    replicas = job["spec"]["mpiReplicaSpecs"]
    assert replicas["Launcher"]["restartPolicy"] == "Never"
    assert job["spec"]["runPolicy"]["backoffLimit"] == MPI["backoff_limit"] == 0
    assert "restartPolicy" not in replicas["Launcher"]["template"]["spec"]


def test_every_pod_of_the_checks_tolerates_the_gpu_nodes_taints_and_the_unverified_one():
    gpu = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    unverified = {"key": "gpu-fabric.nvidia.com/unverified", "operator": "Exists", "effect": "NoSchedule"}
    imex = imex_pod_manifest(NODES[0], "ns", "rack0", "t", "ubuntu:22.04", IMEX_USER, "", gpu)
    job = mpijob_manifest("j", "ns", "nccl", "rack0", NODES, 4, "t", "img", [], MPI, "", gpu)
    specs = [imex["spec"]] + [r["template"]["spec"] for r in job["spec"]["mpiReplicaSpecs"].values()]
    assert [spec["tolerations"] for spec in specs] == [[unverified, *gpu]] * 3
    # given twice, or already the collection's own: each once
    assert imex_pod_manifest(NODES[0], "ns", "r", "t", "i", 1, "", [unverified, *gpu, *gpu])["spec"]["tolerations"] == [
        unverified,
        *gpu,
    ]
