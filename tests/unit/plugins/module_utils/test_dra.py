# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which DRA API version a cluster serves, and the advice when it serves none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import dra

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "k8s"
# k8s_cluster_info's apis are keyed by group/version; the values do not matter here
V134 = {"v1": {}, "apps/v1": {}, "resource.k8s.io/v1": {}, "resource.k8s.io/v1beta1": {}, "resource.k8s.io/v1beta2": {}}
V133 = {"v1": {}, "apps/v1": {}, "resource.k8s.io/v1beta1": {}, "resource.k8s.io/v1beta2": {}}
V132 = {"v1": {}, "apps/v1": {}, "resource.k8s.io/v1beta1": {}}
NO_DRA = {"v1": {}, "apps/v1": {}}


@pytest.mark.parametrize(
    ("served", "version"),
    [
        (V134, "resource.k8s.io/v1"),
        (V133, "resource.k8s.io/v1beta2"),
        (V132, "resource.k8s.io/v1beta1"),
        (NO_DRA, None),
        (["resource.k8s.io/v1beta1", "resource.k8s.io/v1alpha3"], "resource.k8s.io/v1beta1"),
    ],
)
def test_the_newest_served_version_is_picked(served, version):
    assert dra.served_dra_version(served) == version


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("apigroups-1.33.13.json", "resource.k8s.io/v1beta2"),
        ("apigroups-1.34.4.json", "resource.k8s.io/v1"),
        ("apigroups-1.37.2.json", "resource.k8s.io/v1"),
    ],
)
def test_the_version_is_read_from_a_real_api_group_list(name, version):
    """GET /apis of the simulated rack's API servers (tests/fixtures/k8s/README.md)."""
    groups = json.loads((FIXTURES / name).read_text())
    assert dra.served_dra_version(groups) == version
    assert dra.dra_problem(groups, "v" + name.removeprefix("apigroups-").removesuffix(".json")) == ""
    without = {"groups": [g for g in groups["groups"] if g["name"] != "resource.k8s.io"]}
    assert dra.served_dra_version(without) is None


def test_a_served_version_means_no_problem():
    assert dra.dra_problem(V133, "v1.33.13") == ""
    assert dra.dra_problem(V134, "v1.34.4", "resource.k8s.io/v1") == ""


@pytest.mark.parametrize(
    ("server", "runtime_config"),
    [
        ("v1.32.11", "--runtime-config=resource.k8s.io/v1beta1=true;"),
        ("v1.33.13", "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true;"),
    ],
)
def test_on_1_32_and_1_33_the_advice_names_the_feature_gate_and_the_runtime_config(server, runtime_config):
    text = dra.dra_problem(NO_DRA, server)
    assert text.startswith(f"the API server {server} serves no DRA API (resource.k8s.io/v1, resource.k8s.io/v1beta2, ")
    assert "--feature-gates=DynamicResourceAllocation=true" in text
    assert "kube-apiserver, kube-controller-manager, kube-scheduler and every kubelet" in text
    assert runtime_config in text
    assert "1.34.2+" in text


def test_on_1_34_and_later_the_advice_is_to_undo_what_turned_dra_off():
    text = dra.dra_problem(NO_DRA, "v1.37.2")
    assert "DynamicResourceAllocation=false" in text and "resource.k8s.io/v1=false" in text
    assert "--feature-gates=DynamicResourceAllocation=true" not in text


def test_older_than_1_32_is_told_to_upgrade():
    assert "upgrade the control plane and the kubelets to Kubernetes 1.32" in dra.dra_problem(NO_DRA, "v1.31.9")


def test_a_required_version_that_is_not_served_names_the_one_that_is():
    text = dra.dra_problem(V133, "v1.33.13", "resource.k8s.io/v1")
    assert text.startswith("the API server v1.33.13 serves resource.k8s.io/v1beta2 but not resource.k8s.io/v1")
    assert "leave the variable empty" in text


def test_anything_else_is_refused():
    with pytest.raises(TypeError, match="got NoneType"):
        dra.served_dra_version(None)
