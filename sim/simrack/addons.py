# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA stand-ins of the simulated rack: Helm repository, MPI operator manifest, controllers.

``python -m simrack.addons up --state DIR --kubeconfig FILE --bin DIR`` (run by ``sim/rack up``):

1. packages with the sim's Helm into ``<state>/www/charts``, and indexes, the charts of both release sets
   (``RELEASE_SETS``): set 26.7 from the sources ``sim/charts/*`` (gpu-operator v26.7.0,
   dra-driver-nvidia-gpu 0.4.1), set 25.10 derived from them (gpu-operator v25.10.0, nvidia-dra-driver-gpu
   25.8.0); serves ``sim/manifests/mpi-operator.yaml`` as ``/mpi-operator/v0.8.2/`` and, its image
   replaced, as ``/mpi-operator/v0.6.0/``;
2. starts, unless already running, the HTTP server for ``<state>/www`` on 127.0.0.1 and the
   stand-in controllers, each a background process with ``<state>/pids/<name>.pid`` and
   ``<state>/logs/<name>.log`` (``addons-http``, ``standin-<controller>``);
3. writes ``<state>/endpoints.json`` (``helm_repo_url``, ``mpi_operator_manifest_url`` (v0.8.2),
   ``mpi_operator_previous_manifest_url`` (v0.6.0)).

``status`` lists the processes; ``down`` stops them (``sim/rack down`` also does, by pid file).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

SIM_DIR = Path(__file__).resolve().parent.parent
CHARTS_DIR = SIM_DIR / "charts"
MPI_MANIFEST = SIM_DIR / "manifests" / "mpi-operator.yaml"
MPI_OPERATOR_VERSION = "v0.8.2"
# The image tags of the two manifests: upstream's v0.8.2 manifest names the minor tag (release-0.8, "Prepare v0.8.2").
MPI_OPERATOR_IMAGE_TAG = "0.8"
PREVIOUS_MPI_OPERATOR_IMAGE_TAG = "0.6.0"
PREVIOUS_MPI_OPERATOR_VERSION = "v0.6.0"
# The two named release sets the repository serves: 26.7 (the default, the sources) and 25.10 (the guide's
# set, derived). Upgrade tests install set 25.10 first (version A), then 26.7 (B): every derived chart
# carries an extra ConfigMap that B no longer ships (an upgrade must remove it), and every chart's CRDs are
# stamped with its version (an upgrade must re-apply B's CRDs, which Helm alone never does).
RELEASE_SETS = {
    "26.7": {"gpu-operator": "v26.7.0", "dra-driver-nvidia-gpu": "0.4.1", "mpi-operator": MPI_OPERATOR_VERSION},
    "25.10": {
        "gpu-operator": "v25.10.0",
        "nvidia-dra-driver-gpu": "25.8.0",
        "mpi-operator": PREVIOUS_MPI_OPERATOR_VERSION,
    },
}
CHART_VERSION_ANNOTATION = "gpu-fabric.sim/chart-version"
PREVIOUS_ONLY_TEMPLATE = """\
# Only in the previous version of the stand-in: an upgrade to the current one removes it.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-previous-only
  namespace: {{ .Release.Namespace }}
data:
  chartVersion: {{ .Chart.Version | quote }}
"""
HTTP = "addons-http"
CONTROLLERS = ("compute-domain-controller", "dra-kubelet-plugin", "gpu-operator", "mpi-operator", "podlogs")
PROCESS_PREFIX = "standin-"


def say(msg: str) -> None:
    print(f"[sim addons {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pid_file(state: Path, name: str) -> Path:
    return state / "pids" / f"{name}.pid"


def running_pid(state: Path, name: str) -> Optional[int]:
    """The pid recorded for ``name`` if that process is alive and is ours."""
    try:
        pid = int(pid_file(state, name).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if "simrack" in cmdline else None


def start(state: Path, name: str, argv: list[str]) -> int:
    (state / "pids").mkdir(parents=True, exist_ok=True)
    (state / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SIM_DIR), os.environ.get("PYTHONPATH")]))}
    with open(state / "logs" / f"{name}.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(SIM_DIR),
            start_new_session=True,
        )
    pid_file(state, name).write_text(f"{proc.pid}\n")
    return proc.pid


def sources_digest() -> str:
    digest = hashlib.sha256()
    # This file too: it derives the previous versions from the sources.
    for path in sorted(p for p in [*CHARTS_DIR.rglob("*"), MPI_MANIFEST, Path(__file__).resolve()] if p.is_file()):
        digest.update(str(path.relative_to(SIM_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Derivation:
    """How an older chart differs from the source it is derived from: what the real older release lacks
    or has otherwise. Each text replacement must match (a source that drifted fails the packaging)."""

    source: str  # directory under sim/charts
    name: str
    version: str
    texts: tuple[tuple[str, str, str], ...] = ()  # (file glob, old, new), in order
    drop: tuple[str, ...] = ()  # files the older chart does not have
    values: Callable[[dict[str, Any]], None] = lambda values: None
    crds: Callable[[dict[str, Any]], None] = lambda crd: None


def _gpu_operator_v25_10_values(values: dict[str, Any]) -> None:
    for key in ("clusterPolicy", "gpuCluster", "draDriver"):
        values.pop(key)
    values["driver"].pop("nvidiaDriverCRD")
    versions = {
        "driver": "580.95.05",
        "toolkit": "v1.18.0",
        "devicePlugin": "v0.18.0",
        "dcgm": "4.4.1-2-ubuntu22.04",
        "dcgmExporter": "4.4.1-4.6.0-distroless",
        "gfd": "v0.18.0",
        "migManager": "v0.13.0",
    }
    for component, version in versions.items():
        values[component]["version"] = version
    monitor = values["dcgmExporter"]["serviceMonitor"]
    monitor["enabled"] = False
    monitor.pop("scrapeTimeout")
    values["ccManager"] = {"enabled": False}


def _nvidia_dra_driver_25_8_crd(crd: dict[str, Any]) -> None:
    """25.8.0's ComputeDomain requires numNodes and has no default for it (0.4 made it optional)."""
    if crd["metadata"]["name"] != "computedomains.resource.nvidia.com":
        return
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["required"] = ["numNodes", *spec["required"]]
        spec["properties"]["numNodes"].pop("default")


DERIVED = (
    Derivation(
        source="gpu-operator",
        name="gpu-operator",
        version="v25.10.0",
        texts=(
            ("**/*.yaml", "v26.7.0", "v25.10.0"),
            ("templates/clusterpolicy.yaml", "{{- if .Values.clusterPolicy.deployCR }}\n", ""),
            ("templates/clusterpolicy.yaml", "\n{{- end }}\n", "\n"),
            ("templates/rbac.yaml", ', "gpuclusters", "gpuclusters/status"', ""),
        ),
        drop=(
            "crds/nvidia.com_gpuclusters.yaml",
            "crds/resource.nvidia.com_computedomains.yaml",
            "crds/resource.nvidia.com_computedomaincliques.yaml",
            "templates/gpucluster.yaml",
            "templates/validations.yaml",
        ),
        values=_gpu_operator_v25_10_values,
    ),
    Derivation(
        source="dra-driver-nvidia-gpu",
        name="nvidia-dra-driver-gpu",
        version="25.8.0",
        texts=(
            ("**/*.yaml", '"0.4.1"', '"25.8.0"'),
            (
                "values.yaml",
                "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
                "nvcr.io/nvidia/k8s-dra-driver-gpu",
            ),
            (
                "templates/rbac.yaml",
                '  - apiGroups: ["resource.nvidia.com"]\n    resources: ["computedomaincliques", '
                '"computedomaincliques/status"]\n    verbs: ["get", "list", "watch", "create", "update", "patch", '
                '"delete"]\n',
                "",
            ),
            ("**/*", "dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"),
        ),
        drop=("crds/resource.nvidia.com_computedomaincliques.yaml",),
        crds=_nvidia_dra_driver_25_8_crd,
    ),
)


