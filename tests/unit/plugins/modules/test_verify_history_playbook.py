# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""playbooks/verify.yml keeps every run: two started at once both land in the history, a third pins the first.

The kubeconfig points at an API server that answers the preflight and is unavailable to every other call, so
each run is quick and writes one ``error`` record (rack ``fleet``); no cluster is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.plugins.modules.conftest import unavailable_api_kubeconfig

REPO = Path(__file__).resolve().parents[4]


def verify(tmp_path: Path, run_id: str, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.pop("K8S_AUTH_KUBECONFIG", None)
    variables = {
        "gpu_fabric_kubeconfig": str(tmp_path / "kubeconfig"),
        "gpu_fabric_verify_api_patience": 1,
        "gpu_fabric_report_dir": str(tmp_path / "report"),
        "gpu_fabric_verify_run_id": run_id,
    }
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml")]
    command += [str(REPO / "playbooks" / "verify.yml"), "--tags", "cliques", "-e", json.dumps(variables), *extra]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(process: subprocess.Popen) -> str:
    output, _errors = process.communicate(timeout=180)
    assert process.returncode == 2, output  # the report's verdict (error) fails the play, after the history
    return output


def test_two_runs_at_once_both_kept_then_a_third_pins_the_first(tmp_path, unavailable_api):
    unavailable_api_kubeconfig(tmp_path / "kubeconfig", unavailable_api)
    (tmp_path / "hosts.yml").write_text(
        "k8s_controller:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    runs = tmp_path / "report" / "runs"
    together = [verify(tmp_path, "run-a"), verify(tmp_path, "run-b")]
    for process in together:
        finished(process)
    index = json.loads((runs / "index.json").read_text())
    assert sorted(e["run_id"] for e in index["runs"]) == ["run-a", "run-b"]
    assert all(e["verdicts"] == {"cliques/fleet": "error"} for e in index["runs"])
    assert json.loads((runs / "run-a" / "cliques" / "fleet.json").read_text())["run_id"] == "run-a"
    assert json.loads((runs / "run-b" / "cliques" / "fleet.json").read_text())["run_id"] == "run-b"

    # the third run pins the first; the fourth keeps one run (its own) and, always, the pinned run-a
    finished(verify(tmp_path, "run-c", "-e", "gpu_fabric_verify_baseline_run=run-a"))
    finished(verify(tmp_path, "run-d", "-e", "gpu_fabric_verify_history_keep_runs=1"))
    index = json.loads((runs / "index.json").read_text())
    assert [(e["run_id"], e["pinned"]) for e in index["runs"]] == [("run-d", False), ("run-a", True)]
    assert sorted(p.name for p in runs.iterdir()) == [".lock", "index.json", "run-a", "run-d"]
    # the latest view the report reads is still records/
    assert json.loads((tmp_path / "report" / "records" / "cliques" / "fleet.json").read_text())["run_id"] == "run-d"
