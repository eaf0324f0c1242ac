# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check imex_channel measured on a stand-in of its rack run: every tray of the plan is judged from its own
pod's report, and a tray whose pod never reported (deleted, evicted, its log unreadable) is no pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Union

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_api, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import NotRun
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.imex_channel import ImexChannelCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import Preempted
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import imex_pod_name

LISTING = (Path(__file__).resolve().parents[3] / "fixtures" / "k8s" / "imex-channel-injection-pod.log").read_text()
MISSING = "ls: cannot access '/dev/nvidia-caps-imex-channels': No such file or directory\n"
TRAYS = ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]
UNREADABLE = kube_api.ApiUnavailable("read the log of the finished pod ns/imex-channel-gb200-r0-t1 after 10 tries")


def pod(tray: str, phase: str = "Succeeded", **status: Any) -> Dict[str, Any]:
    return {
        "metadata": {"name": imex_pod_name(tray)},
        "spec": {"nodeName": tray},
        "status": dict(status, phase=phase),
    }


class Run:
    """What ImexChannelCheck.measure calls of its RackRun: the pods as the scheduler placed them, then as they
    ended (a tray left out: its pod was deleted), and each pod's log (an exception: the read failed)."""

    def __init__(self, ended: Dict[str, Dict[str, Any]], logs: Dict[str, Union[str, BaseException]]) -> None:
        self.plan = RackPlan("rack0", ["c.1"], TRAYS, TRAYS, [], 4, "NVIDIA-GB200")
        self.settings = rack_run.Settings()
        self.namespace, self.selector, self.claim_template, self.compute_domain = "ns", "", "channel", "domain"
        self.uid_range = None
        self.placed = {imex_pod_name(tray): pod(tray, "Pending") for tray in TRAYS}
        self.ended = {imex_pod_name(tray): value for tray, value in ended.items()}
        self.logs = {imex_pod_name(tray): value for tray, value in logs.items()}
        self.api = self

    def create_namespace(self) -> None:
        pass

    def create_compute_domain(self) -> None:
        pass

    def create_pod(self, manifest: Dict[str, Any]) -> None:
        pass

    def wait_domain_nodes(self, nodes: Any) -> None:
        pass

    def watch_for(self, what: str, kind: str, api_version: str, judge: Any, describe: Any = None, *rest: Any) -> Any:
        pods = self.placed if "scheduled" in what else self.ended
        value = judge({f"ns/{name}": obj for name, obj in pods.items()})
        assert value, f"{what}: the wait would run out ({describe() if describe else ''})"
        return value

    def list(self, kind: str, api_version: str, namespace: str, selector: Optional[str] = None) -> Any:
        return list(self.ended.values())

    def read_log(self, name: str) -> str:
        answer = self.logs[name]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def measure(ended: Dict[str, Dict[str, Any]], logs: Dict[str, Union[str, BaseException]]) -> Any:
    return ImexChannelCheck("ubuntu:22.04").measure(Run(ended, logs))


def test_every_tray_showing_channel0_passes():
    result = measure({t: pod(t) for t in TRAYS}, dict.fromkeys(TRAYS, LISTING))
    assert result.passed is True
    assert result.summary == (
        "channel0 is a character device (major 501, minor 0) in 3 of 3 pods, one per tray (gb200-r0-t0 .. gb200-r0-t2)"
    )
    assert result.details["unreported"] == {}


def test_the_record_keeps_each_pod_as_the_api_admitted_it_and_its_listing():
    ended = {t: pod(t) for t in TRAYS}
    ended["gb200-r0-t1"]["spec"].update(
        securityContext={"runAsNonRoot": True}, priorityClassName="gpu-fabric-verify", priority=-1000000
    )
    logs: Dict[str, Union[str, BaseException]] = dict.fromkeys(TRAYS, LISTING)
    logs["gb200-r0-t0"], logs["gb200-r0-t2"] = MISSING, UNREADABLE
    result = measure(ended, logs)
    assert result.failed_nodes == ["gb200-r0-t0"]
    assert result.details["pods"][1:] == [
        {
            "node": "gb200-r0-t1",
            "pod": "imex-channel-gb200-r0-t1",
            "phase": "Succeeded",
            "security_context": {"runAsNonRoot": True},
            "priority_class": "gpu-fabric-verify",
            "priority": -1000000,
            "channel0": "crw-rw-rw- 1 root root 501, 0 Jan  5 08:31 channel0",
            "listing": LISTING.splitlines(),
        },
        {
            "node": "gb200-r0-t2",
            "pod": "imex-channel-gb200-r0-t2",
            "phase": "Succeeded",
            "security_context": None,
            "priority_class": None,
            "priority": None,
            "channel0": None,
            "listing": [],
        },
    ]
    assert (result.details["run_as_user"], result.details["uid_range"]) == (65534, None)


def test_a_pod_deleted_before_it_reported_is_an_error_naming_its_tray():
    ended = {t: pod(t) for t in TRAYS if t != "gb200-r0-t1"}
    with pytest.raises(NotRun) as caught:
        measure(ended, dict.fromkeys(TRAYS, LISTING))
    assert str(caught.value) == (
        "no report from the IMEX channel pod of 1 of 3 trays: gb200-r0-t1: its pod imex-channel-gb200-r0-t1 was "
        "deleted before it reported; 2 trays showed channel0; run the check again"
    )


