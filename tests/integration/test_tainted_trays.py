# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU nodes are often tainted (``nvidia.com/gpu:NoSchedule``) so that only GPU pods land there: the cluster
and verify stages pass on trays that carry such a taint (``sim/rack up --gpu-taint``).

The taint is put on every tray of the shared rack and taken off again at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from verify_helpers import ZERO, apply_cluster_stage, gpu_trays, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
DRA_NS = "nvidia-dra-driver-gpu"
PLUGIN = "nvidia-dra-driver-gpu-kubelet-plugin"


@pytest.fixture
def tainted_trays(sim_rack: SimRack):
    sim_rack.rack("up", "--gpu-taint", f"{TAINT['key']}={TAINT['value']}:{TAINT['effect']}")
    try:
        # pods already running stay (NoSchedule): let the kubelet plugin be placed again, as after a node reboot
        sim_rack.kubectl(
            "delete",
            "pods",
            "-n",
            DRA_NS,
            "-l",
            "nvidia-dra-driver-gpu-component=kubelet-plugin",
            "--wait=true",
            check=False,
        )
        yield sim_rack
    finally:
        sim_rack.rack("up", "--gpu-taint", "")


def test_cluster_and_verify_pass_on_tainted_trays(tainted_trays: SimRack, tmp_path):
    rack = tainted_trays
    trays = gpu_trays(rack)
    nodes = rack.get_json("nodes")["items"]
    taints = {n["metadata"]["name"]: (n.get("spec") or {}).get("taints") or [] for n in nodes}
    assert all(
        [{k: t.get(k) for k in TAINT} for t in taints[name]] == [TAINT] for names in trays.values() for name in names
    ), taints
    assert taints["sim-control-plane"] == []

    cluster = apply_cluster_stage(rack)
    assert cluster.returncode == 0, f"{cluster.stdout[-6000:]}\n{cluster.stderr[-2000:]}"
    plugin = rack.get_json("daemonset", PLUGIN, "-n", DRA_NS)
    every_tray = sum(len(names) for names in trays.values())
    assert plugin["status"]["numberReady"] == plugin["status"]["desiredNumberScheduled"] == every_tray
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in (
        plugin["spec"]["template"]["spec"]["tolerations"]
    )

    run = run_verify(rack, tmp_path / "report")
    assert run.process.returncode == 0, run.output[-6000:]
    for check, per_rack in run.records().items():
        assert sorted(per_rack) == sorted(trays), check
        for name, record in per_rack.items():
            assert record["passed"] is True, record["summary"]
            assert record["trays"]["skipped"] == [], record["trays"]
            assert record["nodes"] == trays[name]
    assert verification_objects(rack, run.prefix) == ZERO
