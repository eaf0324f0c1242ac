# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Checks in namespaces the site gives: names that never collide, selection by label, cleanup of exactly
the check's own objects, the rights asked before anything is created, and the shipped Role.

The lifecycle against a real API server and RBAC: tests/integration/test_rbac_namespaced.py. Here the
real ``Api`` and ``RackRun`` run over an in-memory dynamic client that stores objects, answers label
selectors, deletes a pod's claims with it (the garbage collector) and a ComputeDomain's channel template
with it (the DRA controller).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Dict, Optional, Set, Tuple

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import compute_domain, kube_api, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base, mpijob
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import imex_channel as imex_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nccl as nccl_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import nvbandwidth as nvbandwidth_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import given_namespaces
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    common_labels,
    imex_pod_manifest,
    label_value,
    mpijob_manifest,
    own_selector,
    owned_by_pods,
)
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception
from mpi_settings import MPI

RBAC = Path(__file__).resolve().parents[4] / "docs" / "rbac" / "verify-stage-namespaced.yaml"
SERVED = {
    ("Namespace", "v1"),
    ("Pod", "v1"),
    ("ComputeDomain", "resource.nvidia.com/v1beta1"),
    ("ResourceClaim", "resource.k8s.io/v1"),
    ("ResourceClaimTemplate", "resource.k8s.io/v1"),
    ("MPIJob", "kubeflow.org/v2beta1"),
    ("ConfigMap", "v1"),
    ("SelfSubjectAccessReview", "authorization.k8s.io/v1"),
    ("SelfSubjectReview", "authentication.k8s.io/v1"),
    ("RoleBinding", "rbac.authorization.k8s.io/v1"),
}
USER = "system:serviceaccount:gpu-fabric:gpu-fabric-verify"
ALL_RIGHTS = {
    (r.verb, r.group, r.resource, r.subresource)
    for r in rack_run.RackRun.rights + mpijob.MpiJobCheck.rights + imex_check.ImexChannelCheck.rights
}


def not_found() -> Exception:
    return api_exception(ApiException(status=404, reason="Not Found"))


class Resource:
    def __init__(self, kind: str, api_version: str) -> None:
        self.kind, self.api_version = kind, api_version


class MemoryClient:
    """The dynamic client's resource/get/create/delete over a dict; ``rights``: (verb, group, resource,
    subresource, namespace) the identity holds."""

    def __init__(
        self, rights: Set[Tuple[str, str, str, str, str]], served: Optional[Set[Tuple[str, str]]] = None
    ) -> None:
        self.objects: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        self.rights = rights
        self.served = SERVED if served is None else served
        self.calls: list = []

    def resource(self, kind: str, api_version: str) -> Resource:
        if (kind, api_version) not in self.served:
            raise ResourceNotFoundError(f"{kind} {api_version}")
        return Resource(kind, api_version)

    def put(self, obj: Dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def names(self, kind: str, namespace: str) -> Set[str]:
        return {name for (k, ns, name) in self.objects if k == kind and ns == namespace}

    def get(self, resource: Resource, name: Optional[str] = None, namespace: Optional[str] = None, **params: Any):
        self.calls.append(("get", resource.kind, namespace, name, params.get("label_selector")))
        if name:
            obj = self.objects.get((resource.kind, namespace or "", name))
            if obj is None:
                raise not_found()
            return obj
        wanted = dict(term.split("=", 1) for term in (params.get("label_selector") or "").split(",") if term)
        named = (params.get("field_selector") or "").partition("metadata.name=")[2]
        items = [
            obj
            for (kind, ns, obj_name), obj in sorted(self.objects.items())
            if kind == resource.kind
            and ns == (namespace or ns)
            and obj_name == (named or obj_name)
            and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]
        return {"items": items, "metadata": {"resourceVersion": str(len(self.calls))}}

    def watch(self, resource: Resource, namespace: Optional[str] = None, **params: Any):
        """Nothing changes here but by the check's own calls: each watch ends with no event (its timeout)."""
        self.calls.append(("watch", resource.kind, namespace, params.get("name"), params.get("label_selector")))
        return iter(())

    def create(self, resource: Resource, body: Dict[str, Any], namespace: Optional[str] = None):
        self.calls.append(("create", resource.kind, namespace, body.get("metadata", {}).get("name"), None))
        if resource.kind == "SelfSubjectAccessReview":
            a = body["spec"]["resourceAttributes"]
            held = (a["verb"], a["group"], a["resource"], a.get("subresource", ""), a["namespace"]) in self.rights
            return dict(body, status={"allowed": held})
        if resource.kind == "SelfSubjectReview":
            return dict(body, status={"userInfo": {"username": USER, "groups": ["system:authenticated"]}})
        if resource.kind == "RoleBinding" and body["roleRef"]["name"] == "gpu-fabric-verify-logs":
            self.rights.add(("get", "", "pods", "log", namespace or ""))  # the authorizer holds it at once
        self.put(body)
        return body

    def delete(self, resource: Resource, name: str, namespace: Optional[str] = None, body: Any = None):
        self.calls.append(("delete", resource.kind, namespace, name, None))
        if (resource.kind, namespace or "", name) not in self.objects:
            raise not_found()
        self.remove(resource.kind, namespace or "", name)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        """The object and, as the garbage collector and the DRA controller do, what it owns."""
        self.objects.pop((kind, namespace, name), None)
        for key, obj in list(self.objects.items()):
            owners = obj["metadata"].get("ownerReferences") or []
            if key[1] == namespace and any(o["kind"] == kind and o["name"] == name for o in owners):
                self.remove(*key)


def claim(namespace: str, pod: str) -> Dict[str, Any]:
    return {
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{pod}-imex-channel-x7k2p",
            "namespace": namespace,
            "labels": {"made-by": "dra-controller"},
            "ownerReferences": [{"kind": "Pod", "name": pod}],
        },
    }


