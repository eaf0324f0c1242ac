# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the uninstall removes and what stops it: users' workloads, verification leftovers, the manifest's order."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import compute_domain as cd
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import uninstall
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    common_labels,
    mpijob_manifest,
    namespace_manifest,
)
from mpi_settings import MPI

# The MPI operator v0.6.0 install manifest as the simulated rack serves it (its objects, our CRD schema).
MPI_MANIFEST = Path(__file__).resolve().parents[4] / "sim" / "manifests" / "mpi-operator.yaml"

SPEC = cd.ComputeDomainSpec(num_nodes=0, channel_template_name="cd-channel")
OUR_DOMAIN = cd.desired_object(
    "nvbandwidth-rack0", "gpu-fabric-verify-nvbandwidth-rack0", SPEC, common_labels("nvbandwidth", "rack0", "run1")
)
OUR_JOB = mpijob_manifest(
    "nvbandwidth-rack0",
    "gpu-fabric-verify-nvbandwidth-rack0",
    "nvbandwidth",
    "rack0",
    ["gb200-r0-t0", "gb200-r0-t1"],
    4,
    "cd-channel",
    "img",
    [],
    MPI,
    "run1",
)
USER_DOMAIN = cd.desired_object("train", "team-a", SPEC, {"app": "llm"})
USER_JOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pretrain", "namespace": "team-b"},
}


def test_users_workloads_are_told_apart_from_the_verification_stage():
    users, ours = uninstall.partition_workloads([OUR_DOMAIN, USER_DOMAIN], [USER_JOB, OUR_JOB])
    assert [r.ref for r in users] == ["ComputeDomain team-a/train", "MPIJob team-b/pretrain"]
    assert [r.ref for r in ours] == [
        "ComputeDomain gpu-fabric-verify-nvbandwidth-rack0/nvbandwidth-rack0",
        "MPIJob gpu-fabric-verify-nvbandwidth-rack0/nvbandwidth-rack0",
    ]
    assert ours[1].definition() == {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "nvbandwidth-rack0", "namespace": "gpu-fabric-verify-nvbandwidth-rack0"},
    }


def test_the_refusal_names_the_users_workloads_and_the_ways_on():
    users = uninstall.partition_workloads([USER_DOMAIN], [USER_JOB])[0]
    assert uninstall.plan_summary(users, [], [], force=False) == (
        "2 workload(s) of users still use the GPU stack: ComputeDomain team-a/train, MPIJob team-b/pretrain. "
        "Delete them (or wait for the jobs to end) and run the uninstall again, or set gpu_fabric_uninstall_force: "
        "true to delete them first. Nothing was removed."
    )
    forced = uninstall.plan_summary(users, [], ["gpu-fabric-verify-nccl-rack0"], force=True)
    assert forced.startswith("forced: 2 workload(s) of users deleted first (ComputeDomain team-a/train, ")
    assert forced.endswith("0 verification workload(s) and 1 verification namespace(s) to delete")


def test_a_long_refusal_names_twenty_and_counts_the_rest():
    jobs = [{"metadata": {"name": f"job{i:02d}", "namespace": "team"}} for i in range(23)]
    users = uninstall.partition_workloads([], jobs)[0]
    message = uninstall.refusal_message(users)
    assert "MPIJob team/job19 and 3 more." in message
    assert "job20" not in message


def test_only_the_labelled_namespaces_are_the_verification_stages():
    given = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "site-given", "labels": {}}}
    ours = namespace_manifest("gpu-fabric-verify-nccl-rack0", "nccl", "rack0", "restricted")
    assert uninstall.verification_namespaces([given, ours]) == ["gpu-fabric-verify-nccl-rack0"]


