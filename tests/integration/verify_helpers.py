# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running playbooks/verify.yml against the simulated rack, and reading what it leaves behind."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks

if TYPE_CHECKING:
    from conftest import SimRack

REPO_ROOT = Path(__file__).resolve().parents[2]
CHECKS = checks.names()


# What a verification may leave behind in its namespaces: nothing.
ZERO = {
    "namespaces": 0,
    "pods": 0,
    "jobs.batch": 0,
    "resourceclaims.resource.k8s.io": 0,
    "computedomains.resource.nvidia.com": 0,
    "mpijobs.kubeflow.org": 0,
}


@dataclass
class VerifyRun:
    """One run of playbooks/verify.yml: its exit code, output, report directory and namespace prefix."""

    process: subprocess.CompletedProcess
    report_dir: Path
    prefix: str = ""

    @property
    def output(self) -> str:
        return self.process.stdout + self.process.stderr

    def record(self, check: str, rack: str = "rack0") -> dict[str, Any]:
        return json.loads((self.report_dir / "records" / check / f"{rack}.json").read_text())

    def records(self) -> dict[str, dict[str, dict[str, Any]]]:
        """check -> rack -> record."""
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for path in sorted((self.report_dir / "records").glob("*/*.json")):
            found.setdefault(path.parent.name, {})[path.stem] = json.loads(path.read_text())
        return found

    def report(self) -> dict[str, Any]:
        return json.loads((self.report_dir / "report.json").read_text())

    def markdown(self) -> str:
        return (self.report_dir / "report.md").read_text()

    def html(self) -> str:
        return (self.report_dir / "report.html").read_text()

    def junit_failures(self) -> dict[tuple[str, str], str]:
        """(classname, test case name) -> failure text ('' for a passing test case)."""
        root = ET.parse(self.report_dir / "report.junit.xml").getroot()
        cases = {}
        for case in root.iter("testcase"):
            failure = case.find("failure")
            cases[(case.get("classname"), case.get("name"))] = "" if failure is None else (failure.text or "")
        return cases


@contextlib.contextmanager
def faults(sim_rack: SimRack, *specs: tuple[str, dict]):
    """The sim's faults ``(name, params)`` on while the block runs, and cleared after it, also when it fails."""
    try:
        for name, params in specs:
            sim_rack.fault(name, **params)
        yield
    finally:
        for name, _params in specs:
            sim_rack.rack("fault", "--clear", name, check=False)


def run_verify(
    sim_rack: SimRack,
    report_dir: Path | str | None,
    *args: str,
    extra_vars: dict[str, Any] | None = None,
    timeout: int = 900,
    cwd: Path = REPO_ROOT,
    env: dict[str, str] | None = None,
) -> VerifyRun:
    """verify.yml with a namespace prefix of this test (the rack is shared) and a report directory of its own
    (``None``: the default one; a relative one is relative to ``cwd``, where ansible-playbook runs)."""
    prefix = f"verify-{uuid.uuid4().hex[:6]}"
    variables = {
        **({"gpu_fabric_report_dir": str(report_dir)} if report_dir is not None else {}),
        "gpu_fabric_verify_namespace_prefix": prefix,
        "verify_imex_channel_timeout": 120,
        "verify_imex_channel_poll_delay": 1,
        "verify_nvbandwidth_timeout": 180,
        "verify_nvbandwidth_poll_delay": 1,
        "verify_nccl_timeout": 180,
        "verify_nccl_poll_delay": 1,
        **(extra_vars or {}),
    }
    process = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "verify.yml"),
            "-e",
            json.dumps(variables),
            *args,
        ],
        cwd=cwd,
        env={**sim_rack.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return VerifyRun(
        process=process, report_dir=cwd / (report_dir if report_dir is not None else "report"), prefix=prefix
    )


def verification_objects(sim_rack: SimRack, prefix: str) -> dict[str, int]:
    """Objects a verification creates, counted in the namespaces of its prefix and cluster-wide."""

    def items(*args: str) -> list[dict[str, Any]]:
        result = sim_rack.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(result.stdout)["items"] if result.returncode == 0 else []

    namespaces = [item for item in items("namespaces") if item["metadata"]["name"].startswith(prefix)]
    ours = {item["metadata"]["name"] for item in namespaces}
    # a namespace being deleted is counted by what is still in it (the check does not wait for the namespace
    # controller to remove an empty one: test_verify_stage waits for that)
    counts = {"namespaces": sum(1 for item in namespaces if not item["metadata"].get("deletionTimestamp"))}
    for kind in (
        "pods",
        "jobs.batch",
        "resourceclaims.resource.k8s.io",
        "computedomains.resource.nvidia.com",
        "mpijobs.kubeflow.org",
    ):
        counts[kind] = sum(1 for item in items(kind, "-A") if item["metadata"].get("namespace") in ours)
    return counts


def gpu_trays(sim_rack: SimRack) -> dict[str, list[str]]:
    """rack label -> tray names of the simulated rack, sorted."""
    racks: dict[str, list[str]] = {}
    for node in sim_rack.get_json("nodes")["items"]:
        rack = node["metadata"].get("labels", {}).get("gpu-fabric.sim/rack")
        if rack:
            racks.setdefault(rack, []).append(node["metadata"]["name"])
    return {
        rack: sorted(names, key=natural_key) for rack, names in sorted(racks.items(), key=lambda r: natural_key(r[0]))
    }


def natural_key(text: str) -> tuple:
    """gb200-r0-t2 before gb200-r0-t10, as the records list trays."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def cluster_stage_installed(sim_rack: SimRack) -> bool:
    crds = {item["metadata"]["name"] for item in sim_rack.get_json("crd")["items"]}
    classes = sim_rack.kubectl("get", "deviceclasses", "-o", "name", check=False).stdout.split()
    return (
        "computedomains.resource.nvidia.com" in crds
        and "mpijobs.kubeflow.org" in crds
        and "deviceclass.resource.k8s.io/compute-domain-default-channel.nvidia.com" in classes
    )


def uninstall_cluster_stage(sim_rack: SimRack) -> None:
    """As an admin would: both Helm releases, the MPI operator manifest, the CRDs, the namespaces."""
    helm = str(sim_rack.bin_dir / "helm")
    for release, namespace in (("gpu-operator", "gpu-operator"), ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")):
        subprocess.run(
            [helm, "uninstall", "-n", namespace, release, "--wait"], env=sim_rack.env, capture_output=True, check=False
        )
    with urllib.request.urlopen(sim_rack.env["GPU_FABRIC_SIM_MPI_MANIFEST_URL"], timeout=30) as response:
        manifest = response.read().decode()
    sim_rack.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", input=manifest)
    crds = ("clusterpolicies.nvidia.com", "gpuclusters.nvidia.com", "computedomains.resource.nvidia.com")
    sim_rack.kubectl("delete", "crd", "--ignore-not-found", *crds, "computedomaincliques.resource.nvidia.com")
    sim_rack.kubectl(
        "delete", "namespace", "--ignore-not-found", "--wait=true", "gpu-operator", "nvidia-dra-driver-gpu"
    )
    assert not cluster_stage_installed(sim_rack)


def apply_cluster_stage(sim_rack: SimRack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "cluster.yml"),
            *args,
        ],
        cwd=REPO_ROOT,
        env=sim_rack.env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
