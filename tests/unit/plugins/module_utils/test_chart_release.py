# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Helm release judged: what its history and values say is installed, what the play asks for, what to do."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_release as cr
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import helm_release

FIXTURES = Path(__file__).parents[3] / "fixtures" / "helm"
# `helm history nvidia-dra-driver-gpu -o json` and `helm get values nvidia-dra-driver-gpu -o json` (Helm 3.19.5) of
# the release cluster.yml installs on the simulated rack
HISTORY = (FIXTURES / "history-dra-driver.json").read_text()
VALUES = (FIXTURES / "get-values-dra-driver.json").read_text()
# `helm show crds nvidia-dra-driver-gpu --version 25.8.0 --repo <the simulated rack's chart repository>`
CRDS = (FIXTURES / "show-crds-dra-driver.txt").read_text()
CHART = "nvidia-dra-driver-gpu"


def latest(**changes) -> helm_release.Revision:
    return replace(helm_release.parse_history(HISTORY)[-1], **changes)


def installed(values=None, **changes) -> cr.Installed:
    return cr.installed_release(latest(**changes), cr.parse_values(VALUES) if values is None else values, CHART)


def wanted() -> dict:
    return json.loads(VALUES)


def test_the_latest_revision_and_the_values_give_the_chart_its_version_and_the_sites_values():
    release = installed()
    assert (release.revision, release.status) == (1, "deployed")
    assert (release.chart_name, release.chart_version, release.app_version) == (CHART, "25.8.0", "25.8.0")
    assert release.values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert release.values == wanted()


@pytest.mark.parametrize(
    "chart, name, expected",
    [
        ("nvidia-dra-driver-gpu-25.8.0", "nvidia-dra-driver-gpu", ("nvidia-dra-driver-gpu", "25.8.0")),
        ("gpu-operator-v25.10.0", "gpu-operator", ("gpu-operator", "v25.10.0")),
        # the name asked for is not the installed one: the version is told by its x.y.z form
        ("gpu-operator-v25.10.0", "nvidia-dra-driver-gpu", ("gpu-operator", "v25.10.0")),
        ("chart-2-gpu-1.0.0-rc.1+b5", "", ("chart-2-gpu", "1.0.0-rc.1+b5")),
        ("no-version", "", ("no-version", "")),
    ],
)
def test_helms_chart_and_version_are_split_at_the_version(chart, name, expected):
    assert cr.split_chart(chart, name) == expected


def test_a_release_given_no_values_has_none():
    assert cr.parse_values("null\n") == {}
    assert cr.parse_values("") == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ("Error: something", "helm get values printed no JSON"),
        ("[1, 2]", "not a mapping of values"),
        ('"text"', "not a mapping of values"),
    ],
)
def test_values_that_are_not_a_mapping_are_refused_in_one_line(text, message):
    with pytest.raises(cr.ChartReleaseError, match=message) as caught:
        cr.parse_values(text)
    assert "\n" not in str(caught.value)


def test_the_same_chart_version_and_values_need_nothing():
    assert cr.plan(installed(), CHART, "25.8.0", wanted()) == cr.Plan("none")


def test_an_absent_release_is_installed():
    assert cr.plan(None, CHART, "25.8.0", {}) == cr.Plan("install", ["not installed"])


def test_a_v_before_the_version_is_the_same_version():
    assert cr.same_version("v25.10.0", "25.10.0")
    assert cr.plan(installed(), CHART, "v25.8.0", wanted()).action == "none"
    assert not cr.same_version("25.8.0", "25.8.1")


def test_every_difference_is_a_reason_to_upgrade():
    release = installed(number=2, status="failed")
    values = dict(wanted(), logVerbosity="6")
    the_plan = cr.plan(release, CHART, "25.8.1", values)
    assert the_plan.action == "upgrade"
    assert the_plan.reasons == [
        "revision 2 is failed",
        "chart version 25.8.0 -> 25.8.1",
        "values differ (logVerbosity)",
    ]


def test_a_release_of_another_chart_is_upgraded():
    release = cr.installed_release(latest(), wanted(), "gpu-operator")
    assert cr.plan(release, "gpu-operator", "25.8.0", wanted()).reasons == [
        "chart nvidia-dra-driver-gpu, not gpu-operator"
    ]


def test_values_are_compared_as_helm_stores_them():
    # a string "6" and a number 6 are different values for a chart; a tuple from Jinja is a list
    now = {"a": {"b": 6, "c": [1, 2]}}
    assert cr.plan(installed(now), "", "25.8.0", {"a": {"b": 6, "c": (1, 2)}}).action == "none"
    assert cr.plan(installed(now), "", "25.8.0", {"a": {"b": "6", "c": [1, 2]}}).reasons == ["values differ (a.b)"]


