# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real control plane processes: certificates, etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the KWOK controller, all bound to 127.0.0.1 and recorded under the state dir."""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import os
import secrets
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from simrack import SIM_DIR, Ports, RackConfig, StatePaths, atomic_write, audit, build_versions

Progress = Callable[[str], None]

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.1/16"
KWOK_CONFIG_DIR = SIM_DIR / "kwok"
KWOK_CRDS = ("logs", "clusterlogs")


# --- certificates -------------------------------------------------------------------------------


def ensure_pki(paths: StatePaths) -> None:
    """A CA, the apiserver's serving certificate (SAN 127.0.0.1, localhost, kubernetes.default)
    and the service-account key pair. Generated once per rack; `down` removes them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    pki = paths.pki
    if (pki / "apiserver.crt").exists() and (pki / "sa.pub").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)

    def write_key(key: rsa.RSAPrivateKey, name: str) -> None:
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
        atomic_write(pki / name, pem.decode(), mode=0o600)

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    later = now + datetime.timedelta(days=3650)

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-fabric-sim-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    server_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    san = x509.SubjectAlternativeName(
        [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
            x509.DNSName("kubernetes.default.svc.cluster.local"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address(SERVICE_IP)),
        ]
    )
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_pub = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    write_key(ca_key, "ca.key")
    atomic_write(pki / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM).decode())
    write_key(server_key, "apiserver.key")
    write_key(sa_key, "sa.key")
    atomic_write(pki / "sa.pub", sa_pub.decode())
    # Written last: its presence says the set is complete.
    atomic_write(pki / "apiserver.crt", server_cert.public_bytes(serialization.Encoding.PEM).decode())


def ensure_audit_policy(paths: StatePaths) -> None:
    """The audit policy the API server reads at start (simrack.audit.POLICY)."""
    atomic_write(paths.audit_policy, json.dumps(audit.POLICY, indent=2) + "\n", mode=0o600)


def ensure_admin_credentials(paths: StatePaths, config: RackConfig) -> None:
    """A static admin token (group system:masters) and the kubeconfig that carries it."""
    tokens = paths.pki / "tokens.csv"
    if not tokens.exists():
        atomic_write(tokens, f'{secrets.token_hex(24)},admin,admin,"system:masters"\n', mode=0o600)
    token = tokens.read_text().split(",", 1)[0]
    ca_data = base64.b64encode((paths.pki / "ca.crt").read_bytes()).decode()
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gpu-fabric-sim",
                "cluster": {
                    "server": f"https://127.0.0.1:{config.ports.apiserver}",
                    "certificate-authority-data": ca_data,
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "gpu-fabric-sim", "context": {"cluster": "gpu-fabric-sim", "user": "admin"}}],
        "current-context": "gpu-fabric-sim",
        "preferences": {},
    }
    # JSON is YAML: kubectl, client-go and the Python client all read it.
    atomic_write(paths.kubeconfig, json.dumps(kubeconfig, indent=2) + "\n", mode=0o600)


# --- processes ----------------------------------------------------------------------------------


def read_pid(pid_file: Path) -> Optional[int]:
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def pid_alive(pid: Optional[int]) -> bool:
    """True for a live process that is not a zombie."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def component_pid(paths: StatePaths, name: str) -> Optional[int]:
    pid = read_pid(paths.pid_file(name))
    return pid if pid_alive(pid) else None


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def recorded_processes(paths: StatePaths) -> dict[str, Optional[int]]:
    """Every process recorded under <state>/pids, ours and the stand-ins', name -> live pid."""
    if not paths.pids.is_dir():
        return {}
    return {f.stem: (pid if pid_alive(pid := read_pid(f)) else None) for f in sorted(paths.pids.glob("*.pid"))}


def start_process(paths: StatePaths, name: str, argv: list[str], env: Optional[dict[str, str]] = None) -> int:
    """Start argv detached (own session, survives the CLI), log to <state>/logs/<name>.log."""
    paths.logs.mkdir(parents=True, exist_ok=True)
    paths.pids.mkdir(parents=True, exist_ok=True)
    with open(paths.log_file(name), "ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=paths.root,
            env=env,
        )
    atomic_write(paths.pid_file(name), f"{proc.pid}\n")
    return proc.pid