def plan(rack: str, nodes) -> RackPlan:
    return RackPlan(rack, [f"c.{rack}"], list(nodes), list(nodes), [], 4, "NVIDIA GB200")


RACK0 = plan("rack0", ["gb200-r0-t0", "gb200-r0-t1"])
RACK1 = plan("rack1", ["gb200-r1-t0", "gb200-r1-t1"])


def all_rights(namespace: str) -> Set[Tuple[str, str, str, str, str]]:
    return {(*right, namespace) for right in ALL_RIGHTS}


def rack_run_of(
    client: MemoryClient, check: base.Check, rack: RackPlan, namespaces: Dict[str, str]
) -> rack_run.RackRun:
    settings = rack_run.Settings(namespaces=namespaces, run_id="20261201T132211Z", timeout=30, poll=0.01)
    return rack_run.RackRun(check, kube_api.Api(client, patience=0), rack, settings, sleep=lambda s: None)


def imex() -> imex_check.ImexChannelCheck:
    return imex_check.ImexChannelCheck("ubuntu:22.04")


def nvbandwidth() -> nvbandwidth_check.NvbandwidthCheck:
    return nvbandwidth_check.NvbandwidthCheck(
        "img", MPI, "multinode_device_to_device_memcpy_read_ce", [], lambda *a: {}
    )


def nccl() -> nccl_check.NcclCheck:
    return nccl_check.NcclCheck("img", MPI, "all_reduce_perf", [], [], lambda *a: {})


def the_objects_of(run: rack_run.RackRun) -> list:
    """What the check creates in the namespace on its rack, as the lifecycle creates it."""
    ns, labels = run.namespace, common_labels(run.check.name, run.plan.name, run.settings.run_id)
    domain = compute_domain.desired_object(
        run.compute_domain, ns, compute_domain.ComputeDomainSpec(0, run.claim_template), dict(labels)
    )
    template = {
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": run.claim_template,
            "namespace": ns,
            "ownerReferences": [{"kind": "ComputeDomain", "name": run.compute_domain}],
        },
    }
    objects = [domain, template]
    if isinstance(run.check, imex_check.ImexChannelCheck):
        pods = [imex_pod_manifest(n, ns, run.plan.name, run.claim_template, "img", 65534, "r1") for n in run.plan.nodes]
    else:
        job = run.check.manifest(run)
        objects.append(job)
        name, template_labels = job["metadata"]["name"], job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
        pods = [
            {
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-worker-{i}",
                    "namespace": ns,
                    "labels": dict(template_labels["metadata"]["labels"], **{"training.kubeflow.org/job-name": name}),
                    "ownerReferences": [{"kind": "MPIJob", "name": name}],
                },
            }
            for i in range(len(run.plan.nodes))
        ]
    for pod in pods:
        pod.setdefault("kind", "Pod")
        objects += [pod, claim(ns, pod["metadata"]["name"])]
    return objects


