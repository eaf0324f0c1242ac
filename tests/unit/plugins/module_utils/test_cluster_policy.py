# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU Operator's ClusterPolicy readiness: the state and conditions the operator writes."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import cluster_policy
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, api_exception

# The status GPU Operator v25.10.0 writes (clusterpolicy_controller.go, internal/conditions): state notReady,
# Ready=False (reason Error) and Error=True (reason OperandNotReady) whose message lists the states.
NOT_READY = {
    "metadata": {"name": "cluster-policy", "creationTimestamp": "2026-12-01T10:00:00Z"},
    "status": {
        "state": "notReady",
        "namespace": "gpu-operator",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Error", "message": ""},
            {
                "type": "Error",
                "status": "True",
                "reason": "OperandNotReady",
                "message": "ClusterPolicy is not ready, states not ready: [state-dcgm-exporter]",
            },
        ],
    },
}
READY = {
    "metadata": {"name": "cluster-policy", "creationTimestamp": "2026-12-01T10:00:00Z"},
    "status": {
        "state": "ready",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Reconciled",
                "message": "ClusterPolicy is ready as all resources have been successfully reconciled",
            },
            {"type": "Error", "status": "False", "reason": "Ready", "message": ""},
        ],
    },
}


def test_not_ready_names_the_state_and_the_operators_states_not_ready():
    readiness = cluster_policy.evaluate_policies([NOT_READY])
    assert readiness.ready is False
    assert readiness.state == "notReady"
    assert readiness.summary() == (
        "ClusterPolicy cluster-policy state notReady; conditions: Ready=False (Error); "
        "Error=True (OperandNotReady): ClusterPolicy is not ready, states not ready: [state-dcgm-exporter]"
    )


def test_ready_is_ready():
    readiness = cluster_policy.evaluate_policies([READY])
    assert readiness.ready is True
    assert readiness.to_dict()["state"] == "ready"


def test_a_policy_without_status_is_not_ready():
    readiness = cluster_policy.evaluate_policies([{"metadata": {"name": "cluster-policy"}}])
    assert (readiness.ready, readiness.state) == (False, "")
    assert readiness.summary() == "ClusterPolicy cluster-policy state no status yet"


def test_the_oldest_policy_is_the_one_reconciled_and_the_others_are_named():
    newer = {
        "metadata": {"name": "a-second", "creationTimestamp": "2026-12-01T11:00:00Z"},
        "status": {"state": "ignored"},
    }
    readiness = cluster_policy.evaluate_policies([newer, READY])
    assert readiness.name == "cluster-policy"
    assert readiness.ready is True
    assert readiness.summary().endswith("also a-second (ignored by the operator: only one ClusterPolicy is reconciled)")
    assert cluster_policy.evaluate_policies([newer, READY], name="a-second").ready is False


def test_wait_returns_once_ready_and_times_out_naming_states_and_conditions():
    answers = iter([[], [NOT_READY], [READY]])
    clock = iter(range(0, 100, 5))
    readiness = cluster_policy.wait_ready(lambda: next(answers), 60, sleep=lambda s: None, clock=lambda: next(clock))
    assert readiness.ready is True

    answers = iter([[], [{"metadata": {"name": "cluster-policy"}}]] + [[NOT_READY]] * 30)
    clock = iter(range(0, 1000, 5))
    with pytest.raises(cluster_policy.PolicyTimeout) as err:
        cluster_policy.wait_ready(lambda: next(answers), 20, sleep=lambda s: None, clock=lambda: next(clock))
    assert err.value.message == (
        "GPU Operator not ready after 20s: ClusterPolicy cluster-policy state notReady; conditions: "
        "Ready=False (Error); Error=True (OperandNotReady): ClusterPolicy is not ready, states not ready: "
        "[state-dcgm-exporter] (states seen: absent, no status, notReady); expected state ready. Read the "
        "operator's log (`kubectl -n gpu-operator logs deploy/gpu-operator`) and the operand pods; raise "
        "gpu_operator_wait_timeout when driver containers are still building."
    )
    assert err.value.readiness.state == "notReady"


def test_wait_reads_again_after_a_transient_error_and_not_after_a_refusal():
    def answers(*outcomes):
        it = iter(outcomes)

        def read():
            outcome = next(it)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        return read

    unavailable = api_exception(ApiException(status=503, reason="Service Unavailable"))
    clock = iter(range(0, 100, 5))
    readiness = cluster_policy.wait_ready(
        answers(unavailable, [READY]), 60, sleep=lambda s: None, clock=lambda: next(clock)
    )
    assert readiness.ready is True
    forbidden = api_exception(ApiException(status=403, reason="Forbidden"))
    with pytest.raises(DynamicApiError):
        cluster_policy.wait_ready(answers(forbidden, [READY]), 60, sleep=lambda s: None, clock=lambda: next(clock))


def test_no_policy_at_all_says_to_install_the_chart():
    clock = iter(range(0, 100, 5))
    with pytest.raises(cluster_policy.PolicyTimeout) as err:
        cluster_policy.wait_ready(lambda: [], 5, sleep=lambda s: None, clock=lambda: next(clock))
    assert "no ClusterPolicy exists (states seen: absent)" in err.value.message
    assert "Install the GPU Operator chart first" in err.value.message


@pytest.mark.parametrize(
    ("setting", "served", "wanted"),
    [("auto", True, True), ("auto", False, False), ("true", False, True), ("false", True, False), (True, False, True)],
)
def test_service_monitor_auto_follows_the_api(setting, served, wanted):
    assert cluster_policy.service_monitor_wanted(setting, served) is wanted


def test_service_monitor_refuses_other_words():
    with pytest.raises(ValueError, match="not auto, true or false"):
        cluster_policy.service_monitor_wanted("sometimes", True)


@pytest.mark.parametrize(
    ("setting", "served", "expected"),
    [("auto", False, False), ("auto", True, True), ("true", False, True), ("false", True, False), (True, False, True)],
)
def test_the_service_monitor_in_the_chart_values_is_decided(setting, served, expected):
    values = {"driver": {"enabled": True}, "dcgmExporter": {"serviceMonitor": {"enabled": setting, "interval": "15s"}}}
    resolved = cluster_policy.resolve_service_monitor(values, served)
    assert resolved["dcgmExporter"]["serviceMonitor"] == {"enabled": expected, "interval": "15s"}
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] == setting  # the input is left as it was


def test_values_without_a_service_monitor_are_left_alone():
    values = {"driver": {"enabled": False}}
    assert cluster_policy.resolve_service_monitor(values, True) == {"driver": {"enabled": False}}
    with pytest.raises(ValueError, match="not auto, true or false"):
        cluster_policy.resolve_service_monitor({"dcgmExporter": {"serviceMonitor": {"enabled": "sometimes"}}}, True)
