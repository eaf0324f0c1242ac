# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The variable check as a user meets it: the stages' playbooks in check mode on the controller alone, no cluster.

A wrong shared variable fails the play in one line that names the variable as the user wrote it, and the uninstall
checks its variables too and says in one line which variable brings the MPI operator manifest when it cannot read it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

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


def failed_run(inventory: Path, name: str, *extra_vars: str, kubeconfig: Optional[Path] = None, tags: str = "") -> str:
    """The output of a check-mode run that must fail; without ``kubeconfig`` no kubeconfig, so no cluster is
    reached."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        K8S_AUTH_KUBECONFIG=str(kubeconfig or inventory.parent / "no-kubeconfig"),
    )
    args = [arg for extra in extra_vars for arg in ("-e", extra)] + (["--tags", tags] if tags else [])
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
    return run.stdout + run.stderr


# What verify.yml says last when it was refused (roles/report/tasks/refused.yml): the run still answers.
REFUSED = "[ERROR]: Task failed: Action failed: ERROR: the run was refused at the task "


def error_lines(name: str, output: str) -> List[str]:
    """The ``[ERROR]`` lines of a run's output; of verify.yml, those before the refusal's, which must end it."""
    lines = [line for line in output.splitlines() if line.startswith("[ERROR]")]
    if name == "verify.yml":
        assert lines[-1].startswith(REFUSED), lines
        lines = lines[:-1]
    return lines


def errors(
    inventory: Path, name: str, *extra_vars: str, kubeconfig: Optional[Path] = None, tags: str = ""
) -> List[str]:
    """The ``[ERROR]`` lines of a check-mode run that must fail."""
    return error_lines(name, failed_run(inventory, name, *extra_vars, kubeconfig=kubeconfig, tags=tags))


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory) -> Path:
    """A kubeconfig that loads, of an API server that does not answer (nothing here connects to it)."""
    path = tmp_path_factory.mktemp("kube") / "kubeconfig"
    cluster = {"name": "rack", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "admin", "user": {"token": "t"}}],
                "contexts": [{"name": "rack", "context": {"cluster": "rack", "user": "admin"}}],
                "current-context": "rack",
            }
        )
    )
    return path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_wrong_type_in_a_shared_variable_fails_the_verify_stage_first_in_one_line_naming_it(inventory):
    [line] = errors(inventory, "verify.yml", "gpu_fabric_verify_parallel_racks=eight")
    assert line == (
        "[ERROR]: Task failed: Action failed: role verify_common: gpu_fabric_verify_parallel_racks is 'eight': give a "
        "whole number of racks"
    )


def test_a_word_for_a_number_of_hours_says_so_and_names_no_internal_class(inventory):
    [line] = errors(inventory, "verify.yml", "gpu_fabric_verify_valid_hours=week")
    assert line == (
        "[ERROR]: Task failed: Action failed: role report: gpu_fabric_verify_valid_hours is 'week': give a number of "
        "hours"
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
    assert line == (
        f"[ERROR]: Task failed: Action failed: cannot download the MPI operator manifest from {url}: Connection "
        "refused; set mpi_operator_manifest_url or gpu_fabric_download_mirror or mpi_operator_manifest_src to a copy "
        "the host can read (the uninstall reads it to find the MPI operator's objects); nothing was removed"
    )


def test_the_mpi_operator_install_without_its_manifest_says_the_same_in_one_line(inventory):
    url = f"http://127.0.0.1:{closed_port()}/mpi-operator.yaml"
    [line] = errors(inventory, "cluster.yml", f"mpi_operator_manifest_url={url}", tags="mpi_operator")
    assert line == (
        f"[ERROR]: Task failed: Action failed: cannot download the MPI operator manifest from {url}: Connection "
        "refused; set mpi_operator_manifest_url or gpu_fabric_download_mirror or mpi_operator_manifest_src to a copy "
        "the host can read"
    )


FIRST_CHECK = "TASK [gpu_fabric.mnnvl.verify_common : Run on every rack the check"


def test_a_misspelled_check_fails_the_verify_stage_before_the_first_check_naming_the_nearest(inventory, kubeconfig):
    output = failed_run(inventory, "verify.yml", "gpu_fabric_verify_checks=gpu_helth", kubeconfig=kubeconfig)
    assert error_lines("verify.yml", output) == [
        "[ERROR]: Task failed: Module failed: gpu_fabric_verify_checks names 'gpu_helth', which is no check (did you "
        "mean gpu_health?); the checks are cliques, imex_channel, nvbandwidth, nccl, gpu_health, dcgm_diag"
    ]
    assert FIRST_CHECK not in output


def test_what_a_check_refuses_in_its_settings_fails_the_verify_stage_before_the_first_check(inventory, kubeconfig):
    settings = json.dumps(
        {
            "gpu_fabric_verify_checks": "gpu_health",
            "gpu_fabric_verify_settings": {"gpu_health": {"xid_window_hours": -1}},
        }
    )
    output = failed_run(inventory, "verify.yml", settings, kubeconfig=kubeconfig)
    assert error_lines("verify.yml", output) == [
        "[ERROR]: Task failed: Module failed: gpu_fabric_verify_settings: gpu_health.xid_window_hours is -1: 0 (since "
        "boot) or more"
    ]
    assert FIRST_CHECK not in output


def test_the_metrics_settings_fail_the_verify_stage_before_the_first_check(inventory, kubeconfig, tmp_path):
    textfile = tmp_path / "absent" / "gpu-fabric.prom"
    output = failed_run(
        inventory,
        "verify.yml",
        f"gpu_fabric_verify_metrics_textfile={textfile}",
        "gpu_fabric_verify_pushgateway_url=pushgateway:9091",
        kubeconfig=kubeconfig,
    )
    assert (
        f"[ERROR]: Task failed: Module failed: gpu_fabric_verify_metrics_textfile: textfile {textfile} cannot be "
        f"written: its directory {textfile.parent} does not exist; create it (node-exporter's "
        "--collector.textfile.directory) or set textfile (report_metrics_textfile) to a file in that directory"
        "\ngpu_fabric_verify_pushgateway_url: pushgateway_url 'pushgateway:9091' is not "
        "an http(s) URL; expected e.g. http://pushgateway.monitoring:9091\n"
    ) in output
    assert FIRST_CHECK not in output


def test_a_missing_kubeconfig_fails_the_verify_stage_naming_the_path_and_the_variable(inventory):
    path = inventory.parent / "no-kubeconfig"
    assert errors(inventory, "verify.yml") == [
        f"[ERROR]: Task failed: Module failed: the kubeconfig {path} (K8S_AUTH_KUBECONFIG) does not exist: set "
        "K8S_AUTH_KUBECONFIG to the kubeconfig file of the cluster"
    ]
    assert errors(inventory, "verify.yml", f"gpu_fabric_kubeconfig={path}") == [
        f"[ERROR]: Task failed: Module failed: the kubeconfig {path} (gpu_fabric_kubeconfig) does not exist: set "
        "gpu_fabric_kubeconfig to the kubeconfig file of the cluster"
    ]


def test_a_release_set_that_yaml_read_as_a_number_says_to_quote_it(inventory):
    [line] = errors(inventory, "cluster.yml", '{"gpu_fabric_release_set": 25.10}')
    assert line == (
        "[ERROR]: Task failed: Action failed: role gpu_fabric: value of gpu_fabric_release_set must be one of: 26.7, "
        "25.10, got: 25.1; YAML reads an unquoted 25.10 as the number 25.1: quote it ('25.10')"
    )