BYSTANDERS = [
    {"kind": "ConfigMap", "metadata": {"name": "site-settings", "namespace": "shared"}},
    {"kind": "Pod", "metadata": {"name": "site-pod", "namespace": "shared", "labels": {"app": "site"}}},
    claim("shared", "site-pod"),
]


# -- names -------------------------------------------------------------------------------------------------


def test_racks_and_checks_sharing_a_namespace_have_different_names_for_every_object():
    client = MemoryClient(set())
    runs = [
        rack_run_of(client, check(), rack, {"rack0": "shared", "rack1": "shared"})
        for check, rack in itertools.product((imex, nvbandwidth, nccl), (RACK0, RACK1))
    ]
    names = [(obj["kind"], obj["metadata"]["name"]) for run in runs for obj in the_objects_of(run)]
    assert len(names) == len(set(names)) == 2 * 6 + 4 * 7  # imex: CD, template, 2 pods, 2 claims; MPI: + MPIJob
    assert {run.namespace for run in runs} == {"shared"}
    assert [run.compute_domain for run in runs[:2]] == ["imex-channel-rack0", "imex-channel-rack1"]
    assert [run.claim_template for run in runs[2:4]] == ["nvbandwidth-rack0-channel", "nvbandwidth-rack1-channel"]
    assert [run.check.job_name(run) for run in runs[4:]] == ["nccl-rack0", "nccl-rack1"]
    assert runs[0].selector == (
        "app.kubernetes.io/part-of=gpu-fabric-verify,gpu-fabric.nvidia.com/check=imex_channel,"
        "gpu-fabric.nvidia.com/rack=rack0"
    )
    assert len({run.selector for run in runs}) == 6


def test_without_given_namespaces_each_check_keeps_a_namespace_of_its_own():
    run = rack_run_of(MemoryClient(set()), imex(), RACK1, {"rack0": "shared"})
    assert (run.namespace, run.given) == ("gpu-fabric-verify-imex-channel-rack1", False)
    assert rack_run_of(MemoryClient(set()), imex(), RACK0, {"rack0": "shared"}).given is True


def test_every_object_and_every_mpi_pod_carries_the_selection_labels():
    run = rack_run_of(MemoryClient(set()), nccl(), RACK1, {"rack1": "shared"})
    job = mpijob_manifest("nccl-rack1", "shared", "nccl", "rack1", RACK1.nodes, 4, "t", "img", [], MPI, "r-1")
    wanted = {
        "app.kubernetes.io/part-of": "gpu-fabric-verify",
        "gpu-fabric.nvidia.com/check": "nccl",
        "gpu-fabric.nvidia.com/rack": "rack1",
        "gpu-fabric.nvidia.com/run-id": "r-1",
    }
    for labels in (
        job["metadata"]["labels"],
        job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"]["labels"],
        job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"],
    ):
        assert wanted.items() <= labels.items()
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]["nccl-replica"] == "mpi-worker"
    assert run.domain_request("present").labels == dict(wanted, **{"gpu-fabric.nvidia.com/run-id": "20261201T132211Z"})
    assert compute_domain.desired_object("d", "shared", compute_domain.ComputeDomainSpec(0, "t"), {"a": "b"})[
        "metadata"
    ] == {
        "name": "d",
        "namespace": "shared",
        "labels": {"a": "b"},
    }


def test_a_run_id_is_made_a_valid_label_value():
    assert label_value("20261201T132211123456Z") == "20261201T132211123456Z"
    assert label_value("run 7/ci:") == "run-7-ci"
    assert len(label_value("x" * 80)) == 63


def test_the_pods_of_a_job_are_told_from_those_of_a_job_with_a_longer_rack_name():
    run = rack_run_of(MemoryClient(set()), nvbandwidth(), plan("rack1", ["a", "b"]), {"rack1": "shared"})
    assert run.check.owns_pod(run, "nvbandwidth-rack1-worker-0")
    assert run.check.owns_pod(run, "nvbandwidth-rack1-launcher-5xq2v")
    assert not run.check.owns_pod(run, "nvbandwidth-rack1-b-worker-0")
    assert not run.check.owns_pod(run, "nvbandwidth-rack10-worker-0")
    claims = [claim("shared", "nvbandwidth-rack1-worker-1"), claim("shared", "nvbandwidth-rack1-b-worker-1")]
    assert owned_by_pods(claims, lambda pod: run.check.owns_pod(run, pod)) == claims[:1]


