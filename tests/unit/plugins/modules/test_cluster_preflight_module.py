# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""cluster_preflight: the module's reads and results, the API faked or absent, Helm a script."""

from __future__ import annotations

import copy
import stat

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import cluster_preflight

from tests.unit.plugins.modules.runner import run_module

APIS = {
    "kind": "APIGroupList",
    "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1"}]},
        {"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1"}]},
    ],
}


def node(name, kubelet, control_plane=False, unschedulable=False):
    labels = {"node-role.kubernetes.io/control-plane": ""} if control_plane else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"nodeInfo": {"kubeletVersion": kubelet}},
    }


class FakeDynamicClient:
    def __init__(self, paths):
        self.paths = paths
        self.requests = []

    def request(self, method, path, serialize=True):
        assert serialize is False
        self.requests.append((method, path))
        return copy.deepcopy(self.paths[path])


class FakeClient:
    """kubernetes.core's K8SClient as the module uses it: raw discovery GETs and a paginated Node list."""

    def __init__(self, nodes, version="v1.34.4"):
        self.client = FakeDynamicClient({"/version": {"gitVersion": version}, "/apis": APIS})
        self.nodes = nodes
        self.lists = 0

    def resource(self, kind, api_version):
        assert (kind, api_version) == ("Node", "v1")
        return "nodes"

    def get(self, resource, serialize=True, **params):
        self.lists += 1
        return {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": copy.deepcopy(self.nodes)}


@pytest.fixture
def helm(tmp_path):
    """A Helm stand-in that prints what Helm 3.19 prints and logs its arguments."""
    script = tmp_path / "helm"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/helm.log\necho v3.19.0+g3d8990f\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_a_healthy_cluster_passes_and_returns_what_later_roles_need(monkeypatch, helm):
    client = FakeClient([node("cp-0", "v1.34.4", control_plane=True), node("gb200-r0-t0", "v1.34.4")])
    monkeypatch.setattr(cluster_preflight, "get_api_client", lambda module: client)
    result = run_module(cluster_preflight.main, {"helm_binary": str(helm)}, check_mode=True)
    assert result["failed"] is False and result["changed"] is False
    assert result["problems"] == []
    assert result["server_version"] == "v1.34.4"
    assert result["dra_api_version"] == "resource.k8s.io/v1"
    assert result["openshift"] is False
    assert result["node_count"] == 2
    assert result["schedulable_control_plane"] == ["cp-0"]
    assert result["helm_version"] == "v3.19.0+g3d8990f"
    assert result["summary"].startswith("Kubernetes v1.34.4, 2 nodes, resource.k8s.io/v1 served, v3.19.0")
    assert client.client.requests == [("get", "/version"), ("get", "/apis")]
    assert client.lists == 1
    assert (helm.parent / "helm.log").read_text() == "version --short\n"  # read in check mode too


def test_every_problem_fails_in_one_line_with_the_extra_ones(monkeypatch, helm):
    client = FakeClient([node("gb200-r0-t3", "v1.34.1"), node("cp-0", "v1.34.4", True, unschedulable=True)])
    monkeypatch.setattr(cluster_preflight, "get_api_client", lambda module: client)
    args = {"helm_binary": str(helm), "extra_problems": ["gpu_operator_value is not a variable"]}
    result = run_module(cluster_preflight.main, args)
    assert result["failed"] is True
    assert result["msg"].startswith("Cluster preflight found 2 problem(s): kubelet 1.34.0/1.34.1 is refused")
    assert result["msg"].endswith(" | gpu_operator_value is not a variable")
    assert result["refused_nodes"] == ["gb200-r0-t3"]
    assert result["schedulable_control_plane"] == []

    allowed = run_module(cluster_preflight.main, dict(args, extra_problems=[], allow_refused_kubelet=True))
    assert allowed["failed"] is False
    assert allowed["warning"].startswith("Proceeding on nodes with refused kubelets (gb200-r0-t3)")


def test_an_absent_api_server_and_helm_are_two_problems(monkeypatch, tmp_path):
    for var in ("K8S_AUTH_KUBECONFIG", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)
    args = {
        "host": "https://127.0.0.1:9",
        "validate_certs": False,
        "api_key": "none",
        "api_patience": 0,
        "helm_binary": str(tmp_path / "no-helm"),
        "fail_on_problems": False,
    }
    result = run_module(cluster_preflight.main, args)
    assert result["failed"] is False
    assert result["reachable"] is False
    first, helm_problem = result["problems"]
    # the collection's one wording for it, as the verify preflight and the checks say it; never urllib3's repr
    assert first == (
        "cannot reach the Kubernetes API at https://127.0.0.1:9: connection refused; check that the API server runs "
        "and that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options point at it, then "
        "run it again"
    )
    assert helm_problem.startswith(f"Helm is not usable: `{tmp_path / 'no-helm'} version` failed ([Errno 2] ")
    assert result["dra_api_version"] == "" and result["node_count"] == 0


def test_a_floor_that_is_not_a_version_is_refused(monkeypatch, helm):
    monkeypatch.setattr(cluster_preflight, "get_api_client", lambda module: FakeClient([]))
    result = run_module(cluster_preflight.main, {"helm_binary": str(helm), "min_kubernetes_version": "latest"})
    assert result["failed"] is True
    assert result["msg"].startswith("cluster_preflight: 'latest' is not a version")
