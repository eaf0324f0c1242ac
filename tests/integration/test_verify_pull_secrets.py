# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Image pull Secrets in the namespaces the checks create: copied from the site's namespace before the pods,
named by every pod and MPIJob, gone with the namespace; a missing one is an ``error`` verdict naming it.

The simulated nodes pull no image, so what is proven is what a real kubelet needs: while each check pod ran,
its namespace held a copy of the Secret it names. A watcher (admin, outside the run) reads the check objects
twice a second.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from verify_helpers import ZERO, run_verify, verification_objects

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

SECRET = "mirror-pull"
SOURCE = "gpu-operator"  # the default source: the GPU Operator's namespace
PART_OF = "app.kubernetes.io/part-of=gpu-fabric-verify"
DOCKER_CONFIG = {"auths": {"registry.example.com": {"auth": base64.b64encode(b"robot:s3cret").decode()}}}


class Watcher(threading.Thread):
    """Snapshots of the check's pods, MPIJobs and Secrets in the namespaces of one prefix."""

    def __init__(self, sim_rack: SimRack, prefix: str) -> None:
        super().__init__(daemon=True)
        self.sim_rack, self.prefix = sim_rack, prefix
        self.snapshots: list[dict[str, list[dict[str, Any]]]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            result = self.sim_rack.kubectl(
                "get", "pods,mpijobs.kubeflow.org,secrets", "-A", "-l", PART_OF, "-o", "json", check=False
            )
            if result.returncode == 0:
                snapshot: dict[str, list[dict[str, Any]]] = {"Pod": [], "MPIJob": [], "Secret": []}
                for item in json.loads(result.stdout)["items"]:
                    if item["metadata"]["namespace"].startswith(self.prefix):
                        snapshot[item["kind"]].append(item)
                self.snapshots.append(snapshot)
            time.sleep(0.5)


def pull_secret(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": SECRET, "namespace": namespace, "labels": {"site": "mirror"}},
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(DOCKER_CONFIG).encode()).decode()},
    }


def watched_verify(sim_rack: SimRack, tmp_path, prefix: str, extra_vars: dict[str, Any]):
    watcher = Watcher(sim_rack, prefix)
    watcher.start()
    try:
        run = run_verify(
            sim_rack,
            tmp_path / "report",
            "--tags",
            "imex_channel,nvbandwidth",
            extra_vars={"gpu_fabric_verify_namespace_prefix": prefix, **extra_vars},
        )
    finally:
        watcher.done.set()
        watcher.join(timeout=30)
    return run, watcher.snapshots


def secrets_left(sim_rack: SimRack, prefix: str, wait: float = 90.0) -> list[str]:
    """The copies still in the prefix's namespaces once the namespace controller had time to empty them."""
    deadline = time.monotonic() + wait
    while True:
        items = json.loads(sim_rack.kubectl("get", "secrets", "-A", "-l", PART_OF, "-o", "json").stdout)["items"]
        left = [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in items]
        left = [name for name in left if name.startswith(prefix)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(2)


@pytest.fixture
def source_secret(cluster_stage: SimRack):
    cluster_stage.apply(pull_secret(SOURCE))
    yield cluster_stage
    cluster_stage.kubectl("delete", "secret", "-n", SOURCE, SECRET, "--ignore-not-found")


def test_the_check_pods_pull_with_a_copy_of_the_secret_in_their_namespace(source_secret: SimRack, tmp_path):
    sim_rack = source_secret
    prefix = "pull-ok"
    run, snapshots = watched_verify(sim_rack, tmp_path, prefix, {"gpu_fabric_verify_image_pull_secrets": [SECRET]})

    assert run.process.returncode == 0, run.output[-6000:]
    records = run.records()
    racks = sorted(records["imex_channel"])  # every rack the simulated fleet has now
    for check in ("imex_channel", "nvbandwidth"):
        assert sorted(records[check]) == racks
        for record in records[check].values():
            assert (record["verdict"], record["objects_left"]) == ("passed", 0), record["summary"]
            assert record["timings"]["copy the image pull Secrets"] >= 0
    source = sim_rack.get_json("secret", "-n", SOURCE, SECRET)
    running: dict[str, set[str]] = {}  # namespace -> running pods seen with the copy there
    jobs: set[str] = set()
    for snapshot in snapshots:
        copies = {s["metadata"]["namespace"]: s for s in snapshot["Secret"] if s["metadata"]["name"] == SECRET}
        for job in snapshot["MPIJob"]:
            for replica in job["spec"]["mpiReplicaSpecs"].values():
                assert replica["template"]["spec"]["imagePullSecrets"] == [{"name": SECRET}]
            jobs.add(job["metadata"]["name"])
        for pod in snapshot["Pod"]:
            namespace = pod["metadata"]["namespace"]
            assert pod["spec"]["imagePullSecrets"] == [{"name": SECRET}], pod["metadata"]["name"]
            if pod["status"].get("phase") != "Running":
                continue
            copy = copies.get(namespace)
            assert copy is not None, f"pod {namespace}/{pod['metadata']['name']} ran without Secret {SECRET}"
            assert copy["type"] == "kubernetes.io/dockerconfigjson"
            assert copy["data"] == source["data"]
            assert "ownerReferences" not in copy["metadata"] and "site" not in copy["metadata"]["labels"]
            assert (
                copy["metadata"]["labels"]["gpu-fabric.nvidia.com/check"]
                == pod["metadata"]["labels"]["gpu-fabric.nvidia.com/check"]
            )
            running.setdefault(namespace, set()).add(pod["metadata"]["name"])
    assert sorted(running) == sorted(
        f"{prefix}-{check}-{rack}" for rack in racks for check in ("imex-channel", "nvbandwidth")
    )
    for rack in racks:
        assert any("-launcher" in name for name in running[f"{prefix}-nvbandwidth-{rack}"]), running
        assert len(running[f"{prefix}-imex-channel-{rack}"]) == len(records["imex_channel"][rack]["nodes"])
    assert jobs == {f"nvbandwidth-{rack}" for rack in racks}
    assert verification_objects(sim_rack, prefix) == ZERO
    assert secrets_left(sim_rack, prefix) == []
    assert sim_rack.get_json("secret", "-n", SOURCE, SECRET)["metadata"]["uid"] == source["metadata"]["uid"]


def test_a_missing_secret_is_an_error_verdict_of_the_check_naming_it(cluster_stage: SimRack, tmp_path):
    prefix = "pull-missing"
    run, snapshots = watched_verify(
        cluster_stage,
        tmp_path,
        prefix,
        {
            "gpu_fabric_verify_image_pull_secrets": ["absent-pull"],
            "gpu_fabric_verify_image_pull_secrets_namespace": "default",
        },
    )

    assert run.process.returncode != 0
    report = run.report()
    checks = report["racks"]["rack0"]["checks"]
    assert (checks["imex_channel"], checks["nvbandwidth"]) == ("error", "error"), checks
    for check in ("imex_channel", "nvbandwidth"):
        record = run.record(check)
        assert record["verdict"] == "error" and record["failed_nodes"] == []
        assert record["summary"] == (
            "rack rack0: the check could not run: image pull Secret absent-pull does not exist in namespace default: "
            "create it there, or set gpu_fabric_verify_image_pull_secrets_namespace to the namespace that holds it"
        )
    assert "Traceback" not in run.output
    assert all(not snapshot["Pod"] and not snapshot["MPIJob"] for snapshot in snapshots)
    assert verification_objects(cluster_stage, prefix) == ZERO
