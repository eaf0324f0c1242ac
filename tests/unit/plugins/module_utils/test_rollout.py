# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout judges of the gpu_operator and dra_driver roles, and the wait that retries transient reads."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import rollout
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, api_exception
from urllib3.exceptions import MaxRetryError, NewConnectionError

TRAY = Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "gb200-tray-node.json"


def pod(name, phase="Running", ready=True, node=""):
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
        },
    }


def node(name, gpus):
    status = {"capacity": {"cpu": "144", "nvidia.com/gpu": gpus}} if gpus is not None else {}
    return {"metadata": {"name": name}, "status": status}


class Clock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def api_error(status):
    """The dynamic client's exception for an HTTP answer, built the way the client builds it."""
    reason = "Service Unavailable" if status >= 500 else "Forbidden"
    return api_exception(ApiException(status=status, reason=reason))


def test_not_ready_pods_name_the_phase_and_leave_finished_jobs_out():
    pods = [
        pod("gpu-operator-7d9"),
        pod("nvidia-driver-daemonset-x2", "Pending", ready=False),
        pod("nvidia-cuda-validator-q8", "Succeeded", ready=False),
        {"metadata": {"name": "nvidia-dcgm-exporter-10"}, "status": {}},
        pod("nvidia-dcgm-exporter-2", ready=False),
    ]
    assert rollout.not_ready_pods(pods) == [
        "nvidia-dcgm-exporter-2 (Running)",
        "nvidia-dcgm-exporter-10 (Unknown)",
        "nvidia-driver-daemonset-x2 (Pending)",
    ]


def test_gpu_capacity_of_a_real_tray_and_of_nodes_without_the_device_plugin():
    tray = json.loads(TRAY.read_text())
    capacity = rollout.gpu_capacity([node("gb200-r0-t10", "4"), tray, node("gb200-r0-t2", None), node("x", "n/a")])
    assert capacity[tray["metadata"]["name"]] == int(tray["status"]["capacity"]["nvidia.com/gpu"])
    assert capacity["gb200-r0-t2"] == 0 and capacity["x"] == 0
    assert list(capacity) == ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10", "x"]  # name order, t2 before t10


def test_plugin_and_slice_coverage_name_the_nodes_left_out():
    nodes = ["t1", "t2", "t10"]
    plugins = [pod("p1", node="t1"), pod("p2", ready=False, node="t2"), pod("p3", "Pending", ready=False)]
    assert rollout.missing(nodes, rollout.ready_pod_nodes(plugins)) == ["t2", "t10"]
    slices = [
        {"spec": {"driver": "compute-domain.nvidia.com", "nodeName": "t10"}},
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "t1"}},
        {"spec": {"driver": "compute-domain.nvidia.com"}},
    ]
    assert rollout.missing(nodes, rollout.slice_nodes(slices, "compute-domain.nvidia.com")) == ["t1", "t2"]


def test_poll_returns_once_the_judge_holds():
    clock = Clock()
    reads = iter([[], [pod("a", ready=False)], [pod("a")]])
    found = rollout.poll(
        lambda: next(reads),
        lambda pods: bool(pods) and not rollout.not_ready_pods(pods),
        60,
        5,
        sleep=clock.sleep,
        clock=clock,
    )
    assert [p["metadata"]["name"] for p in found] == ["a"] and clock.sleeps == [5, 5]


def test_poll_times_out_with_the_last_read():
    clock = Clock()
    with pytest.raises(rollout.WaitTimeout) as caught:
        rollout.poll(lambda: [pod("a", ready=False)], lambda pods: False, 12, 5, sleep=clock.sleep, clock=clock)
    assert rollout.not_ready_pods(caught.value.last) == ["a (Running)"]
    # the last pause is cut short: the last read is at the deadline, not one delay after it
    assert (clock.sleeps, clock.now, caught.value.reads) == ([5, 5, 2], 12, 4)


