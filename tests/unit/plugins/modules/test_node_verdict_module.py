# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""node_verdict: the module's options, results, diff and failures (the API behind it faked or absent)."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone

import pytest
from ansible.module_utils import basic
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import node_verdict as verdict_utils
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import node_verdict

from tests.unit.plugins.modules.runner import run_module

# a run that finished an hour ago: its verdicts hold now (the module judges them at the moment it reads the nodes)
TIME = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
DEFAULT_RUN = {"cliques": {"outcome": "passed"}, "imex_channel": {"outcome": "passed"}}
TRAYS = {
    "gb200-r0-t0": {
        "verdict": "passed",
        "rack": "rack0",
        "checks_failed": [],
        "checks": {**DEFAULT_RUN, "nvbandwidth": {"outcome": "passed"}},
        "summary": "rack0: 3 of 3 checks passed",
    },
    "gb200-r0-t1": {
        "verdict": "failed",
        "rack": "rack0",
        "checks_failed": ["nccl"],
        "checks": {**DEFAULT_RUN, "nccl": {"outcome": "failed", "summary": "rack0 nccl: low busbw"}},
        "summary": "rack0 nccl: low busbw",
    },
    "gb200-r0-t2": {"verdict": "skipped", "rack": "rack0", "checks_failed": [], "summary": "gb200-r0-t2 cordoned"},
    "gb200-r0-t9": {"verdict": "failed", "rack": "rack0", "checks_failed": ["cliques"], "summary": "no clique label"},
}


def tray(name):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "100", "labels": {"nvidia.com/gpu.present": "true"}},
        "spec": {},
    }


class FakeClient:
    """Lists and patches Nodes in memory; records the patches."""

    def __init__(self, *names):
        self.nodes = {name: tray(name) for name in names}
        self.patches = []

    def resource(self, kind, api_version):
        return "nodes"

    def get(self, resource, name=None, **params):
        if name:
            return copy.deepcopy(self.nodes[name])
        return {"metadata": {}, "items": [copy.deepcopy(n) for n in self.nodes.values()]}

    def patch(self, resource, body, name=None, content_type=None):
        self.patches.append((name, content_type))
        node = self.nodes[name]
        for key in ("labels", "annotations"):
            node["metadata"].setdefault(key, {}).update((body.get("metadata") or {}).get(key) or {})
        if "spec" in body:
            node["spec"]["taints"] = body["spec"]["taints"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return node


def with_client(monkeypatch, client):
    monkeypatch.setattr(node_verdict, "get_api_client", lambda module: client)


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg))
    return seen


def test_writes_the_verdicts_warns_about_a_missing_node_and_diffs(monkeypatch, warnings):
    client = FakeClient("gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2")
    with_client(monkeypatch, client)
    result = run_module(node_verdict.main, {"trays": TRAYS, "time": TIME, "taint_failed": True})
    assert result["failed"] is False
    assert result["changed"] is True
    assert result["changed_nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert result["nodes"] == {
        "gb200-r0-t0": {"label": "passed", "taint": "unchanged", "changed": True},
        "gb200-r0-t1": {"label": "failed", "taint": "added", "changed": True},
        "gb200-r0-t2": {"label": None, "taint": "unchanged", "changed": False},
        "gb200-r0-t9": {"label": None, "taint": "unchanged", "changed": False},
    }
    assert warnings == ["node gb200-r0-t9 does not exist; its verdict (failed) was not written"]
    assert sorted(result["diff"]["after"]) == ["gb200-r0-t0", "gb200-r0-t1"]
    assert result["diff"]["after"]["gb200-r0-t1"]["taints"] == [
        {"key": "gpu-fabric.nvidia.com/unverified", "value": "true", "effect": "NoSchedule"}
    ]
    assert client.nodes["gb200-r0-t2"] == tray("gb200-r0-t2")

    again = run_module(node_verdict.main, {"trays": TRAYS, "time": TIME, "taint_failed": True})
    assert again["changed"] is False
    assert again["changed_nodes"] == []
    assert len(client.patches) == 3


