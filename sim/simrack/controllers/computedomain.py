# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the ComputeDomain controller (and the node side of the kubelet plugin) of
the DRA driver for NVIDIA GPUs, as seen from the API: nvidia-dra-driver-gpu 25.8.0 and its successor
dra-driver-nvidia-gpu 0.4.1, told apart by the running controller's image tag.

The driver's controller pod is found by what it runs (its ``compute-domain-controller`` container), not
by its name or label key: those follow the chart's name (``nvidia-dra-driver-gpu-component``, or
``dra-driver-nvidia-gpu-component`` for 0.4 without ``nameOverride``) and the real driver works whatever
they are.

Per ComputeDomain, while the driver's controller pod runs:

* finalizer ``resource.nvidia.com/computeDomain`` on the CD;
* the workload ResourceClaimTemplate ``spec.channel.resourceClaimTemplate.name`` in the CD's
  namespace (request ``channel`` from ``compute-domain-default-channel.nvidia.com``, opaque
  ``ComputeDomainChannelConfig``);
* the daemon ResourceClaimTemplate and the per-CD DaemonSet in the driver's namespace, whose pods
  select nodes labelled ``resource.nvidia.com/computeDomain=<CD UID>``;
* that node label on each node where a pod claiming the channel template is scheduled (the real
  kubelet plugin sets it when it prepares the claim);
* ``status.nodes[]`` (name, ipAddress = daemon pod IP, cliqueID, index, status) for nodes whose
  daemon pod runs, and ``status.status`` (Ready once ``numNodes`` nodes are Ready);
* on delete: templates, DaemonSet and node labels removed, then the finalizer.

Fault ``compute-domain-not-ready``: every node stays NotReady, so the CD never becomes Ready.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from simrack.controllers.base import SIM_LABEL, Controller, is_ready, is_running, labels_of, runs
from simrack.controllers.kube import (
    COMPUTEDOMAINS,
    DAEMONSETS,
    NODES,
    PODS,
    RESOURCECLAIMTEMPLATES,
    ApiError,
)

log = logging.getLogger("simrack")

FINALIZER = "resource.nvidia.com/computeDomain"
CD_LABEL = "resource.nvidia.com/computeDomain"
TARGET_LABEL = "resource.nvidia.com/computeDomainTarget"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
CONTROLLER_COMMAND = "compute-domain-controller"
DRIVER = "compute-domain.nvidia.com"
MANAGER = "compute-domain-controller"


def channel_template_name(cd: dict[str, Any]) -> str:
    return cd["spec"]["channel"]["resourceClaimTemplate"]["name"]