def stamp_crds(chart: Path, version: str, edit: Callable[[dict[str, Any]], None] = lambda crd: None) -> None:
    """Annotate each CRD of a staged chart with the chart version it came from (after ``edit``)."""
    import yaml  # the sim's Python has PyYAML (the kubernetes client needs it)

    for path in sorted((chart / "crds").glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for doc in docs:
            edit(doc)
            doc.setdefault("metadata", {}).setdefault("annotations", {})[CHART_VERSION_ANNOTATION] = version
        # each file starts with "---", as the real charts' CRD files do (helm show crds prints them back to back)
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))


def chart_version(chart: Path) -> str:
    import yaml

    return str(yaml.safe_load((chart / "Chart.yaml").read_text())["version"])


def stage_chart(source: Path, staging: Path) -> Path:
    """A copy of a source chart to package, its CRDs stamped with its version."""
    staged = staging / source.name
    shutil.copytree(source, staged)
    stamp_crds(staged, chart_version(staged))
    return staged


def derive_chart(derivation: Derivation, staging: Path, charts_dir: Path = CHARTS_DIR) -> Path:
    """The older chart of ``derivation``, staged from its source: files dropped, texts replaced, values and
    CRDs edited, the ``previous-only`` ConfigMap added, its CRDs stamped with its version."""
    import yaml

    staged = staging / f"{derivation.name}-{derivation.version}"
    shutil.copytree(charts_dir / derivation.source, staged)
    for rel in derivation.drop:
        (staged / rel).unlink()
    for pattern, old, new in derivation.texts:
        files = [p for p in sorted(staged.glob(pattern)) if p.is_file()]
        hits = [p for p in files if old in p.read_text()]
        if not hits:
            raise SystemExit(f"deriving {derivation.name} {derivation.version}: {old!r} not found in {pattern}")
        for path in hits:
            path.write_text(path.read_text().replace(old, new))
    values_file = staged / "values.yaml"
    values = yaml.safe_load(values_file.read_text())
    derivation.values(values)
    header = f"# {derivation.name} {derivation.version}, derived by sim/simrack/addons.py from {derivation.source}\n"
    values_file.write_text(header + yaml.safe_dump(values, sort_keys=False))
    (staged / "templates" / "previous-only.yaml").write_text(PREVIOUS_ONLY_TEMPLATE)
    if chart_version(staged) != derivation.version:
        found = chart_version(staged)
        raise SystemExit(f"deriving {derivation.name}: Chart.yaml says {found}, not {derivation.version}")
    stamp_crds(staged, derivation.version, derivation.crds)
    return staged


