# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks as a user of the built collection runs them: ``ansible-playbook gpu_fabric.mnnvl.verify``.

The collection is built with ``ansible-galaxy collection build``, installed from that tarball into a
collections path of the test's own, and run from a directory that has neither the clone's ansible.cfg nor
its layout: only the installed copy can answer to ``gpu_fabric.mnnvl``.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import REPO_ROOT, VENV_BIN, SimRack


def run(*command: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        list(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, (
        f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-6000:]}{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with an empty ansible.cfg and collections/, where the built tarball is installed."""
    work = tmp_path_factory.mktemp("installed")
    run(str(VENV_BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(work / "dist"), cwd=REPO_ROOT)
    (tarball,) = (work / "dist").glob("gpu_fabric-mnnvl-*.tar.gz")
    (work / "ansible.cfg").write_text("[defaults]\n")
    env_of = {**os.environ, "ANSIBLE_CONFIG": str(work / "ansible.cfg")}
    # --no-deps: kubernetes.core comes with the ansible package (the test machines reach no Galaxy)
    install = [str(VENV_BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(work / "collections")]
    run(*install, str(tarball), cwd=work, env=env_of)
    return work


def test_verify_runs_by_its_fqcn_from_the_installed_collection(cluster_stage: SimRack, installed: Path):
    site = installed / "site"
    site.mkdir()
    env = {
        **cluster_stage.env,
        "ANSIBLE_CONFIG": str(installed / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(installed / "collections"),
        "ANSIBLE_SHOW_CUSTOM_STATS": "true",
    }
    variables = {"gpu_fabric_verify_namespace_prefix": f"installed-{uuid.uuid4().hex[:6]}"}
    result = subprocess.run(
        [
            *(str(VENV_BIN / "ansible-playbook"), "-v", "-i", str(REPO_ROOT / "inventories" / "sim")),
            *("gpu_fabric.mnnvl.verify", "--tags", "cliques", "-e", json.dumps(variables)),
        ],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    # the play is the installed copy's: the only gpu_fabric.mnnvl on the collections path, and not the clone
    assert "running playbook inside collection gpu_fabric.mnnvl" in output
    listed = run(
        str(VENV_BIN / "ansible-galaxy"),
        "collection",
        "list",
        "gpu_fabric.mnnvl",
        "--format",
        "json",
        cwd=site,
        env=env,
    )
    assert list(json.loads(listed.stdout)) == [str(installed / "collections" / "ansible_collections")]
    assert str(REPO_ROOT / "playbooks") not in output

    # the default report directory is relative to where ansible-playbook ran, resolved to an absolute path
    report = json.loads((site / "report" / "report.json").read_text())
    assert report["verdict"] == "passed"
    assert sorted((entry["check"], entry["rack"], entry["passed"]) for entry in report["checks"]) == [
        ("cliques", "rack0", True),
        ("cliques", "rack1", True),
    ]
    stats = output.split("CUSTOM STATS:", 1)[1]
    assert '"gpu_fabric_verdict": "passed"' in stats
    assert f'"json": "{site / "report" / "report.json"}"' in stats
