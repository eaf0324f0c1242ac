# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""uninstall_plan with an API server that does not answer: retried for the patience, then one line (no urllib3
text). The clock is injected: nothing sleeps."""

from __future__ import annotations

import functools

import pytest
import urllib3
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import k8s
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import uninstall_plan
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception
from urllib3.exceptions import MaxRetryError

from tests.unit.plugins.modules.runner import run_module

HINT = (
    "; check that the API server runs and that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the "
    "host options point at it, then run it again"
)


def refused() -> MaxRetryError:
    """urllib3's error for a closed port, as the client raises it (nothing listens on port 1)."""
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", 1, retries=urllib3.Retry(0))
    with pytest.raises(MaxRetryError) as caught:
        pool.request("GET", "/version")
    return caught.value


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class ListingClient:
    """Lists every kind as empty after ``failures`` calls that raise ``error``."""

    def __init__(self, failures, error):
        self.failures, self.error, self.calls = failures, error, 0

    def resource(self, kind, api_version):
        return kind

    def get(self, resource, serialize=True, **params):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return {"kind": f"{resource}List", "metadata": {}, "items": []}


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(uninstall_plan, "connect", functools.partial(k8s.connect, sleep=fake.sleep, clock=fake))
    monkeypatch.setattr(uninstall_plan, "retry", functools.partial(k8s.retry, sleep=fake.sleep, clock=fake))
    return fake


def test_an_api_server_that_never_answers_fails_with_one_line_after_the_patience(monkeypatch, clock):
    def get_api_client(module):
        raise refused()

    monkeypatch.setattr(uninstall_plan, "get_api_client", get_api_client)
    result = run_module(uninstall_plan.main, dict(api_patience=60))
    assert result["failed"]
    assert result["msg"] == (
        "cannot reach the Kubernetes API at https://127.0.0.1:1 for 60 s: connection refused; nothing was removed"
        + HINT
    )
    assert clock.slept == [2.0] * 30


def test_lists_that_fail_for_a_while_are_retried(monkeypatch, clock):
    client = ListingClient(2, refused())
    monkeypatch.setattr(uninstall_plan, "get_api_client", lambda module: client)
    result = run_module(uninstall_plan.main, dict(api_patience=60))
    assert not result["failed"], result.get("msg")
    assert (result["blocked"], result["user_workloads"], result["verification_namespaces"]) == (False, [], [])
    assert clock.slept == [2.0, 2.0]


def test_a_refusal_is_not_retried_and_names_the_lists(monkeypatch, clock):
    forbidden = api_exception(ApiException(status=403, reason="Forbidden"))
    monkeypatch.setattr(uninstall_plan, "get_api_client", lambda module: ListingClient(1, forbidden))
    result = run_module(uninstall_plan.main, dict(api_patience=60))
    assert result["msg"] == "cannot list ComputeDomains, MPIJobs and Namespaces: 403 Forbidden; nothing was removed"
    assert clock.slept == []
