# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulated GB200 rack: a real Kubernetes control plane with KWOK nodes, on 127.0.0.1.

Shared by the ``sim/rack`` command and the stand-ins for the NVIDIA components: where the state
lives, which ports are used, where the binaries are, and the fault switchboard (``faults.json``).
Standard library only, so that controllers can import it without the kubernetes client.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

SIM_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = SIM_DIR.parent
BUILD_SCRIPT = SIM_DIR / "build.sh"

# Names of the processes that the control plane side starts, in start order.
CONTROL_PLANE_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "helm")

# Faults the sim knows (parameters: simrack.faults.PARAMS). `sim/rack fault` (and `up`, again)
# applies the node faults (unlabelled-node, split-clique, missing-gpu, busy-node) and the
# apiserver-restart action itself; the stand-ins read the others from faults.json on every
# reconcile. Matrix faults are per rack: rack=<R>, default 0.
FAULTS = {
    "unlabelled-node": "remove the nvidia.com/gpu.clique label from one tray (node=<name>)",
    "split-clique": "relabel half of one rack's trays with a second clique (rack=<R>)",
    "apiserver-restart": "kill and restart kube-apiserver now, or --after SECONDS in the background",
    "degraded-link": "a measurement fault, not hardware (no tool but nvbandwidth shows it): "
    "set cell (src,dst) of the nvbandwidth matrix of MPIJobs on rack R, and the SUM; src and dst "
    "may each name several GPUs (1,4, 0-3, all: src=5 dst=all is row 5) "
    "(rack=<R, default 0> src=<gpu> dst=<gpu> gbps=<value, default 400>)",
    "degraded-gpu": "hardware: GPU G of rack R (tray G // 4 in rack order, its GPU G % 4; or each GPU of a list "
    "1,4,6, a range 0-17, or all) lost round(18 x (1 - factor)) NVLinks, at least 1: nvidia-smi nvlink -s shows them "
    "inactive; the row and column of the rank that runs on that GPU (wherever its worker was scheduled) in the "
    "nvbandwidth matrix of MPIJobs on rack R, and the SUM, scaled by factor (a cell between two such GPUs takes the "
    "lower), the rack's nccl figures too "
    "(rack=<R, default 0> gpu=<G> factor=<(0,1], default 0.944 = 17 of 18 NVLinks>)",
    "missing-gpu": "hardware: GPU gpu= (default 3) of one tray is not enumerated: the tray reports 3 nvidia.com/gpu "
    "(capacity, allocatable, label nvidia.com/gpu.count), nvidia-smi and DCGM list 3 GPUs (node=<tray> gpu=<3>)",
    "gpu-off-bus": "hardware: GPU gpu= (default 0) of one tray fell off the bus: Xid 79 in the kernel log, nvidia-smi "
    "cannot get its handle (exit 255), DCGM leaves it out, allocatable drops by one, capacity stays "
    "(node=<tray> gpu=<0>)",
    "nvlink-down": "hardware: links= (default 1) of the 18 NVLinks of GPUs gpu= (default 0) of one tray are inactive: "
    "nvidia-smi nvlink -s, the nvbandwidth matrix's row and column of that GPU and the rack's nccl figures scaled "
    "by (18 - links) / 18 (node=<tray> gpu=<0> links=<1>)",
    "row-remap-pending": "hardware: GPUs gpu= (default all) of one tray have an uncorrectable ECC error and a row "
    "remapping pending: nvidia-smi -q -x, and DCGM's software test fails them (85) (node=<tray> gpu=<all>)",
    "xid": "hardware: the kernel log of one tray shows NVRM Xid code= (default 79) on GPUs gpu= (default all) "
    "(node=<tray> gpu=<all> code=<79>)",
    "nvlink-errors": "hardware: GPUs gpu= (default all) of one tray count count= (3) failed recoveries on NVLink "
    "link= (7): nvidia-smi nvlink -e (node=<tray> gpu=<all> link=<7> count=<3>)",
    "fabric-unhealthy": "hardware: the fabric registration of GPUs gpu= (default 0) of one tray failed: nvidia-smi "
    "-q -x fabric Completed/Failure/Unhealthy, DCGM's software test fails (112) (node=<tray> gpu=<0>)",
    "busy-node": "another tenant's Running pod holds all 4 nvidia.com/gpu of one tray "
    "(pod busy-<node> in namespace gpu-fabric-sim-busy) (node=<tray>)",
    "launcher-fails": "the MPIJob launcher pod fails with exit code 1 and an MPI/CUDA error in its log (code=<N>)",
    "compute-domain-not-ready": "the ComputeDomain controller never marks nodes Ready",
    "missing-deviceclass": "the compute-domain-default-channel.nvidia.com DeviceClass is removed",
    "channel-missing": "the IMEX channel pod's listing lacks channel0",
    "rack-run-time": "an nvbandwidth launcher runs for the modelled time of a real rack "
    "(plugins/module_utils/nvbandwidth_runtime.py: its ranks, testcase, -b, -i) x scale before it exits "
    "(scale=<[0,10], default 1>; off: 2.5 s)",
}
# Faults that are actions, not lasting states: they are carried out and not recorded.
ACTION_FAULTS = ("apiserver-restart",)


