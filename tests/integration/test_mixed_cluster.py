# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster is rarely GB200 only, and an inventory rarely names nodes as the kubelets do: the clique check
leaves a GPU node without multi-node NVLink (an H100 node) out, and inventory racks given by FQDN match the
trays' short node names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from verify_helpers import gpu_trays, run_verify

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

H100 = "h100-node-0"


@pytest.fixture
def h100_node(cluster_stage: SimRack):
    """An 8-GPU H100 node as GPU Feature Discovery labels one: no clique, no rack."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": H100,
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": H100,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "8",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            },
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
        },
    }
    cluster_stage.apply(node)
    try:
        yield cluster_stage
    finally:
        cluster_stage.kubectl("delete", "node", H100, "--ignore-not-found")


def test_an_h100_node_is_no_clique_violation(h100_node: SimRack, tmp_path):
    racks = gpu_trays(h100_node)
    run = run_verify(h100_node, tmp_path / "report", "--tags", "cliques")
    assert run.process.returncode == 0, run.output[-6000:]
    records = run.records()["cliques"]
    assert sorted(records) == sorted(racks)
    for rack, record in records.items():
        assert record["passed"] is True, record["summary"]
        assert H100 not in str(record)
        assert record["nodes"] == racks[rack]


def test_inventory_racks_named_by_fqdn_match_the_short_node_names(cluster_stage: SimRack, tmp_path):
    racks = gpu_trays(cluster_stage)
    inventory = {f"nvl72-{rack}": [f"{tray}.gpu.example.com" for tray in trays] for rack, trays in racks.items()}
    run = run_verify(
        cluster_stage, tmp_path / "report", "--tags", "cliques", extra_vars={"gpu_fabric_racks": inventory}
    )
    assert run.process.returncode == 0, run.output[-6000:]
    records = run.records()["cliques"]
    assert sorted(records) == sorted(inventory)
    for rack, trays in racks.items():
        record = records[f"nvl72-{rack}"]
        assert record["passed"] is True, record["summary"]
        assert record["nodes"] == trays
