# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pods the checks create run unprivileged: every pod and every container of the IMEX channel check and
of the MPIJobs (launcher and workers), built with the module's own defaults, against the Pod Security
Standard "restricted" (https://kubernetes.io/docs/concepts/security/pod-security-standards/)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verification_objects as vo
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
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


# The checks that need the host, each with its reason; every other registered check runs restricted pods only,
# in a namespace that enforces "restricted" (docs/rbac/verify-stage.yaml refuses any other from the verify account).
HOST_CHECKS = {
    "gpu_health": "reads the kernel log (CAP_SYSLOG) and every GPU's counters without claiming one: privileged",
    "dcgm_diag": "its own DCGM host engine runs the diagnostic's plugins in the pod: privileged, as the GPU "
    "Operator's nvidia-dcgm container is (baseline through the operator's host engine)",
}


def registered_check(name: str):
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks

    defaults = {key: option.get("default") for key, option in ARGUMENT_SPEC.items() if "options" not in option}
    # nccl has no default image (there is no official one)
    settings = {"nccl": {"image": "registry.example/nccl-tests:2.13"}}
    return checks.get(name).from_params(checks.with_settings(dict(defaults, settings=settings)))


def host_check_pods() -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(check, pod spec) of the checks that run one pod per tray, with their defaults."""
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import rack_run

    plan = RackPlan("rack0", ["c.1"], NODES[:2], NODES[:2], [], 4, "NVIDIA GB200")
    for name in HOST_CHECKS:
        check = registered_check(name)
        yield name, check.manifest(rack_run.RackRun(check, object(), plan, rack_run.Settings()), NODES[1])["spec"]


def test_every_registered_check_creates_a_restricted_namespace_but_the_host_checks():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, rack_run

    levels = {
        name: registered_check(name).pod_security_level or rack_run.Settings().pod_security_level
        for name in checks.names()
    }
    assert levels == {name: "privileged" if name in HOST_CHECKS else "restricted" for name in checks.names()}


def test_the_host_checks_are_the_only_pods_outside_restricted_and_each_is_privileged_for_its_reason():
    """The exceptions, named: every pod of every registered check is either in pods() above (restricted, tested
    field by field) or a host check's, whose one violation is the privilege its reason names."""
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks

    covered = {name.rsplit("-", 1)[0] if name.startswith(("nvbandwidth", "nccl")) else name for name, _pod in pods()}
    assert covered | set(HOST_CHECKS) == {"imex-channel", "nvbandwidth", "nccl", *HOST_CHECKS}
    assert set(checks.names()) - {"cliques"} == {"imex_channel", "nvbandwidth", "nccl", *HOST_CHECKS}
    for name, spec in host_check_pods():
        assert "ctr: privileged" in restricted_violations(spec), (name, HOST_CHECKS[name])
        assert spec["automountServiceAccountToken"] is False
        assert not [v for v in spec.get("volumes") or [] if "hostPath" in v], name
        assert not any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")), name
        # bound to a GPU tray by label too: the host-check grant's admission policy admits nothing else
        assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}, name


def test_a_service_account_is_bound_as_one_and_any_other_user_as_a_user():
    assert vo.rbac_subject("system:serviceaccount:gpu-fabric:gpu-fabric-verify") == {
        "kind": "ServiceAccount",
        "name": "gpu-fabric-verify",
        "namespace": "gpu-fabric",
    }
    for user in ("alice@example.com", "system:serviceaccount:gpu-fabric", "system:serviceaccount:a:b:c", "admin"):
        assert vo.rbac_subject(user) == {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}


def test_the_log_binding_gives_the_log_reader_role_to_the_identity_alone_in_the_checks_namespace():
    labels = vo.common_labels("imex_channel", "rack0", "run-1")
    binding = vo.log_reader_binding("gpu-fabric-verify-imex-channel-rack0", "alice@example.com", labels)
    assert binding == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": "gpu-fabric-verify-logs",
            "namespace": "gpu-fabric-verify-imex-channel-rack0",
            "labels": labels,
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-fabric-verify-logs"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice@example.com"}],
    }


LAUNCHER_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "node-role.kubernetes.io/launcher", "operator": "Exists"}]}
            ]
        }
    }
}