def test_poll_reads_again_after_a_transient_error_and_not_after_a_refusal():
    clock = Clock()
    outcomes = iter([api_error(503), MaxRetryError(None, "/api", NewConnectionError(None, "refused")), ["ok"]])

    def read():
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert rollout.poll(read, bool, 60, 2, sleep=clock.sleep, clock=clock) == ["ok"]
    assert clock.sleeps == [2, 2]

    def refused():
        raise api_error(403)

    with pytest.raises(DynamicApiError):
        rollout.poll(refused, bool, 60, 2, sleep=clock.sleep, clock=clock)
    assert clock.sleeps == [2, 2]  # not read again


def test_poll_gives_up_on_transient_errors_at_the_deadline():
    clock = Clock()

    def read():
        raise api_error(503)

    with pytest.raises(DynamicApiError):
        rollout.poll(read, bool, 10, 4, sleep=clock.sleep, clock=clock)
    assert (clock.sleeps, clock.now) == ([4, 4, 2], 10)


# ---------------------------------------------------------------------------------------------
# The one rule of every wait and retry: pauses (fixed or a Backoff) cut at the deadline, attempts
# ---------------------------------------------------------------------------------------------


def failing(*outcomes):
    """A call that raises or returns each of ``outcomes`` in turn, counting its calls."""
    pending = list(outcomes)

    def call():
        call.calls += 1
        outcome = pending.pop(0) if pending else outcomes[-1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    call.calls = 0
    return call


def test_a_backoff_doubles_up_to_its_cap_and_a_number_is_a_fixed_pause():
    pauses = rollout.Backoff(1.0, 2.0, 10.0).pauses()
    assert list(itertools.islice(pauses, 7)) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    pauses = rollout.Backoff(0.5, 2.0, 2.0).pauses()
    assert list(itertools.islice(pauses, 4)) == [0.5, 1.0, 2.0, 2.0]
    pauses = rollout.Backoff(3.0).pauses()
    assert list(itertools.islice(pauses, 3)) == [3.0, 3.0, 3.0]


def test_retry_backs_off_until_the_patience_and_tries_once_more_at_its_end():
    clock = Clock()
    call = failing(api_error(503))
    with pytest.raises(DynamicApiError):
        rollout.retry(call, 60, rollout.Backoff(1.0, 2.0, 10.0), sleep=clock.sleep, clock=clock)
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 5.0]
    assert (clock.now, call.calls) == (60, 10)


def test_retry_returns_the_first_answer_and_raises_a_refusal_at_once():
    clock = Clock()
    call = failing(api_error(503), ConnectionRefusedError(), "answer")
    assert rollout.retry(call, 60, 2.0, sleep=clock.sleep, clock=clock) == "answer"
    assert (clock.sleeps, call.calls) == ([2.0, 2.0], 3)
    refused = failing(api_error(403))
    with pytest.raises(DynamicApiError):
        rollout.retry(refused, 60, 2.0, sleep=pytest.fail, clock=clock)
    assert refused.calls == 1


def test_attempts_alone_bound_a_retry_without_a_deadline_and_read_no_clock():
    def no_clock():
        pytest.fail("the clock was read")

    slept = []
    call = failing(api_error(503))
    with pytest.raises(DynamicApiError):
        rollout.retry(call, None, rollout.Backoff(0.5, 2.0, 2.0), sleep=slept.append, clock=no_clock, attempts=4)
    assert (slept, call.calls) == ([0.5, 1.0, 2.0], 4)


def test_a_zero_pause_retries_without_sleeping():
    def conflict(exc):
        return getattr(exc, "status", 0) == 409

    call = failing(api_error(409), api_error(409), "written")
    assert rollout.retry(call, None, 0.0, sleep=pytest.fail, transient=conflict, attempts=5) == "written"
    assert call.calls == 3


def test_a_poll_bounded_by_attempts_times_out_with_its_reads():
    slept = []
    with pytest.raises(rollout.WaitTimeout) as caught:
        rollout.poll(lambda: "", bool, None, 1.0, sleep=slept.append, attempts=3)
    assert (caught.value.last, caught.value.reads, slept) == ("", 3, [1.0, 1.0])


