# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""mirror_settings: the module in process, and its action plugin through ansible-playbook (on the controller)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.modules import mirror_settings

from tests.unit.plugins.modules.runner import run_module

REPO_ROOT = Path(__file__).resolve().parents[4]
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: mpi-operator, namespace: mpi-operator}
spec:
  template:
    spec:
      containers:
        - {name: mpi-operator, image: "mpioperator/mpi-operator:0.6.0"}
"""


def test_the_module_mirrors_a_manifest_urls_and_charts():
    result = run_module(
        mirror_settings.main,
        {
            "registry": "registry.example.com/mirror",
            "pull_secrets": ["mirror-pull"],
            "download_mirror": "https://files.example.com/gpu",
            "urls": {"manifest": "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.6.0/x.yaml"},
            "manifest": MANIFEST,
        },
    )
    assert result["failed"] is False and result["changed"] is False
    spec = result["manifest_objects"][0]["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "registry.example.com/mirror/mpioperator/mpi-operator:0.6.0"
    assert spec["imagePullSecrets"] == [{"name": "mirror-pull"}]
    assert result["urls"]["manifest"].startswith("https://files.example.com/gpu/")


def test_a_manifest_that_is_not_yaml_is_one_line():
    result = run_module(mirror_settings.main, {"manifest": "kind: [unclosed"})
    assert result["failed"] is True
    assert result["msg"].startswith("the manifest is not YAML: ") and "\n" not in result["msg"]


PLAYBOOK = """\
- name: Mirror settings for a host that cannot be reached
  hosts: all
  gather_facts: false
  tasks:
    - name: Compute on the controller
      gpu_fabric.mnnvl.mirror_settings:
        registry: registry.example.com/mirror
        images:
          operator: mpioperator/mpi-operator:0.6.0
      register: mirrored

    - name: Keep the result
      ansible.builtin.copy:
        content: "{{ mirrored | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      delegate_to: localhost
      connection: local
      vars:
        ansible_python_interpreter: "{{ ansible_playbook_python }}"

    - name: A bad manifest fails the task
      gpu_fabric.mnnvl.mirror_settings:
        manifest: "kind: [unclosed"
"""


def test_the_action_runs_on_the_controller_without_reaching_the_host(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    completed = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "tray.invalid,",  # no such host: a module would fail unreachable
            "-e",
            f"out={out}",
            str(playbook),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "unreachable=0" in completed.stdout
    assert json.loads(out.read_text())["images"] == {
        "operator": "registry.example.com/mirror/mpioperator/mpi-operator:0.6.0"
    }
    assert "the manifest is not YAML: " in completed.stdout
