# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container-log writer: gives pods on the KWOK trays the output their real containers print.

For each pod it writes a CRI-format file under ``<state>/podlogs/<namespace>/<pod>.log`` and a
kwok ``Logs`` object (same name and namespace as the pod, owned by it) pointing at the file, so
``kubectl logs`` and ``kubernetes.core.k8s_log`` read it through kwok's kubelet server:

* a pod labelled ``gpu-fabric.nvidia.com/check: <name>`` that a program of ``simrack/programs`` claims
  (its ``CHECK``): what that program's ``log(pod, node, faults)`` returns, written once the pod is bound
  to its tray (``node``: that Node object); the programs are consulted before everything below;
* a pod claiming a ComputeDomain's channel template (and not an MPI worker): the
  ``ls -la /dev/nvidia-caps-imex-channels`` listing; without ``channel0`` when the fault
  ``channel-missing`` is on or the node has no clique label (the real driver injects no channel
  on a node without a clique ID);
* an MPIJob launcher pod: nvbandwidth output scaled to workers x slotsPerWorker ranks, or an
  nccl-tests ``all_reduce_perf`` table when the command runs it; a launcher with a non-zero
  ``gpu-fabric.sim/exit-code`` annotation ends with the CUDA/MPI error instead.

The matrix faults are per rack (param ``rack``, default 0): ``degraded-link`` (src, dst, gbps)
sets one cell, ``degraded-gpu`` (gpu, factor) scales a row and a column, of the matrix of a job
on that rack. The rack of an MPIJob is the rack of the trays its worker pods are bound to (all
of them on one rack), else the rack of the trays its worker template's node affinity or node
selector names (``kubernetes.io/hostname`` values, or the ``gpu-fabric.sim/rack`` label); a job
whose workers span racks, or that names no tray, gets no matrix fault.

A log is written once, when the pod is first seen; faults switched later do not rewrite it.

With ``rack-run-time scale=S`` on, an nvbandwidth launcher runs as long as the run-time model of the
collection (``plugins/module_utils/nvbandwidth_runtime.py``: its ranks, testcase, ``-b``, ``-i``) says a
real rack takes, times S, before it is let finish (tests set a small S, e.g. 0.01: a 16-GPU rack's 55 s
become 0.55 s); off (the default), it finishes 2.5 s after its log is served, as before.

A real container's output is in its log before the container exits, so a reader that sees a
finished pod can read what it printed. The kwok stages that finish a Job's pod (the launcher) wait
for the annotation ``gpu-fabric.sim/log-written``, set here once the pod's ``Logs`` object exists
(or once it is known that the pod prints nothing of interest): a launcher never completes before
its log is served, however loaded the machine is.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import shutil
import sys
import threading
import time
from types import ModuleType
from typing import Any, Optional

from simrack import REPO_ROOT, faultspec, hardware, logs, programs
from simrack.controllers.base import Controller, labels_of
from simrack.controllers.kube import COMPUTEDOMAINS, KWOK_LOGS, MPIJOBS, NODES, PODS, owner_reference
from simrack.controllers.mpioperator import (
    EXIT_CODE_ANNOTATION,
    JOB_NAME,
    JOB_ROLE,
    LOG_WRITTEN,
    WORKER_LOST_ANNOTATION,
    defaults,
)
from simrack.nodes import RACK_LABEL, parse_tray_name

log = logging.getLogger("simrack")

CLIQUE_LABEL = "nvidia.com/gpu.clique"
POD_UID = "gpu-fabric.sim/pod-uid"
RUNTIME_MODEL = REPO_ROOT / "plugins" / "module_utils" / "nvbandwidth_runtime.py"
SIM_GPU_PRODUCT = "NVIDIA-GB200"  # what the sim's trays are labelled