def test_changed_keys_name_added_removed_and_changed_paths():
    now = {"keep": 1, "gone": 2, "nested": {"x": 1, "y": {"z": 1}}}
    later = {"keep": 1, "new": 3, "nested": {"x": 2, "y": {"z": 1}}}
    assert cr.changed_keys(now, later) == ["gone", "nested.x", "new"]
    assert len(cr.changed_keys({}, {str(i): i for i in range(20)})) == 8


@pytest.mark.parametrize(
    "version, exact",
    [
        ("25.8.0", True),
        ("v25.10.0", True),
        ("1.2.3-rc.1+build.5", True),
        ("25.8", True),
        ("~25.8", False),
        ("^25", False),
        (">=25.3.0 <26", False),
        ("25.x", False),
        ("", False),
    ],
)
def test_a_range_is_told_from_one_version(version, exact):
    assert cr.is_exact_version(version) is exact


def test_a_chart_yaml_gives_its_version():
    assert cr.parse_chart_version("apiVersion: v2\nname: gpu-operator\nversion: v25.10.0\n") == "v25.10.0"
    with pytest.raises(cr.ChartReleaseError, match="without a version"):
        cr.parse_chart_version("apiVersion: v2\nname: gpu-operator\n")


def test_the_charts_crds_are_its_customresourcedefinition_documents():
    crds = cr.crd_documents(CRDS)
    names = [crd["metadata"]["name"] for crd in crds]
    assert "computedomains.resource.nvidia.com" in names
    assert all(crd["kind"] == "CustomResourceDefinition" for crd in crds)
    # empty documents and other kinds are left out
    assert cr.crd_documents("---\n---\n" + CRDS + "\n---\nkind: ConfigMap\nmetadata: {name: x}\n") == crds
    assert cr.crd_documents("") == []


def test_crd_files_without_a_leading_separator_are_read_one_by_one():
    """Helm prints the chart's CRD files back to back (helm 3.19 ``show crds``): a file that does not start with
    ``---`` runs into the one before it, and YAML would keep only the last CRD of the merged mapping."""
    files = [
        f"# {name}\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\n"
        for name in ("clusterpolicies.nvidia.com", "gpuclusters.nvidia.com", "computedomains.resource.nvidia.com")
    ]
    expected = ["clusterpolicies.nvidia.com", "gpuclusters.nvidia.com", "computedomains.resource.nvidia.com"]
    assert [c["metadata"]["name"] for c in cr.crd_documents("\n".join(files))] == expected
    assert [c["metadata"]["name"] for c in cr.crd_documents("---\n" + "\n---\n".join(files))] == expected
    # a nested apiVersion (a conversion webhook's, an indented key) is not a new document
    nested = files[0] + "spec:\n  conversion:\n    webhook:\n      apiVersion: v1\n"
    assert len(cr.crd_documents(nested)) == 1


def test_crds_that_are_not_yaml_or_have_no_name_are_refused():
    with pytest.raises(cr.ChartReleaseError, match="no YAML"):
        cr.crd_documents("kind: [unclosed")
    with pytest.raises(cr.ChartReleaseError, match="without a name"):
        cr.crd_documents("kind: CustomResourceDefinition\nmetadata: {}\n")


PRIVILEGED = {"pod-security.kubernetes.io/enforce": "privileged"}


def test_the_namespace_gets_only_the_labels_it_lacks():
    assert cr.namespace_labels_patch(None, PRIVILEGED) == PRIVILEGED
    site = {"metadata": {"labels": {"team": "gpu", "pod-security.kubernetes.io/enforce": "baseline"}}}
    assert cr.namespace_labels_patch(site, PRIVILEGED) == PRIVILEGED  # the site's team label stays as it is
    done = {"metadata": {"labels": {"team": "gpu", **PRIVILEGED}}}
    assert cr.namespace_labels_patch(done, PRIVILEGED) == {}
    assert cr.namespace_labels_patch({"metadata": {}}, {"n": 1}) == {"n": "1"}


def test_the_upgrade_installs_with_exactly_the_values_given():
    args = cr.upgrade_args("rel", "nvidia-dra-driver-gpu", "25.8.0", "/tmp/v.json", 600)
    assert args == [
        "upgrade",
        "rel",
        "nvidia-dra-driver-gpu",
        "--install",
        "--version",
        "25.8.0",
        "--reset-values",
        "--values",
        "/tmp/v.json",
        "--wait",
        "--timeout",
        "600s",
    ]
    more = cr.upgrade_args("rel", "x", "1", "/v", 60, chart_repo_url="http://charts", take_ownership=True)
    assert more[-3:] == ["--repo", "http://charts", "--take-ownership"]


