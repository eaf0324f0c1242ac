# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenShift detection and the checks' pods on OpenShift, proven on the simulated rack.

The rack's API server is made to serve the API groups OpenShift serves (minimal CRDs of
``securitycontextconstraints.security.openshift.io``, ``clusterversions.config.openshift.io`` and
``subscriptions.operators.coreos.com``, tests/integration/openshift/crds.yaml), and a thread stands in for
OpenShift's namespace controller: it writes the ``openshift.io/sa.scc.*`` annotations on the verification's
namespaces a moment after they are created. SCC admission itself does not run here (docs/openshift.md).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from verify_helpers import run_verify

REPO_ROOT = Path(__file__).resolve().parents[2]
CRDS = Path(__file__).resolve().parent / "openshift" / "crds.yaml"
CRD_NAMES = (
    "securitycontextconstraints.security.openshift.io",
    "clusterversions.config.openshift.io",
    "subscriptions.operators.coreos.com",
)
UID_RANGE = "1000680000/10000"
ANNOTATIONS = {
    "openshift.io/sa.scc.uid-range": UID_RANGE,
    "openshift.io/sa.scc.supplemental-groups": "1000680000/10000",
    "openshift.io/sa.scc.mcs": "s0:c26,c25",
}


def served_groups(sim_rack) -> set[str]:
    found = json.loads(sim_rack.kubectl("get", "--raw", "/apis").stdout)
    return {group["name"] for group in found["groups"]}


def preflight(sim_rack):
    env = dict(sim_rack.env, ANSIBLE_NOCOLOR="1")
    return subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "cluster.yml"),
            "--tags",
            "cluster_preflight",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=600,
        check=False,
    )


class NamespaceAnnotator(threading.Thread):
    """OpenShift's namespace controller, as far as the checks see it: new namespaces of ``prefix`` get their
    SCC annotations after a short delay (the real controller is asynchronous too)."""

    def __init__(self, sim_rack, prefix: str) -> None:
        super().__init__(daemon=True)
        self.sim_rack, self.prefix = sim_rack, prefix
        self.stop = threading.Event()
        self.annotated: list[str] = []

    def run(self) -> None:
        while not self.stop.wait(0.5):
            result = self.sim_rack.kubectl("get", "namespaces", "-o", "json", check=False)
            if result.returncode != 0:
                continue
            for item in json.loads(result.stdout)["items"]:
                meta = item["metadata"]
                if not meta["name"].startswith(self.prefix) or meta.get("deletionTimestamp"):
                    continue
                if "openshift.io/sa.scc.uid-range" in (meta.get("annotations") or {}):
                    continue
                pairs = [f"{key}={value}" for key, value in ANNOTATIONS.items()]
                if self.sim_rack.kubectl("annotate", "namespace", meta["name"], *pairs, check=False).returncode == 0:
                    self.annotated.append(meta["name"])


@pytest.fixture
def openshift_groups(sim_rack):
    sim_rack.kubectl("apply", "-f", str(CRDS))
    for name in CRD_NAMES:
        sim_rack.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    sim_rack.wait_until("the OpenShift groups served", lambda: {"security.openshift.io"} <= served_groups(sim_rack))
    yield sim_rack
    remove_openshift_groups(sim_rack)


def remove_openshift_groups(sim_rack, timeout: float = 300.0) -> None:
    """Delete the stand-in CRDs and wait until they and their groups are gone.

    ``kubectl delete --wait`` is not used: on a loaded 2-core machine the API server's CRD finalizer has
    taken over 2 minutes to release a CRD, and a blocked kubectl says nothing about why. The wait here is
    bounded and, on timeout, names each CRD still present with its finalizers and conditions."""
    sim_rack.kubectl("delete", "-f", str(CRDS), "--ignore-not-found", "--wait=false")

    def left() -> list[dict]:
        found = sim_rack.get_json("crd", "-l", "gpu-fabric.test/owner=test_openshift")
        return found["items"]

    def gone() -> bool:
        return not left() and "security.openshift.io" not in served_groups(sim_rack)

    try:
        sim_rack.wait_until("the OpenShift CRDs and groups gone", gone, timeout=timeout, interval=2.0)
    except AssertionError as exc:
        states = [
            {
                "name": item["metadata"]["name"],
                "finalizers": item["metadata"].get("finalizers"),
                "conditions": [
                    f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
                    for c in item.get("status", {}).get("conditions", [])
                ],
            }
            for item in left()
        ]
        raise AssertionError(f"{exc}; CRDs still present: {json.dumps(states)}") from None


def test_preflight_detects_openshift_and_not_once_the_groups_are_gone(openshift_groups):
    sim_rack = openshift_groups
    result = preflight(sim_rack)
    text = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout[-4000:]
    assert "OpenShift detected (security.openshift.io and config.openshift.io served)" in text

    remove_openshift_groups(sim_rack)
    result = preflight(sim_rack)
    text = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout[-4000:]
    assert "OpenShift not detected" in text


def test_imex_pods_leave_their_user_to_the_namespace_range(openshift_groups, cluster_stage, tmp_path):
    prefix = f"osv-{uuid.uuid4().hex[:6]}"
    annotator = NamespaceAnnotator(cluster_stage, prefix)
    annotator.start()
    try:
        run = run_verify(
            cluster_stage,
            tmp_path / "report",
            "--tags",
            "imex_channel",
            extra_vars={"gpu_fabric_verify_namespace_prefix": prefix},
        )
    finally:
        annotator.stop.set()
        annotator.join(timeout=10)
    assert run.process.returncode == 0, run.output[-6000:]
    record = run.record("imex_channel")
    assert record["passed"] is True, record["summary"]
    assert record["cluster"]["openshift"] == "true"
    assert record["details"]["uid_range"] == UID_RANGE
    assert record["details"]["run_as_user"] is None
    assert record["details"]["namespace"] in annotator.annotated
    pods = record["details"]["pods"]
    assert len(pods) == len(record["nodes"]) >= 2
    for pod in pods:
        # as the API server stored the pod: no fixed user, still non-root
        assert pod["security_context"]["runAsNonRoot"] is True
        assert "runAsUser" not in pod["security_context"] and "runAsGroup" not in pod["security_context"]
        assert re.match(r"^crw", pod["channel0"] or ""), pod


def test_gpu_operator_installed_by_olm_is_not_installed_again_with_helm(openshift_groups, cluster_stage):
    subscription = json.loads(
        (REPO_ROOT / "tests" / "fixtures" / "k8s" / "olm-gpu-operator-subscription.json").read_text()
    )
    subscription["metadata"]["namespace"] = "gpu-operator"  # where the sim's operator stand-in runs
    subscription.pop("status")  # no OLM here: nothing resolves the CSV
    cluster_stage.apply(subscription)
    env = dict(cluster_stage.env, ANSIBLE_NOCOLOR="1")
    result = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "cluster.yml"),
            "--tags",
            "gpu_operator",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=600,
        check=False,
    )
    text = " ".join(result.stdout.split())
    assert result.returncode == 0, result.stdout[-4000:]
    assert (
        "GPU Operator installed by OLM (Subscription gpu-operator/gpu-operator-certified, CSV not resolved yet)" in text
    )
    # the Helm release task was skipped, the readiness checks ran
    assert re.search(
        r"TASK \[(?:gpu_fabric\.mnnvl\.gpu_operator : )?Install or upgrade the gpu-operator release\] \*+ skipping",
        text,
    )
    assert "GPU nodes: gb200-r0-t0=4" in text
