# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""gpu_fabric.mnnvl.clique_info against the simulated fleet's API server, run as a user runs it.

The module reads the labelled GPU nodes as metadata alone and only the other nodes whole; these tests
prove the answer is the one a whole-object read gives, including for a GPU node that GPU Feature
Discovery never labelled (only its ``nvidia.com/gpu`` capacity says it holds GPUs).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.sim

REPO_ROOT = Path(__file__).resolve().parents[2]
# Not a KWOK tray (no type=kwok label): nothing manages it, nothing schedules on it (NoSchedule).
STRAY = "gpu-fabric-test-unlabelled-gpu-node"


def clique_info(sim_rack, **args: Any) -> dict[str, Any]:
    env = dict(
        sim_rack.env,
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    process = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible"),
            "localhost",
            "-m",
            "gpu_fabric.mnnvl.clique_info",
            "-a",
            json.dumps(dict(args, fail_on_violation=False)),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=180,
        check=False,
    )
    assert process.stdout.strip(), f"no output (exit {process.returncode}):\n{process.stderr[-4000:]}"
    return json.loads(process.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def expected(sim_rack) -> tuple[dict[str, list[str]], list[str]]:
    """The grouping read from whole Node objects with kubectl: clique -> nodes, and GPU nodes without a clique."""
    groups: dict[str, list[str]] = {}
    unlabelled = []
    for node in sim_rack.get_json("nodes")["items"]:
        name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
        capacity = int((node.get("status", {}).get("capacity") or {}).get("nvidia.com/gpu", "0"))
        if labels.get("nvidia.com/gpu.clique"):
            groups.setdefault(labels["nvidia.com/gpu.clique"], []).append(name)
        elif labels.get("nvidia.com/gpu.present") == "true" or capacity > 0:
            unlabelled.append(name)
    return {clique: sorted(nodes) for clique, nodes in groups.items()}, sorted(unlabelled)


@pytest.fixture
def stray_gpu_node(sim_rack):
    """A Node with 4 nvidia.com/gpu and no NVIDIA label at all, taken away afterwards."""
    sim_rack.kubectl("delete", "node", STRAY, "--ignore-not-found", "--wait=true")
    sim_rack.apply(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": STRAY, "labels": {"kubernetes.io/hostname": STRAY}},
            "spec": {"taints": [{"key": "gpu-fabric.test/stray", "effect": "NoSchedule"}]},
        }
    )
    status = {"status": {"capacity": {"nvidia.com/gpu": "4", "cpu": "72"}, "allocatable": {"nvidia.com/gpu": "4"}}}
    sim_rack.kubectl("patch", "node", STRAY, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    try:
        yield STRAY
    finally:
        sim_rack.kubectl("delete", "node", STRAY, "--ignore-not-found", "--wait=false", check=False)


def test_the_grouping_is_the_one_whole_nodes_give(sim_rack):
    groups, unlabelled = expected(sim_rack)
    result = clique_info(sim_rack)
    assert result["cliques"] == groups
    assert result["unlabelled_nodes"] == unlabelled
    assert result["gpu_nodes"] == sum(len(nodes) for nodes in groups.values()) + len(unlabelled)


def test_a_gpu_node_known_only_by_its_capacity_is_still_counted(sim_rack, stray_gpu_node):
    result = clique_info(sim_rack, page_size=7)
    assert stray_gpu_node in result["unlabelled_nodes"]
    assert any(stray_gpu_node in violation for violation in result["violations"])
    groups, unlabelled = expected(sim_rack)
    assert (result["cliques"], result["unlabelled_nodes"]) == (groups, unlabelled)
