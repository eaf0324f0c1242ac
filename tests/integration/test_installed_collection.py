# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The playbooks as a user of the built collection runs them: ``ansible-playbook gpu_fabric.mnnvl.verify``.

The collection is built with ``ansible-galaxy collection build``, installed from that tarball into a
collections path of the test's own, and run from a directory that has neither the clone's ansible.cfg nor
its layout: only the installed copy can answer to ``gpu_fabric.mnnvl``. The README's "Using it" commands
run as written, from an empty directory with a home of their own.
"""

from __future__ import annotations

import json
import os
import re
import shlex
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


def readme_using_it() -> list[str]:
    """The commands of the README's "Using it" block, without their comments."""
    text = (REPO_ROOT / "README.md").read_text()
    block = text[text.index("\n## Using it\n") :].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split(" #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def as_run_here(command: str, tarball: Path) -> str:
    """A README command as this test runs it: the test machines reach neither Galaxy nor a package index."""
    if command.startswith("python3 -m pip install"):
        words = shlex.split(command, posix=False)
        # the venv holds the packages; a requirements file named must exist where the README says
        return f"test -f {words[words.index('-r') + 1]}" if "-r" in words else "true"
    if command.startswith("ansible-galaxy collection install "):
        # --no-deps: kubernetes.core comes with the ansible package
        return re.sub(r"\S*gpu_fabric-mnnvl-\S+\.tar\.gz", shlex.quote(str(tarball)), command) + " --no-deps"
    if command.startswith("ansible-playbook "):
        return f"{command} --syntax-check"  # no trays and no cluster behind the example inventory
    return command


def test_the_readme_using_it_commands_work_outside_a_clone(installed: Path, tmp_path: Path):
    (tarball,) = (installed / "dist").glob("gpu_fabric-mnnvl-*.tar.gz")
    home, site = tmp_path / "home", tmp_path / "controller"
    home.mkdir()
    site.mkdir()
    commands = readme_using_it()
    assert not (site / "inventories").exists()
    env = {name: value for name, value in os.environ.items() if not name.startswith("ANSIBLE_")}
    env.update(HOME=str(home), PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    script = "\n".join(as_run_here(command, tarball) for command in commands)
    result = subprocess.run(
        ["bash", "-euxo", "pipefail", "-c", script],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{script}\n{output[-6000:]}"

    collections = home / ".ansible" / "collections" / "ansible_collections"
    manifest = json.loads((collections / "gpu_fabric" / "mnnvl" / "MANIFEST.json").read_text())
    assert tarball.name == f"gpu_fabric-mnnvl-{manifest['collection_info']['version']}.tar.gz"
    assert (site / "inventories" / "mysite" / "hosts.yml").is_file()
    assert (site / "inventories" / "mysite" / "group_vars" / "all.yml").is_file()
    played = [
        re.search(r"gpu_fabric\.mnnvl\.[a-z_]+", command).group(0)
        for command in commands
        if "ansible-playbook" in command
    ]
    assert played == ["gpu_fabric.mnnvl.site", "gpu_fabric.mnnvl.verify", "gpu_fabric.mnnvl.cluster"]
    for name in played:  # each one resolved to the installed copy
        assert f"playbook: {collections}/gpu_fabric/mnnvl/playbooks/{name.split('.')[-1]}.yml" in output
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
    assert list(json.loads(listed.stdout)) == [str(collections)]


def run_installed(installed: Path, tmp_path: Path, *args: str, kubeconfig: str = "") -> subprocess.CompletedProcess:
    """``ansible-playbook gpu_fabric.mnnvl.verify`` from the installed copy, in a directory of its own, with a
    controller inventory and no connection of the caller's; the json callback's output."""
    (tmp_path / "hosts.yml").write_text(
        "k8s_controller:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {VENV_BIN / 'python'}\n"
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANSIBLE_", "K8S_AUTH_"))}
    env.update(
        ANSIBLE_CONFIG=str(installed / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(installed / "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_SHOW_CUSTOM_STATS="true",
        KUBECONFIG=kubeconfig or str(tmp_path / "no-kubeconfig"),
    )
    command = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "gpu_fabric.mnnvl.verify", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_installed_verify_answers_an_api_server_that_does_not_answer_once_in_check_mode(
    installed: Path, tmp_path: Path
):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "current-context: c\n"
    )
    result = run_installed(
        installed, tmp_path, "--check", "-e", "gpu_fabric_verify_api_patience=2", kubeconfig=str(kubeconfig)
    )
    # before: exit 0, each check waiting 90 s for the API server again
    assert result.returncode == 2, result.stdout[-4000:] + result.stderr[-2000:]
    stats = json.loads(result.stdout)["global_custom_stats"]
    assert stats["gpu_fabric_verdict"] == "error"
    assert (
        "cannot reach the Kubernetes API at https://127.0.0.1:1 for 2 s: connection refused"
        in (stats["gpu_fabric_summary"])
    )


def test_the_installed_verify_with_tags_of_another_stage_needs_no_cluster_and_writes_no_report(
    installed: Path, tmp_path: Path
):
    result = run_installed(installed, tmp_path, "--tags", "cluster")
    # before: the report step failed ("the records directory ... does not exist; run the verify roles first")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert not (tmp_path / "report").exists()
    assert "select no check of the verify stage; no report written" in result.stdout