def test_the_whole_mpijob_field_by_field_with_a_launcher_affinity_a_run_id_and_a_priority_class():
    mpi = dict(MPI, worker_command=["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"])
    mpi["run_as_user"], mpi["ssh_auth_mount_path"], mpi["backoff_limit"] = 1000, "/home/mpiuser/.ssh", 0
    mpi["launcher_affinity"] = LAUNCHER_AFFINITY
    gpu = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    trays = ["gb200-r0-t0", "gb200-r0-t1"]
    args = ["all_reduce_perf", "-b", "8"]
    job = mpijob_manifest(
        "nccl-rack0", "ns", "nccl", "rack0", trays, 4, "cd-channel", "img", args, mpi, "run-1", gpu, "gpu-fabric-verify"
    )
    assert job == {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": "nccl-rack0",
            "namespace": "ns",
            "labels": {
                "app.kubernetes.io/part-of": "gpu-fabric-verify",
                "gpu-fabric.nvidia.com/check": "nccl",
                "gpu-fabric.nvidia.com/rack": "rack0",
                "gpu-fabric.nvidia.com/run-id": "run-1",
            },
        },
        "spec": {
            "slotsPerWorker": 4,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "metadata": {
                            "labels": {
                                "app.kubernetes.io/part-of": "gpu-fabric-verify",
                                "gpu-fabric.nvidia.com/check": "nccl",
                                "gpu-fabric.nvidia.com/rack": "rack0",
                                "gpu-fabric.nvidia.com/run-id": "run-1",
                                "nccl-replica": "mpi-launcher",
                            }
                        },
                        "spec": {
                            "automountServiceAccountToken": False,
                            "securityContext": {
                                "runAsNonRoot": True,
                                "runAsUser": 1000,
                                "runAsGroup": 1000,
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "affinity": LAUNCHER_AFFINITY,
                            "tolerations": [
                                {
                                    "key": "gpu-fabric.nvidia.com/unverified",
                                    "operator": "Exists",
                                    "effect": "NoSchedule",
                                },
                                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            ],
                            "priorityClassName": "gpu-fabric-verify",
                            "containers": [
                                {
                                    "name": "mpi-launcher",
                                    "image": "img",
                                    "securityContext": {
                                        "privileged": False,
                                        "allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"]},
                                        "seccompProfile": {"type": "RuntimeDefault"},
                                        "runAsNonRoot": True,
                                        "runAsUser": 1000,
                                        "runAsGroup": 1000,
                                    },
                                    "command": ["mpirun"],
                                    "args": [
                                        "--bind-to",
                                        "core",
                                        "--map-by",
                                        "ppr:4:node",
                                        "-np",
                                        "8",
                                        "all_reduce_perf",
                                        "-b",
                                        "8",
                                    ],
                                }
                            ],
                        },
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "metadata": {
                            "labels": {
                                "app.kubernetes.io/part-of": "gpu-fabric-verify",
                                "gpu-fabric.nvidia.com/check": "nccl",
                                "gpu-fabric.nvidia.com/rack": "rack0",
                                "gpu-fabric.nvidia.com/run-id": "run-1",
                                "nccl-replica": "mpi-worker",
                            }
                        },
                        "spec": {
                            "automountServiceAccountToken": False,
                            "securityContext": {
                                "runAsNonRoot": True,
                                "runAsUser": 1000,
                                "runAsGroup": 1000,
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "affinity": {
                                "nodeAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "nodeSelectorTerms": [
                                            {
                                                "matchExpressions": [
                                                    {
                                                        "key": "kubernetes.io/hostname",
                                                        "operator": "In",
                                                        "values": ["gb200-r0-t0", "gb200-r0-t1"],
                                                    }
                                                ]
                                            }
                                        ]
                                    }
                                },
                                "podAntiAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "labelSelector": {
                                                "matchExpressions": [
                                                    {"key": "nccl-replica", "operator": "In", "values": ["mpi-worker"]}
                                                ]
                                            },
                                            "topologyKey": "kubernetes.io/hostname",
                                        }
                                    ]
                                },
                            },
                            "tolerations": [
                                {
                                    "key": "gpu-fabric.nvidia.com/unverified",
                                    "operator": "Exists",
                                    "effect": "NoSchedule",
                                },
                                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            ],
                            "priorityClassName": "gpu-fabric-verify",
                            "containers": [
                                {
                                    "name": "mpi-worker",
                                    "image": "img",
                                    "securityContext": {
                                        "privileged": False,
                                        "allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                                        "seccompProfile": {"type": "RuntimeDefault"},
                                        "runAsNonRoot": True,
                                        "runAsUser": 1000,
                                        "runAsGroup": 1000,
                                    },
                                    "command": ["/usr/sbin/sshd"],
                                    "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                                    "resources": {
                                        "limits": {"nvidia.com/gpu": 4},
                                        "claims": [{"name": "compute-domain-channel"}],
                                    },
                                }
                            ],
                            "resourceClaims": [
                                {"name": "compute-domain-channel", "resourceClaimTemplateName": "cd-channel"}
                            ],
                        },
                    },
                },
            },
        },
    }
    assert list(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]) == [
        "name",
        "image",
        "securityContext",
        "command",
        "args",
        "resources",
    ]