@dataclass
class Ports:
    """Loopback ports of the control plane; each one overridable by an environment variable."""

    apiserver: int = 6443
    etcd: int = 2379
    etcd_peer: int = 2380
    kwok: int = 10247
    controller_manager: int = 10257
    scheduler: int = 10259

    ENV = {
        "apiserver": "GPU_FABRIC_SIM_APISERVER_PORT",
        "etcd": "GPU_FABRIC_SIM_ETCD_PORT",
        "etcd_peer": "GPU_FABRIC_SIM_ETCD_PEER_PORT",
        "kwok": "GPU_FABRIC_SIM_KWOK_PORT",
        "controller_manager": "GPU_FABRIC_SIM_KCM_PORT",
        "scheduler": "GPU_FABRIC_SIM_SCHEDULER_PORT",
    }

    @classmethod
    def from_env(cls, environ: Optional[dict[str, str]] = None) -> Ports:
        environ = os.environ if environ is None else environ
        ports = cls()
        for name, var in cls.ENV.items():
            if environ.get(var):
                setattr(ports, name, int(environ[var]))
        return ports


@dataclass
class RackConfig:
    """What `sim/rack up` was asked for; stored as <state>/config.json so later commands agree."""

    racks: int = 1
    trays_per_rack: int = 4
    bin_dir: str = ""
    # "KEY=VALUE:EFFECT" put on every tray (`up --gpu-taint`, GPU_FABRIC_SIM_GPU_TAINT); "" for none.
    gpu_taint: str = ""
    ports: Ports = field(default_factory=Ports)
    # the Kubernetes release of bin_dir (GPU_FABRIC_SIM_K8S_VERSION, default in sim/build.sh)
    k8s_version: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RackConfig:
        data = json.loads(text)
        ports = Ports(**data.pop("ports", {}))
        return cls(ports=ports, **data)


@dataclass(frozen=True)
class StatePaths:
    """Everything the rack writes lives under one directory that `sim/rack down` removes."""

    root: Path

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def podlogs(self) -> Path:
        return self.root / "podlogs"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def faults(self) -> Path:
        return self.root / "faults.json"

    @property
    def audit_policy(self) -> Path:
        return self.pki / "audit-policy.json"

    @property
    def audit_log(self) -> Path:
        return self.logs / "audit.log"

    @property
    def endpoints(self) -> Path:
        return self.root / "endpoints.json"

    def pid_file(self, name: str) -> Path:
        return self.pids / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.logs / f"{name}.log"


def state_dir(environ: Optional[dict[str, str]] = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ.get("GPU_FABRIC_SIM_STATE") or REPO_ROOT / ".tmp" / "sim").resolve()


def build_versions(script: Path = BUILD_SCRIPT, environ: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The pinned versions, read from the defaults in sim/build.sh (one source of truth)."""
    environ = os.environ if environ is None else environ
    versions = {}
    for name, default in re.findall(r'^(\w+_VERSION)="\$\{\1:-([^}]+)\}"', script.read_text(), re.MULTILINE):
        versions[name] = environ.get(name) or default
    # GPU_FABRIC_SIM_K8S_VERSION picks the Kubernetes release (build.sh reads it the same way)
    versions["K8S_VERSION"] = environ.get("GPU_FABRIC_SIM_K8S_VERSION") or versions["K8S_VERSION"]
    return versions


def bin_dir(environ: Optional[dict[str, str]] = None) -> Path:
    """The version-keyed binary cache that sim/build.sh fills (same rule as the script)."""
    environ = os.environ if environ is None else environ
    v = build_versions(environ=environ)
    cache_root = environ.get("GPU_FABRIC_SIM_CACHE") or str(
        Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-fabric-sim"
    )
    key = f"k8s{v['K8S_VERSION']}-etcd{v['ETCD_VERSION']}-kwok{v['KWOK_VERSION']}-helm{v['HELM_VERSION']}"
    return Path(cache_root) / key / "bin"


def missing_binaries(directory: Path) -> list[str]:
    return [name for name in BINARIES if not os.access(directory / name, os.X_OK)]


def read_faults(state: Path) -> dict[str, dict[str, Any]]:
    """Active faults, ``{name: {param: value}}``; empty when none is on or the rack is down."""
    try:
        data = json.loads((StatePaths(state).faults).read_text())
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{StatePaths(state).faults} is not valid JSON ({exc}); clear it with `sim/rack fault --clear-all`"
        ) from exc
    return data if isinstance(data, dict) else {}


def write_faults(state: Path, faults: dict[str, dict[str, Any]]) -> None:
    """Replace faults.json atomically, so a controller never reads half a file."""
    atomic_write(StatePaths(state).faults, json.dumps(faults, indent=2, sort_keys=True) + "\n")


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
