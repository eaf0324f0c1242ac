# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""chart_release's run: its API steps (the namespace, the CRDs' server-side apply) against a recorded API, its
transient-error retry, and its decisions (install, upgrade, nothing, check mode, CRDs left to their owner, the
refusals, the failure messages) with Helm faked in-process, answering with the Helm outputs of tests/fixtures/helm.
The real Helm runs against the simulated rack (tests/integration/test_cluster_stage.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_release_runner as runner
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception

PRIVILEGED = {"pod-security.kubernetes.io/enforce": "privileged"}


class RecordedApi:
    """Answers by (method, path) from ``objects``; records every call with its parameters."""

    def __init__(self, objects):
        self.objects = dict(objects)
        self.calls = []

    def call(self, method, path, **params):
        self.calls.append((method, path, params))
        answer = self.objects.get((method, path))
        if callable(answer):
            return answer(params)
        return answer or {}

    def get(self, path):
        self.calls.append(("get", path, {}))
        return self.objects.get(("get", path))


def test_an_absent_namespace_is_created_with_its_labels():
    api = RecordedApi({})
    assert runner.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=False) == "created"
    method, path, params = api.calls[-1]
    assert (method, path) == ("post", "/api/v1/namespaces")
    assert params["body"]["metadata"] == {"name": "gpu-operator", "labels": PRIVILEGED}


def test_a_namespace_is_given_the_labels_it_lacks_and_check_mode_writes_nothing():
    namespace = {"metadata": {"name": "gpu-operator", "labels": {"team": "gpu"}}}
    api = RecordedApi({("get", "/api/v1/namespaces/gpu-operator"): namespace})
    assert runner.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=True) == "labelled"
    assert [c[0] for c in api.calls] == ["get"]
    assert runner.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=False) == "labelled"
    method, _path, params = api.calls[-1]
    assert (method, params["body"], params["content_type"]) == (
        "patch",
        {"metadata": {"labels": PRIVILEGED}},
        "application/merge-patch+json",
    )
    namespace["metadata"]["labels"].update(PRIVILEGED)
    assert runner.ensure_namespace(api, "gpu-operator", PRIVILEGED, check_mode=False) == "unchanged"


def crd(name, **spec):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": "nvidia.com", **spec},
    }


def applied(desired, resourceVersion, manager="gpu-fabric", **metadata):
    """``desired`` as the API server returns it once ``manager`` applied it."""
    live = {**desired, "metadata": {**desired["metadata"], "resourceVersion": resourceVersion, **metadata}}
    live["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Apply", "fieldsV1": {"f:spec": {"f:group": {}}}}
    ]
    return live


def test_only_the_crds_that_differ_are_applied_and_those_it_changed_are_told():
    path = runner.CRD_PATH
    same = crd("same.nvidia.com")
    newer = crd("newer.nvidia.com", scope="Namespaced")
    api = RecordedApi(
        {
            ("get", f"{path}/same.nvidia.com"): applied(same, "10"),
            ("get", f"{path}/newer.nvidia.com"): applied(crd("newer.nvidia.com", scope="Cluster"), "11"),
            ("patch", f"{path}/newer.nvidia.com"): {"metadata": {"name": "newer.nvidia.com", "resourceVersion": "12"}},
            ("patch", f"{path}/new.nvidia.com"): {"metadata": {"name": "new.nvidia.com", "resourceVersion": "13"}},
        }
    )
    crds = [same, newer, crd("new.nvidia.com")]
    assert runner.apply_crds(api, crds, "gpu-fabric", check_mode=False) == ["newer.nvidia.com", "new.nvidia.com"]
    # a read of each, then one forced server-side apply by the field manager of each that differs
    assert [(method, path.rsplit("/", 1)[1]) for method, path, _params in api.calls] == [
        ("get", "same.nvidia.com"),
        ("get", "newer.nvidia.com"),
        ("patch", "newer.nvidia.com"),
        ("get", "new.nvidia.com"),
        ("patch", "new.nvidia.com"),
    ]
    for method, _path, params in api.calls:
        if method == "patch":
            assert params["content_type"] == "application/apply-patch+yaml"
            assert (params["field_manager"], params["force_conflicts"], params.get("dry_run")) == (
                "gpu-fabric",
                True,
                None,
            )