def build_repository(state: Path, bin_dir: Path) -> Path:
    """Package every chart and index them; copy the MPI operator manifest. Answers the web root.

    Rebuilt only when the sources changed, into a new directory swapped in by rename, so a rack
    in use keeps serving while ``up`` runs again.
    """
    www = state / "www"
    charts = www / "charts"
    digest = sources_digest()
    stamp = www / ".sources"
    if charts.is_dir() and stamp.exists() and stamp.read_text() == digest:
        return www
    helm = str(bin_dir / "helm") if (bin_dir / "helm").exists() else shutil.which("helm")
    if not helm:
        raise SystemExit(f"helm not found in {bin_dir} nor on PATH: run sim/build.sh (sim/rack up builds it)")
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(state / "helm" / "cache"),
        "HELM_CONFIG_HOME": str(state / "helm" / "config"),
        "HELM_DATA_HOME": str(state / "helm" / "data"),
    }
    fresh = www / "charts.new"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    staging = www / "charts.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    sources = sorted(p for p in CHARTS_DIR.iterdir() if (p / "Chart.yaml").exists())
    staged = [stage_chart(chart, staging) for chart in sources]
    staged += [derive_chart(derivation, staging) for derivation in DERIVED]
    for path in staged:
        subprocess.run([helm, "package", str(path), "-d", str(fresh)], check=True, env=env, stdout=subprocess.DEVNULL)
    shutil.rmtree(staging, ignore_errors=True)
    # Relative chart URLs: Helm resolves them against the repository URL, whatever the port.
    subprocess.run([helm, "repo", "index", str(fresh)], check=True, env=env)
    if charts.exists():
        old = www / "charts.old"
        shutil.rmtree(old, ignore_errors=True)
        charts.rename(old)
        fresh.rename(charts)
        shutil.rmtree(old, ignore_errors=True)
    else:
        fresh.rename(charts)
    manifest_dir = www / "mpi-operator" / MPI_OPERATOR_VERSION
    manifest_dir.mkdir(parents=True, exist_ok=True)
    tmp = manifest_dir / "mpi-operator.yaml.tmp"
    shutil.copyfile(MPI_MANIFEST, tmp)
    tmp.replace(manifest_dir / "mpi-operator.yaml")
    previous_dir = www / "mpi-operator" / PREVIOUS_MPI_OPERATOR_VERSION
    previous_dir.mkdir(parents=True, exist_ok=True)
    current_tag, previous_tag = MPI_OPERATOR_IMAGE_TAG, PREVIOUS_MPI_OPERATOR_IMAGE_TAG
    text = (
        MPI_MANIFEST.read_text()
        .replace(f"mpi-operator:{current_tag}", f"mpi-operator:{previous_tag}")
        .replace(f"MPI operator {MPI_OPERATOR_VERSION}", f"MPI operator {PREVIOUS_MPI_OPERATOR_VERSION}")
    )
    (previous_dir / "mpi-operator.yaml.tmp").write_text(text)
    (previous_dir / "mpi-operator.yaml.tmp").replace(previous_dir / "mpi-operator.yaml")
    stamp.write_text(digest)
    return www


