# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check of the execution environment's build context, on the Containerfile ansible-builder writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "build"))

import check_ee

ROOT = Path(__file__).resolve().parents[2]
BUILDER = shutil.which("ansible-builder") or str(Path(sys.executable).parent / "ansible-builder")


@pytest.fixture(scope="module")
def containerfile(tmp_path_factory) -> str:
    if not Path(BUILDER).exists():
        pytest.skip("ansible-builder is not installed (requirements-test.txt)")
    context = tmp_path_factory.mktemp("ee")
    subprocess.run(
        # the file's name follows the container engine found (Dockerfile where docker is and podman is not):
        # named, as `make ee` names it, so the test reads the same file on every build machine
        [
            BUILDER,
            "create",
            "--file",
            str(ROOT / "execution-environment.yml"),
            "--context",
            str(context),
            "--output-filename",
            "Containerfile",
        ],
        check=True,
        capture_output=True,
    )
    return (context / "Containerfile").read_text()


def test_the_containerfile_of_execution_environment_yml_passes(containerfile):
    assert check_ee.containerfile_problems(check_ee.stages(containerfile)) == []


def test_helm_fetched_for_the_builders_machine_only_is_refused(containerfile):
    text = containerfile.replace("ARG TARGETARCH\n", "")
    assert check_ee.containerfile_problems(check_ee.stages(text)) == [
        "Containerfile: Helm is not fetched for the target architecture (ARG TARGETARCH)"
    ]


def test_an_image_without_helm_or_runner_is_refused(containerfile):
    lines = [line for line in containerfile.splitlines() if "install_helm.py" not in line]
    text = "\n".join(lines).replace(" ansible-runner>=2.4.0", "")
    assert check_ee.containerfile_problems(check_ee.stages(text)) == [
        "Containerfile: the base stage installs no ansible-runner (ANSIBLE_INSTALL_REFS: "
        "'ARG ANSIBLE_INSTALL_REFS=\"ansible-core>=2.16.0,<2.20\"')",
        "Containerfile: the final stage does not install Helm (install_helm.py)",
    ]


def test_a_context_without_the_collection_tarball_is_refused(tmp_path, containerfile):
    build = tmp_path / "_build"
    (build / "scripts").mkdir(parents=True)
    (tmp_path / "Containerfile").write_text(containerfile)
    shutil.copy(ROOT / "requirements.txt", build / "requirements.txt")
    (build / "bindep.txt").write_text("tar\n")
    shutil.copy(ROOT / "meta" / "ee" / "requirements.yml", build / "requirements.yml")
    shutil.copy(ROOT / "meta" / "ee" / "install_helm.py", build / "scripts" / "install_helm.py")
    assert check_ee.check(tmp_path, ROOT) == [
        "_build/bindep.txt: lacks openssh-clients [platform:rpm], openssh-client [platform:dpkg], gzip of bindep.txt",
        "_build/requirements.yml: installs dist/gpu_fabric-mnnvl.tar.gz, which is not in the build context",
    ]