def test_own_selector_leaves_out_the_run_id():
    assert own_selector("nvbandwidth", "Rack 2") == (
        "app.kubernetes.io/part-of=gpu-fabric-verify,gpu-fabric.nvidia.com/check=nvbandwidth,"
        "gpu-fabric.nvidia.com/rack=" + dns_label("Rack 2")
    )


# -- which namespace --------------------------------------------------------------------------------------


def test_given_namespaces_per_rack_first_then_the_shared_one():
    assert given_namespaces(["rack0", "rack1"], {}, "") == {}
    assert given_namespaces(["rack0", "rack1"], {}, "team-a") == {"rack0": "team-a", "rack1": "team-a"}
    assert given_namespaces(["rack0", "rack1"], {"rack1": "team-b", "rack9": "x"}, "team-a") == {
        "rack0": "team-a",
        "rack1": "team-b",
    }


def test_a_rack_without_a_namespace_or_a_bad_name_is_refused():
    with pytest.raises(ValueError) as caught:
        given_namespaces(["rack0", "rack1", "rack2"], {"rack0": "team-a"}, "")
    assert str(caught.value) == (
        "gpu_fabric_verify_namespaces gives no namespace to 2 racks (rack1, rack2; it names rack0): add them, "
        "or set gpu_fabric_verify_namespace for the racks it does not name"
    )
    with pytest.raises(ValueError, match=r"gives rack rack0 the namespace 'Team_A', which is not a valid namespace"):
        given_namespaces(["rack0"], {}, "Team_A")


# -- rights, cleanup, count --------------------------------------------------------------------------------


def test_the_shipped_role_grants_exactly_the_rights_the_checks_ask_for():
    role = next(doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc["kind"] == "Role")
    assert role["metadata"]["namespace"] == "VERIFY_NAMESPACE"
    granted = set()
    for rule in role["rules"]:
        for group, resource, verb in itertools.product(rule["apiGroups"], rule["resources"], rule["verbs"]):
            base, _slash, sub = resource.partition("/")
            granted.add((verb, group, base, sub))
        if rule["resources"] == ["namespaces"]:
            assert rule["resourceNames"] == ["VERIFY_NAMESPACE"]
    assert granted == ALL_RIGHTS


def test_missing_rights_end_the_check_with_one_line_before_anything_is_created():
    rights = all_rights("shared") - {
        ("get", "", "pods", "log", "shared"),
        ("create", "kubeflow.org", "mpijobs", "", "shared"),
    }
    client = MemoryClient(rights)
    client.put({"kind": "Namespace", "metadata": {"name": "shared"}})
    record = rack_run_of(client, nvbandwidth(), RACK0, {"rack0": "shared"}).run()
    assert record["summary"] == (
        "rack rack0: the check could not run: this identity lacks 2 rights in namespace shared, given for rack rack0: "
        "get pods/log, create mpijobs.kubeflow.org; apply the Role and RoleBinding of "
        "docs/rbac/verify-stage-namespaced.yaml in namespace shared"
    )
    assert not record["passed"] and record["objects_left"] == 0 and record["cleanup_error"] == ""
    assert [c for c in client.calls if c[0] in ("create", "delete") and c[1] != "SelfSubjectAccessReview"] == []


def test_a_namespace_without_any_right_says_so_and_hints_that_it_may_not_exist():
    message = rack_run.missing_rights_message(
        "nope", "rack0", list(rack_run.RackRun.rights), len(rack_run.RackRun.rights)
    )
    assert message == (
        "this identity holds none of the 14 rights the check needs in namespace nope, given for rack rack0; apply "
        "the Role and RoleBinding of docs/rbac/verify-stage-namespaced.yaml in namespace nope (create the namespace "
        "first if it does not exist)"
    )


def test_a_given_namespace_that_does_not_exist_is_named():
    client = MemoryClient(all_rights("gone"))
    run = rack_run_of(client, imex(), RACK1, {"rack1": "gone"})
    with pytest.raises(base.NotRun) as caught:
        run.create_namespace()
    assert str(caught.value) == (
        "namespace gone, given for rack rack1, does not exist: create it (the checks never create nor delete a "
        "given namespace) or fix gpu_fabric_verify_namespace(s)"
    )
    assert run.clean_up() == [] and run.count_left() == (0, [])