@functools.lru_cache(maxsize=1)
def runtime_model() -> ModuleType:
    """The collection's nvbandwidth run-time model (standard library only), loaded from its file."""
    spec = importlib.util.spec_from_file_location("gpu_fabric_nvbandwidth_runtime", RUNTIME_MODEL)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {RUNTIME_MODEL}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def launcher_run_seconds(pod: dict[str, Any], mpijob: dict[str, Any], scale: float) -> float:
    """Seconds the launcher ``pod`` of ``mpijob`` runs before it may finish: the modelled run time of a real
    rack x ``scale``; 0 when scale is 0, for nccl-tests, and for a launcher that fails."""
    argv = command_line(pod)
    exit_code = ((pod["metadata"].get("annotations") or {}).get(EXIT_CODE_ANNOTATION) or "0").strip()
    if scale <= 0 or exit_code not in ("", "0") or not any(a.endswith("nvbandwidth") for a in argv):
        return 0.0
    spec = defaults(mpijob.get("spec") or {})
    ranks = int(spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0)) * int(spec["slotsPerWorker"])
    if ranks < 1:
        return 0.0
    tool = next(i for i, a in enumerate(argv) if a.endswith("nvbandwidth"))
    model = runtime_model()
    estimate = model.estimate_for(testcase_of(argv), ranks, argv[tool + 1 :], SIM_GPU_PRODUCT)
    return float(estimate.seconds) * scale


def owned_by_job(pod: dict[str, Any]) -> bool:
    return any(ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or [])


def command_line(pod: dict[str, Any]) -> list[str]:
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        return []
    c = containers[0]
    return [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]


def testcase_of(argv: list[str]) -> str:
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-t", "--testcase"):
            return argv[i + 1]
    return logs.DEFAULT_TESTCASE


def _racks_of_trays(names: list[str]) -> set[int]:
    return {parsed[0] for parsed in map(parse_tray_name, names) if parsed is not None}


def _template_racks(spec: dict[str, Any]) -> set[int]:
    """Racks the Worker template pins its pods to: tray names under ``kubernetes.io/hostname`` (or
    ``metadata.name``) in the node selector or the required node affinity, or ``rack<N>`` values
    of the ``gpu-fabric.sim/rack`` label."""
    worker = (spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}
    pod_spec = (worker.get("template") or {}).get("spec") or {}
    pairs: list[tuple[str, list[str]]] = [(k, [str(v)]) for k, v in (pod_spec.get("nodeSelector") or {}).items()]
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in [*(term.get("matchExpressions") or []), *(term.get("matchFields") or [])]:
            if expr.get("operator", "In") == "In":
                pairs.append((str(expr.get("key", "")), [str(v) for v in expr.get("values") or []]))
    racks: set[int] = set()
    for key, values in pairs:
        if key in ("kubernetes.io/hostname", "metadata.name"):
            racks |= _racks_of_trays(values)
        elif key == RACK_LABEL:
            racks |= {int(v[4:]) for v in values if v.startswith("rack") and v[4:].isdigit()}
    return racks


def mpijob_rack(mpijob: dict[str, Any], workers: list[dict[str, Any]]) -> Optional[int]:
    """The rack an MPIJob runs on: that of the trays its workers are bound to, else that of the trays
    its Worker template names; None when they span racks or name none."""
    bound = _racks_of_trays([str((w.get("spec") or {}).get("nodeName") or "") for w in workers])
    if bound:
        return bound.pop() if len(bound) == 1 else None
    named = _template_racks(mpijob.get("spec") or {})
    return named.pop() if len(named) == 1 else None


