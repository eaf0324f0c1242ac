# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated launcher's run time: the collection's model of a real rack x the scale a test sets
(``sim/rack fault rack-run-time scale=S``); no rack needed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import nvbandwidth_runtime  # noqa: E402
from simrack import FAULTS, faultspec  # noqa: E402
from simrack.controllers import podlogs  # noqa: E402


def mpijob(workers: int = 18, slots: int = 4) -> dict:
    return {
        "metadata": {"name": "nvbandwidth-rack0", "namespace": "ns"},
        "spec": {"slotsPerWorker": slots, "mpiReplicaSpecs": {"Worker": {"replicas": workers}}},
    }


def launcher(*args: str, exit_code: str = "0") -> dict:
    return {
        "metadata": {"name": "nvbandwidth-rack0-launcher", "annotations": {"gpu-fabric.sim/exit-code": exit_code}},
        "spec": {"containers": [{"command": ["mpirun"], "args": ["--report-bindings", "-q", "nvbandwidth", *args]}]},
    }


def test_a_full_nvl72_launcher_runs_the_modelled_time_scaled():
    pod = launcher("-t", "multinode_device_to_device_memcpy_read_ce")
    modelled = nvbandwidth_runtime.estimate_for("multinode_device_to_device_memcpy_read_ce", 72, (), "NVIDIA-GB200")
    assert (
        podlogs.launcher_run_seconds(pod, mpijob(), 1.0)
        == pytest.approx(modelled.seconds)
        == pytest.approx(977.6, abs=0.1)
    )
    assert podlogs.launcher_run_seconds(pod, mpijob(), 0.001) == pytest.approx(0.9776, abs=1e-3)


def test_the_buffer_and_testcase_of_the_command_line_count():
    small = podlogs.launcher_run_seconds(launcher("-t", "multinode_bisect_write_ce", "-b", "64"), mpijob(), 1.0)
    assert small == pytest.approx(
        nvbandwidth_runtime.estimate_for("multinode_bisect_write_ce", 72, ["-b", "64"], "GB200").seconds
    )
    assert small < 20


def test_no_run_time_when_off_for_nccl_and_for_a_failing_launcher():
    pod = launcher("-t", "multinode_device_to_device_memcpy_read_ce")
    assert podlogs.launcher_run_seconds(pod, mpijob(), 0.0) == 0.0
    assert podlogs.launcher_run_seconds(launcher(exit_code="1"), mpijob(), 1.0) == 0.0
    nccl = {"metadata": {"annotations": {}}, "spec": {"containers": [{"command": ["mpirun", "all_reduce_perf"]}]}}
    assert podlogs.launcher_run_seconds(nccl, mpijob(), 1.0) == 0.0


def test_the_setting_and_its_parameters():
    assert "rack-run-time" in FAULTS
    assert faultspec.validate("rack-run-time", {}, 1, 4) == {"scale": "1.0"}
    assert faultspec.validate("rack-run-time", {"scale": "0.01"}, 1, 4) == {"scale": "0.01"}
    with pytest.raises(ValueError, match=r"rack-run-time: scale=-1 must be in \[0, 10\]"):
        faultspec.validate("rack-run-time", {"scale": "-1"}, 1, 4)
    assert faultspec.run_time_scale({}) == 0.0
    assert faultspec.run_time_scale({"rack-run-time": {"scale": "0.01"}}) == 0.01


class FakeKube:
    """The calls the podlogs stand-in makes, on a dict of objects; merge patches recorded."""

    def __init__(self, pods: list, mpijobs: list) -> None:
        self.objects = {"pods": pods, "mpijobs": mpijobs}
        self.patches: list = []

    def list(self, res, *args, **kwargs):
        return list(self.objects.get(res.plural, []))

    def get(self, res, name, namespace=None):
        return None

    def create(self, res, obj, namespace=None):
        return obj

    def delete(self, *args, **kwargs):
        return None

    def merge_patch(self, res, name, patch, namespace=None):
        self.patches.append((name, patch))


def running_launcher() -> dict:
    pod = launcher("-t", "multinode_device_to_device_memcpy_read_ce")
    pod["metadata"].update(
        namespace="ns",
        uid="u1",
        labels={podlogs.JOB_NAME: "nvbandwidth-rack0", podlogs.JOB_ROLE: "launcher"},
        ownerReferences=[{"kind": "Job", "name": "nvbandwidth-rack0-launcher"}],
    )
    return pod


def test_the_launcher_is_let_finish_only_after_its_scaled_run(tmp_path, monkeypatch):
    job = mpijob(workers=2, slots=4)  # 8 GPUs: 20.6 s modelled
    kube = FakeKube([running_launcher()], [job])
    controller = podlogs.PodLogsController(kube, tmp_path)
    controller.faults = {"rack-run-time": {"scale": "0.01"}}
    now = [1000.0]
    monkeypatch.setattr(podlogs.time, "monotonic", lambda: now[0])
    controller.reconcile()
    assert kube.patches == []  # its log is served, but it still runs
    assert controller.running["u1"] == pytest.approx(1000.0 + 0.206, abs=1e-3)
    now[0] += 0.1
    controller.reconcile()
    assert kube.patches == []
    now[0] += 0.2
    controller.reconcile()
    assert kube.patches == [
        ("nvbandwidth-rack0-launcher", {"metadata": {"annotations": {podlogs.LOG_WRITTEN: "true"}}})
    ]
    assert controller.running == {}


def test_without_the_setting_the_launcher_is_let_finish_at_once(tmp_path):
    kube = FakeKube([running_launcher()], [mpijob(workers=2, slots=4)])
    controller = podlogs.PodLogsController(kube, tmp_path)
    controller.reconcile()
    assert [name for name, _patch in kube.patches] == ["nvbandwidth-rack0-launcher"]