def workload_claim_template(cd: dict[str, Any]) -> dict[str, Any]:
    uid = cd["metadata"]["uid"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": channel_template_name(cd),
            "namespace": cd["metadata"]["namespace"],
            "labels": {CD_LABEL: uid, TARGET_LABEL: "Workload", SIM_LABEL: MANAGER},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "channel", "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}}
                    ],
                    "config": [
                        {
                            "requests": ["channel"],
                            "opaque": {
                                "driver": DRIVER,
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "ComputeDomainChannelConfig",
                                    "domainID": uid,
                                    "allocationMode": cd["spec"]["channel"].get("allocationMode", "Single"),
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


DEFAULT_DRIVER = "v25.8.0"
UID_NAMED_DAEMONS = "v25.12.0"  # the first release that names a domain's daemon objects after its UID


def driver_version(image: str) -> tuple[int, ...]:
    """The DRA driver's release from its image tag, ordered by release date; 25.8.0 if unknown.

    NVIDIA's releases are calendar versions (``k8s-dra-driver-gpu:v25.8.0``, ``v25.12.0``); the project moved
    to kubernetes-sigs and restarted at ``dra-driver-nvidia-gpu:v0.4.1``, released after all of them. The
    answer leads with the line: (0, 25, 12, 0) for v25.12.0, (1, 0, 4, 1) for v0.4.1.
    """
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else DEFAULT_DRIVER
    parts = tag.lstrip("v").split("-", 1)[0].split(".")
    try:
        numbers = tuple(int(x) for x in parts)
    except ValueError:
        numbers = (25, 8, 0)
    return (1 if numbers[0] == 0 else 0, *numbers)


def daemon_names(cd: dict[str, Any], image: str = "") -> tuple[str, str]:
    """(DaemonSet name, daemon ResourceClaimTemplate name), as the controller of that release names them.

    Up to 25.8 it uses generateName (``<name>-<random>``, ``<name>-daemon-claim-template-<random>``); from
    25.12 (so in 0.4.1 too) both are named after the ComputeDomain's UID (``computedomain-daemon-<uid>``).
    """
    uid = cd["metadata"]["uid"]
    if driver_version(image) >= driver_version(f":{UID_NAMED_DAEMONS}"):
        return f"computedomain-daemon-{uid}", f"computedomain-daemon-{uid}"
    suffix = uid[:5]
    name = cd["metadata"]["name"]
    return f"{name}-{suffix}", f"{name}-daemon-claim-template-{suffix}"


def daemon_claim_template(cd: dict[str, Any], driver_ns: str, image: str = "") -> dict[str, Any]:
    uid = cd["metadata"]["uid"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": daemon_names(cd, image)[1],
            "namespace": driver_ns,
            "labels": {CD_LABEL: uid, TARGET_LABEL: "Daemon", SIM_LABEL: MANAGER},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "daemon", "exactly": {"deviceClassName": "compute-domain-daemon.nvidia.com"}}
                    ],
                    "config": [
                        {
                            "requests": ["daemon"],
                            "opaque": {
                                "driver": DRIVER,
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "ComputeDomainDaemonConfig",
                                    "domainID": uid,
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


def daemon_set(cd: dict[str, Any], driver_ns: str, image: str = "") -> dict[str, Any]:
    uid = cd["metadata"]["uid"]
    ds_name, rct_name = daemon_names(cd, image)
    labels = {CD_LABEL: uid, "app.kubernetes.io/name": "compute-domain-daemon"}
    probe = {"exec": {"command": ["compute-domain-daemon", "check"]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": ds_name, "namespace": driver_ns, "labels": {**labels, SIM_LABEL: MANAGER}},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "compute-domain-daemon-service-account",
                    "nodeSelector": {CD_LABEL: uid},
                    "tolerations": [
                        {"operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists", "effect": "NoExecute"},
                        {"operator": "Exists", "effect": "PreferNoSchedule"},
                    ],
                    "containers": [
                        {
                            "name": "compute-domain-daemon",
                            "image": image or f"nvcr.io/nvidia/k8s-dra-driver-gpu:{DEFAULT_DRIVER}",
                            "command": ["compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "run"],
                            "env": [
                                {"name": "LOG_VERBOSITY", "value": "4"},
                                {"name": "MAX_NODES_PER_IMEX_DOMAIN", "value": "18"},
                                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
                                {"name": "COMPUTE_DOMAIN_UUID", "value": uid},
                                {"name": "COMPUTE_DOMAIN_NAME", "value": cd["metadata"]["name"]},
                                {"name": "COMPUTE_DOMAIN_NAMESPACE", "value": cd["metadata"]["namespace"]},
                            ],
                            "startupProbe": {**probe, "periodSeconds": 1, "failureThreshold": 1200},
                            "livenessProbe": {**probe, "periodSeconds": 60, "failureThreshold": 20},
                            "readinessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 1},
                            "resources": {"claims": [{"name": "compute-domain-daemon"}]},
                        }
                    ],
                    "resourceClaims": [{"name": "compute-domain-daemon", "resourceClaimTemplateName": rct_name}],
                },
            },
        },
    }


def claims_template(pod: dict[str, Any], namespace: str, template: str) -> bool:
    if pod["metadata"].get("namespace") != namespace:
        return False
    return any(
        rc.get("resourceClaimTemplateName") == template for rc in pod.get("spec", {}).get("resourceClaims") or []
    )


def workload_nodes(cd: dict[str, Any], pods: list[dict[str, Any]]) -> set[str]:
    """Nodes where a live pod claiming the CD's channel template is scheduled."""
    template = channel_template_name(cd)
    namespace = cd["metadata"]["namespace"]
    nodes = set()
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
            continue
        if claims_template(pod, namespace, template) and pod.get("spec", {}).get("nodeName"):
            nodes.add(pod["spec"]["nodeName"])
    return nodes


def node_statuses(
    cd: dict[str, Any],
    daemon_pods: dict[str, dict[str, Any]],
    cliques: dict[str, str],
    not_ready: bool,
) -> list[dict[str, Any]]:
    """``status.nodes`` for the nodes whose CD daemon pod runs; indexes stay stable per clique."""
    previous = {n["name"]: n for n in (cd.get("status") or {}).get("nodes") or []}
    used: dict[str, set[int]] = {}
    for prev in previous.values():
        if prev["name"] in daemon_pods and isinstance(prev.get("index"), int):
            used.setdefault(cliques.get(prev["name"], ""), set()).add(prev["index"])
    entries = []
    for node in sorted(daemon_pods):
        clique = cliques.get(node, "")
        index = previous.get(node, {}).get("index")
        if not isinstance(index, int) or previous.get(node, {}).get("cliqueID") != clique:
            taken = used.setdefault(clique, set())
            index = next(i for i in range(len(taken) + 1) if i not in taken)
            taken.add(index)
        pod = daemon_pods[node]
        ready = is_ready(pod) and not not_ready
        entries.append(
            {
                "name": node,
                "ipAddress": (pod.get("status") or {}).get("podIP") or "",
                "cliqueID": clique,
                "index": index,
                "status": "Ready" if ready else "NotReady",
            }
        )
    return entries


def global_status(cd: dict[str, Any], nodes: list[dict[str, Any]], not_ready: bool) -> str:
    if not_ready:
        return "NotReady"
    ready = sum(1 for n in nodes if n["status"] == "Ready")
    return "Ready" if ready >= int(cd["spec"].get("numNodes") or 0) else "NotReady"


class ComputeDomainController(Controller):
    name = MANAGER
    watched = (COMPUTEDOMAINS, PODS, DAEMONSETS)

    image = ""  # the running driver controller's image: its tag is the release whose naming is followed

    def driver_namespace(self) -> Optional[str]:
        for pod in self.list(PODS):
            container = runs(pod, CONTROLLER_COMMAND)
            if container is not None and is_running(pod):
                self.image = str(container.get("image") or "")
                return pod["metadata"]["namespace"]
        return None

    def reconcile(self) -> None:
        cds = self.kube.list(COMPUTEDOMAINS)
        driver_ns = self.driver_namespace()
        if driver_ns is None:
            return  # no DRA driver controller running: nothing reconciles ComputeDomains
        pods = self.list(PODS) if cds else []
        nodes = {n["metadata"]["name"]: n for n in self.kube.list(NODES)} if cds else {}
        for cd in cds:
            try:
                if cd["metadata"].get("deletionTimestamp"):
                    self.finalize(cd, driver_ns, nodes)
                else:
                    self.converge(cd, driver_ns, pods, nodes)
            except ApiError as err:
                if err.status == 403 and "NamespaceTerminating" in err.body:
                    continue  # the namespace is going away: its CDs get their deletionTimestamp next
                log.warning("ComputeDomain %s/%s: %s", cd["metadata"]["namespace"], cd["metadata"]["name"], err)
            except (KeyError, TypeError, ValueError) as err:
                log.warning(
                    "ComputeDomain %s/%s: malformed: %r", cd["metadata"]["namespace"], cd["metadata"]["name"], err
                )
        self.collect_orphans(cds, driver_ns)

    def converge(
        self, cd: dict[str, Any], driver_ns: str, pods: list[dict[str, Any]], nodes: dict[str, dict[str, Any]]
    ) -> None:
        meta = cd["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if FINALIZER not in (meta.get("finalizers") or []):
            self.kube.merge_patch(
                COMPUTEDOMAINS, name, {"metadata": {"finalizers": [*(meta.get("finalizers") or []), FINALIZER]}}, ns
            )
        if self.kube.create(RESOURCECLAIMTEMPLATES, workload_claim_template(cd), ns):
            log.info("created ResourceClaimTemplate %s/%s", ns, channel_template_name(cd))
        self.kube.create(RESOURCECLAIMTEMPLATES, daemon_claim_template(cd, driver_ns, self.image), driver_ns)
        if self.kube.create(DAEMONSETS, daemon_set(cd, driver_ns, self.image), driver_ns):
            log.info("created DaemonSet %s/%s", driver_ns, daemon_names(cd, self.image)[0])

        wanted = workload_nodes(cd, pods)
        for node_name, node in nodes.items():
            current = labels_of(node).get(CD_LABEL)
            if node_name in wanted and current is None:
                self.kube.merge_patch(NODES, node_name, {"metadata": {"labels": {CD_LABEL: uid}}})
            elif node_name in wanted and current != uid:
                log.warning("node %s: label already exists for a different ComputeDomain (%s)", node_name, current)
            elif node_name not in wanted and current == uid:
                self.kube.merge_patch(NODES, node_name, {"metadata": {"labels": {CD_LABEL: None}}})

        daemon_pods = {
            p["spec"]["nodeName"]: p
            for p in pods
            if p["metadata"].get("namespace") == driver_ns
            and labels_of(p).get(CD_LABEL) == uid
            and is_running(p)
            and p["spec"].get("nodeName") in wanted
        }
        cliques = {n: labels_of(nodes[n]).get(CLIQUE_LABEL, "") for n in daemon_pods if n in nodes}
        not_ready = "compute-domain-not-ready" in self.faults
        entries = node_statuses(cd, daemon_pods, cliques, not_ready)
        status = {"status": global_status(cd, entries, not_ready), "nodes": entries}
        old = cd.get("status") or {}
        if old.get("status") != status["status"] or (old.get("nodes") or []) != entries:
            self.kube.merge_patch(COMPUTEDOMAINS, name, {"status": status}, ns, sub="status")
            log.info(
                "ComputeDomain %s/%s: %s, nodes %s",
                ns,
                name,
                status["status"],
                [(e["name"], e["status"]) for e in entries],
            )

    def finalize(self, cd: dict[str, Any], driver_ns: str, nodes: dict[str, dict[str, Any]]) -> None:
        meta = cd["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        # by the domain's label, as the real controller finds them (each release names them its own way)
        for res in (DAEMONSETS, RESOURCECLAIMTEMPLATES):
            for obj in self.kube.list(res, driver_ns, label_selector=f"{CD_LABEL}={uid},{SIM_LABEL}={MANAGER}"):
                self.kube.delete(res, obj["metadata"]["name"], driver_ns)
        rct = self.kube.get(RESOURCECLAIMTEMPLATES, channel_template_name(cd), ns)
        if rct is not None and labels_of(rct).get(CD_LABEL) == uid:
            self.kube.delete(RESOURCECLAIMTEMPLATES, channel_template_name(cd), ns)
        for node_name, node in nodes.items():
            if labels_of(node).get(CD_LABEL) == uid:
                self.kube.merge_patch(NODES, node_name, {"metadata": {"labels": {CD_LABEL: None}}})
        finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        if len(finalizers) != len(meta.get("finalizers") or []):
            self.kube.merge_patch(COMPUTEDOMAINS, name, {"metadata": {"finalizers": finalizers or None}}, ns)
            log.info("ComputeDomain %s/%s cleaned up", ns, name)

    def collect_orphans(self, cds: list[dict[str, Any]], driver_ns: str) -> None:
        """Remove daemon objects and node labels of CDs that are gone (e.g. namespace force-deleted)."""
        live = {cd["metadata"]["uid"] for cd in cds}
        for ds in self.kube.list(DAEMONSETS, driver_ns, label_selector=f"{SIM_LABEL}={MANAGER}"):
            if labels_of(ds).get(CD_LABEL) not in live:
                self.kube.delete(DAEMONSETS, ds["metadata"]["name"], driver_ns)
        for rct in self.kube.list(RESOURCECLAIMTEMPLATES, driver_ns, label_selector=f"{SIM_LABEL}={MANAGER}"):
            if labels_of(rct).get(CD_LABEL) not in live:
                self.kube.delete(RESOURCECLAIMTEMPLATES, rct["metadata"]["name"], driver_ns)
        for node in self.kube.list(NODES, label_selector=CD_LABEL):
            if labels_of(node).get(CD_LABEL) not in live:
                self.kube.merge_patch(NODES, node["metadata"]["name"], {"metadata": {"labels": {CD_LABEL: None}}})
