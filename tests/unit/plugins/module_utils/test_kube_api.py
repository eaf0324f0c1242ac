# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kube_api.Api.watch_until: what it asks the API server for, and a refused watch as one line."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_api, rights
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception


def pod(name: str, phase: str) -> dict:
    return {"metadata": {"name": name, "namespace": "v"}, "status": {"phase": phase}}


class Response:
    """What the dynamic client answers with ``serialize=False``: the HTTP response, its body as bytes."""

    def __init__(self, page: dict) -> None:
        self.data = json.dumps(page).encode()


class Dynamic:
    """The dynamic client's get (a list in two pages) and watch; records what was asked."""

    def __init__(self, watch_error: Exception | None = None) -> None:
        self.asked: list = []
        self.watch_error = watch_error

    def resource(self, kind, api_version):
        return f"{api_version}/{kind}"

    def get(self, resource, serialize=True, **params):
        self.asked.append(("list", resource, params))
        if params.get("_continue") is None:
            return Response(
                {
                    "kind": "PodList",
                    "metadata": {"resourceVersion": "41", "continue": "p2"},
                    "items": [pod("a", "Pending")],
                }
            )
        return Response({"kind": "PodList", "metadata": {"resourceVersion": "41"}, "items": [pod("b", "Running")]})

    def watch(self, resource, **params):
        self.asked.append(("watch", resource, params))
        if self.watch_error is not None:
            raise self.watch_error
        yield {"type": "MODIFIED", "raw_object": pod("a", "Running")}


class K8SClient:
    """kubernetes.core's wrapper: the dynamic client as ``.client``, its own resource and get, no watch."""

    def __init__(self, dynamic: Dynamic) -> None:
        self.client = dynamic
        self.resource = dynamic.resource
        self.get = dynamic.get


def all_running(objects):
    return all(o["status"]["phase"] == "Running" for o in objects.values())


def test_a_wait_lists_every_page_then_watches_from_the_lists_version_with_the_same_selector():
    dynamic = Dynamic()
    api = kube_api.Api(K8SClient(dynamic), sleep=lambda s: None, clock=lambda: 0.0)

    outcome = api.watch_until("Pod", "v1", "v", all_running, deadline=600.0, label_selector="app=x")

    assert outcome.value is True and sorted(outcome.objects) == ["v/a", "v/b"]
    lists = [params for verb, _r, params in dynamic.asked if verb == "list"]
    assert [p.get("_continue") for p in lists] == [None, "p2"]
    assert all(p["label_selector"] == "app=x" and p["namespace"] == "v" for p in lists)
    assert dynamic.asked[-1] == (
        "watch",
        "v1/Pod",
        {"resource_version": "41", "timeout": 300, "namespace": "v", "label_selector": "app=x"},
    )


def test_one_object_is_listed_and_watched_by_its_name():
    dynamic = Dynamic()
    api = kube_api.Api(dynamic, sleep=lambda s: None, clock=lambda: 0.0)
    api.watch_until("Pod", "v1", "v", all_running, deadline=600.0, name="a")
    assert all(params["field_selector"] == "metadata.name=a" for _verb, _r, params in dynamic.asked)


def test_a_refused_watch_is_one_line_naming_what_was_watched():
    forbidden = api_exception(ApiException(status=403, reason="Forbidden"))
    api = kube_api.Api(Dynamic(watch_error=forbidden), sleep=lambda s: None, clock=lambda: 0.0)
    with pytest.raises(kube_api.ApiUnavailable) as caught:
        api.watch_until("Pod", "v1", "v", lambda objects: False, deadline=600.0)
    assert str(caught.value).startswith("watch Pod in v: 403 ")
    assert "\n" not in str(caught.value)


class Reviews:
    """The dynamic client's create of SelfSubjectReviews and SelfSubjectAccessReviews; ``allowed`` answers each
    access review in turn."""

    def __init__(self, allowed=(), username="system:serviceaccount:gpu-fabric:gpu-fabric-verify") -> None:
        self.allowed = list(allowed)
        self.username = username
        self.created: list = []

    def resource(self, kind, api_version):
        return kind

    def create(self, resource, body, **params):
        self.created.append(body)
        if resource == "SelfSubjectReview":
            return {"status": {"userInfo": {"username": self.username, "groups": ["system:authenticated"]}}}
        return {"status": {"allowed": self.allowed.pop(0)}}


def test_the_identity_is_asked_once_per_run():
    reviews = Reviews()
    api = kube_api.Api(reviews, sleep=lambda s: None, clock=lambda: 0.0)
    assert api.username() == "system:serviceaccount:gpu-fabric:gpu-fabric-verify"
    assert api.username() == "system:serviceaccount:gpu-fabric:gpu-fabric-verify"
    assert reviews.created == [{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}]


def test_a_review_that_names_no_user_is_an_error_not_an_empty_subject():
    api = kube_api.Api(Reviews(username=""), sleep=lambda s: None, clock=lambda: 0.0)
    with pytest.raises(
        kube_api.ApiUnavailable, match=r"^ask who this identity is: the SelfSubjectReview names no user$"
    ):
        api.username()


def test_a_right_is_asked_once_unless_asked_again_after_a_grant():
    reviews = Reviews(allowed=[False, True])
    api = kube_api.Api(reviews, sleep=lambda s: None, clock=lambda: 0.0)
    logs = rights.Right("get", "", "pods", "log")
    assert api.can(logs, "v") is False
    assert api.can(logs, "v") is False  # the answer kept
    assert api.can(logs, "v", again=True) is True
    assert api.can(logs, "v") is True  # the new answer kept
    assert [body["spec"]["resourceAttributes"] for body in reviews.created] == [
        {"namespace": "v", "verb": "get", "group": "", "resource": "pods", "subresource": "log"}
    ] * 2


def test_only_a_refusal_of_the_identity_is_refused():
    def unavailable(status):
        exc = kube_api.ApiUnavailable("x")
        exc.__cause__ = api_exception(ApiException(status=status, reason="r"))  # as Api.call raises it
        return exc

    assert kube_api.refused(unavailable(403)) and kube_api.refused(unavailable(401))
    assert not kube_api.refused(unavailable(404)) and not kube_api.refused(unavailable(500))
    assert not kube_api.refused(kube_api.ApiUnavailable("list Node: cannot reach the Kubernetes API for 90 s"))


class HelperError(Exception):
    """A helper's own error (as compute_domain.ComputeDomainError), raised from the API error that caused it."""


def raised_from(status: int) -> HelperError:
    exc = HelperError(f"helper failed on {status}")
    exc.__cause__ = api_exception(ApiException(status=status, reason="r"))
    return exc


def raising(exc: BaseException):
    def call():
        raise exc

    return call


def test_a_helpers_error_from_a_transient_one_is_retried_and_any_other_goes_to_the_caller_as_it_is():
    slept: list = []
    api = kube_api.Api(None, patience=60, sleep=slept.append, clock=lambda: 0.0)
    tries = iter([raised_from(503), raised_from(503), "done"])

    def helper():
        answer = next(tries)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert api.call("ensure ComputeDomain ns/d", helper, wrapped=(HelperError,)) == "done"
    assert slept == [1.0, 2.0]
    with pytest.raises(HelperError, match="helper failed on 404"):
        api.call("ensure ComputeDomain ns/d", raising(raised_from(404)), wrapped=(HelperError,))
    # a helper's error the caller does not name is not the API's: it goes through untouched, never retried
    with pytest.raises(HelperError, match="helper failed on 503"):
        api.call("read x", raising(raised_from(503)))
    assert slept == [1.0, 2.0]