def test_an_evicted_pod_is_an_error_naming_its_tray_and_its_log_is_not_read():
    ended = {t: pod(t) for t in TRAYS}
    ended["gb200-r0-t2"] = pod("gb200-r0-t2", "Failed", reason="Evicted", message="The node was low on resource.")
    logs: Dict[str, Union[str, BaseException]] = dict.fromkeys(TRAYS, LISTING)
    logs["gb200-r0-t2"] = AssertionError("the log of an evicted pod is not read")
    with pytest.raises(NotRun, match=r"^no report from the IMEX channel pod of 1 of 3 trays: gb200-r0-t2: its pod "):
        measure(ended, logs)


def test_an_unreadable_log_is_an_error_naming_its_tray_after_the_other_trays_are_read():
    logs: Dict[str, Union[str, BaseException]] = dict.fromkeys(TRAYS, LISTING)
    logs["gb200-r0-t1"] = UNREADABLE
    with pytest.raises(NotRun) as caught:
        measure({t: pod(t) for t in TRAYS}, logs)
    assert str(caught.value) == (
        "no report from the IMEX channel pod of 1 of 3 trays: gb200-r0-t1: its pod's log could not be read (read "
        "the log of the finished pod ns/imex-channel-gb200-r0-t1 after 10 tries); 2 trays showed channel0; run the "
        "check again"
    )


def test_a_tray_without_channel0_fails_and_an_unreported_one_is_named_not_passed():
    logs: Dict[str, Union[str, BaseException]] = {"gb200-r0-t0": MISSING, "gb200-r0-t1": UNREADABLE}
    logs["gb200-r0-t2"] = LISTING
    result = measure({t: pod(t) for t in TRAYS}, logs)
    assert result.passed is False
    assert result.failed_nodes == ["gb200-r0-t0"]
    assert result.summary.endswith(
        "; no report from 1 tray: gb200-r0-t1: its pod's log could not be read (read the log of the finished pod "
        "ns/imex-channel-gb200-r0-t1 after 10 tries)"
    )
    assert list(result.details["unreported"]) == ["gb200-r0-t1"]


class Forbidden(Exception):
    """What the Kubernetes client raises for a refused request: its ``status``."""

    status = 403


def test_a_log_the_identity_may_not_read_is_the_runs_error_not_each_trays():
    # a missing pods/log right is the same on every tray: the read's own one line goes up as the rack's error
    refused = kube_api.ApiUnavailable("read the log of pod ns/imex-channel-gb200-r0-t0: 403 Forbidden")
    refused.__cause__ = Forbidden()
    logs: Dict[str, Union[str, BaseException]] = dict.fromkeys(TRAYS, refused)
    with pytest.raises(kube_api.ApiUnavailable) as caught:
        measure({t: pod(t) for t in TRAYS}, logs)
    assert caught.value is refused


def preempted_pod(tray: str, phase: str) -> Dict[str, Any]:
    """A tray's pod as the scheduler leaves it when it preempts it (shaped as in test_priority)."""
    victim = pod(tray, phase)
    victim["metadata"]["deletionTimestamp"] = "2026-12-06T18:01:02Z"
    victim["spec"]["schedulerName"] = "default-scheduler"
    victim["status"]["conditions"] = [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "default-scheduler: preempting to accommodate a higher priority pod",
        }
    ]
    return victim


@pytest.mark.parametrize("while_", ["scheduled", "running"])
def test_a_preempted_pod_makes_the_rack_incomplete_naming_its_tray(while_):
    run = Run({t: pod(t) for t in TRAYS}, dict.fromkeys(TRAYS, LISTING))
    pods = run.placed if while_ == "scheduled" else run.ended
    pods[imex_pod_name("gb200-r0-t1")] = preempted_pod("gb200-r0-t1", "Running")
    with pytest.raises(Preempted) as caught:
        ImexChannelCheck("ubuntu:22.04").measure(run)
    assert caught.value.nodes == ["gb200-r0-t1"]
    assert caught.value.summary == (
        "IMEX channel: incomplete, 1 pod preempted: pod imex-channel-gb200-r0-t1 on tray gb200-r0-t1 was preempted "
        "by a pod of higher priority (default-scheduler: preempting to accommodate a higher priority pod); the trays "
        "stay due and are measured again on the next run"
    )


class WaitRanOut(Exception):
    """The wait's timeout, with what the check says of its pods then."""


class Stuck(Run):
    """A rack run whose pods are never all placed: the wait runs out with the check's description of its pods."""

    def watch_for(self, what: str, kind: str, api_version: str, judge: Any, describe: Any = None, *rest: Any) -> Any:
        if judge({f"ns/{name}": obj for name, obj in self.placed.items()}):
            return True
        raise WaitRanOut(f"{what}: {describe()}")


def test_pods_never_scheduled_are_named_with_what_holds_them():
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pending = pod("gb200-r0-t1", "Pending", conditions=[dict(unschedulable, message="0/3 nodes are available")])
    run = Stuck({"gb200-r0-t0": pod("gb200-r0-t0", "Running"), "gb200-r0-t1": pending}, {})
    for tray in ("gb200-r0-t0", "gb200-r0-t2"):
        run.placed[imex_pod_name(tray)] = pod(tray, "Running")
    run.placed[imex_pod_name("gb200-r0-t1")]["spec"] = {}
    with pytest.raises(WaitRanOut) as caught:
        ImexChannelCheck("ubuntu:22.04").measure(run)
    assert str(caught.value) == (
        "the IMEX channel pods to be scheduled: pending pods: gb200-r0-t1: Pending (unschedulable: 0/3 nodes are "
        "available)"
    )
    run.ended = {imex_pod_name("gb200-r0-t0"): pod("gb200-r0-t0", "Running")}
    with pytest.raises(WaitRanOut) as caught:
        ImexChannelCheck("ubuntu:22.04").measure(run)
    assert str(caught.value) == "the IMEX channel pods to be scheduled: no pod is pending"
