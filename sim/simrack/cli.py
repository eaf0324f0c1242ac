# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sim/rack: the simulated GB200 NVL72 rack on 127.0.0.1 (run through the sim/rack wrapper).

sim/rack up [--racks N] [--trays-per-rack M]   build (once, cached), start, create the trays
            [--gpu-taint KEY=VALUE:EFFECT]     taint every tray (GPU_FABRIC_SIM_GPU_TAINT; '' removes it)
sim/rack status [--json]                       what runs, memory, nodes (exit 1 when down)
sim/rack env                                   export KUBECONFIG=... (use: source <(sim/rack env))
sim/rack logs [COMPONENT] [-n LINES]           tail of a component's log
sim/rack fault NAME [key=value ...] [--after S] | --clear NAME | --clear-all | --list
sim/rack down                                  stop everything and remove the state directory

Trays are nodes gb200-r<R>-t<T> labelled gpu-fabric.sim/rack=rack<R> and nvidia.com/gpu.clique
(one clique per rack). Faults (all of them: sim/rack fault --list or --help); several at once:
  sim/rack fault degraded-link rack=1 src=0 dst=5 gbps=400   cell 0->5 of rack 1's nvbandwidth matrix
  sim/rack fault degraded-gpu rack=1 gpu=6 factor=0.944      row and column 6 of rack 1's matrix
  sim/rack fault degraded-gpu rack=0 gpu=all                 every GPU of rack 0 one NVLink down
  sim/rack fault missing-gpu node=gb200-r1-t3                that tray reports 3 nvidia.com/gpu
  sim/rack fault busy-node node=gb200-r0-t2                  another tenant's pod holds its 4 GPUs
  sim/rack fault --clear busy-node
(rack= defaults to 0; the rack of an MPIJob is that of the trays its workers are bound to)
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

SIM_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = SIM_DIR.parent
# Run as a script, Python puts sim/simrack itself first on the path; import the package instead.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.insert(0, str(SIM_DIR))

if not (importlib.util.find_spec("kubernetes") and importlib.util.find_spec("yaml")):
    venv_python = REPO_ROOT / ".venv" / "bin" / "python"
    if (
        venv_python.exists()
        and Path(sys.prefix).resolve() != venv_python.parent.parent.resolve()
        and not os.environ.get("GPU_FABRIC_SIM_REEXEC")
    ):
        os.environ["GPU_FABRIC_SIM_REEXEC"] = "1"
        os.execv(str(venv_python), [str(venv_python), __file__, *sys.argv[1:]])
    sys.exit("sim/rack needs the Python packages kubernetes and PyYAML: run `make venv` and put .venv/bin on PATH")

from simrack import (  # noqa: E402
    BUILD_SCRIPT,
    CONTROL_PLANE_COMPONENTS,
    FAULTS,
    Ports,
    RackConfig,
    StatePaths,
    atomic_write,
    bin_dir,
    build_versions,
    cluster,
    faultspec,
    missing_binaries,
    nodes,
    programs,
    read_faults,
    state_dir,
    write_faults,
)

STARTED = time.monotonic()


def progress(message: str) -> None:
    elapsed = int(time.monotonic() - STARTED)
    print(f"[sim {elapsed // 60:d}:{elapsed % 60:02d}] {message}", flush=True)


