# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated rack for end-to-end tests.

``sim_rack`` (session): brings the simulated fleet up once per test run with ``sim/rack up`` at
``GPU_FABRIC_SIM_RACKS`` x ``GPU_FABRIC_SIM_TRAYS`` (default 2 racks x 18 trays: every verification
test runs on more than one full NVL72 rack; the first run on a machine builds the control plane: tens
of minutes), reuses a rack that is already up (growing it to that size), leaves it running, and tears
down a rack it started unless ``GPU_FABRIC_SIM_KEEP=1``.
``clean_faults`` (function): clears every fault after the test.
``namespace`` (function): a fresh namespace, deleted after the test.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
from verify_helpers import apply_cluster_stage, cluster_stage_installed

REPO_ROOT = Path(__file__).resolve().parents[2]
RACK = REPO_ROOT / "sim" / "rack"
sys.path.insert(0, str(REPO_ROOT / "sim"))
from simrack import Ports, StatePaths, accounts, audit  # noqa: E402

VENV_BIN = REPO_ROOT / ".venv" / "bin"


def run_rack(
    *args: str, env: dict[str, str] | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RACK), *args], capture_output=True, text=True, env=env or dict(os.environ), timeout=timeout, check=False
    )


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.5) -> Any:
    """Poll until `check` returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


@dataclass
class SimRack:
    state: Path
    kubeconfig: Path
    bin_dir: Path
    env: dict[str, str]
    endpoints: dict[str, str] = field(default_factory=dict)
    started_here: bool = False
    wait_until = staticmethod(wait_until)

    def rack(self, *args: str, check: bool = True, timeout: float | None = 300) -> subprocess.CompletedProcess:
        result = run_rack(*args, env=self.env, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(
                f"sim/rack {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), *args],
            capture_output=True,
            text=True,
            env=self.env,
            input=input,
            timeout=120,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return result

    def get_json(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest: dict[str, Any] | list[dict[str, Any]], namespace: str | None = None) -> None:
        items = manifest if isinstance(manifest, list) else [manifest]
        scope = ["-n", namespace] if namespace else []
        self.kubectl("apply", *scope, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    def status(self) -> dict[str, Any]:
        return json.loads(self.rack("status", "--json", check=False).stdout)

    def fault(self, name: str, after: float | None = None, **params: Any) -> subprocess.CompletedProcess:
        args = ["fault", name, *(f"{k}={v}" for k, v in params.items())]
        if after is not None:
            args += ["--after", str(after)]
        return self.rack(*args)

    def apiserver_restarts_done(self) -> int:
        """How many `fault apiserver-restart --after` restarts have finished: each ends its log with the
        line `kube-apiserver restarted; ...` once kube-controller-manager has caught up."""
        try:
            return (self.state / "logs" / "fault-apiserver-restart.log").read_text().count("kube-apiserver restarted;")
        except FileNotFoundError:
            return 0

    def wait_apiserver_restarts_done(self, count: int) -> None:
        """Wait for `count` background restarts to have finished, so the next test finds a whole rack."""
        self.wait_until(
            f"{count} kube-apiserver restart(s) and kube-controller-manager's catch-up",
            lambda: self.apiserver_restarts_done() >= count,
            timeout=300,
        )

    def clear_faults(self) -> None:
        self.rack("fault", "--clear-all")

    def service_account_kubeconfig(self, name: str, path: Path, rbac_file: Path | None = None) -> tuple[Path, str]:
        """ServiceAccount gpu-fabric/<name> (bound by ``rbac_file`` when given) and a kubeconfig with only a
        fresh token of it (simrack.accounts); its path and the token."""

        def kubectl(*args: str, stdin: str | None = None) -> str:
            return self.kubectl(*args, input=stdin).stdout

        return accounts.service_account_kubeconfig(kubectl, self.kubeconfig, name, path, rbac_file)

    def audited(self, user: str, since: datetime.datetime) -> list[audit.Request]:
        """What ``user`` (a ServiceAccount) asked of the API server since ``since`` (simrack.audit)."""
        return audit.requests(StatePaths(self.state).audit_log, user=user, since=since)

    def faults(self) -> dict[str, dict[str, Any]]:
        try:
            return json.loads((self.state / "faults.json").read_text())
        except FileNotFoundError:
            return {}


# The size of the simulated fleet for the integration tests.
FLEET = {"GPU_FABRIC_SIM_RACKS": "2", "GPU_FABRIC_SIM_TRAYS": "18"}


# With pytest-xdist (`make integration` runs two streams, `-n 2 --dist loadfile`), each worker after the
# first has a rack of its own: its own state directory and control-plane ports (the first worker's rack
# keeps the defaults, so it reuses the rack Molecule's cluster scenario left), and its own Helm repository
# settings, so that `helm repo add` of one stream never points the other's at its rack.
PORT_STRIDE = 100


def worker_index(environ: dict[str, str]) -> int:
    """0 without xdist and for its first worker (gw0); n for gw<n>."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


