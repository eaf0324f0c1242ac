# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster stage interrupted and run twice at once, with the real Helm on the simulated rack.

Helm marks a release ``pending-install`` while it installs it. A killed run leaves that mark, and with it
every later ``helm upgrade --install`` fails ("another operation (install/upgrade/rollback) is in
progress"). Each test takes the DRA driver's release away, strikes while Helm installs it again, and leaves
the stage installed as it found it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from verify_helpers import REPO_ROOT, cluster_stage_installed

if TYPE_CHECKING:
    from conftest import SimRack

pytestmark = pytest.mark.sim

RELEASE, NAMESPACE = "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu"
# A short Helm timeout: a pending revision older than it (+ 60 s) is taken as interrupted.
SHORT = {"dra_driver_wait_timeout": 30}


def cluster_run(sim_rack: SimRack, extra_vars: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(REPO_ROOT / "inventories" / "sim"),
            str(REPO_ROOT / "playbooks" / "cluster.yml"),
            "-e",
            json.dumps(extra_vars or {}),
        ],
        cwd=REPO_ROOT,
        env=sim_rack.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: killing it kills Helm too
    )


def history(sim_rack: SimRack) -> list[dict]:
    helm = sim_rack.bin_dir / "helm"
    result = subprocess.run(
        [str(helm), "history", RELEASE, "-n", NAMESPACE, "-o", "json"],
        env=sim_rack.env,
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(result.stdout) if result.returncode == 0 else []


def uninstall(sim_rack: SimRack) -> None:
    helm = sim_rack.bin_dir / "helm"
    subprocess.run([str(helm), "uninstall", RELEASE, "-n", NAMESPACE, "--wait"], env=sim_rack.env, check=True)


def wait_pending_install(sim_rack: SimRack, run: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        revisions = history(sim_rack)
        if revisions and revisions[-1]["status"] == "pending-install":
            return
        if run.poll() is not None:
            pytest.fail(f"cluster.yml ended before Helm installed {RELEASE}:\n{run.stdout.read()[-4000:]}")
        time.sleep(0.3)
    pytest.fail(f"{RELEASE} never became pending-install")


def finish(run: subprocess.Popen, timeout: float = 900) -> tuple[int, str]:
    output = run.communicate(timeout=timeout)[0]
    return run.returncode, output


def test_a_run_killed_while_helm_installs_is_repaired_by_the_next_run(cluster_stage: SimRack):
    uninstall(cluster_stage)
    first = cluster_run(cluster_stage, SHORT)
    try:
        wait_pending_install(cluster_stage, first)
    finally:
        # as a cancelled AWX job's container or a lost controller ends it: the play and its Helm client (which
        # Ansible starts in a session of its own, so killing the play's process group alone leaves it running)
        os.killpg(first.pid, signal.SIGKILL)
        subprocess.run(["pkill", "-KILL", "-f", f"helm .*(upgrade|install).* {RELEASE} "], check=False)
        first.wait()
    assert history(cluster_stage)[-1]["status"] == "pending-install"

    code, output = finish(cluster_run(cluster_stage, SHORT))
    assert code == 0, output[-6000:]
    assert "an interrupted install; uninstalling it so that it can be installed again" in output
    assert history(cluster_stage)[-1]["status"] == "deployed"
    assert cluster_stage_installed(cluster_stage)


def test_two_runs_at_once_both_converge(cluster_stage: SimRack):
    uninstall(cluster_stage)
    first = cluster_run(cluster_stage)
    wait_pending_install(cluster_stage, first)
    second = cluster_run(cluster_stage)  # starts while the first one's Helm install runs
    (code1, out1), (code2, out2) = finish(first), finish(second)
    assert code1 == 0, out1[-6000:]
    assert code2 == 0, out2[-6000:]
    revisions = history(cluster_stage)
    assert [r["status"] for r in revisions][-1] == "deployed"
    assert not [r for r in revisions if r["status"].startswith("pending")]
    assert cluster_stage_installed(cluster_stage)