def test_the_diff_shows_both_values_as_yaml():
    diff = cr.values_diff("ns/rel", {"a": 1}, {"a": 2, "b": {"c": "6"}})
    assert yaml.safe_load(diff["before"]) == {"a": 1}
    assert yaml.safe_load(diff["after"]) == {"a": 2, "b": {"c": "6"}}
    assert diff["before_header"] == "ns/rel values (installed)"
    assert cr.values_diff("ns/rel", {}, {"a": 1})["before"] == ""


def test_the_release_line_says_what_was_done_and_why():
    upgrade = cr.Plan("upgrade", ["values differ (a)"])
    assert cr.release_line("ns/rel", "chart", "1.0", upgrade, check_mode=True) == (
        "release ns/rel: would upgrade chart 1.0 (values differ (a))"
    )
    assert cr.release_line("ns/rel", "chart", "1.0", upgrade, check_mode=False).startswith("release ns/rel: upgraded")
    assert cr.release_line("ns/rel", "chart", "1.0", cr.Plan("none"), False) == (
        "release ns/rel: chart 1.0 deployed with the values asked for"
    )


REGISTRY_VALUES = {
    "driver": {
        "enabled": True,
        "repository": "registry.example.com/nvidia",
        "imagePullSecrets": [{"name": "ngc-pull"}],
        "licensingConfig": {"nlsEnabled": True, "configMapName": "licensing"},
    },
    "ngc": {"apiKey": "nvapi-0123456789", "password": "hunter2", "privateKey": "-----BEGIN KEY-----", "port": 443},
    "toolkit": {"env": [{"name": "REGISTRY_TOKEN", "value": "plain-name-stays"}]},
    "secretName": "ngc-secret",
    "createSecret": True,
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
}


def test_credentials_are_redacted_in_results_and_the_rest_is_left_as_it_is():
    shown = cr.redact(REGISTRY_VALUES)
    assert shown["ngc"] == {"apiKey": "********", "password": "********", "privateKey": "********", "port": 443}
    assert shown["secretName"] == "********"
    assert shown["createSecret"] is True  # a switch is no secret
    assert shown["driver"] == REGISTRY_VALUES["driver"]  # a secret's name under "name" stays readable
    assert shown["tolerations"] == REGISTRY_VALUES["tolerations"]  # a toleration's "key" is not a credential
    assert REGISTRY_VALUES["ngc"]["password"] == "hunter2"  # the values handed to Helm are untouched


def test_the_diff_shows_no_credential_of_either_side():
    now = dict(REGISTRY_VALUES, ngc={"password": "old-password"})
    diff = cr.values_diff("gpu-operator/gpu-operator", now, REGISTRY_VALUES)
    text = diff["before"] + diff["after"]
    for secret in ("old-password", "hunter2", "nvapi-0123456789", "BEGIN KEY", "ngc-secret"):
        assert secret not in text
    assert "registry.example.com/nvidia" in diff["after"]
    # a changed password is still a reason to upgrade, named by its path and not its value
    installed = cr.Installed(1, "deployed", "gpu-operator", "v25.10.0", "v25.10.0", now)
    reasons = cr.plan(installed, "gpu-operator", "v25.10.0", REGISTRY_VALUES).reasons
    assert reasons == ["values differ (ngc.apiKey, ngc.password, ngc.port, ngc.privateKey)"]


def test_secret_values_are_merged_over_the_values_and_redacted_whatever_their_keys():
    secret = {"credentials": {"user": "robot$ci", "pass": "pa55"}, "driver": {"repository": "u:p@registry.example"}}
    wanted = cr.merge_values(REGISTRY_VALUES, secret)
    assert wanted["driver"]["repository"] == "u:p@registry.example"  # a secret leaf replaces a plain one
    assert wanted["driver"]["enabled"] is True  # mapping into mapping: the rest of driver is kept
    shown = cr.redact(wanted, hidden=secret)
    assert shown["credentials"] == {"user": "********", "pass": "********"}  # neither key reads as a credential
    assert shown["driver"]["repository"] == "********"
    assert shown["driver"]["imagePullSecrets"] == [{"name": "ngc-pull"}]
    assert shown["ngc"]["apiKey"] == "********" and shown["ngc"]["port"] == 443
    assert cr.merge_values({"a": {"b": 1}}, {"a": [1]}) == {"a": [1]}  # a list or scalar replaces