def worker_rack_env(environ: dict[str, str]) -> dict[str, str]:
    """The variables that give an xdist worker a simulated rack of its own (none for the first)."""
    index = worker_index(environ)
    if index == 0:
        return {}
    own = REPO_ROOT / ".tmp" / f"sim-gw{index}"
    env = {"GPU_FABRIC_SIM_STATE": str(own)}
    for name, variable in Ports.ENV.items():
        env[variable] = str(getattr(Ports(), name) + PORT_STRIDE * index)
    env["HELM_REPOSITORY_CONFIG"] = str(own / "helm" / "repositories.yaml")
    env["HELM_REPOSITORY_CACHE"] = str(own / "helm" / "repository")
    return env


# Seconds each test file takes in one stream (the CI run of 2026-12-06: pytest's --durations of its slowest
# tests, about 5 s for each of the others), rounded. `make integration` runs the files longest first
# (`--no-loadscope-reorder` keeps this order; pytest-xdist would otherwise start the files of most tests
# first, which left the four longest files of one test each to the end of the run and one stream idle
# for minutes). A file not named here (a new one) starts before these, in collection order: however long
# it is, the files after it even the streams out, where at the end it could leave one stream alone. A
# stale figure only costs balance, never a test. `make integration` prints every test's time
# (--durations=0): name a new file here with its seconds.
FILE_SECONDS = {
    "test_cluster_stage.py": 415,
    "test_soak.py": 305,
    "test_sim_addons.py": 300,
    "test_due_runs.py": 300,  # measured locally (5 runs of verify.yml on 3 trays a rack), not yet in CI
    "test_upgrade.py": 295,
    "test_existing_install.py": 275,
    "test_fleet_verify.py": 275,
    "test_sim_fleet.py": 270,
    "test_faults.py": 260,
    "test_fault_matrix.py": 240,  # measured locally (cluster stage, one verify.yml run of every check)
    "test_rbac.py": 255,
    "test_faults_survived.py": 250,
    "test_cluster_stage_faults.py": 205,
    "test_uninstall.py": 185,
    "test_sim_rack.py": 125,
    "test_rbac_namespaced.py": 110,
    "test_node_verdict.py": 105,  # waits for a KWOK heartbeat (measured locally)
    "test_verify_stage.py": 85,
    "test_tainted_trays.py": 80,
    "test_schedule.py": 80,  # measured locally
    "test_sim_versions.py": 60,
    "test_verify_pull_secrets.py": 45,
    "test_check_dcgm_diag.py": 35,
    "test_air_gapped.py": 25,
    "test_openshift.py": 15,
    "test_check_gpu_health.py": 10,
    "test_clique_info.py": 10,
    "test_installed_collection.py": 10,
    "test_mixed_cluster.py": 10,
    "test_compat.py": 0,  # skipped but in `make compat`
    "test_upstream_mirror.py": 0,  # skipped without GPU_FABRIC_UPSTREAM_DIR
}


