# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Image pull Secrets copied into the namespaces the checks create: before any pod, data only, labelled, gone
with the namespace; a missing one is an ``error`` verdict naming it; a transient API error is retried; the
shipped RBAC grants exactly the two rights it needs.

The real ``Api`` and ``RackRun`` over the in-memory client of test_fleet_given_namespace.py, which here also
deletes what is in a namespace with it (the namespace controller). The lifecycle on a real API server:
tests/integration/test_verify_pull_secrets.py.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any, Dict, List

import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_api, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base, mpijob
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import imex_channel as imex_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    common_labels,
    imex_pod_manifest,
    pull_secret_copy,
)
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception
from test_fleet_given_namespace import RACK0, MemoryClient, Resource

RBAC = Path(__file__).resolve().parents[4] / "docs" / "rbac"
RUN_ID = "20261201T132211Z"
DOCKER_CONFIG = base64.b64encode(b'{"auths":{"registry.example.com":{"auth":"cm9ib3Q6cw=="}}}').decode()
SOURCE_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "kubernetes.io/dockerconfigjson",
    "metadata": {
        "name": "mirror-pull",
        "namespace": "gpu-operator",
        "uid": "0f4c2a8e-6a0e-4c59-9b53-0c1b9e0c6d11",
        "resourceVersion": "4711",
        "creationTimestamp": "2026-12-01T09:00:00Z",
        "labels": {"team": "platform"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "x"}],
        "managedFields": [{"manager": "kubectl"}],
    },
    "data": {".dockerconfigjson": DOCKER_CONFIG},
}


class ClusterClient(MemoryClient):
    """Serves Secrets and ServiceAccounts too, deletes a namespace's objects with it, and can answer 503 to the
    first reads of a Secret (an API server restart)."""

    def __init__(self, unavailable_reads: int = 0) -> None:
        super().__init__(set())
        self.unavailable_reads = unavailable_reads

    def resource(self, kind: str, api_version: str) -> Resource:
        return Resource(kind, api_version)

    def get(self, resource: Resource, name=None, namespace=None, **params: Any):
        if resource.kind == "Secret" and self.unavailable_reads:
            self.unavailable_reads -= 1
            self.calls.append(("get", "Secret", namespace, name, "503"))
            raise api_exception(ApiException(status=503, reason="Service Unavailable"))
        return super().get(resource, name=name, namespace=namespace, **params)

    def create(self, resource: Resource, body: Dict[str, Any], namespace=None):
        created = super().create(resource, body, namespace)
        if resource.kind == "Namespace":  # kube-controller-manager makes the default ServiceAccount
            self.put({"kind": "ServiceAccount", "metadata": {"name": "default", "namespace": body["metadata"]["name"]}})
        return created

    def remove(self, kind: str, namespace: str, name: str) -> None:
        super().remove(kind, namespace, name)
        if kind == "Namespace":
            for key in [key for key in self.objects if key[1] == name]:
                self.objects.pop(key)


class PodCheck(base.Check):
    """One pod on the rack's first tray, made as the IMEX check makes its pods; what it saw is kept."""

    name = "imex_channel"
    objects = ()

    def __init__(self) -> None:
        self.seen: Dict[str, Any] = {}

    def measure(self, run: rack_run.RackRun) -> base.Result:
        run.create_namespace()
        node = run.plan.nodes[0]
        pod = run.create_pod(imex_pod_manifest(node, run.namespace, run.plan.name, "t", "img", 65534, RUN_ID))
        client = run.api.client
        self.seen = {
            "secrets": {name: client.objects[("Secret", ns, name)] for ns, name in _secrets(client, run.namespace)},
            "pod": pod,
        }
        return base.Result(True, "the pod ran")


def _secrets(client: MemoryClient, namespace: str) -> List[tuple]:
    return [(ns, name) for (kind, ns, name) in client.objects if kind == "Secret" and ns == namespace]


def rack_run_of(client: MemoryClient, check: base.Check, secrets=("mirror-pull",), namespaces=None, patience=0):
    settings = rack_run.Settings(
        run_id=RUN_ID,
        timeout=30,
        poll=0.01,
        image_pull_secrets=list(secrets),
        image_pull_secrets_namespace="gpu-operator",
        namespaces=namespaces or {},
    )
    return rack_run.RackRun(
        check, kube_api.Api(client, patience=patience, sleep=lambda s: None), RACK0, settings, lambda s: None
    )


