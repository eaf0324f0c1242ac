# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The values every role shares live once, in the gpu_fabric role (kubespray's kubespray_defaults pattern).

The roles that depend on it read them as they are (no fallback of their own, no K8S_AUTH_* written by hand), and
Ansible resolves them as a user meets them: the shared value, or the role's own variable where it is set.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
SPEC = yaml.safe_load((ROLES / "gpu_fabric" / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
DEFAULTS = yaml.safe_load((ROLES / "gpu_fabric" / "defaults" / "main.yml").read_text())
SHARED_FALLBACK = re.compile(r"\b(" + "|".join(sorted(SPEC["options"], key=len, reverse=True)) + r")\s*\|\s*default\(")


def dependents() -> List[str]:
    found = []
    for meta in sorted(ROLES.glob("*/meta/main.yml")):
        dependencies = yaml.safe_load(meta.read_text()).get("dependencies") or []
        if any(isinstance(dep, dict) and dep.get("role") == "gpu_fabric.mnnvl.gpu_fabric" for dep in dependencies):
            found.append(meta.parent.parent.name)
    return found


def test_every_shared_value_is_declared_and_every_declared_one_is_defined():
    # the release set's name is left unset: release_sets.py holds the sets and the default one
    assert set(DEFAULTS) == set(SPEC["options"]) - {"gpu_fabric_release_set"}
    assert not (ROLES / "gpu_fabric" / "tasks").exists()  # defaults only, as kubespray_defaults


def test_the_roles_that_read_shared_values_depend_on_the_gpu_fabric_role():
    host = {"preflight", "nvidia_driver", "containerd", "nvidia_imex"}
    cluster = {"cluster_preflight", "gpu_operator", "dra_driver", "mpi_operator", "uninstall", "report"}
    assert host | cluster <= set(dependents())


@pytest.mark.parametrize("role", dependents())
def test_a_dependent_role_reads_the_shared_values_without_a_copy_of_its_own(role):
    copies = []
    for path in sorted((ROLES / role).glob("defaults/*.yml")) + sorted((ROLES / role).glob("tasks/*.yml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{number}: {line.strip()}"
            # a fallback for an empty value (`| default(x, true)`) is the role's own choice, not a copy
            copies += [where for match in SHARED_FALLBACK.finditer(line) if ", true)" not in line[match.end() :]]
            if "K8S_AUTH_" in line and not line.lstrip().startswith("#"):
                copies.append(where)
    assert copies == []


PLAY = """
- name: Resolve the shared values as the roles see them
  hosts: localhost
  gather_facts: false
  roles:
    - role: gpu_fabric.mnnvl.dra_driver
      when: false
    - role: gpu_fabric.mnnvl.nvidia_imex
      when: false
    - role: gpu_fabric.mnnvl.uninstall
      when: false
  tasks:
    - name: Write what they resolve to
      ansible.builtin.copy:
        dest: "{{ out }}"
        mode: "0600"
        content: "{{ resolved | to_json }}"
      vars:
        resolved:
          dra_driver_environment: >-
            {{ dra_driver_kubeconfig | gpu_fabric.mnnvl.k8s_auth_environment(dra_driver_kube_context) }}
          shared_environment: "{{ gpu_fabric_k8s_auth_environment }}"
          dra_driver_driver_owner: "{{ dra_driver_driver_owner }}"
          dra_driver_namespace: "{{ dra_driver_namespace }}"
          dra_driver_chart_version: "{{ dra_driver_chart_version }}"
          nvidia_imex_driver_root: "{{ nvidia_imex_driver_root }}"
          uninstall_dra_driver_namespace: "{{ uninstall_dra_driver_namespace }}"
          uninstall_gpu_operator_namespace: "{{ uninstall_gpu_operator_namespace }}"
"""


def resolve(tmp_path: Path, *extra_vars: str) -> Dict[str, Any]:
    play, out = tmp_path / "play.yml", tmp_path / "resolved.json"
    play.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    given = (f"out={out}", f"ansible_python_interpreter={sys.executable}", *extra_vars)
    args = [arg for extra in given for arg in ("-e", extra)]
    run = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(play), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(out.read_text())


def test_the_shared_defaults_reach_every_role(tmp_path):
    assert resolve(tmp_path) == {
        "dra_driver_environment": {},
        "shared_environment": {},
        "dra_driver_driver_owner": "operator",
        "dra_driver_namespace": "nvidia-dra-driver-gpu",
        "dra_driver_chart_version": "0.4.1",
        "nvidia_imex_driver_root": "/run/nvidia/driver",
        "uninstall_dra_driver_namespace": "nvidia-dra-driver-gpu",
        "uninstall_gpu_operator_namespace": "gpu-operator",
    }


def test_a_shared_value_set_once_moves_every_role_and_a_role_variable_still_wins(tmp_path):
    resolved = resolve(
        tmp_path,
        "gpu_fabric_kubeconfig=/srv/rack.kubeconfig",
        "gpu_fabric_driver_owner=host",
        "gpu_fabric_release_set=25.10",
        "gpu_fabric_dra_driver_namespace=dra",
        "dra_driver_kube_context=rack0",
        "nvidia_imex_driver_owner=operator",
        "gpu_operator_namespace=gpu",
    )
    assert resolved == {
        "dra_driver_environment": {"K8S_AUTH_KUBECONFIG": "/srv/rack.kubeconfig", "K8S_AUTH_CONTEXT": "rack0"},
        "shared_environment": {"K8S_AUTH_KUBECONFIG": "/srv/rack.kubeconfig"},
        "dra_driver_driver_owner": "host",
        "dra_driver_namespace": "dra",
        "dra_driver_chart_version": "25.8.0",
        "nvidia_imex_driver_root": "/run/nvidia/driver",
        "uninstall_dra_driver_namespace": "dra",
        "uninstall_gpu_operator_namespace": "gpu",
    }


def test_the_required_checks_default_is_the_python_constant_and_the_checks_of_a_default_verify_run():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import DEFAULT_REQUIRED_CHECKS

    assert DEFAULTS["gpu_fabric_verify_required_checks"] == list(DEFAULT_REQUIRED_CHECKS)
    assert SPEC["options"]["gpu_fabric_verify_required_checks"]["default"] == list(DEFAULT_REQUIRED_CHECKS)
    # a default verify.yml run: the roles it runs without a `when`, and no check of the generic role (opt-in)
    play = yaml.safe_load((REPO / "playbooks" / "verify.yml").read_text())[0]
    always = [role["role"].rsplit(".", 1)[1] for role in play["roles"] if "when" not in role]
    ran = [name.removeprefix("verify_") for name in always if name.removeprefix("verify_") in checks.names()]
    assert ran == list(DEFAULT_REQUIRED_CHECKS)
    assert (
        yaml.safe_load((ROLES / "verify_checks" / "defaults" / "main.yml").read_text())["verify_checks_enabled"]
        == "{{ gpu_fabric_verify_checks | default([]) }}"
    )