def longest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items grouped by file: the files ``FILE_SECONDS`` does not name first, in collection order, then the
    others longest first; the order within a file is kept."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered = sorted(files, key=lambda path: -FILE_SECONDS.get(Path(path).name, float("inf")))
    return [item for path in ordered for item in files[path]]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_files_first(items)


def _rack_env() -> dict[str, str]:
    env = dict(os.environ)
    for key, value in FLEET.items():
        env.setdefault(key, value)
    env.update(worker_rack_env(env))
    env["ANSIBLE_CONFIG"] = str(REPO_ROOT / "ansible.cfg")
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _up_with_progress(env: dict[str, str]) -> tuple[int, str]:
    """`sim/rack up`, its progress shown live (a cold build takes tens of minutes), its tail kept."""
    proc = subprocess.Popen(
        [str(RACK), "up"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1
    )
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stderr.write(line)
        sys.stderr.flush()
        tail = [*tail[-199:], line]
    return proc.wait(), "".join(tail)


@pytest.fixture(scope="session")
def sim_rack(request: pytest.FixtureRequest) -> SimRack:
    env = _rack_env()
    status = run_rack("status", "--json", env=env)
    started_here = False
    wanted = (int(env["GPU_FABRIC_SIM_RACKS"]), int(env["GPU_FABRIC_SIM_TRAYS"]))
    if status.returncode == 0:
        info = json.loads(status.stdout)
        if (info.get("racks"), info.get("trays_per_rack")) != wanted:
            resized = run_rack("up", env=env)
            assert resized.returncode == 0, (
                f"sim/rack up (to {wanted[0]} x {wanted[1]}) failed:\n{resized.stdout}{resized.stderr}"
            )
            status = run_rack("status", "--json", env=env)
    if status.returncode != 0:
        # show the progress live, past pytest's output capture
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            code, output = _up_with_progress(env)
        if code != 0:
            pytest.fail(f"sim/rack up failed (exit {code}):\n{output}")
        started_here = True
        status = run_rack("status", "--json", env=env)
        assert status.returncode == 0, f"sim/rack up returned but status says down:\n{status.stdout}"
    info = json.loads(status.stdout)
    for line in run_rack("env", env=env).stdout.splitlines():
        key, value = line.removeprefix("export ").split("=", 1)
        env[key] = value.replace("$PATH", env["PATH"]) if key == "PATH" else value
    rack = SimRack(
        state=Path(info["state"]),
        kubeconfig=Path(info["kubeconfig"]),
        bin_dir=Path(info["bin_dir"]),
        env=env,
        endpoints=info.get("endpoints", {}),
        started_here=started_here,
    )
    yield rack
    if started_here and os.environ.get("GPU_FABRIC_SIM_KEEP") != "1":
        run_rack("down", env=env)


@pytest.fixture
def clean_faults(sim_rack: SimRack):
    yield sim_rack
    sim_rack.clear_faults()


@pytest.fixture
def namespace(sim_rack: SimRack):
    name = f"simtest-{uuid.uuid4().hex[:8]}"
    sim_rack.kubectl("create", "namespace", name)
    wait_until(
        f"ServiceAccount default in {name}",
        lambda: sim_rack.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
    )
    yield name
    sim_rack.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def cluster_stage(sim_rack: SimRack) -> SimRack:
    """The cluster stage (GPU Operator, DRA driver, MPI operator stand-ins) installed once per run."""
    if not cluster_stage_installed(sim_rack):
        result = apply_cluster_stage(sim_rack)
        output = f"{result.stdout[-8000:]}\n{result.stderr[-4000:]}"
        assert result.returncode == 0, f"playbooks/cluster.yml failed:\n{output}"
    assert cluster_stage_installed(sim_rack)
    return sim_rack