def stop_pid(pid: int, timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`; waits until the process is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.1)
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        while pid_alive(pid):
            _reap(pid)
            time.sleep(0.05)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            data = handle.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


# --- component command lines --------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    name: str
    argv: list[str]


def kwok_config_flags() -> list[str]:
    """KWOK options and one stage per file: `--config` may be given many times."""
    files = [KWOK_CONFIG_DIR / "kwok.yaml", *sorted((KWOK_CONFIG_DIR / "stages").glob("*.yaml"))]
    return [f"--config={f}" for f in files]


def dra_flags(k8s_version: str) -> dict[str, list[str]]:
    """Flags that make Kubernetes ``k8s_version`` serve DRA, per component (none from 1.34, where it is GA).

    On 1.32 and 1.33 DRA is beta and off by default: the feature gate on the API server, the
    controller manager and the scheduler (the kubelets are KWOK's), and the beta API versions on the
    API server, as a site enables it (cluster_preflight gives the same advice).
    """
    minor = int(k8s_version.lstrip("v").split(".")[1])
    if minor >= 34:
        return {}
    gate = ["--feature-gates=DynamicResourceAllocation=true"]
    beta = ["resource.k8s.io/v1beta1=true"] + (["resource.k8s.io/v1beta2=true"] if minor >= 33 else [])
    return {
        "kube-apiserver": [*gate, f"--runtime-config={','.join(beta)}"],
        "kube-controller-manager": gate,
        "kube-scheduler": gate,
    }


def component_commands(paths: StatePaths, config: RackConfig) -> dict[str, Component]:
    bindir = Path(config.bin_dir)
    p = config.ports
    pki = paths.pki
    kubeconfig = str(paths.kubeconfig)
    etcd_url = f"http://127.0.0.1:{p.etcd}"
    dra = dra_flags(config.k8s_version or build_versions()["K8S_VERSION"])
    commands = [
        Component(
            "etcd",
            [
                str(bindir / "etcd"),
                "--name=sim",
                f"--data-dir={paths.etcd_data}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-cluster=sim=http://127.0.0.1:{p.etcd_peer}",
                # a throwaway cluster: durability is not worth the disk syncs
                "--unsafe-no-fsync",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        ),
        Component(
            "kube-apiserver",
            [
                str(bindir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p.apiserver}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                # 127.0.0.1 is not a valid Endpoints address; nothing in the sim needs the
                # kubernetes Service's endpoints, so do not reconcile them.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                # what a ServiceAccount asked for (simrack.audit); the sim's own components are not logged
                f"--audit-policy-file={paths.audit_policy}",
                f"--audit-log-path={paths.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=200",
                "--audit-log-maxbackup=1",
                *dra.get("kube-apiserver", []),
            ],
        ),
        Component(
            "kube-controller-manager",
            [
                str(bindir / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--controllers=*",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # KWOK renews thousands of node Leases from one process; on a busy machine a renewal
                # can lag beyond the kubelet's 50 s, and nodes would flap NotReady.
                "--node-monitor-grace-period=300s",
                "--node-startup-grace-period=300s",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.controller_manager}",
                f"--cert-dir={pki / 'kcm'}",
                "--profiling=false",
                *dra.get("kube-controller-manager", []),
            ],
        ),
        Component(
            "kube-scheduler",
            [
                str(bindir / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.scheduler}",
                f"--cert-dir={pki / 'scheduler'}",
                "--profiling=false",
                *dra.get("kube-scheduler", []),
            ],
        ),
        Component(
            "kwok",
            [
                str(bindir / "kwok"),
                f"--kubeconfig={kubeconfig}",
                *kwok_config_flags(),
                "--manage-all-nodes=false",
                "--manage-nodes-with-label-selector=type=kwok",
                "--node-ip=127.0.0.1",
                "--node-name=localhost",
                f"--node-port={p.kwok}",
                f"--server-address=127.0.0.1:{p.kwok}",
                f"--cidr={POD_CIDR}",
                # Renewed every 30 s (a quarter), inside kube-controller-manager's 50 s grace period;
                # the kubelet's 40 s would cost a third more writes with thousands of trays.
                "--node-lease-duration-seconds=120",
                "--enable-crds=Logs,ClusterLogs",
                # INFO logs every lease renewal
                "--v=WARN",
            ],
        ),
    ]
    return {c.name: c for c in commands}


# --- readiness ----------------------------------------------------------------------------------


def _ssl_context(paths: StatePaths) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(paths.pki / "ca.crt"))


def admin_token(paths: StatePaths) -> str:
    return (paths.pki / "tokens.csv").read_text().split(",", 1)[0]


def apiserver_get(paths: StatePaths, config: RackConfig, path: str, timeout: float = 3.0) -> tuple[int, str]:
    request = urllib.request.Request(
        f"https://127.0.0.1:{config.ports.apiserver}{path}",
        headers={"Authorization": f"Bearer {admin_token(paths)}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_ssl_context(paths)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def apiserver_ready(paths: StatePaths, config: RackConfig) -> bool:
    try:
        status = apiserver_get(paths, config, "/readyz")[0]
    except (OSError, ssl.SSLError):
        return False
    return status == 200


def etcd_healthy(config: RackConfig) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{config.ports.etcd}/health", timeout=2) as response:
            return json.loads(response.read()).get("health") == "true"
    except (OSError, ValueError):
        return False


def wait_for(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    progress: Progress,
    alive: Optional[Callable[[], bool]] = None,
    log: Optional[Path] = None,
) -> None:
    """Poll `check` until true; fail early, with the log's tail, when the process died."""
    start = time.monotonic()
    last_note = start
    while not check():
        now = time.monotonic()
        if alive is not None and not alive():
            raise RuntimeError(
                f"{what}: the process exited while starting; last lines of {log}:\n{tail(log, 25) if log else ''}"
            )
        if now - start > timeout:
            raise RuntimeError(f"{what}: not ready after {timeout:.0f}s; see {log}:\n{tail(log, 25) if log else ''}")
        if now - last_note > 15:
            progress(f"  still waiting for {what} ({now - start:.0f}s)")
            last_note = now
        time.sleep(0.25)


def _port_ready(port: int) -> Callable[[], bool]:
    import socket

    def check() -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    return check


def component_ports(config: RackConfig, name: str) -> list[tuple[int, str]]:
    """The loopback ports a component listens on, with the variable that moves each one."""
    p = config.ports
    env = Ports.ENV
    return {
        "etcd": [(p.etcd, env["etcd"]), (p.etcd_peer, env["etcd_peer"])],
        "kube-apiserver": [(p.apiserver, env["apiserver"])],
        "kube-controller-manager": [(p.controller_manager, env["controller_manager"])],
        "kube-scheduler": [(p.scheduler, env["scheduler"])],
        "kwok": [(p.kwok, env["kwok"])],
    }[name]


def readiness_check(paths: StatePaths, config: RackConfig, name: str) -> Callable[[], bool]:
    p = config.ports
    return {
        "etcd": lambda: etcd_healthy(config),
        "kube-apiserver": lambda: apiserver_ready(paths, config),
        "kube-controller-manager": _port_ready(p.controller_manager),
        "kube-scheduler": _port_ready(p.scheduler),
        "kwok": _port_ready(p.kwok),
    }[name]


def ensure_component(paths: StatePaths, config: RackConfig, component: Component, progress: Progress) -> bool:
    """Start the component unless it runs already, then wait until it serves. True if started."""
    if component_pid(paths, component.name) is not None:
        return False
    for port, variable in component_ports(config, component.name):
        if _port_ready(port)():
            raise RuntimeError(
                f"{component.name}: port 127.0.0.1:{port} is already taken by another process (another rack, or "
                f"another program); stop it, or choose a free port with {variable}=<port>"
            )
    progress(f"starting {component.name}")
    pid = start_process(paths, component.name, component.argv)
    timeout = 120.0 if component.name == "kube-apiserver" else 60.0
    wait_for(
        component.name,
        readiness_check(paths, config, component.name),
        timeout,
        progress,
        alive=lambda: pid_alive(pid),
        log=paths.log_file(component.name),
    )
    return True


def restart_apiserver(paths: StatePaths, config: RackConfig, progress: Progress) -> tuple[float, float]:
    """Kill kube-apiserver and start it again on the same etcd.

    Returns the seconds without an API, then the seconds kube-controller-manager took after that to
    act on a new object again (`controllers_caught_up`): the rack is whole when this returns.
    """
    component = component_commands(paths, config)["kube-apiserver"]
    start = time.monotonic()
    pid = component_pid(paths, component.name)
    if pid is not None:
        progress(f"stopping kube-apiserver (pid {pid})")
        stop_pid(pid)
    ensure_component(paths, config, component, progress)
    downtime = time.monotonic() - start
    return downtime, controllers_caught_up(paths, config, progress)


# client-go's reflector re-lists after a failed watch with a backoff of 0.8 s doubling to 30 s, jittered
# up to twice that, and reset only after 2 minutes without a failure; one minute covers it, the rest
# is for a loaded machine.
CATCH_UP_TIMEOUT = 180.0


def controllers_caught_up(
    paths: StatePaths, config: RackConfig, progress: Progress, timeout: float = CATCH_UP_TIMEOUT
) -> float:
    """Wait until kube-controller-manager acts on a new object again; returns the seconds it took.

    After kube-apiserver restarts, the controller-manager's informers reconnect with the reflector's
    backoff, so its controllers can lag the API by up to a minute, and longer after restarts close
    together (a real control plane does the same). The sign that they caught up is the one `up` waits
    for: a new namespace gets its `default` ServiceAccount. The probe namespace is deleted after.
    """
    name = f"sim-probe-{secrets.token_hex(4)}"
    kubectl(config, paths, "create", "namespace", name)
    try:
        start = time.monotonic()
        wait_default_service_account(paths, config, name, timeout, progress)
        kubelets_serve_logs(paths, config, name, max(1.0, timeout - (time.monotonic() - start)), progress)
        return time.monotonic() - start
    finally:
        kubectl(config, paths, "delete", "namespace", name, "--wait=false", check=False)
        (paths.root / f"{name}.log").unlink(missing_ok=True)


def kubelets_serve_logs(
    paths: StatePaths, config: RackConfig, namespace: str, timeout: float, progress: Progress
) -> None:
    """Wait until KWOK, the trays' kubelets, serves a new pod's log from a new Logs object.

    KWOK's informers reconnect after a kube-apiserver restart with the same reflector backoff as the
    controller-manager's (a real kubelet's do too); until its Logs informer has re-listed, `kubectl logs` of a
    pod made since answers 400 "no logs found". The probe pod is bound to a tray (no scheduler needed) and
    goes with its namespace.
    """
    from simrack.logs import cri_lines

    tray = kubectl(config, paths, "get", "nodes", "-l", "type=kwok", "-o", "jsonpath={.items[0].metadata.name}")
    logfile = paths.root / f"{namespace}.log"
    logfile.write_text(cri_lines("probe\n"))
    objects = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": {
                "nodeName": tray.stdout.strip(),
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "probe", "image": "registry.invalid/sim-probe:1"}],
            },
        },
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": {"logs": [{"containers": [], "logsFile": str(logfile), "follow": False}]},
        },
    ]
    kubectl(
        config, paths, "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    wait_for(
        f"KWOK to serve the log of pod {namespace}/probe (its informers re-list after the restart)",
        lambda: apiserver_get(paths, config, f"/api/v1/namespaces/{namespace}/pods/probe/log")[0] == 200,
        timeout,
        progress,
        log=paths.log_file("kwok"),
    )


def wait_default_service_account(
    paths: StatePaths, config: RackConfig, namespace: str, timeout: float, progress: Progress
) -> float:
    """Wait until kube-controller-manager made the `default` ServiceAccount of `namespace` (no pod can be
    created in a namespace before it); returns the seconds it took."""
    start = time.monotonic()
    wait_for(
        f"kube-controller-manager to make the default ServiceAccount of namespace {namespace}",
        lambda: apiserver_get(paths, config, f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0] == 200,
        timeout,
        progress,
        log=paths.log_file("kube-controller-manager"),
    )
    return time.monotonic() - start


def kwok_crd_files(bindir: Path) -> list[Path]:
    """The Logs and ClusterLogs CRDs from the kwok module in the Go module cache (not copied)."""
    version = _kwok_version(bindir)
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/kwok@v{version}"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"`go mod download sigs.k8s.io/kwok@v{version}` failed ({result.stderr.strip() or result.stdout.strip()}); "
            "the kwok CRDs come from the Go module cache: check that the Go module proxy is reachable"
        )
    module_dir = Path(json.loads(result.stdout)["Dir"])
    files = [module_dir / "kustomize" / "crd" / "bases" / f"kwok.x-k8s.io_{name}.yaml" for name in KWOK_CRDS]
    for f in files:
        if not f.exists():
            raise RuntimeError(f"{f} is missing from the kwok module; expected the CRD bases of kwok v{version}")
    return files


def _kwok_version(bindir: Path) -> str:
    # bin dir is .../k8s<v>-etcd<v>-kwok<v>-helm<v>/bin
    for part in bindir.parent.name.split("-"):
        if part.startswith("kwok"):
            return part[len("kwok") :]
    raise RuntimeError(f"cannot tell the kwok version from {bindir}")


def kubectl(
    config: RackConfig, paths: StatePaths, *args: str, check: bool = True, input: Optional[str] = None
) -> subprocess.CompletedProcess:
    argv = [str(Path(config.bin_dir) / "kubectl"), f"--kubeconfig={paths.kubeconfig}", *args]
    result = subprocess.run(argv, capture_output=True, text=True, input=input, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{result.stderr.strip()}")
    return result
