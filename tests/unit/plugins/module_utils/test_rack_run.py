# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RackRun.grant_logs: the right to read the pods' logs, held or bound in the check's own namespace only.

That the shipped RBAC and its admission policy let the verify account bind itself the log reader there, and
nowhere else, is proven on the simulated rack's API server (tests/integration/test_rbac.py).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_api, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import imex_channel as imex_check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from fake_clock import Clock
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception

USER = "system:serviceaccount:gpu-fabric:gpu-fabric-verify"
NAMESPACE = "gpu-fabric-verify-imex-channel-rack0"


class GrantApi:
    """``Api.can``, ``username`` and ``create`` as the API server answers them: the log right is held from the start
    (``held``), or once the binding was created and the authorizer read it ``takes`` access reviews later."""

    def __init__(self, held=False, takes=1, refusal=None):
        self.held = held
        self.takes = takes
        self.refusal = refusal
        self.created = []
        self.asked = []

    def can(self, right, namespace, again=False):
        self.asked.append((str(right), namespace, again))
        if self.held:
            return True
        if self.created:
            self.takes -= 1
            return self.takes <= 0
        return False

    def username(self):
        return USER

    def create(self, body):
        if self.refusal is not None:
            raise self.refusal
        self.created.append(body)
        return body


def rack_run_on(api, clock):
    plan = RackPlan("rack0", ["c.1"], ["t0"], ["t0"], [], 4, "NVIDIA GB200")
    settings = rack_run.Settings(run_id="run-1", poll=1.0)
    return rack_run.RackRun(imex_check.ImexChannelCheck("busybox"), api, plan, settings, clock.sleep, clock)


def test_an_identity_that_reads_logs_already_binds_nothing():
    api = GrantApi(held=True)
    rack_run_on(api, Clock()).grant_logs()
    assert api.created == [] and api.asked == [("get pods/log", NAMESPACE, False)]


def test_the_log_reader_is_bound_to_the_identity_and_waited_for_until_the_authorizer_holds_it():
    api, clock = GrantApi(takes=3), Clock()
    rack_run_on(api, clock).grant_logs()
    [binding] = api.created
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"]["name"] == "gpu-fabric-verify-logs"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-fabric-verify", "namespace": "gpu-fabric"}]
    assert binding["metadata"]["labels"]["gpu-fabric.nvidia.com/check"] == "imex_channel"
    assert [again for _r, _n, again in api.asked] == [False, True, True, True]
    assert clock.now == pytest.approx(0.15)  # 0.05 then 0.1: a binding is read in milliseconds, not a poll


def test_an_identity_that_may_not_bind_the_log_reader_cannot_run_the_check():
    refusal = kube_api.ApiUnavailable("create RoleBinding ns/gpu-fabric-verify-logs: 403 Forbidden")
    refusal.__cause__ = api_exception(ApiException(status=403, reason="Forbidden"))  # as Api.call raises it
    with pytest.raises(base.NotRun) as caught:
        rack_run_on(GrantApi(refusal=refusal), Clock()).grant_logs()
    assert str(caught.value) == (
        f"{USER} may not read the logs of the check's pods in namespace {NAMESPACE}, nor bind ClusterRole "
        "gpu-fabric-verify-logs to itself there: apply docs/rbac/verify-stage.yaml again (it holds that role and the "
        "right to bind it); server: create RoleBinding ns/gpu-fabric-verify-logs: 403 Forbidden"
    )


def test_an_unreachable_api_while_binding_stays_an_api_error():
    unreachable = kube_api.ApiUnavailable("create RoleBinding: cannot reach the Kubernetes API for 90 s")
    with pytest.raises(kube_api.ApiUnavailable):
        rack_run_on(GrantApi(refusal=unreachable), Clock()).grant_logs()


def test_a_binding_that_never_grants_the_right_ends_the_check_in_bounded_time():
    api, clock = GrantApi(takes=10**6), Clock()
    with pytest.raises(base.NotRun) as caught:
        rack_run_on(api, clock).grant_logs()
    assert str(caught.value).startswith(
        f"RoleBinding {NAMESPACE}/gpu-fabric-verify-logs still does not let {USER} read the logs there after "
    )
    assert "(30 s): is ClusterRole gpu-fabric-verify-logs of docs/rbac/verify-stage.yaml applied" in str(caught.value)
    assert clock.now == pytest.approx(30.0)
