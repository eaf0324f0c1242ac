# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A GPU Operator the collection did not install: found, named, and the site's choice applied."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import existing_install as ei

WANTED = {"driver": {"enabled": True}, "dcgm": {"enabled": True}, "dcgmExporter": {"serviceMonitor": {"enabled": True}}}


def policy(release=None, namespace=None):
    annotations = {ei.RELEASE_NAME_ANNOTATION: release, ei.RELEASE_NAMESPACE_ANNOTATION: namespace} if release else {}
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy", "annotations": annotations},
    }


def release_secret(config, version, status="deployed"):
    """A Helm release Secret as Helm 3 stores it: base64 (API) of base64 (Helm) of gzipped JSON."""
    payload = base64.b64encode(
        gzip.compress(json.dumps({"name": "gpu-op", "version": version, "config": config}).encode())
    )
    return {
        "metadata": {
            "name": f"sh.helm.release.v1.gpu-op.v{version}",
            "labels": {"owner": "helm", "status": status, "version": str(version)},
        },
        "data": {"release": base64.b64encode(payload).decode()},
    }


def test_the_values_of_the_deployed_revision_are_read_from_helms_secrets():
    secrets = [
        release_secret({"driver": {"enabled": False}}, 1, "superseded"),
        release_secret({"toolkit": {"enabled": False}}, 2),
    ]
    assert ei.helm_release_values(ei.latest_deployed(secrets)) == {"toolkit": {"enabled": False}}
    assert ei.latest_deployed([release_secret({}, 1, "failed")]) is None


def test_nothing_installed_or_our_own_release_installs():
    none = ei.decide([], "gpu-operator", "gpu-operator", None, WANTED)
    assert (none.kind, none.action) == (ei.NONE, "install")
    assert none.values == dict(WANTED, gpuFabric={"managedBy": "gpu_fabric.mnnvl"})
    ours = ei.decide(
        [policy("gpu-operator", "gpu-operator")],
        "gpu-operator",
        "gpu-operator",
        {**WANTED, "gpuFabric": ei.MARKER, "toolkit": {"enabled": False}},
        {"driver": {"enabled": False}},
    )
    assert (ours.kind, ours.action) == (ei.OURS, "install")  # the collection's own earlier values, not the site's


def test_another_release_fails_by_default_naming_it_and_the_choices():
    found = ei.decide([policy("gpu-op", "nvidia")], "gpu-operator", "gpu-operator", None, WANTED)
    assert (found.kind, found.action) == (ei.FOREIGN_RELEASE, "fail")
    assert found.message == (
        "the GPU Operator is already installed by Helm release nvidia/gpu-op (ClusterPolicy cluster-policy), not by "
        "this collection's gpu-operator/gpu-operator; set gpu_operator_on_existing to adopt (manage it, its values "
        "kept under the collection's), skip (leave it, skip the role) or fail. Nothing was changed."
    )


def test_adopting_another_release_upgrades_it_with_its_values_under_the_collections():
    adopted = ei.decide(
        [policy("gpu-op", "nvidia")],
        "gpu-operator",
        "gpu-operator",
        None,
        WANTED,
        "adopt",
        {"driver": {"enabled": False, "version": "580.95.05"}, "mig": {"strategy": "mixed"}},
    )
    assert (adopted.action, adopted.release_name, adopted.release_namespace) == ("adopt", "gpu-op", "nvidia")
    assert adopted.values["driver"] == {"enabled": True, "version": "580.95.05"}
    assert adopted.values["mig"] == {"strategy": "mixed"}
    assert adopted.take_ownership is False
    skipped = ei.decide([policy("gpu-op", "nvidia")], "gpu-operator", "gpu-operator", None, WANTED, "skip")
    assert skipped.action == "skip" and skipped.message.endswith(
        "left as it is (gpu_operator_on_existing=skip), role skipped"
    )


def test_a_cluster_policy_without_a_release_is_taken_over_only_when_adopted():
    assert ei.decide([policy()], "gpu-operator", "gpu-operator", None, WANTED).message.startswith(
        "ClusterPolicy cluster-policy exists without a Helm release (installed by hand or another tool); set "
    )
    adopted = ei.decide([policy()], "gpu-operator", "gpu-operator", None, WANTED, "adopt")
    assert (adopted.kind, adopted.action, adopted.take_ownership) == (ei.UNMANAGED, "adopt", True)


def test_values_the_site_set_on_our_release_are_named_before_an_upgrade_replaces_them():
    site = {"driver": {"enabled": False}, "toolkit": {"version": "v1.18.1"}, "dcgm": {"enabled": True}}
    found = ei.decide([policy("gpu-operator", "gpu-operator")], "gpu-operator", "gpu-operator", site, WANTED)
    assert (found.kind, found.action) == (ei.SITE_VALUES, "fail")
    assert found.site_values == ["driver.enabled=false (replaced by true)", "toolkit.version=v1.18.1 (dropped)"]
    assert found.message.startswith(
        "release gpu-operator/gpu-operator carries values the site set: driver.enabled=false (replaced by true), "
        "toolkit.version=v1.18.1 (dropped); an upgrade would replace them: put them in gpu_operator_values, or set "
    )
    adopted = ei.decide([policy("gpu-operator", "gpu-operator")], "gpu-operator", "gpu-operator", site, WANTED, "adopt")
    assert adopted.values["toolkit"] == {"version": "v1.18.1"}
    assert adopted.values["driver"] == {"enabled": True}


def test_an_unknown_choice_is_refused():
    with pytest.raises(ValueError, match="gpu_operator_on_existing must be one of fail, adopt, skip, not 'keep'"):
        ei.decide([], "gpu-operator", "gpu-operator", None, WANTED, "keep")