def rank_gpus(
    mpijob: dict[str, Any], workers: list[dict[str, Any]], rack: Optional[int], slots: int, n_workers: int
) -> list[tuple[str, int]]:
    """(tray, GPU on the tray) of each rank (``ppr:<slots>:node``: worker w's ranks are its tray's GPUs 0..slots-1):
    the tray worker ``<job>-worker-<w>`` is bound to, else, before the workers are bound, the rack's trays in order."""
    name = mpijob["metadata"]["name"]
    bound = {
        str((w.get("metadata") or {}).get("name") or ""): str((w.get("spec") or {}).get("nodeName") or "")
        for w in workers
    }
    ranks = []
    for w in range(n_workers):
        tray = bound.get(f"{name}-worker-{w}") or (f"gb200-r{rack}-t{w}" if rack is not None else "")
        ranks.extend((tray, s) for s in range(slots))
    return ranks


def launcher_log(
    pod: dict[str, Any],
    mpijob: dict[str, Any],
    faults: dict[str, dict[str, Any]],
    workers: Optional[list[dict[str, Any]]] = None,
) -> str:
    spec = defaults(mpijob.get("spec") or {})
    n_workers = int(spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0))
    slots = int(spec["slotsPerWorker"])
    hostnames, devices = logs.ranks_for(mpijob["metadata"]["name"], n_workers, slots)
    argv = command_line(pod)
    exit_code = ((pod["metadata"].get("annotations") or {}).get(EXIT_CODE_ANNOTATION) or "0").strip()
    failing = exit_code not in ("", "0")
    lost = (pod["metadata"].get("annotations") or {}).get(WORKER_LOST_ANNOTATION)
    rack = mpijob_rack(mpijob, workers or [])
    # A lost NVLink (nvlink-down, degraded-gpu) is the tray's hardware: it slows the ranks of the GPU where its worker
    # runs (hardware.rank_factors), not a place in the matrix; degraded-link stays a measurement fault of one cell.
    measured = {name: params for name, params in faults.items() if name != "degraded-gpu"}
    cells, factors, notes = faultspec.matrix_faults(measured, rack, len(hostnames))
    for rank, factor in hardware.rank_factors(faults, rank_gpus(mpijob, workers or [], rack, slots, n_workers)).items():
        factors[rank] = min(factor, factors.get(rank, 1.0))
    if any(a.endswith("all_reduce_perf") for a in argv) and not failing:
        # a ring all-reduce moves at the pace of its slowest GPU: one that lost links slows the rack's job
        slowest = min(factors.values(), default=1.0)
        return logs.all_reduce_perf_text(argv, len(hostnames), hostnames, logs.mean_measured_cell() * slowest)
    ref = f"{mpijob['metadata'].get('namespace')}/{mpijob['metadata']['name']}"
    for note in notes:
        log.warning("MPIJob %s (rack %s): fault %s", ref, rack, note)
    if cells or factors:
        log.info("MPIJob %s on rack %s: degraded cells %s, GPU factors %s", ref, rack, cells, factors)
    run = logs.NvbandwidthRun(
        hostnames=hostnames,
        local_devices=devices,
        testcase=testcase_of(argv),
        degraded=cells,
        gpu_factors=factors,
        failure=f"worker-lost:{lost}" if lost else "launcher-fails" if failing else None,
    )
    return logs.nvbandwidth_text(run)


def program_log(
    program: programs.Program, pod: dict[str, Any], node: dict[str, Any], faults: dict[str, dict[str, Any]]
) -> Optional[tuple[str, int]]:
    """What ``program`` says the pod prints on ``node``, and the exit code its container ends with (a program's
    ``log`` returns the text, or the text and a code); None (and the error in the stand-in's log) when it fails,
    so one broken program does not stop the other pods' logs."""
    try:
        answer = program.log(pod, node, faults)
        text, code = answer if isinstance(answer, tuple) and len(answer) == 2 else (answer, 0)
        if not isinstance(text, str) or not isinstance(code, int):
            raise TypeError(f"log() returned {type(answer).__name__}, not str or (str, int)")
        return text, code
    except Exception:
        meta = pod["metadata"]
        log.exception(
            "simrack/programs/%s.py: no log for %s/%s", program.module, meta.get("namespace"), meta.get("name")
        )
        return None


