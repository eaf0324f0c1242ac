# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks' PriorityClass on every pod they create, and a preempted check pod: ``incomplete``, never ``failed``.

The pods below are shaped as kube-scheduler leaves a victim (pkg/scheduler/framework/preemption, Kubernetes 1.26
and later): before deleting it, the scheduler sets the condition ``DisruptionTarget`` with reason
``PreemptionByScheduler`` and the message ``<schedulerName>: preempting to accommodate a higher priority pod``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import Check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.dcgm_diag import DcgmDiagCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.gpu_health import GpuHealthCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.nvbandwidth import NvbandwidthCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kube_api import ApiUnavailable
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import (
    PRIORITY_CLASS,
    Preempted,
    pod_priority,
    preempted,
    preemption_of,
    priority_class_manifest,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan, is_selection_skip
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    imex_pod_manifest,
    mpijob_manifest,
)
from mpi_settings import MPI

PLAN = RackPlan("rack0", ["c.1"], ["gb200-r0-t0", "gb200-r0-t1"], ["gb200-r0-t0", "gb200-r0-t1"], [], 4, "NVIDIA GB200")


def victim(name: str, node: str = "gb200-r0-t1", phase: str = "Running") -> dict:
    """A check's pod as the scheduler leaves it when it preempts it (then it deletes it, with its grace period)."""
    return {
        "metadata": {
            "name": name,
            "namespace": "gpu-fabric-verify-gpu-health-rack0",
            "deletionTimestamp": "2026-12-06T18:01:02Z",
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "priorityClassName": PRIORITY_CLASS,
            "priority": -1000000,
        },
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": "default-scheduler: preempting to accommodate a higher priority pod",
                    "lastTransitionTime": "2026-12-06T18:01:02Z",
                },
            ],
        },
    }


def test_a_preempted_pod_is_named_with_its_tray_and_the_schedulers_message():
    assert preemption_of(victim("gpu-health-gb200-r0-t1")) == (
        "pod gpu-health-gb200-r0-t1 on tray gb200-r0-t1 was preempted by a pod of higher priority "
        "(default-scheduler: preempting to accommodate a higher priority pod)"
    )


def test_other_disruptions_and_failures_are_no_preemption():
    taint = victim("p")
    taint["status"]["conditions"][-1].update(
        reason="DeletionByTaintManager", message="Taint manager: deleting due to NoExecute taint"
    )
    gc = victim("p")
    gc["status"]["conditions"][-1].update(reason="DeletionByPodGC")
    gone_false = victim("p")
    gone_false["status"]["conditions"][-1]["status"] = "False"
    failed = {"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Error"}}
    assert [preemption_of(pod) for pod in (taint, gc, gone_false, failed, {})] == [None] * 5


def test_the_check_is_incomplete_naming_the_preempted_pods_and_their_trays():
    running = {
        "metadata": {"name": "gpu-health-gb200-r0-t0"},
        "spec": {"nodeName": "gb200-r0-t0"},
        "status": {"phase": "Running"},
    }
    found = preempted("read the GPU health signals", [running, victim("gpu-health-gb200-r0-t1")])
    assert isinstance(found, Preempted) and found.nodes == ["gb200-r0-t1"]
    assert found.summary == (
        "read the GPU health signals: incomplete, 1 pod preempted: pod gpu-health-gb200-r0-t1 on tray gb200-r0-t1 "
        "was preempted by a pod of higher priority (default-scheduler: preempting to accommodate a higher priority "
        "pod); the trays stay due and are measured again on the next run"
    )
    assert preempted("x", [running]) is None


def test_the_priority_class_is_the_lowest_and_never_preempts():
    assert priority_class_manifest() == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "gpu-fabric-verify", "labels": {"app.kubernetes.io/part-of": "gpu-fabric-verify"}},
        "value": -1000000,
        "preemptionPolicy": "Never",
        "description": "The gpu_fabric.mnnvl verification checks' pods, the lowest: any other pod preempts them",
    }
    assert pod_priority("") == {} and pod_priority("low") == {"priorityClassName": "low"}


def check_pods(priority_class: str) -> dict:
    """Every pod spec a check creates, by name."""
    settings = rack_run.Settings(priority_class=priority_class)
    specs = {
        "imex": imex_pod_manifest("t0", "ns", "rack0", "tpl", "ubuntu:22.04", 65534, priority_class=priority_class)[
            "spec"
        ]
    }
    job = mpijob_manifest(
        "nvbandwidth-rack0",
        "ns",
        "nvbandwidth",
        "rack0",
        ["t0", "t1"],
        4,
        "tpl",
        "img",
        [],
        MPI,
        priority_class=priority_class,
    )
    for role, replica in job["spec"]["mpiReplicaSpecs"].items():
        specs[f"mpi {role}"] = replica["template"]["spec"]
    for cls in (GpuHealthCheck, DcgmDiagCheck):
        check = cls.from_params(checks.with_settings({"settings": {}}))
        specs[check.name] = check.manifest(rack_run.RackRun(check, object(), PLAN, settings), "gb200-r0-t0")["spec"]
    return specs


def test_every_pod_of_the_checks_carries_the_priority_class():
    specs = check_pods("gpu-fabric-verify")
    assert set(specs) == {"imex", "mpi Launcher", "mpi Worker", "gpu_health", "dcgm_diag"}
    assert {name: spec.get("priorityClassName") for name, spec in specs.items()} == dict.fromkeys(
        specs, "gpu-fabric-verify"
    )
    assert all("priorityClassName" not in spec for spec in check_pods("").values())