def test_a_crd_helm_created_is_applied_once_by_the_field_manager():
    path = runner.CRD_PATH
    same = crd("same.nvidia.com")
    api = RecordedApi(
        {
            ("get", f"{path}/same.nvidia.com"): applied(same, "10", manager="helm"),
            ("patch", f"{path}/same.nvidia.com"): {"metadata": {"name": "same.nvidia.com", "resourceVersion": "11"}},
        }
    )
    assert runner.apply_crds(api, [same], "gpu-fabric", check_mode=False) == ["same.nvidia.com"]


def test_check_mode_dry_runs_the_apply_and_compares_generation_and_labels():
    path = runner.CRD_PATH
    old = {"resourceVersion": "10", "generation": 1, "labels": {"x": "1"}}
    a = crd("a.nvidia.com", scope="Namespaced")
    b = crd("b.nvidia.com", scope="Namespaced")
    api = RecordedApi(
        {
            ("get", f"{path}/a.nvidia.com"): applied(crd("a.nvidia.com", scope="Cluster"), **old),
            # applied by another manager: the dry run tells whether anything would change
            ("get", f"{path}/b.nvidia.com"): applied(b, manager="helm", **old),
            # a dry run keeps the resourceVersion; a changed spec shows in the generation
            ("patch", f"{path}/a.nvidia.com"): {"metadata": dict(old, name="a.nvidia.com", generation=2)},
            ("patch", f"{path}/b.nvidia.com"): {"metadata": dict(old, name="b.nvidia.com")},
        }
    )
    assert runner.apply_crds(api, [a, b], "fm", check_mode=True) == ["a.nvidia.com"]
    assert all(params["dry_run"] == "All" for method, _path, params in api.calls if method == "patch")