class PodLogsController(Controller):
    name = "podlogs"
    watched = (PODS,)
    resync = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.root = self.state / "podlogs"
        self.done: set[str] = set()  # pod UIDs whose Logs object exists
        self.lost: set[str] = set()  # launcher pod UIDs whose log says a worker was lost
        self.running: dict[str, float] = {}  # launcher pod UID -> when (monotonic) its modelled run ends
        try:  # the checks' stand-in programs, found once (a program added later needs a restart of the stand-ins)
            self.programs = programs.discover()
        except programs.ProgramError as err:
            log.error("no check programs: %s", err)
            self.programs = {}

    def reconcile(self) -> None:
        pods = self.list(PODS)
        live = {p["metadata"]["uid"] for p in pods}
        self.done &= live
        self.lost &= live
        self.running = {uid: end for uid, end in self.running.items() if uid in live}
        for pod in pods:  # launchers whose modelled run is over may finish now
            end = self.running.get(pod["metadata"]["uid"])
            if end is not None and time.monotonic() >= end:
                self.mark_written(pod)
                del self.running[pod["metadata"]["uid"]]
        pending = [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and (p["metadata"]["uid"] not in self.done or self.newly_lost(p))
        ]
        channel_templates: Optional[set[tuple[str, str]]] = None
        mpijobs: Optional[dict[tuple[str, str], dict[str, Any]]] = None
        for pod in pending:
            meta = pod["metadata"]
            role = labels_of(pod).get(JOB_ROLE)
            text = None
            mpijob: Optional[dict[str, Any]] = None
            program = self.programs.get(labels_of(pod).get(programs.CHECK_LABEL) or "")
            if program is not None:
                node_name = (pod.get("spec") or {}).get("nodeName")
                if not node_name:
                    continue  # written once the pod is bound to its tray
                node = self.kube.get(NODES, node_name) or {"metadata": {"name": node_name}}
                output = program_log(program, pod, node, self.faults)
                if output is None:
                    self.done.add(meta["uid"])
                    continue
                text = output[0]
                self.publish(pod, text)
                self.mark_written(pod, exit_code=output[1])  # the kwok stages gb200-check-pod-* let it exit
                self.done.add(meta["uid"])
                continue
            elif role == "launcher":
                if mpijobs is None:
                    mpijobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in self.kube.list(MPIJOBS)}
                job_name = labels_of(pod).get(JOB_NAME, "")
                mpijob = mpijobs.get((meta["namespace"], job_name))
                if mpijob is not None:
                    workers = [
                        p
                        for p in pods
                        if p["metadata"].get("namespace") == meta["namespace"]
                        and labels_of(p).get(JOB_NAME) == job_name
                        and labels_of(p).get(JOB_ROLE) == "worker"
                    ]
                    text = launcher_log(pod, mpijob, self.faults, workers)
            elif role != "worker" and (pod.get("spec") or {}).get("resourceClaims"):
                if channel_templates is None:
                    channel_templates = {
                        (cd["metadata"]["namespace"], cd["spec"]["channel"]["resourceClaimTemplate"]["name"])
                        for cd in self.kube.list(COMPUTEDOMAINS)
                    }
                claims = {
                    (meta["namespace"], rc.get("resourceClaimTemplateName")) for rc in pod["spec"]["resourceClaims"]
                }
                if claims & channel_templates:
                    # Written at once (kwok makes the pod Running right after scheduling, and a reader may
                    # come then), and settled once the node is known: no clique label, no channel.
                    node_name = (pod.get("spec") or {}).get("nodeName")
                    node = (self.kube.get(NODES, node_name) or {}) if node_name else {}
                    present = "channel-missing" not in self.faults and (
                        not node_name or bool(labels_of(node).get(CLIQUE_LABEL))
                    )
                    text = logs.imex_listing(present)
                    if not node_name:
                        self.publish(pod, text)
                        continue
            if text is not None:
                self.publish(pod, text)
            scale = faultspec.run_time_scale(self.faults)
            hold = launcher_run_seconds(pod, mpijob, scale) if mpijob is not None else 0.0
            if hold > 0 and not self.newly_lost_seen(pod):
                self.running[meta["uid"]] = time.monotonic() + hold
                timer = threading.Timer(hold, self._wake.set)
                timer.daemon = True
                timer.start()
                log.info("launcher %s/%s runs %.1f s (the modelled run x scale)", meta["namespace"], meta["name"], hold)
                self.done.add(meta["uid"])
                continue
            self.mark_written(pod)
            self.done.add(meta["uid"])
        self.prune(pods)

    def newly_lost(self, pod: dict[str, Any]) -> bool:
        """A launcher whose worker went away after its log was written, while it still ran: the log is
        written again, failed. A launcher that had finished keeps the log of its finished run."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        lost = bool((pod["metadata"].get("annotations") or {}).get(WORKER_LOST_ANNOTATION))
        if lost and pod["metadata"]["uid"] not in self.lost:
            self.lost.add(pod["metadata"]["uid"])
            return True
        return False

    def newly_lost_seen(self, pod: dict[str, Any]) -> bool:
        """A launcher whose worker was lost fails now, not after its modelled run."""
        return pod["metadata"]["uid"] in self.lost

    def mark_written(self, pod: dict[str, Any], exit_code: Optional[int] = None) -> None:
        """Let the kwok stages finish a Job's pod, or a check's pod whose program wrote its log (``exit_code``
        given: the code its container exits with): its log (if any) is served from now on."""
        meta = pod["metadata"]
        if (owned_by_job(pod) or exit_code is not None) and (meta.get("annotations") or {}).get(LOG_WRITTEN) != "true":
            annotations = {LOG_WRITTEN: "true"}
            if exit_code:
                annotations[EXIT_CODE_ANNOTATION] = str(exit_code)
            self.kube.merge_patch(PODS, meta["name"], {"metadata": {"annotations": annotations}}, meta["namespace"])

    def publish(self, pod: dict[str, Any], text: str) -> None:
        meta = pod["metadata"]
        path = self.root / meta["namespace"] / f"{meta['name']}.log"
        existing = self.kube.get(KWOK_LOGS, meta["name"], meta["namespace"])
        current = existing is not None and (existing["metadata"].get("annotations") or {}).get(POD_UID) == meta["uid"]
        if current and path.exists() and logs.cri_text(path.read_text()) == text:
            return  # already served (also after this process restarted)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(logs.cri_lines(text))
        tmp.replace(path)
        if current:
            log.info("logs for %s/%s rewritten", meta["namespace"], meta["name"])
            return
        pod.setdefault("apiVersion", "v1")
        pod.setdefault("kind", "Pod")
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "annotations": {POD_UID: meta["uid"]},
                "ownerReferences": [owner_reference(pod, controller=False)],
            },
            "spec": {"logs": [{"containers": [], "logsFile": str(path), "follow": False}]},
        }
        if existing is not None:
            self.kube.delete(KWOK_LOGS, meta["name"], meta["namespace"])  # a previous pod of that name
        self.kube.create(KWOK_LOGS, body, meta["namespace"])
        log.info("logs for %s/%s: %d lines", meta["namespace"], meta["name"], text.count("\n"))

    def prune(self, pods: list[dict[str, Any]]) -> None:
        """Remove files of pods that are gone (their Logs objects go with them, by owner)."""
        if not self.root.is_dir():
            return
        names = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
        for ns_dir in self.root.iterdir():
            for f in ns_dir.glob("*.log"):
                if (ns_dir.name, f.stem) not in names:
                    f.unlink(missing_ok=True)
            if ns_dir.is_dir() and not any(ns_dir.iterdir()):
                shutil.rmtree(ns_dir, ignore_errors=True)
