# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""clique_info: the evaluation on Node lists, and the module against an API server that is not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import clique_info

REPO_ROOT = Path(__file__).resolve().parents[4]
LABELS = REPO_ROOT / "tests" / "fixtures" / "k8s" / "gb200-clique-labels.txt"
CLIQUE = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766"


def node(name, clique=None, gpus=4):
    """A Node as kubernetes.core.k8s_info / the dynamic client return it."""
    labels = {"kubernetes.io/hostname": name}
    if gpus:
        labels["nvidia.com/gpu.present"] = "true"
    if clique:
        labels["nvidia.com/gpu.clique"] = clique
    capacity = {"cpu": "144"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": capacity}}


def guide_nodes():
    """The two GB200 nodes of the guide's label table, plus a control-plane node."""
    rows = [line.split() for line in LABELS.read_text().splitlines()[1:] if line.strip()]
    return [node(name, value) for name, _label, value in rows] + [node("cp-0", gpus=0)]


def params(**overrides):
    base = {"expected_cliques": None, "nodes_per_clique": None, "racks": None}
    base.update(overrides)
    return base


def test_guide_rack_passes_every_expectation():
    result = clique_info.evaluate(
        guide_nodes(),
        params(
            expected_cliques=1,
            nodes_per_clique=2,
            racks={"f06": ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"]},
        ),
    )
    assert result == {
        "changed": False,
        "cliques": {CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"]},
        "unlabelled_nodes": [],
        "gpu_nodes": 2,
        "violations": [],
        "passed": True,
    }


def test_unlabelled_node_and_split_rack_are_all_reported():
    other = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32765"
    nodes = [*guide_nodes(), node("gb200-pod2-f06-node07", other), node("gb200-pod2-f06-node08")]
    result = clique_info.evaluate(
        nodes,
        params(
            expected_cliques=1,
            racks={"f06": ["gb200-pod2-f06-node05", "gb200-pod2-f06-node07", "gb200-pod2-f06-node08"]},
        ),
    )
    assert result["passed"] is False
    assert result["gpu_nodes"] == 4
    assert result["unlabelled_nodes"] == ["gb200-pod2-f06-node08"]
    assert result["cliques"] == {
        other: ["gb200-pod2-f06-node07"],
        CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"],
    }
    violations = result["violations"]
    assert len(violations) == 4
    assert violations[0].startswith("GPU node gb200-pod2-f06-node08 has no nvidia.com/gpu.clique label")
    assert violations[1] == f"found 2 clique(s) ({other}, {CLIQUE}), expected 1"
    assert violations[2] == "rack f06: node gb200-pod2-f06-node08 has no nvidia.com/gpu.clique label"
    assert violations[3].startswith(
        f"rack f06 spans 2 cliques ({other}: gb200-pod2-f06-node07; {CLIQUE}: gb200-pod2-f06-node05)"
    )


def test_unreachable_api_server_fails_with_an_actionable_message(capsys, monkeypatch):
    for var in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)
    args = {"host": "https://127.0.0.1:9", "validate_certs": False, "api_key": "none"}
    with patch_module_args(args), pytest.raises(SystemExit):
        clique_info.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert result["msg"].startswith("cannot reach the Kubernetes API to list nodes (MaxRetryError:")
    assert "127.0.0.1" in result["msg"]
    assert result["msg"].endswith("check the kubeconfig/host options or K8S_AUTH_KUBECONFIG")


def test_unknown_option_is_refused(capsys):
    with patch_module_args({"expected_clique": 1}), pytest.raises(SystemExit):
        clique_info.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert "expected_clique" in result["msg"]