class FlakyClient:
    """A dynamic client whose ``request`` fails with ``errors`` first, then answers."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.client = self
        self.requests = 0

    def request(self, method, path, serialize=True, **params):
        self.requests += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"kind": "Namespace", "metadata": {"name": "x"}}


def api_error(status):
    return api_exception(ApiException(status=status, reason="Error"))


def test_a_transient_api_error_is_retried_and_any_other_raised_at_once():
    sleeps = []
    client = FlakyClient(api_error(503), ConnectionRefusedError())
    api = runner.Api(client, patience=10, sleep=sleeps.append, clock=lambda: 0.0)
    assert api.get("/api/v1/namespaces/x")["metadata"]["name"] == "x"
    assert (client.requests, sleeps) == (3, [1.0, 1.0])
    forbidden = runner.Api(FlakyClient(api_error(403)), patience=10, sleep=sleeps.append, clock=lambda: 0.0)
    with pytest.raises(Exception) as caught:
        forbidden.get("/api/v1/namespaces/x")
    assert getattr(caught.value, "status", None) == 403
    assert runner.Api(FlakyClient(api_error(404)), patience=0).get("/api/v1/namespaces/x") is None


# ---------------------------------------------------------------------------------------------
# run_release: the module's decisions, Helm and the API server faked in-process
# ---------------------------------------------------------------------------------------------

FIXTURES = Path(__file__).parents[3] / "fixtures" / "helm"
# `helm history`, `helm get values` and `helm show crds` of the DRA driver's release on the simulated rack
HISTORY = json.loads((FIXTURES / "history-dra-driver.json").read_text())
VALUES = json.loads((FIXTURES / "get-values-dra-driver.json").read_text())
CRDS = (FIXTURES / "show-crds-dra-driver.txt").read_text()
NAME = "nvidia-dra-driver-gpu"
RELEASE = f"{NAME}/{NAME}"
COMPUTE_DOMAINS = "computedomains.resource.nvidia.com"


class FakeHelm:
    """Helm as run_release runs it (AnsibleModule.run_command's signature), answering from the release it holds:
    ``history`` (``helm history``'s entries; empty: not installed) and ``values``. An upgrade records the values
    file it is handed and adds a deployed revision, or fails with ``upgrade_error``. ``calls``: each command, without
    the binary and the ``--namespace`` that ends it."""

    def __init__(self, history=(), values=None, crds=CRDS, chart="", upgrade_error=""):
        self.history = [dict(entry) for entry in history]
        self.values = values
        self.crds = crds
        self.chart = chart
        self.upgrade_error = upgrade_error
        self.calls = []

    def __call__(self, argv, environ_update=None, data=None, binary_data=False):
        args = argv[1:-2] if argv[-2:-1] == ["--namespace"] else argv[1:]
        self.calls.append(args)
        if args[0] == "history":
            if not self.history:
                return 1, "", "Error: release: not found\n"
            return 0, json.dumps(self.history[-int(args[args.index("--max") + 1]) :]), ""
        if args[:2] == ["get", "values"]:
            return 0, json.dumps(self.values), ""
        if args[:2] == ["show", "crds"]:
            return 0, self.crds, ""
        if args[:2] == ["show", "chart"]:
            return 0, self.chart, ""
        if args[0] == "upgrade":
            if self.upgrade_error:
                return 1, "", self.upgrade_error
            with open(args[args.index("--values") + 1], encoding="utf-8") as handle:
                self.values = json.load(handle)
            chart = f"{args[2].rsplit('/', 1)[-1]}-{args[args.index('--version') + 1]}"
            number = self.history[-1]["revision"] + 1 if self.history else 1
            self.history.append(dict(HISTORY[0], revision=number, chart=chart, description="Upgrade complete"))
            return 0, "", ""
        raise AssertionError(f"unexpected helm {args}")

    def commands(self):
        return [" ".join(call[:2]) for call in self.calls]


class RecordedClient:
    """kubernetes.core's client as Api calls it (``client.client.request``), answering from a RecordedApi; a read of
    an object it lacks is the API server's 404."""

    def __init__(self, objects):
        self.api = RecordedApi(objects)
        self.client = self

    def request(self, method, path, serialize=True, **params):
        if method == "get":
            found = self.api.get(path)
            if found is None:
                raise api_error(404)
            return found
        return self.api.call(method, path, **params)

    def writes(self):
        return [(method, path.rsplit("/", 1)[1]) for method, path, _params in self.api.calls if method != "get"]


def compute_domains_crd():
    return next(doc for doc in yaml.safe_load_all(CRDS) if doc)


def deployed_cluster():
    """The namespace with its labels, and the chart's CRD as gpu-fabric applied it."""
    crd = compute_domains_crd()
    return RecordedClient(
        {
            ("get", f"/api/v1/namespaces/{NAME}"): {"metadata": {"name": NAME, "labels": PRIVILEGED}},
            ("get", f"{runner.CRD_PATH}/{COMPUTE_DOMAINS}"): applied(crd, "10"),
        }
    )


def options(**changes):
    """chart_release's options, as the dra_driver role gives them for the release of the fixtures."""
    settings = dict(
        name=NAME,
        namespace=NAME,
        namespace_labels=PRIVILEGED,
        chart_ref=f"nvidia/{NAME}",
        chart_repo_url="",
        repo_name="",
        repo_url="",
        repo_username="",
        repo_password="",
        chart_name=NAME,
        chart_version="25.8.0",
        values=VALUES,
        secret_values={},
        upgrade_crds=True,
        foreign_crds=[],
        forward_only_charts=[],
        field_manager="gpu-fabric",
        take_ownership=False,
        wait_timeout=600,
        stale_after=None,
        poll_delay=5.0,
        api_patience=10,
        binary_path="helm",
    )
    return dict(settings, **changes)


def release(helm, cluster, tmp_path, check_mode=False, diff=False, **changes):
    warnings = []
    hooks = runner.ModuleHooks(
        run_command=helm, connect=lambda: cluster, tmpdir=lambda: str(tmp_path), warn=warnings.append, environ={}
    )
    result = runner.run_release(options(**changes), hooks, check_mode, diff)
    assert warnings == []  # nothing was pending
    return result


def failure(*args, **kwargs):
    with pytest.raises(runner.ReleaseFailed) as caught:
        release(*args, **kwargs)
    return caught.value


def test_a_deployed_release_with_the_values_asked_for_is_read_and_left_alone(tmp_path):
    helm, cluster = FakeHelm(HISTORY, VALUES), deployed_cluster()
    result = release(helm, cluster, tmp_path)
    assert (result["changed"], result["action"], result["reasons"]) == (False, "none", [])
    assert result["msg"] == f"release {RELEASE}: {NAME} 25.8.0 deployed with the values asked for"
    assert (result["namespace"], result["crds"]["changed"], result["settle"]["action"]) == ("unchanged", [], "none")
    assert result["release"] == {
        "name": NAME,
        "namespace": NAME,
        "revision": 1,
        "status": "deployed",
        "chart": "nvidia-dra-driver-gpu-25.8.0",
        "app_version": "25.8.0",
    }
    assert helm.commands() == ["show crds", "history nvidia-dra-driver-gpu", "get values"]
    assert cluster.writes() == []  # an unchanged cluster receives reads alone
    assert "command" not in result


def test_an_absent_release_is_installed_with_its_namespace_and_crds(tmp_path):
    helm, cluster = FakeHelm(), RecordedClient({})
    result = release(helm, cluster, tmp_path)
    assert (result["changed"], result["action"], result["reasons"]) == (True, "install", ["not installed"])
    assert result["msg"] == (
        f"namespace {NAME} created; CRDs changed: {COMPUTE_DOMAINS}; "
        f"release {RELEASE}: installed {NAME} 25.8.0 (not installed)"
    )
    assert cluster.writes() == [("post", "namespaces"), ("patch", COMPUTE_DOMAINS)]
    assert helm.values == VALUES  # the values file Helm was handed
    values_file = str(tmp_path / "values.json")
    assert result["command"] == [
        "helm",
        *["upgrade", NAME, f"nvidia/{NAME}", "--install", "--version", "25.8.0", "--reset-values"],
        *["--values", values_file, "--wait", "--timeout", "600s", "--namespace", NAME],
    ]
    assert (result["release"]["revision"], result["release"]["status"]) == (1, "deployed")  # read after the install


def test_changed_values_upgrade_the_release_and_the_diff_shows_them(tmp_path):
    helm = FakeHelm(HISTORY, VALUES)
    wanted = dict(VALUES, nvidiaDriverRoot="/")
    result = release(helm, deployed_cluster(), tmp_path, diff=True, values=wanted)
    assert (result["action"], result["reasons"]) == ("upgrade", ["values differ (nvidiaDriverRoot)"])
    assert result["msg"] == f"release {RELEASE}: upgraded {NAME} 25.8.0 (values differ (nvidiaDriverRoot))"
    assert "nvidiaDriverRoot: /run/nvidia/driver" in result["diff"]["before"]
    assert "nvidiaDriverRoot: /\n" in result["diff"]["after"]
    assert helm.values == wanted and result["release"]["revision"] == 2


def test_check_mode_reads_everything_and_changes_nothing(tmp_path):
    helm, cluster = FakeHelm(HISTORY, VALUES), deployed_cluster()
    result = release(helm, cluster, tmp_path, check_mode=True, chart_version="25.9.0")
    assert (result["changed"], result["action"]) == (True, "upgrade")
    assert result["reasons"] == ["chart version 25.8.0 -> 25.9.0"]
    assert result["msg"] == f"release {RELEASE}: would upgrade {NAME} 25.9.0 (chart version 25.8.0 -> 25.9.0)"
    assert "upgrade" in result["command"]  # the command that would run
    assert "upgrade" not in [call[0] for call in helm.calls] and helm.values == VALUES
    assert cluster.writes() == [] and not (tmp_path / "values.json").exists()
    assert "diff" not in result  # not asked for


def test_the_crds_another_release_owns_are_left_to_it_and_helm_skips_them(tmp_path):
    own = crd("clusterpolicies.nvidia.com")
    helm = FakeHelm(crds=yaml.safe_dump(own) + "---\n" + CRDS)
    cluster = RecordedClient({})
    result = release(helm, cluster, tmp_path, foreign_crds=[COMPUTE_DOMAINS])
    assert result["crds"] == {
        "applied": ["clusterpolicies.nvidia.com"],
        "changed": ["clusterpolicies.nvidia.com"],
        "left_to_their_owner": [COMPUTE_DOMAINS],
    }
    assert ("patch", COMPUTE_DOMAINS) not in cluster.writes()
    assert result["command"][-3:] == ["--skip-crds", "--namespace", NAME]


def test_foreign_crds_with_upgrade_crds_off_are_refused_before_anything_changes(tmp_path):
    helm, cluster = FakeHelm(), RecordedClient({})
    refused = failure(helm, cluster, tmp_path, foreign_crds=[COMPUTE_DOMAINS], upgrade_crds=False)
    assert refused.message.startswith(
        f"release {RELEASE}: the chart carries {COMPUTE_DOMAINS}, which another release owns; with upgrade_crds off"
    )
    assert helm.commands() == ["show crds"] and cluster.api.calls == []


def test_a_release_of_a_forward_only_chart_is_not_moved_back(tmp_path):
    newer = [dict(HISTORY[0], chart="dra-driver-nvidia-gpu-0.4.0")]
    helm, cluster = FakeHelm(newer, VALUES), deployed_cluster()
    refused = failure(helm, cluster, tmp_path, forward_only_charts=["dra-driver-nvidia-gpu"])
    assert refused.message == (
        f"release {RELEASE} runs chart dra-driver-nvidia-gpu; moving it to chart {NAME} is a downgrade the chart "
        "does not support: keep dra-driver-nvidia-gpu (for the DRA driver, release set 26.7)"
    )
    assert "upgrade" not in [call[0] for call in helm.calls]


def test_a_failed_upgrade_is_one_line_with_what_was_planned(tmp_path):
    error = "Error: UPGRADE FAILED: context deadline exceeded\nstack trace line\n"
    helm = FakeHelm(HISTORY, VALUES, upgrade_error=error)
    failed = failure(helm, deployed_cluster(), tmp_path, values={})
    assert failed.message == (
        f"helm upgrade --install of {RELEASE} failed (rc 1): Error: UPGRADE FAILED: context deadline exceeded "
        "stack trace line"
    )
    assert (failed.result["action"], failed.result["changed"]) == ("upgrade", True)
    assert failed.result["release"]["revision"] == 1  # the revision before the upgrade


def test_a_helm_read_that_fails_names_the_command_and_the_release(tmp_path):
    helm = FakeHelm(HISTORY, VALUES)

    def broken(argv, **kwargs):
        if argv[1:3] == ["show", "crds"]:
            return 1, "", 'Error: chart "nvidia-dra-driver-gpu" version "25.8.0" not found\n'
        return helm(argv, **kwargs)

    failed = failure(broken, deployed_cluster(), tmp_path)
    assert failed.message == (
        f'helm show crds for {RELEASE} failed (rc 1): Error: chart "nvidia-dra-driver-gpu" version "25.8.0" not found'
    )
    assert failed.result == {}
