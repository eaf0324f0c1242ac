# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/verify.yml refused before its first check still answers: the error records, the report, the verdict in
set_stats for AWX, and a failed play. No cluster: the preflight refuses the run before any API call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
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
            },
            "gpu_nodes": {"hosts": {}},
        }
    }
}
# A kubeconfig that loads, of an API server nothing listens on.
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "rack", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
    "users": [{"name": "admin", "user": {"token": "t"}}],
    "contexts": [{"name": "rack", "context": {"cluster": "rack", "user": "admin"}}],
    "current-context": "rack",
}
MISSPELLED = (
    "gpu_fabric_verify_checks names 'gpu_helth', which is no check (did you mean gpu_health?); the checks are "
    "cliques, imex_channel, nvbandwidth, nccl, gpu_health, dcgm_diag"
)
PREFLIGHT = "Refuse what the run could not use before the first check runs"


def verify(tmp_path: Path, *args: str, kubeconfig: bool = True) -> Tuple[int, Dict[str, Any], str]:
    """The exit status, the custom stats (the json callback's) and the stderr of verify.yml run in ``tmp_path``."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(INVENTORY))
    config = tmp_path / "kubeconfig"
    if kubeconfig:
        config.write_text(yaml.safe_dump(KUBECONFIG))
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_SHOW_CUSTOM_STATS="true",
        K8S_AUTH_KUBECONFIG=str(config),
    )
    run = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(REPO_ROOT / "playbooks" / "verify.yml"), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    output = json.loads(run.stdout)
    return run.returncode, output.get("global_custom_stats") or {}, run.stderr


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_misspelled_check_still_gives_the_verdict_and_fails_the_play(tmp_path, check_mode):
    report_dir = tmp_path / "report"
    extra = ["--check"] if check_mode else []
    rc, stats, _output = verify(
        tmp_path, "-e", "gpu_fabric_verify_checks=gpu_helth", "-e", f"gpu_fabric_report_dir={report_dir}", *extra
    )
    assert rc == 2
    assert stats["gpu_fabric_verdict"] == "error"
    assert stats["gpu_fabric_run_id"]
    if check_mode:
        # nothing written: the verdict and the reason alone
        assert stats["gpu_fabric_summary"] == f"ERROR: the run was refused at the task '{PREFLIGHT}': {MISSPELLED}"
        assert stats["gpu_fabric_report"] == {} and not report_dir.exists()
        return
    assert stats["gpu_fabric_summary"].startswith("ERROR: 1 rack, 0 of 3 checks passed; could not run")
    assert stats["gpu_fabric_report"]["json"] == str(report_dir / "report.json")
    report = json.loads((report_dir / "report.json").read_text())
    assert {(c["check"], c["rack"], c["verdict"]) for c in report["checks"]} == {
        ("cliques", "fleet", "error"),
        ("imex_channel", "fleet", "error"),
        ("nvbandwidth", "fleet", "error"),
    }
    summaries = {c["summary"] for c in report["checks"]}
    assert (
        f"nvbandwidth did not run, which says nothing of the fabric; the run was refused at the task '{PREFLIGHT}': "
        f"{MISSPELLED}"
    ) in summaries
    junit = (report_dir / "report.junit.xml").read_text()
    assert junit.count("<testcase") == 3 and "did not run" in junit


def test_a_missing_kubeconfig_gives_the_verdict_naming_it(tmp_path):
    rc, stats, _output = verify(tmp_path, "--check", "--tags", "nvbandwidth", kubeconfig=False)
    assert rc == 2
    assert stats["gpu_fabric_verdict"] == "error"
    assert stats["gpu_fabric_summary"] == (
        f"ERROR: the run was refused at the task '{PREFLIGHT}': the kubeconfig {tmp_path / 'kubeconfig'} "
        "(K8S_AUTH_KUBECONFIG) does not exist: set K8S_AUTH_KUBECONFIG to the kubeconfig file of the cluster"
    )


UNREACHABLE = (
    "cannot reach the Kubernetes API at https://127.0.0.1:1 for 3 s: connection refused; check that the API server "
    "runs and that the kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options point at it, then "
    "run it again"
)


@pytest.mark.parametrize("check_mode", [False, True])
def test_an_api_server_that_does_not_answer_is_said_once_and_fails_the_run(tmp_path, check_mode):
    report_dir = tmp_path / "report"
    extra = ["--check"] if check_mode else []
    rc, stats, _output = verify(
        tmp_path, "-e", "gpu_fabric_verify_api_patience=3", "-e", f"gpu_fabric_report_dir={report_dir}", *extra
    )
    # before: rc 0 in check mode, and each check waited out the patience again (90 s each) in both modes
    assert rc == 2
    assert stats["gpu_fabric_verdict"] == "error"
    if check_mode:
        assert stats["gpu_fabric_summary"] == f"ERROR: the run was refused at the task '{PREFLIGHT}': {UNREACHABLE}"
        return
    report = json.loads((report_dir / "report.json").read_text())
    assert [(c["check"], c["verdict"]) for c in report["checks"]] == [
        ("cliques", "error"),
        ("imex_channel", "error"),
        ("nvbandwidth", "error"),
    ]
    assert {c["summary"] for c in report["checks"]} == {
        f"{check} did not run, which says nothing of the fabric; the run was refused at the task '{PREFLIGHT}': "
        f"{UNREACHABLE}"
        for check in ("cliques", "imex_channel", "nvbandwidth")
    }


@pytest.mark.parametrize("tags", ["cluster", "verify_checks"])
def test_a_run_that_verifies_nothing_needs_no_cluster_and_writes_no_report(tmp_path, tags):
    report_dir = tmp_path / "report"
    rc, stats, _output = verify(tmp_path, "--tags", tags, "-e", f"gpu_fabric_report_dir={report_dir}", kubeconfig=False)
    # before: the report step failed ("the records directory ... does not exist; run the verify roles first")
    assert rc == 0
    assert stats == {} and not report_dir.exists()
