# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""chart_release's API steps (the namespace, the CRDs' server-side apply) against a recorded API, and its
transient-error retry. The Helm steps run against the simulated rack (tests/integration/test_cluster_stage.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import chart_release
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception

PRIVILEGED = {"pod-security.kubernetes.io/enforce": "privileged"}


class RecordedApi:
    """Answers by (method, path) from ``objects``; records every call with its parameters."""

    def __init__(self, objects):
        self.objects = dict(objects)
        self.calls = []

    def call(self, method, path, **params):
        self.calls.append((method, path, params))
        answer = self.objects.get((method, path))
        if callable(answer):
            return answer(params)
        return answer or {}

    def get(self, path):
        self.calls.append(("get", path, {}))
        return self.objects.get(("get", path))


def test_an_absent_namespace_is_created_with_its_labels():
    api = RecordedApi({})
    assert chart_release.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=False) == "created"
    method, path, params = api.calls[-1]
    assert (method, path) == ("post", "/api/v1/namespaces")
    assert params["body"]["metadata"] == {"name": "gpu-operator", "labels": PRIVILEGED}


def test_a_namespace_is_given_the_labels_it_lacks_and_check_mode_writes_nothing():
    namespace = {"metadata": {"name": "gpu-operator", "labels": {"team": "gpu"}}}
    api = RecordedApi({("get", "/api/v1/namespaces/gpu-operator"): namespace})
    assert chart_release.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=True) == "labelled"
    assert [c[0] for c in api.calls] == ["get"]
    assert chart_release.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=False) == "labelled"
    method, _path, params = api.calls[-1]
    assert (method, params["body"], params["content_type"]) == (
        "patch",
        {"metadata": {"labels": PRIVILEGED}},
        "application/merge-patch+json",
    )
    namespace["metadata"]["labels"].update(PRIVILEGED)
    assert chart_release.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=False) == "unchanged"


def crd(name, **spec):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": "nvidia.com", **spec},
    }


def applied(desired, resourceVersion, manager="gpu-fabric", **metadata):
    """``desired`` as the API server returns it once ``manager`` applied it."""
    live = {**desired, "metadata": {**desired["metadata"], "resourceVersion": resourceVersion, **metadata}}
    live["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Apply", "fieldsV1": {"f:spec": {"f:group": {}}}}
    ]
    return live


def test_only_the_crds_that_differ_are_applied_and_those_it_changed_are_told():
    path = chart_release.CRD_PATH
    same = crd("same.nvidia.com")
    newer = crd("newer.nvidia.com", scope="Namespaced")
    api = RecordedApi(
        {
            ("get", f"{path}/same.nvidia.com"): applied(same, "10"),
            ("get", f"{path}/newer.nvidia.com"): applied(crd("newer.nvidia.com", scope="Cluster"), "11"),
            ("patch", f"{path}/newer.nvidia.com"): {"metadata": {"name": "newer.nvidia.com", "resourceVersion": "12"}},
            ("patch", f"{path}/new.nvidia.com"): {"metadata": {"name": "new.nvidia.com", "resourceVersion": "13"}},
        }
    )
    crds = [same, newer, crd("new.nvidia.com")]
    assert chart_release.apply_crds(api, crds, "gpu-fabric", check_mode=False) == ["newer.nvidia.com", "new.nvidia.com"]
    # a read of each, then one forced server-side apply by the field manager of each that differs
    assert [(method, path.rsplit("/", 1)[1]) for method, path, _params in api.calls] == [
        ("get", "same.nvidia.com"),
        ("get", "newer.nvidia.com"),
        ("patch", "newer.nvidia.com"),
        ("get", "new.nvidia.com"),
        ("patch", "new.nvidia.com"),
    ]
    for method, _path, params in api.calls:
        if method == "patch":
            assert params["content_type"] == "application/apply-patch+yaml"
            assert (params["field_manager"], params["force_conflicts"], params.get("dry_run")) == (
                "gpu-fabric",
                True,
                None,
            )


def test_a_crd_helm_created_is_applied_once_by_the_field_manager():
    path = chart_release.CRD_PATH
    same = crd("same.nvidia.com")
    api = RecordedApi(
        {
            ("get", f"{path}/same.nvidia.com"): applied(same, "10", manager="helm"),
            ("patch", f"{path}/same.nvidia.com"): {"metadata": {"name": "same.nvidia.com", "resourceVersion": "11"}},
        }
    )
    assert chart_release.apply_crds(api, [same], "gpu-fabric", check_mode=False) == ["same.nvidia.com"]


def test_check_mode_dry_runs_the_apply_and_compares_generation_and_labels():
    path = chart_release.CRD_PATH
    old = {"resourceVersion": "10", "generation": 1, "labels": {"x": "1"}}
    a = crd("a.nvidia.com", scope="Namespaced")
    b = crd("b.nvidia.com", scope="Namespaced")
    api = RecordedApi(
        {
            ("get", f"{path}/a.nvidia.com"): applied(crd("a.nvidia.com", scope="Cluster"), **old),
            # applied by another manager: the dry run tells whether anything would change
            ("get", f"{path}/b.nvidia.com"): applied(b, manager="helm", **old),
            # a dry run keeps the resourceVersion; a changed spec shows in the generation
            ("patch", f"{path}/a.nvidia.com"): {"metadata": dict(old, name="a.nvidia.com", generation=2)},
            ("patch", f"{path}/b.nvidia.com"): {"metadata": dict(old, name="b.nvidia.com")},
        }
    )
    assert chart_release.apply_crds(api, [a, b], "fm", check_mode=True) == ["a.nvidia.com"]
    assert all(params["dry_run"] == "All" for method, _path, params in api.calls if method == "patch")


class FlakyClient:
    """A dynamic client whose ``request`` fails with ``errors`` first, then answers."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.client = self
        self.requests = 0

    def request(self, method, path, serialize=True, **params):
        self.requests += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"kind": "Namespace", "metadata": {"name": "x"}}


def api_error(status):
    return api_exception(ApiException(status=status, reason="Error"))


def test_a_transient_api_error_is_retried_and_any_other_raised_at_once():
    sleeps = []
    client = FlakyClient(api_error(503), ConnectionRefusedError())
    api = chart_release.Api(client, patience=10, sleep=sleeps.append, clock=lambda: 0.0)
    assert api.get("/api/v1/namespaces/x")["metadata"]["name"] == "x"
    assert (client.requests, sleeps) == (3, [1.0, 1.0])
    forbidden = chart_release.Api(FlakyClient(api_error(403)), patience=10, sleep=sleeps.append, clock=lambda: 0.0)
    with pytest.raises(Exception) as caught:
        forbidden.get("/api/v1/namespaces/x")
    assert getattr(caught.value, "status", None) == 403
    assert chart_release.Api(FlakyClient(api_error(404)), patience=0).get("/api/v1/namespaces/x") is None