def test_the_deadline_counts_from_when_the_caller_started():
    clock = Clock()
    clock.now = 100.0
    with pytest.raises(rollout.WaitTimeout) as caught:
        rollout.poll(lambda: None, bool, 10, 3, sleep=clock.sleep, clock=clock, started=95.0)
    assert (clock.sleeps, clock.now, caught.value.reads) == ([3, 2], 105.0, 3)


def test_a_deadline_already_passed_reads_once():
    clock = Clock()
    with pytest.raises(rollout.WaitTimeout) as caught:
        rollout.poll(lambda: None, bool, -5, 3, sleep=pytest.fail, clock=clock)
    assert caught.value.reads == 1


class Wrapped(Exception):
    """An error of our own raised from an API error (as the ComputeDomain helpers raise theirs)."""


def test_errors_widen_what_is_tried_again_and_transient_still_decides():
    clock = Clock()
    transient = Wrapped("read failed")
    transient.__cause__ = api_error(503)
    call = failing(transient, "ok")
    with pytest.raises(Wrapped):  # not one of the API errors: raised at once
        rollout.retry(call, 60, 1.0, sleep=clock.sleep, clock=clock)
    call = failing(transient, "ok")
    assert rollout.retry(call, 60, 1.0, sleep=clock.sleep, clock=clock, errors=(DynamicApiError, Wrapped)) == "ok"
    refused = Wrapped("refused")
    refused.__cause__ = api_error(403)
    with pytest.raises(Wrapped):
        rollout.retry(failing(refused), 60, 1.0, sleep=pytest.fail, clock=clock, errors=(Wrapped,))
    assert clock.sleeps == [1.0]


def test_a_bug_in_the_read_is_never_retried():
    call = failing(KeyError("name"))
    with pytest.raises(KeyError):
        rollout.poll(call, bool, 60, 1.0, sleep=pytest.fail, clock=Clock())
    assert call.calls == 1


def test_messages_name_what_is_missing_and_where_to_look():
    assert rollout.operator_pods_message("gpu-operator", 900, []) == (
        "GPU Operator pods not ready after 900s in namespace gpu-operator: no pod at all. Read them with "
        "`kubectl -n gpu-operator describe pod` (driver container builds take minutes)."
    )
    assert "No node matches sel" in rollout.gpu_nodes_message("sel", 900, {})
    assert "capacity after 900s: t2; check" in rollout.gpu_nodes_message("sel", 900, {"t1": 4, "t2": 0})
    assert rollout.gpu_nodes_summary({"t1": 4, "t2": 4}) == "2 GPU nodes: t1=4, t2=4"
    text = rollout.controller_message("ns", 600, [pod("nvidia-dra-driver-gpu-controller-0", "Pending", False)])
    assert "ns: nvidia-dra-driver-gpu-controller-0 Pending. A Pending controller" in text
    assert "in namespace ns: no controller pod." in rollout.controller_message("ns", 600, [])
    assert "not Ready on 2 GPU node(s) after 600s: t2, t10." in rollout.plugin_message("ns", 600, ["t2", "t10"])
    assert rollout.device_class_message(["a.nvidia.com"], "nvidia-dra-driver-gpu 25.8.0", "ns", "rel").startswith(
        "DeviceClass missing: a.nvidia.com (expected from chart nvidia-dra-driver-gpu 25.8.0 with"
    )
    assert "for GPU node(s): t1, t2." in rollout.slice_message("compute-domain.nvidia.com", ["t1", "t2"], "ns")


def test_deployment_and_crd_judges_read_what_the_api_server_writes():
    available = {
        "status": {"conditions": [{"type": "Progressing", "status": "True"}, {"type": "Available", "status": "True"}]}
    }
    assert rollout.deployment_available(available) is True
    assert rollout.deployment_available({"status": {"conditions": [{"type": "Available", "status": "False"}]}}) is False
    assert rollout.deployment_available({"metadata": {"name": "new"}}) is False
    assert rollout.deployment_available(None) is False
    crd = {"spec": {"versions": [{"name": "v2beta1", "served": True}, {"name": "v1", "served": False}, {"name": "v3"}]}}
    assert rollout.served_versions(crd) == ["v2beta1"]
    assert rollout.served_versions(None) == []
    assert rollout.deployment_images(None) == []