def fail(message: str, code: int = 1) -> None:
    print(f"sim/rack: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


# --- configuration ------------------------------------------------------------------------------


def load_config(paths: StatePaths) -> RackConfig | None:
    try:
        return RackConfig.from_json(paths.config.read_text())
    except FileNotFoundError:
        return None


def requested_config(
    paths: StatePaths, racks: int | None, trays: int | None, gpu_taint: str | None = None
) -> RackConfig:
    """Arguments win, then GPU_FABRIC_SIM_RACKS/TRAYS/GPU_TAINT, then the running rack's, then 1 x 4 untainted."""
    existing = load_config(paths)
    config = existing or RackConfig(ports=Ports.from_env())
    env_racks, env_trays = os.environ.get("GPU_FABRIC_SIM_RACKS"), os.environ.get("GPU_FABRIC_SIM_TRAYS")
    if racks is not None:
        config.racks = racks
    elif env_racks:
        config.racks = int(env_racks)
    if trays is not None:
        config.trays_per_rack = trays
    elif env_trays:
        config.trays_per_rack = int(env_trays)
    env_taint = os.environ.get("GPU_FABRIC_SIM_GPU_TAINT")
    if gpu_taint is not None:
        config.gpu_taint = gpu_taint
    elif env_taint is not None:
        config.gpu_taint = env_taint
    try:
        nodes.parse_taint(config.gpu_taint)
    except ValueError as exc:
        fail(f"--gpu-taint / GPU_FABRIC_SIM_GPU_TAINT: {exc}", 2)
    if config.racks < 1 or config.trays_per_rack < 1:
        fail(f"racks={config.racks} trays-per-rack={config.trays_per_rack}: both must be at least 1", 2)
    config.bin_dir = str(bin_dir())
    config.k8s_version = build_versions()["K8S_VERSION"]
    return config


def kube_client(paths: StatePaths):
    from kubernetes import client
    from kubernetes import config as kconfig

    api = kconfig.new_client_from_config(config_file=str(paths.kubeconfig))
    api.configuration.connection_pool_maxsize = 16
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 16
    return client.CoreV1Api(api)


# --- build --------------------------------------------------------------------------------------


def running_builds() -> list[int]:
    """Other sim/build.sh processes (a second concurrent build would only compete for the CPU)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")[:3]
        except OSError:
            continue
        if any(a == str(BUILD_SCRIPT) or a.endswith("sim/build.sh") for a in argv):
            pids.append(int(proc.name))
    return pids


def ensure_binaries(config: RackConfig) -> None:
    bindir = Path(config.bin_dir)
    missing = missing_binaries(bindir)
    if not missing:
        return
    others = running_builds()
    if others:
        progress(f"a build is already running (pid {', '.join(map(str, others))}); waiting for it")
        # another release's build (.ci/run builds the default, then the newest) is not waited for
        while running_builds() and missing_binaries(bindir):
            time.sleep(10)
            still = missing_binaries(bindir)
            progress(f"  waiting for the running build; still missing: {', '.join(still) or 'nothing'}")
        missing = missing_binaries(bindir)
        if not missing:
            return
    versions = build_versions()
    progress(
        f"building {', '.join(missing)} from Go modules (Kubernetes {versions['K8S_VERSION']}, etcd "
        f"{versions['ETCD_VERSION']}, kwok {versions['KWOK_VERSION']}, helm {versions['HELM_VERSION']}) into {bindir}"
    )
    progress("a cold build takes 30-60 minutes on 2 cores; later runs reuse the cache")
    proc = subprocess.Popen(
        ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    last_line = [time.monotonic()]
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            if time.monotonic() - last_line[0] >= 30:
                progress(f"  still building (missing: {', '.join(missing_binaries(bindir)) or 'nothing'})")

    threading.Thread(target=heartbeat, daemon=True).start()
    assert proc.stdout is not None
    for line in proc.stdout:
        last_line[0] = time.monotonic()
        line = line.rstrip()
        if line.startswith("go: downloading"):
            continue
        print(f"  {line}", flush=True)
    done.set()
    if proc.wait() != 0:
        fail(f"{BUILD_SCRIPT} failed (exit {proc.returncode}); the output above says which step")
    missing = missing_binaries(bindir)
    if missing:
        fail(f"the build finished but {', '.join(missing)} are missing from {bindir}")


# --- commands -----------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    paths = StatePaths(state_dir())
    config = requested_config(paths, args.racks, args.trays_per_rack, args.gpu_taint)
    running = load_config(paths)
    if running is not None and running.ports != config.ports:
        config.ports = running.ports
    progress(f"simulated rack: {config.racks} rack(s) x {config.trays_per_rack} GB200 trays, state {paths.root}")
    ensure_binaries(config)
    paths.root.mkdir(parents=True, exist_ok=True)
    (paths.root / ".gitignore").write_text("*\n")
    atomic_write(paths.config, config.to_json())

    cluster.ensure_pki(paths)
    cluster.ensure_admin_credentials(paths, config)
    cluster.ensure_audit_policy(paths)
    commands = cluster.component_commands(paths, config)
    started = [
        name
        for name in CONTROL_PLANE_COMPONENTS[:4]
        if cluster.ensure_component(paths, config, commands[name], progress)
    ]

    if cluster.component_pid(paths, "kwok") is None:
        progress("applying the kwok Logs/ClusterLogs CRDs from the Go module cache")
        files = cluster.kwok_crd_files(Path(config.bin_dir))
        cluster.kubectl(
            config,
            paths,
            "apply",
            "--server-side",
            "--field-manager=gpu-fabric-sim",
            *[f"--filename={f}" for f in files],
        )
        cluster.kubectl(
            config,
            paths,
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/logs.kwok.x-k8s.io",
            "crd/clusterlogs.kwok.x-k8s.io",
        )
    if cluster.ensure_component(paths, config, commands["kwok"], progress):
        started.append("kwok")

    core = kube_client(paths)
    kubelet_version = f"v{config.k8s_version or build_versions()['K8S_VERSION']}"
    faults = read_faults(paths.root)
    try:
        created, deleted = nodes.reconcile_nodes(
            core, config.racks, config.trays_per_rack, kubelet_version, progress, faults
        )
    except ValueError as exc:
        fail(f"{exc} (faults.json: {paths.faults}); clear that fault with `sim/rack fault --clear NAME`")
    expected = config.racks * config.trays_per_rack + 1
    waited = nodes.wait_nodes_ready(core, expected, 120 + expected * 0.25, progress)
    if created:
        progress(f"{expected} nodes Ready ({waited:.1f}s after creation)")
    # After Ready: KWOK's node-initialize stage writes the status it read, GPU counts included.
    changed = nodes.apply_tray_state(core, config.racks, config.trays_per_rack, faults)
    if changed:
        progress(
            f"tray labels and GPU counts (faults: {', '.join(sorted(faults)) or 'none'}) set on {len(changed)} node(s)"
        )
    previous = nodes.parse_taint(running.gpu_taint) if running is not None else None
    tainted = nodes.apply_gpu_taint(core, nodes.parse_taint(config.gpu_taint), previous)
    if tainted:
        progress(f"GPU taint {config.gpu_taint or '(none)'} set on {len(tainted)} tray(s)")
    cluster.wait_default_service_account(paths, config, "default", 60.0, progress)
    for change in nodes.apply_busy_pods(core, faults):
        progress(f"fault busy-node: {change}")

    addons = SIM_DIR / "simrack" / "addons.py"
    if os.environ.get("GPU_FABRIC_SIM_ADDONS", "1") == "0":
        progress("GPU_FABRIC_SIM_ADDONS=0: the NVIDIA stand-ins are not started")
    elif addons.exists():
        progress("starting the NVIDIA stand-ins, the MPI operator stand-in and the chart server (simrack.addons)")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SIM_DIR), os.environ.get("PYTHONPATH")])))
        env["PATH"] = f"{config.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "simrack.addons",
                "up",
                "--state",
                str(paths.root),
                "--kubeconfig",
                str(paths.kubeconfig),
                "--bin",
                config.bin_dir,
            ],
            env=env,
            check=False,
        )
        if result.returncode != 0:
            fail(f"simrack.addons up failed (exit {result.returncode}); see `sim/rack logs`")
    else:
        progress("note: sim/simrack/addons.py is not there yet; NVIDIA stand-ins are not started")

    summary = (
        "already up, nothing to start"
        if not (started or created or deleted)
        else (f"started {', '.join(started) or 'nothing'}; nodes +{created}/-{deleted}")
    )
    progress(f"rack up: {summary}")
    progress(f"use it: source <({SIM_DIR / 'rack'} env) && kubectl get nodes -L nvidia.com/gpu.clique")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    paths = StatePaths(state_dir())
    if not paths.root.exists():
        progress(f"nothing to do: {paths.root} does not exist")
        return 0
    processes = cluster.recorded_processes(paths)
    # Stand-ins and kwok first, etcd last, so nothing loses its API server under its feet.
    order = [n for n in processes if n not in CONTROL_PLANE_COMPONENTS] + [
        n for n in reversed(CONTROL_PLANE_COMPONENTS) if n in processes
    ]
    for name in order:
        pid = processes[name]
        if pid is not None:
            progress(f"stopping {name} (pid {pid})")
            cluster.stop_pid(pid)
    shutil.rmtree(paths.root)
    progress(f"removed {paths.root}")
    return 0


def collect_status(paths: StatePaths) -> dict:
    config = load_config(paths)
    processes = cluster.recorded_processes(paths)
    status: dict = {
        "state": str(paths.root),
        "up": False,
        "processes": {
            name: {
                "pid": pid,
                "running": pid is not None,
                "rss_mib": round(cluster.rss_kib(pid) / 1024, 1) if pid else 0,
            }
            for name, pid in processes.items()
        },
    }
    status["rss_mib_total"] = round(sum(p["rss_mib"] for p in status["processes"].values()), 1)
    if config is None:
        return status
    status.update(
        racks=config.racks,
        trays_per_rack=config.trays_per_rack,
        bin_dir=config.bin_dir,
        kubeconfig=str(paths.kubeconfig),
    )
    status["apiserver_ready"] = cluster.apiserver_ready(paths, config)
    all_running = all(processes.get(n) is not None for n in CONTROL_PLANE_COMPONENTS)
    status["up"] = bool(all_running and status["apiserver_ready"])
    status["faults"] = read_faults(paths.root)
    if paths.endpoints.exists():
        status["endpoints"] = json.loads(paths.endpoints.read_text())
    if status["apiserver_ready"]:
        code, body = cluster.apiserver_get(paths, config, "/api/v1/nodes?labelSelector=type%3Dkwok")
        if code == 200:
            items = json.loads(body)["items"]
            status["nodes"] = len(items)
            status["nodes_ready"] = sum(
                1
                for n in items
                for c in n.get("status", {}).get("conditions", [])
                if c["type"] == "Ready" and c["status"] == "True"
            )
    return status


def cmd_status(args: argparse.Namespace) -> int:
    paths = StatePaths(state_dir())
    status = collect_status(paths)
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0 if status["up"] else 1
    print(f"state:     {status['state']}")
    if "racks" not in status:
        print("rack:      down (no state)")
        return 1
    print(f"rack:      {'up' if status['up'] else 'NOT up'} ({status['racks']} x {status['trays_per_rack']} trays)")
    print(f"apiserver: {'ready' if status['apiserver_ready'] else 'not ready'}")
    if "nodes" in status:
        print(f"nodes:     {status['nodes_ready']}/{status['nodes']} Ready")
    for name, proc in status["processes"].items():
        state = f"pid {proc['pid']:<8} {proc['rss_mib']:>8.1f} MiB" if proc["running"] else "NOT running"
        print(f"  {name:<34} {state}")
    print(f"  {'total RSS':<34} {'':<12} {status['rss_mib_total']:>8.1f} MiB")
    print(f"faults:    {', '.join(f'{k} {v}' if v else k for k, v in status['faults'].items()) or 'none'}")
    for key, value in status.get("endpoints", {}).items():
        print(f"{key}: {value}")
    return 0 if status["up"] else 1


def cmd_env(args: argparse.Namespace) -> int:
    paths = StatePaths(state_dir())
    config = load_config(paths)
    bindir = config.bin_dir if config else str(bin_dir())
    lines = [
        f"export KUBECONFIG={paths.kubeconfig}",
        f"export K8S_AUTH_KUBECONFIG={paths.kubeconfig}",
        f"export GPU_FABRIC_SIM_STATE={paths.root}",
        f"export PATH={bindir}:$PATH",
    ]
    if paths.endpoints.exists():
        endpoints = json.loads(paths.endpoints.read_text())
        if "helm_repo_url" in endpoints:
            lines.append(f"export GPU_FABRIC_SIM_HELM_REPO_URL={endpoints['helm_repo_url']}")
        if "mpi_operator_manifest_url" in endpoints:
            lines.append(f"export GPU_FABRIC_SIM_MPI_MANIFEST_URL={endpoints['mpi_operator_manifest_url']}")
    print("\n".join(lines))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    paths = StatePaths(state_dir())
    available = sorted(f.stem for f in paths.logs.glob("*.log")) if paths.logs.is_dir() else []
    if args.component:
        if args.component not in available:
            fail(f"no log named {args.component!r}; available: {', '.join(available) or 'none (rack down)'}", 2)
        print(cluster.tail(paths.log_file(args.component), args.lines))
        return 0
    for name in available:
        print(f"==> {paths.log_file(name)} <==")
        print(cluster.tail(paths.log_file(name), args.lines))
    return 0


def parse_params(items: list[str]) -> dict[str, str]:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"fault parameter {item!r} is not key=value (e.g. node=gb200-r0-t3)", 2)
        params[key] = value
    return params


@functools.lru_cache(maxsize=1)
def known_faults() -> dict[str, str]:
    """Every fault `sim/rack fault` takes, with its line: the sim's own (FAULTS) and the fault knobs of the
    checks' stand-in programs (simrack/programs), as faultspec.validate accepts them."""
    try:
        return faultspec.all_descriptions()
    except programs.ProgramError as exc:  # a broken program must not stop up, status or down
        print(f"sim/rack: {exc}", file=sys.stderr, flush=True)
        return dict(FAULTS)


def cmd_fault(args: argparse.Namespace) -> int:
    paths = StatePaths(state_dir())
    config = load_config(paths)
    known = known_faults()
    if args.list:
        active = read_faults(paths.root)
        for name, text in known.items():
            mark = "ON " if name in active else "   "
            print(f"{mark} {name:<26} {text}{'  ' + json.dumps(active[name]) if active.get(name) else ''}")
        return 0
    if config is None:
        fail(f"the rack is down ({paths.root} has no config.json); run `sim/rack up` first")
    faults = read_faults(paths.root)
    if args.clear_all:
        faults = {}
    elif args.clear:
        if args.clear not in known and args.clear not in faults:
            fail(f"unknown fault {args.clear!r}; known: {', '.join(known)}", 2)
        faults.pop(args.clear, None)
    else:
        if not args.name:
            fail("name a fault (see `sim/rack fault --list`), or use --clear NAME / --clear-all", 2)
        if args.name not in known:
            fail(f"unknown fault {args.name!r}; known: {', '.join(known)}", 2)
        params = parse_params(args.params)
        if args.name == "unlabelled-node":
            params.setdefault("node", nodes.default_unlabelled_node(config.racks, config.trays_per_rack))
        if args.name == "split-clique":
            params.setdefault("rack", "0")
        try:
            params = faultspec.validate(args.name, params, config.racks, config.trays_per_rack)
        except ValueError as exc:
            fail(str(exc), 2)
        if args.name == "apiserver-restart":
            return restart_apiserver(paths, config, args.after)
        faults[args.name] = params
    try:
        nodes.desired_tray_labels(config.racks, config.trays_per_rack, faults)
    except ValueError as exc:
        fail(str(exc), 2)
    write_faults(paths.root, faults)
    core = kube_client(paths)
    changed = nodes.apply_tray_state(core, config.racks, config.trays_per_rack, faults)
    busy = nodes.apply_busy_pods(core, faults)
    progress(
        f"active faults: {', '.join(sorted(faults)) or 'none'}"
        + (f"; changed {', '.join(changed)}" if changed else "")
        + (f"; {'; '.join(busy)}" if busy else "")
    )
    return 0


def restart_apiserver(paths: StatePaths, config: RackConfig, after: float | None) -> int:
    if after:
        log = open(paths.log_file("fault-apiserver-restart"), "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [sys.executable, __file__, "_restart-apiserver", "--delay", str(after)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        progress(f"kube-apiserver will restart in {after:g}s (pid {proc.pid}, log {log.name})")
        return 0
    downtime, catch_up = cluster.restart_apiserver(paths, config, progress)
    progress(
        f"kube-apiserver restarted; API unavailable for {downtime:.1f}s; "
        f"kube-controller-manager caught up {catch_up:.1f}s later"
    )
    return 0


def cmd_restart_apiserver(args: argparse.Namespace) -> int:
    time.sleep(args.delay)
    paths = StatePaths(state_dir())
    config = load_config(paths)
    if config is None:
        fail("the rack went down before the scheduled kube-apiserver restart")
    return restart_apiserver(paths, config, None)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="sim/rack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="bring the rack up (idempotent)")
    up.add_argument("--racks", type=int, help="NVL72 racks (default 1, env GPU_FABRIC_SIM_RACKS)")
    up.add_argument(
        "--trays-per-rack",
        type=int,
        help="compute trays per rack (default 4, 18 like an NVL72; env GPU_FABRIC_SIM_TRAYS)",
    )
    up.add_argument(
        "--gpu-taint",
        metavar="KEY=VALUE:EFFECT",
        help="taint every tray, as GPU nodes often are (e.g. nvidia.com/gpu=present:NoSchedule; '' removes it; "
        "env GPU_FABRIC_SIM_GPU_TAINT); kept by later `up`s",
    )
    sub.add_parser("down", help="stop every process and remove the state directory")
    status = sub.add_parser("status", help="what runs and how much memory it takes; exit 1 when down")
    status.add_argument("--json", action="store_true")
    sub.add_parser("env", help="print export lines for KUBECONFIG, K8S_AUTH_KUBECONFIG, PATH")
    logs = sub.add_parser("logs", help="tail of the components' logs")
    logs.add_argument("component", nargs="?")
    logs.add_argument("-n", "--lines", type=int, default=40)
    fault = sub.add_parser(
        "fault",
        help="switch a fault on or off",
        description="Switch a fault on (NAME key=value ...) or off (--clear NAME, --clear-all). Faults:\n"
        + "\n".join(f"  {name:<25} {text}" for name, text in known_faults().items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fault.add_argument("name", nargs="?")
    fault.add_argument("params", nargs="*", metavar="key=value")
    fault.add_argument("--after", type=float, help="apiserver-restart: do it in the background after SECONDS")
    fault.add_argument("--clear", metavar="NAME")
    fault.add_argument("--clear-all", action="store_true")
    fault.add_argument("--list", action="store_true")
    restart = sub.add_parser("_restart-apiserver")
    restart.add_argument("--delay", type=float, default=0)
    args = parser.parse_args(argv)
    handlers = {
        "up": cmd_up,
        "down": cmd_down,
        "status": cmd_status,
        "env": cmd_env,
        "logs": cmd_logs,
        "fault": cmd_fault,
        "_restart-apiserver": cmd_restart_apiserver,
    }
    try:
        return handlers[args.command](args)
    except RuntimeError as exc:
        fail(str(exc))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
