# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/refresh_state.yml: the Node state between runs, node_verdict with state refreshed and the site's required
checks, run on the controller (no cluster here: an API server that does not answer shows the module was reached)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO_ROOT / "playbooks" / "refresh_state.yml"
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
INVENTORY = {
    "all": {
        "children": {
            "k8s_controller": {
                "hosts": {
                    "localhost": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                    }
                }
            }
        }
    }
}


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(INVENTORY))
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        K8S_AUTH_HOST="https://127.0.0.1:9",
        K8S_AUTH_API_KEY="none",
    )
    return subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(PLAYBOOK), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_playbook_refreshes_with_the_sites_required_checks():
    (play,) = yaml.safe_load(PLAYBOOK.read_text())
    (task,) = play["tasks"]
    assert task["gpu_fabric.mnnvl.node_verdict"] == {
        "state": "refreshed",
        "required_checks": "{{ gpu_fabric_verify_required_checks }}",
        "label": "{{ gpu_fabric_verify_label_nodes | default(false) | bool }}",
        "condition": "{{ gpu_fabric_verify_node_condition | default(false) | bool }}",
    }
    assert play["hosts"] == "k8s_controller" and play["roles"] == [{"role": "gpu_fabric.mnnvl.gpu_fabric"}]


def test_without_the_node_state_on_nothing_is_refreshed(tmp_path):
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipping: [localhost]" in result.stdout


def test_with_the_labels_on_it_calls_node_verdict_on_the_cluster(tmp_path):
    result = run(tmp_path, "-e", "gpu_fabric_verify_label_nodes=true")
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "cannot reach the Kubernetes API at https://127.0.0.1:9: connection refused (connect to the Kubernetes API "
        "after 4 attempts)" in " ".join((result.stdout + result.stderr).split())
    )
