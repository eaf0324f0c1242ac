# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a server-side apply would change an object, on objects a real API server returned after the apply."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import server_side_apply as ssa

REPO_ROOT = Path(__file__).resolve().parents[4]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "k8s"
MANIFEST = {
    (doc["kind"], doc["metadata"]["name"]): doc
    for doc in yaml.safe_load_all((REPO_ROOT / "sim" / "manifests" / "mpi-operator.yaml").read_text())
    if doc
}


@pytest.fixture(params=[("Deployment", "deployment"), ("ClusterRole", "clusterrole")], ids=lambda p: p[0])
def applied(request):
    kind, name = request.param
    live = json.loads((FIXTURES / f"mpi-operator-{name}-applied.json").read_text())
    return live, copy.deepcopy(MANIFEST[(kind, "mpi-operator")])


def test_an_unchanged_object_needs_no_apply(applied):
    live, desired = applied

    assert ssa.apply_reason(live, desired, "gpu-fabric") is None


def test_an_absent_object_and_a_changed_value_need_one():
    live = json.loads((FIXTURES / "mpi-operator-deployment-applied.json").read_text())
    desired = copy.deepcopy(MANIFEST[("Deployment", "mpi-operator")])
    desired["spec"]["template"]["spec"]["containers"][0]["image"] = "mirror.example/mpi-operator:0.6.0"

    assert ssa.apply_reason(None, desired, "gpu-fabric") == ssa.ABSENT
    assert ssa.apply_reason(live, desired, "gpu-fabric") == "differs"


def test_an_object_another_manager_applied_is_applied_again(applied):
    live, desired = applied

    assert ssa.apply_reason(live, desired, "site-gitops") == "not applied by site-gitops yet"


def test_a_field_dropped_from_the_manifest_is_pruned_by_an_apply():
    live = json.loads((FIXTURES / "mpi-operator-deployment-applied.json").read_text())
    desired = copy.deepcopy(MANIFEST[("Deployment", "mpi-operator")])
    del desired["metadata"]["labels"]["app"]
    del desired["spec"]["replicas"]

    assert ssa.apply_reason(live, desired, "gpu-fabric") == "drops metadata.labels.app, spec.replicas"


def test_an_item_added_to_or_removed_from_a_list_differs():
    live = json.loads((FIXTURES / "mpi-operator-clusterrole-applied.json").read_text())
    desired = copy.deepcopy(MANIFEST[("ClusterRole", "mpi-operator")])
    fewer = copy.deepcopy(desired)
    fewer["rules"].pop()
    more = copy.deepcopy(desired)
    more["rules"].append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]})

    assert ssa.apply_reason(live, fewer, "gpu-fabric") == "differs"
    assert ssa.apply_reason(live, more, "gpu-fabric") == "differs"


@pytest.mark.parametrize(
    "live, desired, expected",
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
        ({"a": [2, 1]}, {"a": [1, 2]}, False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": True}, False),
        ({"a": "1"}, {"a": 1}, False),
        ({}, {"a": None, "b": {}, "c": []}, True),
        ({"a": {"b": 1}}, {"a": "x"}, False),
    ],
)
def test_contains(live, desired, expected):
    assert ssa.contains(live, desired) is expected


def test_the_needed_objects_are_split_by_group_in_their_order():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mpi-operator"}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "mpi-operator"}}
    cr = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "b"}}
    reasons = {"Namespace mpi-operator": None, "ServiceAccount mpi-operator/a": "differs", "ClusterRole b": "absent"}

    split = ssa.split_needed({"namespaces": [ns], "namespaced": [cr, sa]}, reasons)

    assert split == {"namespaces": [], "namespaced": [cr, sa]}
