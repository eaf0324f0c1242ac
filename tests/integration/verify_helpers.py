# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running playbooks/verify.yml against the simulated rack, and reading what it leaves behind."""

from __future__ import annotations

import json
import subprocess
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import SimRack

REPO_ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("cliques", "imex_channel", "nvbandwidth", "nccl")


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
    """One run of playbooks/verify.yml: its exit code, output, report directory and namespaces."""

    process: subprocess.CompletedProcess
    report_dir: Path
    namespaces: dict[str, str] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.process.stdout + self.process.stderr

    def record(self, check: str) -> dict[str, Any]:
        return json.loads((self.report_dir / "records" / f"{check}.json").read_text())

    def records(self) -> dict[str, dict[str, Any]]:
        return {path.stem: json.loads(path.read_text()) for path in (self.report_dir / "records").glob("*.json")}

    def markdown(self) -> str:
        return (self.report_dir / "report.md").read_text()

    def html(self) -> str:
        return (self.report_dir / "report.html").read_text()

    def junit_failures(self) -> dict[str, str]:
        """testcase name -> failure text ('' for a passing test case)."""
        root = ET.parse(self.report_dir / "report.junit.xml").getroot()
        cases = {}
        for case in root.iter("testcase"):
            failure = case.find("failure")
            cases[case.get("name")] = "" if failure is None else (failure.text or "")
        return cases


def unique_namespaces() -> dict[str, str]:
    suffix = uuid.uuid4().hex[:6]
    return {check: f"verify-{check.replace('_', '-')}-{suffix}" for check in ("imex_channel", "nvbandwidth", "nccl")}


def run_verify(
    sim_rack: SimRack, report_dir: Path, *args: str, extra_vars: dict[str, Any] | None = None, timeout: int = 900
) -> VerifyRun:
    """verify.yml with namespaces of this test (the rack is shared) and a report directory of its own."""
    namespaces = unique_namespaces()
    variables = {
        "gpu_fabric_report_dir": str(report_dir),
        "verify_imex_channel_namespace": namespaces["imex_channel"],
        "verify_nvbandwidth_namespace": namespaces["nvbandwidth"],
        "verify_nccl_namespace": namespaces["nccl"],
        "verify_imex_channel_timeout": 120,
        "verify_imex_channel_poll_delay": 1,
        "verify_nvbandwidth_timeout": 180,
        "verify_nvbandwidth_poll_delay": 2,
        "verify_nccl_timeout": 180,
        "verify_nccl_poll_delay": 2,
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
        cwd=REPO_ROOT,
        env=sim_rack.env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return VerifyRun(process=process, report_dir=report_dir, namespaces=namespaces)


def verification_objects(sim_rack: SimRack, namespaces: dict[str, str]) -> dict[str, int]:
    """Objects a verification creates, counted in its namespaces and cluster-wide."""

    def count(*args: str) -> int:
        result = sim_rack.kubectl("get", *args, "-o", "json", check=False)
        if result.returncode != 0:
            return 0
        return len(json.loads(result.stdout)["items"])

    ours = set(namespaces.values())
    existing = {item["metadata"]["name"] for item in sim_rack.get_json("namespaces")["items"]}
    counts = {"namespaces": len(ours & existing)}
    for kind in ("pods", "jobs.batch", "resourceclaims.resource.k8s.io"):
        counts[kind] = sum(count(kind, "-n", name) for name in ours & existing)
    for kind in ("computedomains.resource.nvidia.com", "mpijobs.kubeflow.org"):
        result = sim_rack.kubectl("get", kind, "-A", "-o", "json", check=False)
        items = json.loads(result.stdout)["items"] if result.returncode == 0 else []
        counts[kind] = sum(1 for item in items if item["metadata"]["namespace"] in ours)
    return counts


def cluster_stage_installed(sim_rack: SimRack) -> bool:
    crds = {item["metadata"]["name"] for item in sim_rack.get_json("crd")["items"]}
    classes = sim_rack.kubectl("get", "deviceclasses", "-o", "name", check=False).stdout.split()
    return (
        "computedomains.resource.nvidia.com" in crds
        and "mpijobs.kubeflow.org" in crds
        and "deviceclass.resource.k8s.io/compute-domain-default-channel.nvidia.com" in classes
    )


def apply_cluster_stage(sim_rack: SimRack) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "cluster.yml"),
        ],
        cwd=REPO_ROOT,
        env=sim_rack.env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
