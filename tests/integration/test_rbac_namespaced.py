# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The verify stage in namespaces the site gives, with only docs/rbac/verify-stage-namespaced.yaml.

As admin the test creates the namespaces (one per rack, and one that both racks share) with an object of
someone else in each, the ServiceAccount gpu-fabric/gpu-fabric-verify, applies the shipped file once per
namespace with the placeholder replaced (nothing else: the cluster-wide verify-stage.yaml is unbound first),
mints a token and runs playbooks/verify.yml with a kubeconfig holding only that token, the way
docs/rbac/README.md tells users (test_rbac.py's helpers). Every check passes, nothing of the checks is left,
the namespaces and the other objects in them are still there; a namespace without the Role fails the check
with one line naming the missing rights, before anything is created.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_rbac import RBAC, SA_NAMESPACE, playbook, recap, verify_vars
from verify_helpers import gpu_trays

pytestmark = pytest.mark.sim

PLACEHOLDER = "VERIFY_NAMESPACE"
PER_RACK = {"rack0": "site-verify-rack0", "rack1": "site-verify-rack1"}
SHARED = "site-verify-shared"
NO_ROLE = "site-verify-norole"
ACCOUNT = f"system:serviceaccount:{SA_NAMESPACE}:gpu-fabric-verify"
KINDS = (
    "pods",
    "jobs.batch",
    "resourceclaims.resource.k8s.io",
    "resourceclaimtemplates.resource.k8s.io",
    "computedomains.resource.nvidia.com",
    "mpijobs.kubeflow.org",
)


def bystanders(namespace: str) -> list[dict[str, Any]]:
    """Objects of someone else in a given namespace: the checks must leave them alone."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "site-settings", "namespace": namespace},
            "data": {"owner": "site"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "site-pod", "namespace": namespace, "labels": {"app": "site"}},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "sim-control-plane"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "image": "registry.invalid/site:1"}],
            },
        },
    ]


def left_in(sim_rack, namespace: str) -> dict[str, list[str]]:
    """kind -> names of the objects in the namespace other than the bystanders."""
    found = {}
    for kind in KINDS:
        result = sim_rack.kubectl("get", kind, "-n", namespace, "-o", "json")
        names = [item["metadata"]["name"] for item in json.loads(result.stdout)["items"]]
        found[kind] = [name for name in names if name != "site-pod"]
    return found


def nothing_left(sim_rack, namespace: str) -> None:
    assert left_in(sim_rack, namespace) == {kind: [] for kind in KINDS}
    sim_rack.kubectl("get", "namespace", namespace)  # still there
    sim_rack.kubectl("-n", namespace, "get", "configmap", "site-settings")
    sim_rack.kubectl("-n", namespace, "get", "pod", "site-pod")


def can(sim_rack, *args: str) -> str:
    return sim_rack.kubectl("auth", "can-i", *args, f"--as={ACCOUNT}", check=False).stdout.strip()


@pytest.fixture(scope="module")
def namespaced_sa(cluster_stage, tmp_path_factory) -> Path:
    """The namespaces, their bystanders, the ServiceAccount with only the namespaced file, a token kubeconfig."""
    sim_rack = cluster_stage
    # only this file's rights: the cluster-wide binding of verify-stage.yaml (test_rbac.py) must not help
    sim_rack.kubectl("delete", "clusterrolebinding", "gpu-fabric-verify", "--ignore-not-found")
    # and its admission policy, which keeps the account's writes in namespaces the checks created themselves
    sim_rack.kubectl(
        "delete", "validatingadmissionpolicybinding", "gpu-fabric-verify-own-namespaces", "--ignore-not-found"
    )
    kubeconfig, _token = sim_rack.service_account_kubeconfig(
        "gpu-fabric-verify", tmp_path_factory.mktemp("rbac-ns") / "kc"
    )
    text = (RBAC / "verify-stage-namespaced.yaml").read_text()
    assert PLACEHOLDER in text
    for namespace in (*PER_RACK.values(), SHARED, NO_ROLE):
        if sim_rack.kubectl("get", "namespace", namespace, check=False).returncode != 0:
            sim_rack.kubectl("create", "namespace", namespace)
        sim_rack.apply(bystanders(namespace), namespace)
    for namespace in (*PER_RACK.values(), SHARED):
        sim_rack.kubectl("apply", "-f", "-", input=text.replace(PLACEHOLDER, namespace))
    assert can(sim_rack, "create", "namespaces") == "no"
    assert can(sim_rack, "create", "pods", "-n", "default") == "no"
    assert can(sim_rack, "create", "pods", "-n", NO_ROLE) == "no"
    assert can(sim_rack, "create", "pods", "-n", SHARED) == "yes"
    return kubeconfig


def rack_records(report_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (p.parent.name, p.stem): json.loads(p.read_text()) for p in sorted((report_dir / "records").glob("*/*.json"))
    }


def test_every_check_passes_in_one_given_namespace_per_rack(cluster_stage, namespaced_sa, tmp_path):
    sim_rack = cluster_stage
    extra = {
        "gpu_fabric_verify_namespaces": PER_RACK,
        "gpu_fabric_verify_nccl": True,
        "verify_nccl_image": "registry.invalid/nccl-tests:2.13-sim",
    }
    run = playbook(sim_rack, namespaced_sa, "verify.yml", "-e", verify_vars(tmp_path, "unused-prefix", **extra))

    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert recap(run)["failed"] == 0
    found = rack_records(tmp_path)
    racks = sorted(gpu_trays(sim_rack))
    assert sorted(found) == [
        (check, rack) for check in ("cliques", "imex_channel", "nccl", "nvbandwidth") for rack in racks
    ]
    for (check, rack), record in found.items():
        assert record["passed"], record["summary"]
        if check != "cliques":
            assert record["details"]["namespace"] == PER_RACK[rack]
            assert record["details"]["namespace_given"] is True
            assert (record["objects_left"], record["objects_uncounted"]) == (0, []), record
    for namespace in PER_RACK.values():
        nothing_left(sim_rack, namespace)
    assert not [n for n in sim_rack.kubectl("get", "ns", "-o", "name").stdout.split() if "unused-prefix" in n]


def test_racks_sharing_one_given_namespace_do_not_collide(cluster_stage, namespaced_sa, tmp_path):
    sim_rack = cluster_stage
    extra = {"gpu_fabric_verify_namespace": SHARED}
    run = playbook(
        sim_rack,
        namespaced_sa,
        "verify.yml",
        "--tags",
        "imex_channel,nvbandwidth",
        "-e",
        verify_vars(tmp_path, "unused-prefix", **extra),
    )

    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    found = rack_records(tmp_path)
    assert sorted(found) == [(c, r) for c in ("imex_channel", "nvbandwidth") for r in sorted(gpu_trays(sim_rack))]
    assert all(r["passed"] and r["details"]["namespace"] == SHARED and r["objects_left"] == 0 for r in found.values())
    nothing_left(sim_rack, SHARED)


def test_a_namespace_without_the_role_fails_with_one_line_before_anything_is_created(
    cluster_stage, namespaced_sa, tmp_path
):
    sim_rack = cluster_stage
    run = playbook(
        sim_rack,
        namespaced_sa,
        "verify.yml",
        "--tags",
        "imex_channel",
        "-e",
        verify_vars(tmp_path, "unused-prefix", gpu_fabric_verify_namespace=NO_ROLE),
    )

    assert run.returncode != 0
    output = run.stdout + run.stderr
    assert "Traceback" not in output
    summary = rack_records(tmp_path)[("imex_channel", "rack0")]["summary"]
    assert summary.startswith(
        f"rack rack0: the check could not run: this identity lacks 13 rights in namespace {NO_ROLE}, given for rack "
        "rack0: get namespaces, watch pods, create pods, delete pods, get pods/log, "
        "get computedomains.resource.nvidia.com, "
    ), summary
    assert summary.endswith(
        f"; apply the Role and RoleBinding of docs/rbac/verify-stage-namespaced.yaml in namespace {NO_ROLE}"
    ), summary
    assert "\n" not in summary
    # a right the identity lacks: the check could not run, which says nothing of the fabric
    assert rack_records(tmp_path)[("imex_channel", "rack0")]["verdict"] == "error"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "error"
    assert "could not run (not a verdict on the fabric): imex_channel (rack0, rack1)" in report["summary"]
    nothing_left(sim_rack, NO_ROLE)
