# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The variable check as a user meets it: the stages' playbooks in check mode on the controller alone, no cluster.

A wrong shared variable fails the play in one line that names the variable as the user wrote it, and the uninstall
checks its variables too and says in one line which variable brings the MPI operator manifest when it cannot read it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
CONTROLLER = {
    "k8s_controller": {
        "hosts": {
            "localhost": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            }
        }
    },
    "gpu_nodes": {"hosts": {}},
}


@pytest.fixture(scope="module")
def inventory(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("inventory") / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": CONTROLLER}}))
    return path


def errors(inventory: Path, name: str, *extra_vars: str) -> List[str]:
    """The ``[ERROR]`` lines of a check-mode run that must fail; no kubeconfig, so no cluster is reached."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        K8S_AUTH_KUBECONFIG=str(inventory.parent / "no-kubeconfig"),
    )
    args = [arg for extra in extra_vars for arg in ("-e", extra)]
    run = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(REPO_ROOT / "playbooks" / name), "--check", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode != 0, run.stdout
    return [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("[ERROR]")]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_wrong_type_in_a_shared_variable_fails_the_verify_stage_first_in_one_line_naming_it(inventory):
    [line] = errors(inventory, "verify.yml", "gpu_fabric_verify_parallel_racks=eight")
    assert line == (
        "[ERROR]: Task failed: Action failed: role verify_common: argument 'gpu_fabric_verify_parallel_racks' is of "
        "type str and we were unable to convert to int: \"'eight'\" cannot be converted to an int"
    )


def test_one_bad_value_of_a_shared_variable_is_said_once_by_the_cluster_stage(inventory):
    [line] = errors(inventory, "cluster.yml", "gpu_fabric_driver_owner=bogus")
    said = "value of gpu_fabric_driver_owner must be one of: operator, host, got: bogus"
    assert line.count("bogus") == 1 and said in line
    assert "dra_driver_driver_owner" not in line and "gpu_operator_driver_owner" not in line


def test_the_uninstall_refuses_a_misspelled_variable_before_anything_runs(inventory):
    assert errors(inventory, "uninstall.yml", "gpu_fabric_uninstall_crd=true") == [
        "[ERROR]: Task failed: Action failed: gpu_fabric_uninstall_crd (did you mean gpu_fabric_uninstall_crds?) is "
        "not a variable of the gpu_fabric.mnnvl roles (misspelled in the inventory or the extra vars?); the roles' "
        "variables are listed in roles/<role>/meta/argument_specs.yml"
    ]


def test_the_uninstall_without_its_manifest_names_the_variables_that_bring_it(inventory):
    url = f"http://127.0.0.1:{closed_port()}/mpi-operator.yaml"
    [line] = errors(inventory, "uninstall.yml", f"mpi_operator_manifest_url={url}")
    assert line.startswith(f"[ERROR]: Task failed: Action failed: cannot read the MPI operator manifest from {url} (")
    assert line.endswith(
        "); the uninstall reads it to find the MPI operator's objects: set mpi_operator_manifest_src to a copy of it "
        "on the controller, or mpi_operator_manifest_url (or gpu_fabric_download_mirror) to where this site serves "
        "it. Nothing was removed."
    )