def test_check_mode_without_diff_changes_nothing_and_returns_no_diff(monkeypatch):
    client = FakeClient("gb200-r0-t0", "gb200-r0-t1")
    with_client(monkeypatch, client)
    result = run_module(node_verdict.main, {"trays": TRAYS, "time": TIME}, check_mode=True, diff=False)
    assert result["changed"] is True
    assert result["changed_nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert "diff" not in result
    assert client.patches == []


def test_bad_input_fails_with_every_problem(monkeypatch):
    with_client(monkeypatch, FakeClient())
    result = run_module(node_verdict.main, {"trays": {"gb200-r0-t0": {"verdict": "ok"}}, "time": "today"})
    assert result["failed"] is True
    assert result["msg"] == (
        "time is 'today'; expected an RFC 3339 date-time such as 2026-12-01T10:15:00Z (the run's finish); "
        "trays['gb200-r0-t0'].verdict is 'ok'; expected one of passed, failed, skipped"
    )


def test_unreachable_api_server_fails_with_one_clean_line(monkeypatch):
    for var in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(verdict_utils, "API_BACKOFF", verdict_utils.Backoff(0.0))  # no pause between the attempts
    args = {"host": "https://127.0.0.1:9", "validate_certs": False, "api_key": "none", "trays": TRAYS, "time": TIME}
    result = run_module(node_verdict.main, args)
    assert result["failed"] is True
    # the collection's one wording for it (before: "MaxRetryError: HTTPSConnectionPool(...)")
    assert result["msg"] == (
        "cannot reach the Kubernetes API at https://127.0.0.1:9: connection refused (connect to the Kubernetes API "
        "after 4 attempts); check that the API server runs and that the kubeconfig (gpu_fabric_kubeconfig, "
        "K8S_AUTH_KUBECONFIG) or the host options point at it, then run it again"
    )
    assert "exception" not in result


def test_options_and_defaults():
    spec = node_verdict.ARGUMENT_SPEC
    assert spec["label"]["default"] is True
    assert spec["taint_failed"]["default"] is False
    assert spec["label_key"]["default"] == "gpu-fabric.nvidia.com/verified"
    assert spec["annotation_key"]["default"] == "gpu-fabric.nvidia.com/verification"
    assert spec["taint_key"]["default"] == "gpu-fabric.nvidia.com/unverified"


def test_a_cliques_only_run_labels_the_tray_incomplete(monkeypatch):
    client = FakeClient("gb200-r0-t0")
    with_client(monkeypatch, client)
    trays = {"gb200-r0-t0": {"verdict": "passed", "checks": {"cliques": {"outcome": "passed"}}}}
    result = run_module(node_verdict.main, {"trays": trays, "time": TIME, "run_id": "r1"})
    assert result["nodes"] == {"gb200-r0-t0": {"label": "incomplete", "taint": "unchanged", "changed": True}}
    labels = client.nodes["gb200-r0-t0"]["metadata"]["labels"]
    assert labels["gpu-fabric.nvidia.com/verified"] == "incomplete"
    assert labels.get("gpu-fabric.nvidia.com/verified-until") is None
    # a site that requires the clique check only: the same run passes the tray
    only = run_module(node_verdict.main, {"trays": trays, "time": TIME, "run_id": "r1", "required_checks": ["cliques"]})
    assert only["nodes"]["gb200-r0-t0"]["label"] == "passed"


def test_an_older_run_keeps_the_newer_entry_and_the_result_says_so(monkeypatch):
    client = FakeClient("gb200-r0-t0")
    with_client(monkeypatch, client)
    run_module(node_verdict.main, {"trays": TRAYS, "time": TIME, "run_id": "new"})
    earlier = (datetime.now(timezone.utc) - timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = run_module(node_verdict.main, {"trays": TRAYS, "time": earlier, "run_id": "old"})
    assert result["changed"] is False
    assert result["nodes"]["gb200-r0-t0"]["kept_newer"] == {
        "cliques": TIME,
        "imex_channel": TIME,
        "nvbandwidth": TIME,
    }
    annotation = json.loads(
        client.nodes["gb200-r0-t0"]["metadata"]["annotations"]["gpu-fabric.nvidia.com/verification"]
    )
    assert {entry["run"] for entry in annotation["checks"].values()} == {"new"}


def test_a_bad_time_on_a_node_fails_before_any_patch(monkeypatch):
    client = FakeClient("gb200-r0-t0", "gb200-r0-t1")
    bad = {"verdict": "passed", "checks": {"nvbandwidth": {"outcome": "passed", "time": "0001-01-01T00:00:00+01:00"}}}
    client.nodes["gb200-r0-t1"]["metadata"]["annotations"] = {"gpu-fabric.nvidia.com/verification": json.dumps(bad)}
    with_client(monkeypatch, client)
    result = run_module(node_verdict.main, {"trays": TRAYS, "time": TIME})
    assert result["failed"] is True
    assert result["msg"].startswith(
        "nothing was written: the annotation gpu-fabric.nvidia.com/verification of node gb200-r0-t1: "
        "checks.nvbandwidth.time '0001-01-01T00:00:00+01:00' is out of range; "
        "checks.nvbandwidth.valid_until None is not an RFC 3339 date-time; correct it or remove it"
    )
    assert client.patches == []


def test_the_refresh_turns_an_expired_pass_incomplete(monkeypatch):
    client = FakeClient("gb200-r0-t0")
    with_client(monkeypatch, client)
    week_ago = (datetime.now(timezone.utc) - timedelta(hours=170)).strftime("%Y-%m-%dT%H:%M:%SZ")
    run_module(node_verdict.main, {"trays": TRAYS, "time": week_ago, "run_id": "r1"})
    # the run's own judgement at the moment it read the nodes: already expired
    assert client.nodes["gb200-r0-t0"]["metadata"]["labels"]["gpu-fabric.nvidia.com/verified"] == "incomplete"
    client.nodes["gb200-r0-t0"]["metadata"]["labels"]["gpu-fabric.nvidia.com/verified"] = "passed"  # as it read
    result = run_module(node_verdict.main, {"state": "refreshed"})
    assert result["changed_nodes"] == ["gb200-r0-t0"]
    assert result["nodes"] == {"gb200-r0-t0": {"label": "incomplete", "taint": "unchanged", "changed": True}}
    assert run_module(node_verdict.main, {"state": "refreshed"})["changed"] is False