def ensure_http(state: Path, www: Path) -> int:
    """Start the HTTP server unless it runs; keep the previous port when it is still free."""
    port_file = state / "addons-http.port"
    if running_pid(state, HTTP) and port_file.exists():
        return int(port_file.read_text())
    previous = int(read_endpoints(state).get("http_port", 0))
    for port in dict.fromkeys((previous, 0)):
        port_file.unlink(missing_ok=True)
        start(
            state, HTTP, ["-m", "simrack.serve", "--root", str(www), "--port", str(port), "--port-file", str(port_file)]
        )
        for _ in range(50):
            if port_file.exists():
                return int(port_file.read_text())
            time.sleep(0.1)
    raise SystemExit(f"the add-ons HTTP server did not start: see {state / 'logs' / f'{HTTP}.log'}")


def read_endpoints(state: Path) -> dict:
    try:
        return json.loads((state / "endpoints.json").read_text())
    except (OSError, ValueError):
        return {}


def up(state: Path, kubeconfig: str, bin_dir: Path) -> None:
    say(
        "Helm repository: release set 26.7 (gpu-operator v26.7.0, dra-driver-nvidia-gpu 0.4.1, MPI operator v0.8.2) "
        "and 25.10 (gpu-operator v25.10.0, nvidia-dra-driver-gpu 25.8.0, MPI operator v0.6.0), packaged when changed"
    )
    www = build_repository(state, bin_dir)
    port = ensure_http(state, www)
    base = f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(f"{base}/charts/index.yaml", timeout=5) as resp:
        if resp.status != 200:
            raise SystemExit(f"{base}/charts/index.yaml answered {resp.status}")
    say(f"Helm repository and MPI operator manifest served at {base}")
    for name in CONTROLLERS:
        if running_pid(state, PROCESS_PREFIX + name):
            continue
        pid = start(
            state,
            PROCESS_PREFIX + name,
            ["-m", "simrack.controllers", name, "--state", str(state), "--kubeconfig", kubeconfig],
        )
        say(f"started stand-in {name} (pid {pid})")
    endpoints = {
        **read_endpoints(state),
        "http_port": port,
        "helm_repo_url": f"{base}/charts",
        "mpi_operator_manifest_url": f"{base}/mpi-operator/{MPI_OPERATOR_VERSION}/mpi-operator.yaml",
        "mpi_operator_previous_manifest_url": f"{base}/mpi-operator/{PREVIOUS_MPI_OPERATOR_VERSION}/mpi-operator.yaml",
    }
    tmp = state / "endpoints.json.tmp"
    tmp.write_text(json.dumps(endpoints, indent=2) + "\n")
    tmp.replace(state / "endpoints.json")
    say("stand-ins up: " + ", ".join(f"{k}={v}" for k, v in endpoints.items() if k.endswith("_url")))


def status(state: Path) -> int:
    missing = 0
    for name in (HTTP, *(PROCESS_PREFIX + c for c in CONTROLLERS)):
        pid = running_pid(state, name)
        print(f"{name:28} {'running, pid ' + str(pid) if pid else 'not running'}")
        missing += pid is None
    return 1 if missing else 0


def down(state: Path) -> None:
    for name in (HTTP, *(PROCESS_PREFIX + c for c in CONTROLLERS)):
        pid = running_pid(state, name)
        if pid:
            os.kill(pid, signal.SIGTERM)
        pid_file(state, name).unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m simrack.addons")
    parser.add_argument("command", choices=("up", "status", "down"))
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--bin", type=Path, default=Path("/nonexistent"))
    args = parser.parse_args(argv)
    state = args.state.resolve()
    if args.command == "up":
        if not args.kubeconfig:
            parser.error("up needs --kubeconfig")
        up(state, str(Path(args.kubeconfig).resolve()), args.bin)
        return 0
    if args.command == "status":
        return status(state)
    down(state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