class PreemptedCheck(Check):
    name = "gpu_health"

    def measure(self, run):
        raise preempted("read the GPU health signals", [victim("gpu-health-gb200-r0-t1")])


class GoneNamespace:
    """What the cleanup of a check's own namespace reads once the namespace is gone."""

    def __init__(self, priority_class=None, refuse=False):
        self.created = []
        self.priority_class = priority_class
        self.refuse = refuse

    def delete(self, *args, **kwargs):
        pass

    def served(self, kind, api_version):
        return False

    def get(self, kind, api_version, name, namespace=None):
        if kind == "PriorityClass":
            if self.refuse:
                raise ApiUnavailable(f"get PriorityClass {name}: 403 Forbidden: priorityclasses is forbidden")
            return self.priority_class
        return None

    def create(self, body):
        self.created.append(body)
        return body


def test_a_preempted_check_ends_incomplete_not_failed_and_names_the_tray():
    record = rack_run.RackRun(PreemptedCheck(), GoneNamespace(), PLAN, rack_run.Settings(run_id="r1")).run()
    assert (record["outcome"], record["failed_nodes"]) == ("incomplete", [])
    assert record["details"]["preempted_nodes"] == ["gb200-r0-t1"]
    assert record["summary"].startswith("rack rack0: read the GPU health signals: incomplete, 1 pod preempted: pod ")
    # no verdict on the fabric, and every tray of the rack stays due: skipped for the tray's state, not by choice
    assert (record["verdict"], record["passed"], record["nodes"]) == ("error", False, [])
    skipped = {skip["node"]: skip["reason"] for skip in record["trays"]["skipped"]}
    assert skipped["gb200-r0-t1"] == "preempted by a higher-priority pod"
    assert set(skipped) == set(PLAN.nodes)
    assert not any(is_selection_skip(reason) for reason in skipped.values())


def test_a_preempted_check_on_a_rack_allowed_to_be_incomplete_passes_without_measuring_a_tray():
    settings = rack_run.Settings(run_id="r1", allow_incomplete=True)
    record = rack_run.RackRun(PreemptedCheck(), GoneNamespace(), PLAN, settings).run()
    assert (record["outcome"], record["verdict"], record["passed"], record["nodes"]) == (
        "incomplete",
        "passed",
        True,
        [],
    )


def test_the_priority_class_is_created_when_absent_and_only_read_when_present():
    api = GoneNamespace()
    run = rack_run.RackRun(PreemptedCheck(), api, PLAN, rack_run.Settings(priority_class="gpu-fabric-verify"))
    run.ensure_priority_class()
    assert api.created == [priority_class_manifest()]
    present = GoneNamespace(priority_class=priority_class_manifest())
    rack_run.RackRun(
        PreemptedCheck(), present, PLAN, rack_run.Settings(priority_class="gpu-fabric-verify")
    ).ensure_priority_class()
    assert present.created == []


def test_a_priority_class_the_identity_may_not_read_stops_the_check_naming_the_file():
    run = rack_run.RackRun(PreemptedCheck(), GoneNamespace(refuse=True), PLAN, rack_run.Settings(priority_class="low"))
    with pytest.raises(
        rack_run.NotRun,
        match=r"^PriorityClass low of the checks' pods could not be read or created .*: apply docs/rbac/verify-stage",
    ):
        run.ensure_priority_class()


class PreemptedJob:
    """The API as an MPIJob check reads it when a tenant's pod preempted a worker: the worker carries the
    scheduler's condition while it terminates, then the MPI operator marks the job Failed."""

    def __init__(self, job: str, namespace: str):
        self.job, self.namespace = job, namespace
        self.created = []

    def create(self, body):
        self.created.append(body)
        return body

    def list(self, kind, api_version, namespace, selector=""):
        assert kind == "Pod" and namespace == self.namespace
        if "job-role=launcher" in selector:
            return []  # the launcher pod went too: no log to read
        worker = victim(f"{self.job}-worker-1", node="gb200-r0-t1")
        return [worker]

    def watch_until(self, kind, api_version, namespace, judge, deadline, selector="", name="", window=0):
        failed = {
            "metadata": {"name": self.job},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "MPIJobFailed"}]},
        }
        return SimpleNamespace(value=judge({self.job: failed}), events=1)


def test_an_mpijob_that_failed_after_a_preemption_is_incomplete_naming_the_worker_and_its_tray(monkeypatch):
    check = NvbandwidthCheck("img", MPI, "multinode_device_to_device_memcpy_read_ce", [], lambda *a: {})
    run = rack_run.RackRun(check, None, PLAN, rack_run.Settings(priority_class="gpu-fabric-verify"))
    run.api = PreemptedJob(check.job_name(run), run.namespace)
    monkeypatch.setattr(run, "create_namespace", lambda: None)
    monkeypatch.setattr(run, "create_compute_domain", lambda: None)
    with pytest.raises(Preempted) as caught:
        check.measure(run)
    assert caught.value.nodes == ["gb200-r0-t1"]
    assert caught.value.summary.startswith(
        f"MPIJob {check.job_name(run)}: incomplete, 1 pod preempted: pod {check.job_name(run)}-worker-1 on tray "
        "gb200-r0-t1 was preempted by a pod of higher priority"
    )
    (job,) = run.api.created
    templates = [r["template"]["spec"] for r in job["spec"]["mpiReplicaSpecs"].values()]
    assert [t["priorityClassName"] for t in templates] == ["gpu-fabric-verify", "gpu-fabric-verify"]