@pytest.mark.parametrize("check", [imex, nvbandwidth, nccl])
def test_the_cleanup_deletes_exactly_the_checks_objects_on_its_rack_and_keeps_the_namespace(check):
    client = MemoryClient(all_rights("shared"))
    client.put({"kind": "Namespace", "metadata": {"name": "shared"}})
    runs = {
        (c.__name__, r.name): rack_run_of(client, c(), r, {"rack0": "shared", "rack1": "shared"})
        for c, r in itertools.product((imex, nvbandwidth, nccl), (RACK0, RACK1))
    }
    for obj in BYSTANDERS + [o for run in runs.values() for o in the_objects_of(run)]:
        client.put(obj)
    before = set(client.objects)
    run = runs[(check.__name__, "rack0")]
    run.namespace_checked = True
    assert run.count_left() == (len(the_objects_of(run)), [])

    assert run.clean_up() == []

    ours = {(o["kind"], "shared", o["metadata"]["name"]) for o in the_objects_of(run)}
    assert set(client.objects) == before - ours
    assert run.count_left() == (0, [])
    assert ("Namespace", "", "shared") in client.objects
    assert not [c for c in client.calls if c[0] == "delete" and c[1] == "Namespace"]
    other = runs[(check.__name__, "rack1")]
    other.namespace_checked = True
    assert other.count_left() == (len(the_objects_of(other)), [])


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_where_dra_is_beta_the_claims_are_counted_and_the_cleanup_waits_for_them(version):
    """Kubernetes 1.33 serves resource.k8s.io/v1beta2 and v1beta1, 1.32 v1beta1: not v1."""
    dra_kinds = {(kind, f"resource.k8s.io/{version}") for kind in ("ResourceClaim", "ResourceClaimTemplate")}
    served = {k for k in SERVED if not k[1].startswith("resource.k8s.io/")} | dra_kinds
    client = MemoryClient(all_rights("shared"), served)
    client.put({"kind": "Namespace", "metadata": {"name": "shared"}})
    run = rack_run_of(client, imex(), RACK0, {"rack0": "shared"})
    run.namespace_checked = True
    objects = the_objects_of(run)
    for obj in BYSTANDERS + objects:
        client.put(obj)
    assert [o for o in objects if o["kind"] == "ResourceClaim"]
    assert run.count_left() == (len(objects), [])  # the claims too, read in the served version
    assert run.clean_up() == [] and run.count_left() == (0, [])
    assert {("Namespace", "", "shared")} | {(o["kind"], "shared", o["metadata"]["name"]) for o in BYSTANDERS} == set(
        client.objects
    )


def test_what_an_earlier_run_left_is_deleted_before_the_check_creates_anything():
    client = MemoryClient(all_rights("shared"))
    client.put({"kind": "Namespace", "metadata": {"name": "shared"}})
    run = rack_run_of(client, nvbandwidth(), RACK1, {"rack1": "shared"})
    left = the_objects_of(run)
    for obj in BYSTANDERS + left:
        client.put(obj)
    run.create_namespace()
    assert run.namespace_checked
    assert set(client.objects) == {("Namespace", "", "shared")} | {
        (o["kind"], "shared", o["metadata"]["name"]) for o in BYSTANDERS
    }


@pytest.mark.parametrize("check", [imex, nvbandwidth])
def test_the_checks_pods_name_the_pull_secrets_given(check):
    client = MemoryClient(rights=all_rights("shared"))
    settings = rack_run.Settings(
        namespaces={"rack0": "shared"}, image_pull_secrets=["mirror-pull"], timeout=30, poll=0.01
    )
    run = rack_run.RackRun(check(), kube_api.Api(client, patience=0), RACK0, settings, sleep=lambda s: None)
    if isinstance(run.check, imex_check.ImexChannelCheck):
        bodies = [imex_pod_manifest("gb200-r0-t0", "shared", "rack0", run.claim_template, "img", 65534)]
        specs = [b["spec"] for b in map(run.with_pull_secrets, bodies)]
    else:
        job = run.with_pull_secrets(run.check.manifest(run))
        specs = [r["template"]["spec"] for r in job["spec"]["mpiReplicaSpecs"].values()]
    assert specs and all(spec["imagePullSecrets"] == [{"name": "mirror-pull"}] for spec in specs)
    plain = rack_run.RackRun(
        check(), kube_api.Api(client, patience=0), RACK0, rack_run.Settings(), sleep=lambda s: None
    )
    assert plain.with_pull_secrets({"kind": "Pod", "spec": {}}) == {"kind": "Pod", "spec": {}}