def cluster(*secrets: Dict[str, Any], unavailable_reads: int = 0) -> ClusterClient:
    client = ClusterClient(unavailable_reads)
    for secret in secrets:
        client.put(secret)
    return client


def test_the_copy_holds_the_type_the_data_and_the_checks_labels_only():
    copy = pull_secret_copy(SOURCE_SECRET, "gpu-fabric-verify-imex-channel-rack0", "imex_channel", "rack0", RUN_ID)
    assert copy == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "mirror-pull",
            "namespace": "gpu-fabric-verify-imex-channel-rack0",
            "labels": common_labels("imex_channel", "rack0", RUN_ID),
        },
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": DOCKER_CONFIG},
    }
    assert copy["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpu-fabric-verify"  # what the uninstall finds


def test_each_secret_is_in_the_checks_namespace_before_its_pod_and_gone_with_the_namespace():
    other = dict(SOURCE_SECRET, type="kubernetes.io/dockercfg", data={".dockercfg": "e30="})
    other["metadata"] = dict(SOURCE_SECRET["metadata"], name="legacy-pull")
    client = cluster(SOURCE_SECRET, other)
    check = PodCheck()
    run = rack_run_of(client, check, secrets=("mirror-pull", "legacy-pull"))
    record = run.run()

    assert (record["verdict"], record["objects_left"]) == ("passed", 0), record["summary"]
    namespace = "gpu-fabric-verify-imex-channel-rack0"
    assert sorted(check.seen["secrets"]) == ["legacy-pull", "mirror-pull"]
    assert check.seen["secrets"]["mirror-pull"] == pull_secret_copy(
        SOURCE_SECRET, namespace, "imex_channel", "rack0", RUN_ID
    )
    assert check.seen["secrets"]["legacy-pull"]["type"] == "kubernetes.io/dockercfg"
    assert check.seen["pod"]["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}, {"name": "legacy-pull"}]
    reviews = ("SelfSubjectAccessReview", "SelfSubjectReview")
    creates = [
        (kind, ns, name) for verb, kind, ns, name, _sel in client.calls if verb == "create" and kind not in reviews
    ]
    assert creates[:5] == [
        ("Namespace", None, namespace),
        ("RoleBinding", namespace, "gpu-fabric-verify-logs"),  # the logs of its pods, readable there only
        ("Secret", namespace, "mirror-pull"),
        ("Secret", namespace, "legacy-pull"),
        ("Pod", namespace, "imex-channel-gb200-r0-t0"),
    ]
    reads = [(ns, name) for verb, kind, ns, name, _sel in client.calls if verb == "get" and kind == "Secret"]
    assert reads == [("gpu-operator", "mirror-pull"), ("gpu-operator", "legacy-pull")]
    assert _secrets(client, namespace) == []  # went with the namespace
    assert _secrets(client, "gpu-operator") == [("gpu-operator", "mirror-pull"), ("gpu-operator", "legacy-pull")]
    assert "copy the image pull Secrets" in record["timings"]


def test_a_missing_secret_is_an_error_verdict_naming_it_and_nothing_is_left():
    client = cluster()
    record = rack_run_of(client, PodCheck()).run()

    assert record["verdict"] == "error" and not record["passed"]
    assert record["summary"] == (
        "rack rack0: the check could not run: image pull Secret mirror-pull does not exist in namespace "
        "gpu-operator: create it there, or set gpu_fabric_verify_image_pull_secrets_namespace to the namespace "
        "that holds it"
    )
    assert record["failed_nodes"] == [] and record["objects_left"] == 0
    assert [c for c in client.calls if c[0] == "create" and c[1] in ("Pod", "Secret")] == []
    assert client.objects == {}


def test_a_secret_that_is_no_pull_secret_is_refused():
    opaque = dict(SOURCE_SECRET, type="Opaque")
    record = rack_run_of(cluster(opaque), PodCheck()).run()
    assert record["verdict"] == "error"
    assert record["summary"] == (
        "rack rack0: the check could not run: Secret gpu-operator/mirror-pull is of type Opaque, not an image pull "
        "Secret (kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg): fix gpu_fabric_verify_image_pull_secrets"
    )


def test_an_unavailable_api_server_is_ridden_out_while_reading_the_secret():
    client = cluster(SOURCE_SECRET, unavailable_reads=2)
    check = PodCheck()
    record = rack_run_of(client, check, patience=60).run()
    assert record["verdict"] == "passed", record["summary"]
    assert [c for c in client.calls if c[1] == "Secret" and c[0] == "get"] == [
        ("get", "Secret", "gpu-operator", "mirror-pull", "503"),
        ("get", "Secret", "gpu-operator", "mirror-pull", "503"),
        ("get", "Secret", "gpu-operator", "mirror-pull", None),
    ]
    assert list(check.seen["secrets"]) == ["mirror-pull"]


def test_a_refused_read_is_one_clean_line():
    class Forbidden(ClusterClient):
        def get(self, resource, name=None, namespace=None, **params):
            if resource.kind == "Secret":
                raise api_exception(ApiException(status=403, reason="Forbidden"))
            return super().get(resource, name=name, namespace=namespace, **params)

    record = rack_run_of(Forbidden(), PodCheck(), patience=60).run()
    assert record["verdict"] == "error"
    assert record["summary"].startswith("rack rack0: could not read Secret gpu-operator/mirror-pull: 403 Forbidden")
    assert "\n" not in record["summary"]


def test_without_pull_secrets_no_secret_is_read_nor_created():
    client = cluster(SOURCE_SECRET)
    record = rack_run_of(client, PodCheck(), secrets=()).run()
    assert record["verdict"] == "passed"
    assert [c for c in client.calls if c[1] == "Secret"] == []


def test_a_given_namespace_is_left_to_hold_its_own_secrets():
    client = cluster(SOURCE_SECRET)
    rights = {(r.verb, r.group, r.resource, r.subresource, "shared") for r in rack_run.RackRun.rights + PodCheck.rights}
    client.rights = rights
    client.put({"kind": "Namespace", "metadata": {"name": "shared"}})
    check = PodCheck()
    check.measure = lambda run: (run.create_namespace(), base.Result(True, "ok"))[1]  # type: ignore[method-assign]
    record = rack_run_of(client, check, namespaces={"rack0": "shared"}).run()
    assert record["verdict"] == "passed", record["summary"]
    assert [c for c in client.calls if c[1] == "Secret"] == []


# -- the shipped RBAC --------------------------------------------------------------------------------------


def secret_rules(path: Path) -> List[tuple]:
    """(kind of role, its namespace, verbs) of every rule on Secrets in a shipped file."""
    found = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc["rules"]:
                if "secrets" in rule["resources"]:
                    assert rule["resources"] == ["secrets"] and rule["apiGroups"] == [""]
                    found.append((doc["kind"], doc["metadata"].get("namespace", ""), sorted(rule["verbs"])))
    return found


def test_the_verify_stage_may_read_secrets_only_in_the_source_namespace_and_only_create_them_elsewhere():
    assert secret_rules(RBAC / "verify-stage.yaml") == [
        ("ClusterRole", "", ["create"]),
        ("Role", "gpu-operator", ["get"]),
    ]
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all((RBAC / "verify-stage.yaml").read_text())}
    for kind, binding in (("ClusterRole", "ClusterRoleBinding"), ("Role", "RoleBinding")):
        bound = docs[(binding, "gpu-fabric-verify-pull-secrets")]
        assert bound["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": kind,
            "name": bound["metadata"]["name"],
        }
        assert docs[(kind, "gpu-fabric-verify-pull-secrets")]["rules"] == [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get" if kind == "Role" else "create"]}
        ]
    # the main ClusterRole, which test_rbac.py trims rule by rule, holds no right on Secrets
    main = docs[("ClusterRole", "gpu-fabric-verify")]
    assert not any("secrets" in rule["resources"] for rule in main["rules"])


def test_in_given_namespaces_no_right_on_secrets_is_needed():
    assert secret_rules(RBAC / "verify-stage-namespaced.yaml") == []
    assert not any(
        right.resource == "secrets"
        for right in itertools.chain(
            rack_run.RackRun.rights, mpijob.MpiJobCheck.rights, imex_check.ImexChannelCheck.rights
        )
    )
