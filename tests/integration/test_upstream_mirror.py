# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster and verify stages against a site's mirror of the REAL upstream artifacts.

Set GPU_FABRIC_UPSTREAM_DIR to a directory holding what a site mirrors (see MAKE_THE_DIRECTORY): the
GPU Operator and DRA driver charts as `helm pull` saves them, and the MPI operator manifest. The test
makes the directory a Helm repository (`helm repo index`), serves it on 127.0.0.1, uninstalls the stand-in
releases (so that nothing of theirs is left to pass for the real ones), and runs playbooks/cluster.yml then
playbooks/verify.yml on the simulated rack, overriding only gpu_operator_chart_repo_url,
dra_driver_chart_repo_url and mpi_operator_manifest_url. The installed GPU Operator release must hold what only
the real chart holds (its node-feature-discovery subchart); the NVIDIA controllers stay the sim's stand-ins,
which deploy the operands from the real chart's ClusterPolicy. At the end the stand-ins are installed again, as
the other tests expect them.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import release_set
from verify_helpers import (
    REPO_ROOT,
    ZERO,
    apply_cluster_stage,
    gpu_trays,
    run_verify,
    uninstall_cluster_stage,
    verification_objects,
)

if TYPE_CHECKING:
    from conftest import SimRack

# The release set whose real artifacts the directory holds (GPU_FABRIC_UPSTREAM_RELEASE_SET; the default set).
RELEASES = release_set(os.environ.get("GPU_FABRIC_UPSTREAM_RELEASE_SET", "")).as_vars()
GPU_OPERATOR = ("gpu-operator", RELEASES["gpu_operator_chart_version"])
DRA_DRIVER = (RELEASES["dra_driver_chart_name"], RELEASES["dra_driver_chart_version"])
MPI_MANIFEST = "mpi-operator.yaml"
DRA_REPO = RELEASES["dra_driver_chart_repo_url"]
DRA_PULL = f"{DRA_REPO}/{DRA_DRIVER[0]}" if DRA_REPO.startswith("oci://") else f"{DRA_DRIVER[0]} --repo {DRA_REPO}"
MAKE_THE_DIRECTORY = (
    "set GPU_FABRIC_UPSTREAM_DIR to a directory made with (GPU_FABRIC_UPSTREAM_RELEASE_SET=25.10: the guide's set):\n"
    f"  helm pull {GPU_OPERATOR[0]} --repo https://helm.ngc.nvidia.com/nvidia --version {GPU_OPERATOR[1]} -d DIR\n"
    f"  helm pull {DRA_PULL} --version {DRA_DRIVER[1]} -d DIR\n"
    f"  curl -fsSLo DIR/{MPI_MANIFEST} {RELEASES['mpi_operator_manifest_url']}"
)

pytestmark = [
    pytest.mark.sim,
    pytest.mark.skipif(not os.environ.get("GPU_FABRIC_UPSTREAM_DIR"), reason=MAKE_THE_DIRECTORY.replace("\n", " ")),
]


@pytest.fixture
def mirror(sim_rack: SimRack, tmp_path):
    """The upstream directory as a Helm repository and a web server on 127.0.0.1: its base URL."""
    source = Path(os.environ["GPU_FABRIC_UPSTREAM_DIR"])
    wanted = [f"{GPU_OPERATOR[0]}-{GPU_OPERATOR[1]}.tgz", f"{DRA_DRIVER[0]}-{DRA_DRIVER[1]}.tgz", MPI_MANIFEST]
    missing = [name for name in wanted if not (source / name).is_file()]
    if missing:
        pytest.fail(f"{source} lacks {', '.join(missing)}; {MAKE_THE_DIRECTORY}")
    served = tmp_path / "mirror"
    served.mkdir()
    for name in wanted:
        shutil.copy(source / name, served / name)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    helm = sim_rack.bin_dir / "helm"
    subprocess.run([str(helm if helm.exists() else "helm"), "repo", "index", str(served), "--url", url], check=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url
    server.shutdown()
    server.server_close()


def playbook(sim_rack: SimRack, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / name),
            *args,
        ],
        cwd=REPO_ROOT,
        env=sim_rack.env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def test_cluster_then_verify_pass_against_the_sites_mirror(sim_rack: SimRack, mirror: str, tmp_path):
    urls = [
        "-e",
        f"gpu_fabric_release_set={RELEASES['name']}",
        "-e",
        f"gpu_operator_chart_repo_url={mirror}",
        "-e",
        f"dra_driver_chart_repo_url={mirror}",
        "-e",
        f"mpi_operator_manifest_url={mirror}/{MPI_MANIFEST}",
    ]
    try:
        uninstall_cluster_stage(sim_rack)
        cluster = playbook(sim_rack, "cluster.yml", *urls)
        assert cluster.returncode == 0, (cluster.stdout + cluster.stderr)[-8000:]
        releases = sim_rack.kubectl("get", "secrets", "-A", "-l", "owner=helm", "-o", "name").stdout
        assert releases, "no Helm release was installed"
        charts = subprocess.run(
            [str(sim_rack.bin_dir / "helm"), "list", "-A", "-o", "yaml"],
            env=sim_rack.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        installed = {r["chart"] for r in yaml.safe_load(charts)}
        assert f"{GPU_OPERATOR[0]}-{GPU_OPERATOR[1]}" in installed and f"{DRA_DRIVER[0]}-{DRA_DRIVER[1]}" in installed
        manifest = subprocess.run(
            [str(sim_rack.bin_dir / "helm"), "get", "manifest", "gpu-operator", "-n", "gpu-operator"],
            env=sim_rack.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        kinds = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(manifest) if d}
        assert any("node-feature-discovery" in name for _kind, name in kinds), "not the real chart: no NFD subchart"
        assert not [name for kind, name in kinds if kind == "DaemonSet" and name.startswith("nvidia-")]
        operands = sim_rack.get_json("daemonsets", "-n", "gpu-operator")["items"]
        owned = {
            d["metadata"]["name"]
            for d in operands
            if any(ref["kind"] == "ClusterPolicy" for ref in d["metadata"].get("ownerReferences") or [])
        }
        assert {"nvidia-device-plugin-daemonset", "nvidia-container-toolkit-daemonset"} <= owned

        racks = gpu_trays(sim_rack)
        run = run_verify(sim_rack, tmp_path / "report")
        assert run.process.returncode == 0, run.output[-6000:]
        for check, by_rack in run.records().items():
            assert sorted(by_rack) == sorted(racks), check
            assert all(r["outcome"] == "passed" for r in by_rack.values()), check
        assert verification_objects(sim_rack, run.prefix) == ZERO
    finally:
        # the stand-ins again, for the tests that share the rack; the real MPI operator Deployment has another
        # (immutable) selector than the stand-in's, so it goes first
        # uninstalled first: the stand-in releases have the real ones' names and versions, so an install over
        # them would find nothing to change and leave the real charts in place
        sim_rack.kubectl("delete", "deployment", "mpi-operator", "-n", "mpi-operator", "--wait=true", check=False)
        uninstall_cluster_stage(sim_rack)
        restored = apply_cluster_stage(sim_rack)  # the default set
        assert restored.returncode == 0, (restored.stdout + restored.stderr)[-4000:]
