# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check ``imex_channel``: a pod on every tray claims the rack's IMEX channel through its ComputeDomain, and
channel0 must show in each as a character device (the CDI injection of the NVIDIA DRA driver)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch, openshift
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import (
    Check,
    NotRun,
    Result,
    by_name,
    skipped_note,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import pod_summary
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kube_api import ApiUnavailable, refused
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.priority import preempted
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification_objects import (
    imex_pod_manifest,
    imex_pod_name,
)

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun


def channel0_line(listing: str) -> Optional[str]:
    for line in listing.splitlines():
        if line.rstrip().endswith(" channel0"):
            return line.rstrip()
    return None


def judge_channel_listing(listing: str) -> Tuple[bool, str]:
    """(passed, what was seen) for one pod's ``ls -la /dev/nvidia-caps-imex-channels``."""
    line = channel0_line(listing)
    if line is None:
        return False, "channel0 is missing (listing: " + " / ".join(x for x in listing.splitlines() if x.strip())[
            :200
        ] + ")"
    if not line.startswith("c"):
        return False, f"channel0 is not a character device: {line}"
    numbers = re.search(r"(\d+),\s*(\d+)", line)
    device = f"major {numbers.group(1)}, minor {numbers.group(2)}" if numbers else "character device"
    return True, device


def channel_findings(bad: Mapping[str, str], limit: int = 3) -> str:
    """'gb200-r0-t0, gb200-r0-t1 and 16 more: channel0 is missing (listing: ...)': trays with the same finding
    named together, the finding said once."""
    by_text: Dict[str, List[str]] = {}
    for node, text in bad.items():
        by_text.setdefault(text, []).append(node)
    parts = []
    for text, trays in by_text.items():
        more = f" and {len(trays) - limit} more" if len(trays) > limit else ""
        parts.append(f"{', '.join(trays[:limit])}{more}: {text}")
    return "; ".join(parts[:limit]) + (f"; {len(parts) - limit} more findings" if len(parts) > limit else "")


def unreported_text(pod: Optional[Mapping[str, Any]], name: str) -> Optional[str]:
    """Why a tray's pod has no report to read (deleted, evicted), or None when its log is to be read."""
    if pod is None:
        return f"its pod {name} was deleted before it reported"
    status = pod.get("status") or {}
    if status.get("reason") == "Evicted":
        return f"its pod {name} was evicted before it reported ({one_line(status.get('message') or 'no message')})"
    return None


def all_scheduled(names: Mapping[str, str], objects: kube_watch.Objects) -> bool:
    """Every tray's pod has a node; a preempted pod raises (the scheduler deletes it: its tray measured nothing)."""
    pods = by_name(objects)
    lost = preempted("IMEX channel", pods.values())
    if lost:
        raise lost
    return all(((pods.get(name) or {}).get("spec") or {}).get("nodeName") for name in names.values())


def all_started(names: Mapping[str, str], objects: kube_watch.Objects) -> bool:
    """Every pod ran, or is gone: a pod deleted after it was scheduled never reports (judged by the verdict)."""
    pods = by_name(objects)
    lost = preempted("IMEX channel", pods.values())
    if lost:
        raise lost
    return all(
        name not in pods or ((pods[name].get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"))
        for name in names.values()
    )


def pending_text(names: Mapping[str, str], pods: Mapping[str, Mapping[str, Any]]) -> str:
    """What a wait that runs out says of the pods: the trays whose pod is still pending, and why."""
    pending = {
        node: pod_summary(pods[name]).split(": ", 1)[-1]
        for node, name in names.items()
        if name in pods and ((pods[name].get("status") or {}).get("phase") or "Pending") == "Pending"
    }
    return f"pending pods: {channel_findings(pending)}" if pending else "no pod is pending"


def tray_pod_view(node: str, name: str, pod: Optional[Mapping[str, Any]], listing: str) -> Dict[str, Any]:
    """What the record keeps of one tray's pod: its phase and settings as the API admitted them, and its listing."""
    spec = (pod or {}).get("spec") or {}
    return {
        "node": node,
        "pod": name,
        "phase": ((pod or {}).get("status") or {}).get("phase"),
        "security_context": spec.get("securityContext"),
        # as the API admitted it: the class named, and the priority its admission resolved from it
        "priority_class": spec.get("priorityClassName"),
        "priority": spec.get("priority"),
        "channel0": channel0_line(listing),
        "listing": listing.splitlines(),
    }


@dataclass
class TrayReports:
    """Each tray's report: judged (passed, what was seen), or why there is none (no evidence either way)."""

    seen: Dict[str, Tuple[bool, str]] = field(default_factory=dict)
    unreported: Dict[str, str] = field(default_factory=dict)
    pods: List[Dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, run: RackRun, names: Mapping[str, str], pods: Mapping[str, Mapping[str, Any]]) -> TrayReports:
        reports = cls()
        for node in run.plan.nodes:
            listing, gone = read_listing(run, names[node], pods.get(names[node]))
            if gone:
                reports.unreported[node] = gone
            else:
                reports.seen[node] = judge_channel_listing(listing)
            reports.pods.append(tray_pod_view(node, names[node], pods.get(names[node]), listing))
        return reports


def read_listing(run: RackRun, name: str, pod: Optional[Mapping[str, Any]]) -> Tuple[str, Optional[str]]:
    """(the pod's listing, why it has none): a pod deleted or evicted, or a log that could not be read."""
    gone = unreported_text(pod, name)
    try:
        listing = "" if gone else run.read_log(name)
    except ApiUnavailable as exc:
        if refused(exc):
            raise  # a right the identity lacks, the same on every tray: the run's error, not the tray's
        gone = f"its pod's log could not be read ({one_line(str(exc))})"
        listing = ""
    return listing, gone


class ImexChannelCheck(Check):
    name = "imex_channel"
    uses_gpus = False
    pod_security_level = "restricted"

    options = {
        "imex_channel": dict(
            type="dict",
            default={},
            options=dict(
                image=dict(type="str", default="ubuntu:22.04"),
                run_as_user=dict(type="int", default=65534),
            ),
        ),
    }

    def __init__(self, image: str, run_as_user: int = 65534) -> None:
        self.image = image
        self.run_as_user = run_as_user

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ImexChannelCheck:
        return cls(params["imex_channel"]["image"], params["imex_channel"]["run_as_user"])

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        view["pods"] = [imex_pod_name(node) for node in run.plan.nodes]
        return view

    def owns_pod(self, run: RackRun, name: str) -> bool:
        return name in {imex_pod_name(node) for node in run.plan.nodes}

    def _pods(self, run: RackRun) -> Dict[str, Dict[str, Any]]:
        pods = run.api.list("Pod", "v1", run.namespace, run.selector)
        return {p["metadata"]["name"]: p for p in pods}

    def measure(self, run: RackRun) -> Result:
        names = {node: imex_pod_name(node) for node in run.plan.nodes}
        user = self._create_pods(run)
        self._wait_for_pods(run, names)
        reports = TrayReports.read(run, names, self._pods(run))
        return self._verdict(run, user, reports)

    def _create_pods(self, run: RackRun) -> Optional[int]:
        """The namespace, the ComputeDomain and one pod per tray claiming its channel; the user the pods run as."""
        run.create_namespace()
        run.create_compute_domain()
        # on OpenShift, a user outside the namespace's range is left to the SCC: ls runs as any user
        user = openshift.pod_run_as_user(self.run_as_user, run.uid_range, arbitrary_uid_works=True)
        for node in run.plan.nodes:
            run.create_pod(
                imex_pod_manifest(
                    node,
                    run.namespace,
                    run.plan.name,
                    run.claim_template,
                    self.image,
                    user,
                    run.settings.run_id,
                    run.settings.tolerations,
                    run.settings.priority_class,
                )
            )
        return user

    def _wait_for_pods(self, run: RackRun, names: Mapping[str, str]) -> None:
        """Every pod placed, the ComputeDomain's nodes ready, then every pod run (or gone); a preemption raises."""

        def describe_pods() -> str:
            return pending_text(names, self._pods(run))

        run.watch_for(
            "the IMEX channel pods to be scheduled", "Pod", "v1", partial(all_scheduled, names), describe_pods
        )
        run.wait_domain_nodes(run.plan.nodes)
        run.watch_for("the IMEX channel pods to run", "Pod", "v1", partial(all_started, names), describe_pods)

    def _verdict(self, run: RackRun, user: Optional[int], reports: TrayReports) -> Result:
        """Passed when every tray showed channel0; failed on the trays that showed none; no verdict when some trays
        gave no report and none failed."""
        nodes, seen, unreported = run.plan.nodes, reports.seen, reports.unreported
        bad = {node: text for node, (ok, text) in seen.items() if not ok}
        missing = (
            f"; no report from {plural(len(unreported), 'tray')}: {channel_findings(unreported)}" if unreported else ""
        )
        details = {
            "compute_domain": run.compute_domain,
            "run_as_user": user,
            "uid_range": str(run.uid_range) if run.uid_range else None,
            "pods": reports.pods,
            "unreported": unreported,
            "violations": [f"{node}: {text}" for node, text in {**bad, **unreported}.items()],
        }
        if not bad and unreported:  # no tray failed on evidence, and some trays gave none: no verdict on the rack
            raise NotRun(
                f"no report from the IMEX channel pod of {len(unreported)} of {len(nodes)} trays: "
                f"{channel_findings(unreported)}; {plural(len(seen), 'tray')} showed channel0; run the check again"
            )
        if bad:
            problems = {
                node: f"{text}; check that containerd has CDI enabled (enable_cdi) and that the DRA kubelet "
                f"plugin runs on {node}"
                for node, text in bad.items()
            }
            return Result(
                False,
                f"channel0 not injected in {len(bad)} of {len(nodes)} pods: {channel_findings(bad)}; check that "
                f"containerd has CDI enabled (enable_cdi) and that the DRA kubelet plugin runs there{missing}",
                details,
                list(bad),
                problems,
            )
        devices = sorted({text for _ok, text in seen.values()})
        return Result(
            True,
            f"channel0 is a character device ({', '.join(devices)}) in {len(nodes)} of {len(nodes)} "
            f"pods, one per tray ({nodes[0]} .. {nodes[-1]}){skipped_note(run.plan)}",
            details,
        )

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        def delete_pods() -> None:
            for node in run.plan.nodes:
                run.api.delete("Pod", "v1", imex_pod_name(node), run.namespace)
            run.watch_for("the IMEX channel pods to be deleted", "Pod", "v1", lambda objects: not objects)

        return [("delete the IMEX channel pods", delete_pods)]


CHECK = ImexChannelCheck