def test_the_manifest_is_deleted_in_reverse_with_the_namespace_last_and_the_crd_only_when_asked():
    documents = list(yaml.safe_load_all(MPI_MANIFEST.read_text()))
    objects, aggregating, crds = uninstall.manifest_removal(documents, include_crds=False)
    refs = [(o["kind"], o["metadata"]["name"]) for o in objects]
    # the aggregating role apart, deleted after the roles it aggregates (those stay in objects)
    assert [(o["kind"], o["metadata"]["name"]) for o in aggregating] == [("ClusterRole", "kubeflow-mpijobs-admin")]
    assert ("ClusterRole", "kubeflow-mpijobs-admin") not in refs
    assert ("ClusterRole", "kubeflow-mpijobs-edit") in refs
    assert refs[0] == ("Deployment", "mpi-operator")
    assert refs[-1] == ("Namespace", "mpi-operator")
    assert ("CustomResourceDefinition", "mpijobs.kubeflow.org") not in refs
    assert refs.index(("Deployment", "mpi-operator")) < refs.index(("ClusterRoleBinding", "mpi-operator"))
    assert objects[0]["metadata"] == {"name": "mpi-operator", "namespace": "mpi-operator"}
    assert crds == []
    crds = uninstall.manifest_removal(documents, include_crds=True)[2]
    assert crds == [
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "mpijobs.kubeflow.org"},
        }
    ]


def test_empty_documents_of_a_manifest_are_skipped():
    objects, aggregating, crds = uninstall.manifest_removal(
        [None, {}, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}], include_crds=True
    )
    assert aggregating == []
    assert (objects, crds) == ([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}], [])


def listed(objects):
    """Objects as the uninstall plan reads them: a list's items, with the kind and version put back."""
    return [dict(o, apiVersion=o["apiVersion"], kind=o["kind"]) for o in objects]


def test_the_schedule_and_the_checks_priority_class_are_removed_cronjob_first_priority_class_last():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_schedule
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import priority_class_manifest

    rbac_text = (Path(__file__).resolve().parents[4] / "docs" / "rbac" / "verify-stage.yaml").read_text()
    made = verify_schedule.objects_from_text({"image": "ee:1", "namespace": "ops"}, rbac_text)
    found = listed([*made["rbac"], *made["schedule"]])
    # the checks' PriorityClass made by a check (no managed-by label), listed a second time by its own label
    found.append(priority_class_manifest())
    # a site's ConfigMap and a PriorityClass of another product stay
    found.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site", "namespace": "ops"}})
    found.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "tenant-high"}})
    removal = uninstall.schedule_removal(found)
    assert [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in removal] == [
        ("CronJob", "ops", "gpu-fabric-verify"),
        ("ConfigMap", "ops", "gpu-fabric-verify"),
        ("ValidatingAdmissionPolicyBinding", "", "gpu-fabric-verify-own-namespaces"),
        ("ValidatingAdmissionPolicy", "", "gpu-fabric-verify-own-namespaces"),
        ("RoleBinding", "nvidia-dra-driver-gpu", "gpu-fabric-verify-diagnostics"),
        ("Role", "nvidia-dra-driver-gpu", "gpu-fabric-verify-diagnostics"),
        ("ClusterRoleBinding", "", "gpu-fabric-verify"),
        ("ClusterRole", "", "gpu-fabric-verify"),
        ("ClusterRole", "", "gpu-fabric-verify-logs"),
        ("ServiceAccount", "ops", "gpu-fabric-verify"),
        ("PriorityClass", "", "gpu-fabric-verify"),
    ]
    assert removal[0] == {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "gpu-fabric-verify", "namespace": "ops"},
    }
    assert uninstall.schedule_removal([]) == []


def test_the_schedules_refresh_cronjob_is_removed_with_the_verify_cronjob_before_anything_else():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_schedule

    rbac_text = (Path(__file__).resolve().parents[4] / "docs" / "rbac" / "verify-stage.yaml").read_text()
    made = verify_schedule.objects_from_text(
        {"image": "ee:1", "namespace": "ops", "node_verdict_rbac": True}, rbac_text
    )
    found = listed([*made["rbac"], *made["schedule"], *made["refresh"]])
    removal = uninstall.schedule_removal(found)
    assert [(d["kind"], d["metadata"]["name"]) for d in removal[:3]] == [
        ("CronJob", "gpu-fabric-verify"),
        ("CronJob", "gpu-fabric-verify-refresh"),
        ("ConfigMap", "gpu-fabric-verify"),
    ]
    assert removal[1] == {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "gpu-fabric-verify-refresh", "namespace": "ops"},
    }
    # the node-verdict rights the refresh job wrote with go with the rest of the RBAC
    assert ("ClusterRoleBinding", "gpu-fabric-verify-node-verdict") in [
        (d["kind"], d["metadata"]["name"]) for d in removal
    ]
