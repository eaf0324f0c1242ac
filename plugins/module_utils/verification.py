# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verification core: which racks and trays a check covers, and the record it writes.

The unit of verification is the rack: one NVLink clique (``nvidia.com/gpu.clique =
<clusterUUID>.<cliqueId>``), one namespace and one set of test objects per check. This module
holds everything about a verification run that is not Kubernetes I/O:

* the rack of a GPU node (inventory map, then a rack label, then the clique itself);
* the plan of a run: per rack, the trays found, the trays used and every tray skipped with its
  reason (cordoned, NotReady, tainted, GPUs held by other pods, fewer GPUs than the rack's,
  not selected, not due), and whether the rack is left ``incomplete``; a run told to verify only the
  due trays (``Scope.only_due``) uses the due ones, with their reason (``tray_state.due_reason``), and
  the fewest partners a check spanning trays needs;
* object names per rack that never collide and stay valid DNS labels.

The record a check writes per rack is ``record.Record``; the clique judge is the check ``checks.cliques``.

Nodes and pods are plain dicts shaped like the Kubernetes objects. Pure functions, standard
library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import (  # one reading of a Node
    CLIQUE_LABEL,
    GPU_RESOURCE,
    _get,
    is_gpu_node,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_taint import UNVERIFIED_TOLERATION
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.object_names import dns_label
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import MIN_TRAYS, RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import by_name, natural_key, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    TrayState,
    due_reason,
    not_due_reason,
    read_state,
)

PRODUCT_LABEL = "nvidia.com/gpu.product"
UNASSIGNED_RACK = "unassigned"
# GPU nodes are often tainted so that only GPU pods land there; NVIDIA's operands tolerate this key.
GPU_NODE_TOLERATIONS: List[Dict[str, str]] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


# GPU products built for multi-node NVLink (GPU Feature Discovery's nvidia.com/gpu.product, e.g. NVIDIA-GB200):
# a GPU node of another product (an H100 or L40S node in the same cluster) has no NVLink clique by design.
MNNVL_PRODUCTS: List[str] = ["GB200", "GB300", "GH200"]


def multi_node_nvlink(node: Mapping[str, Any], products: Sequence[str] = tuple(MNNVL_PRODUCTS)) -> bool:
    """Whether a GPU node belongs in the NVLink checks: it has a clique label, or its product is one of
    ``products`` (substring, any case), or its product is not known (an unlabelled MNNVL tray is a finding)."""
    labels = labels_of(node)
    if labels.get(CLIQUE_LABEL):
        return True
    product = str(labels.get(PRODUCT_LABEL) or "")
    return not product or any(p.lower() in product.lower() for p in products)


def short_name(name: str) -> str:
    """A host name without its domain, lower case: an inventory's FQDN and a kubelet's short node name agree."""
    return name.split(".", 1)[0].lower()


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether ``toleration`` tolerates ``taint``, as the scheduler decides (core/v1 Toleration semantics)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def node_name(node: Mapping[str, Any]) -> str:
    return str(_get(node, "metadata", "name") or "")


def labels_of(obj: Mapping[str, Any]) -> Dict[str, str]:
    return dict(_get(obj, "metadata", "labels") or {})


def quantity(value: Any) -> int:
    """An integer resource quantity (``"4"``, ``4``); anything else counts as 0."""
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return 0


def allocatable_gpus(node: Mapping[str, Any]) -> int:
    return quantity((_get(node, "status", "allocatable") or {}).get(GPU_RESOURCE))


def clique_short_name(clique: str) -> str:
    """``clique-<first 8 of the cluster UUID>-<clique id>``: a rack name when nothing else names it."""
    uuid, _dot, clique_id = clique.partition(".")
    return f"clique-{uuid[:8].lower()}-{clique_id or '0'}"


def rack_of(
    node: Mapping[str, Any],
    racks: Optional[Mapping[str, Sequence[str]]] = None,
    rack_label: str = "",
) -> str:
    """The rack a GPU node belongs to: the inventory map (by node name, else by short host name: the inventory
    may say gb200-r0-t1.example.com where Kubernetes says gb200-r0-t1, or the other way), then the rack label,
    then its clique."""
    name = node_name(node)
    for rack, members in (racks or {}).items():
        if name in members:
            return str(rack)
    for rack, members in (racks or {}).items():
        if short_name(name) in {short_name(str(m)) for m in members}:
            return str(rack)
    labels = labels_of(node)
    if rack_label and labels.get(rack_label):
        return labels[rack_label]
    if labels.get(CLIQUE_LABEL):
        return clique_short_name(labels[CLIQUE_LABEL])
    return UNASSIGNED_RACK


# -- the GPUs other pods hold -------------------------------------------------------------------------


def pod_gpu_request(pod: Mapping[str, Any]) -> int:
    """``nvidia.com/gpu`` a pod holds while it lives: its containers' requests (limits when unset).

    Init containers run one at a time before the others, so the pod holds the larger of the
    largest init container and the sum of the regular ones (the scheduler's rule).
    """

    def of(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        return quantity(requests.get(GPU_RESOURCE, limits.get(GPU_RESOURCE)))

    spec = pod.get("spec") or {}
    regular = sum(of(c) for c in spec.get("containers") or [])
    init = max([of(c) for c in spec.get("initContainers") or []] or [0])
    return max(regular, init)


def gpus_in_use(
    pods: Iterable[Mapping[str, Any]], ignore_namespaces: Sequence[str] = ()
) -> Dict[str, List[Tuple[str, int]]]:
    """node -> [(``namespace/pod``, GPUs)] of the pods that hold GPUs there (not Succeeded/Failed)."""
    held: Dict[str, List[Tuple[str, int]]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        node = _get(pod, "spec", "nodeName")
        phase = _get(pod, "status", "phase")
        if not node or phase in ("Succeeded", "Failed") or meta.get("namespace") in ignore_namespaces:
            continue
        gpus = pod_gpu_request(pod)
        if gpus > 0:
            held.setdefault(str(node), []).append((f"{meta.get('namespace')}/{meta.get('name')}", gpus))
    return held


# -- why a tray cannot be used ------------------------------------------------------------------------


def _ready_problem(node: Mapping[str, Any]) -> Optional[str]:
    for condition in _get(node, "status", "conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return None
            reason = condition.get("reason") or condition.get("status") or "Unknown"
            return f"NotReady ({reason})"
    return "NotReady (no Ready condition)"


def _taint_problem(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> Optional[str]:
    for taint in _get(node, "spec", "taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute") or any(tolerates(t, taint) for t in tolerations):
            continue
        value = f"={taint['value']}" if taint.get("value") else ""
        return f"tainted {taint.get('key')}{value}:{taint.get('effect')}"
    return None


def unusable_reason(
    node: Mapping[str, Any],
    gpus_needed: int,
    held: Sequence[Tuple[str, int]] = (),
    tolerations: Sequence[Mapping[str, Any]] = (UNVERIFIED_TOLERATION,),
) -> Optional[str]:
    """Why a tray cannot take a verification pod that needs ``gpus_needed`` GPUs (and carries ``tolerations``),
    or None."""
    if _get(node, "spec", "unschedulable"):
        return "cordoned"
    problem = _ready_problem(node) or _taint_problem(node, tolerations)
    if problem:
        return problem
    allocatable = allocatable_gpus(node)
    if gpus_needed and allocatable < gpus_needed:
        return f"{allocatable} of {gpus_needed} {GPU_RESOURCE} allocatable"
    in_use = sum(gpus for _pod, gpus in held)
    if gpus_needed and allocatable - in_use < gpus_needed:
        holders = ", ".join(f"{pod} ({gpus})" for pod, gpus in held[:3]) + (" and more" if len(held) > 3 else "")
        return f"GPUs in use: {in_use} of {allocatable} {GPU_RESOURCE} held by {holders}"
    return None


# -- the plan of a run --------------------------------------------------------------------------------


@dataclass
class Scope:
    """What a run covers; the defaults are the whole fleet."""

    racks: Dict[str, List[str]] = field(default_factory=dict)  # inventory: rack -> nodes
    rack_label: str = ""
    cliques: List[str] = field(default_factory=list)  # clique values or rack names; empty: all
    nodes_per_clique: Optional[int] = None  # None: every usable tray
    node_names: List[str] = field(default_factory=list)  # only these trays
    gpus_per_tray: int = 0  # 0: the most GPUs a tray of the rack has allocatable
    trays_per_clique: int = 0  # 0: not checked
    allow_incomplete: bool = False
    # GPU products with multi-node NVLink; a GPU node of another product without a clique is left out
    mnnvl_products: List[str] = field(default_factory=lambda: list(MNNVL_PRODUCTS))
    # the tolerations of the checks' pods: a tray with a taint none of them tolerates is skipped
    tolerations: List[Dict[str, Any]] = field(default_factory=lambda: [dict(UNVERIFIED_TOLERATION)])
    # only the trays that are due (tray_state.due_reason) at ``now`` or within ``due_within_hours`` of it
    only_due: bool = False
    due_within_hours: float = 0.0
    now: Optional[datetime] = None  # set once per run; None: when the plan is made
    due_check: str = ""  # the check whose due trays an only-due run uses (tray_state: due is per check); "": the tray's


@dataclass
class FleetPlan:
    racks: List[RackPlan]
    gpu_nodes: int
    unknown_selections: List[str]  # asked for by name (clique, rack or node) and not found

    def to_dict(self) -> Dict[str, Any]:
        return {
            "racks": [rack.to_dict() for rack in self.racks],
            "gpu_nodes": self.gpu_nodes,
            "unknown_selections": list(self.unknown_selections),
        }


def _most_common(values: Iterable[str]) -> str:
    counts: Dict[str, int] = {}
    for value in values:
        if value:
            counts[value] = counts.get(value, 0) + 1
    return max(sorted(counts), key=lambda v: counts[v]) if counts else ""


def declares(members: Sequence[str], name: str) -> bool:
    """Whether an inventory list names the node ``name`` (by name, else by short host name, as ``rack_of`` reads it)."""
    return name in members or short_name(name) in {short_name(str(m)) for m in members}


def group_racks(nodes: Sequence[Mapping[str, Any]], scope: Scope) -> Dict[str, List[Mapping[str, Any]]]:
    """rack name -> its GPU nodes sorted by name. GPU nodes without multi-node NVLink (``multi_node_nvlink``) are
    no rack's: an H100 node is not an unlabelled tray.

    A node gpu_fabric_racks does not list, in the clique of a rack it declares, is that rack's (undeclared, see
    ``plan_fleet``), not a rack of its own: the inventory left it out, the NVLink domain did not."""
    racks: Dict[str, List[Mapping[str, Any]]] = {}
    gpu_nodes = [n for n in nodes if is_gpu_node(n) and multi_node_nvlink(n, scope.mnnvl_products)]
    declared_cliques: Dict[str, str] = {}
    for node in gpu_nodes:
        rack, clique = rack_of(node, scope.racks, scope.rack_label), labels_of(node).get(CLIQUE_LABEL)
        if clique and rack in scope.racks:
            declared_cliques.setdefault(clique, rack)
    for node in sorted(gpu_nodes, key=lambda n: natural_key(node_name(n))):
        rack = rack_of(node, scope.racks, scope.rack_label)
        clique = labels_of(node).get(CLIQUE_LABEL)
        if clique in declared_cliques and rack == clique_short_name(clique):  # named by its clique alone
            rack = declared_cliques[clique]
        racks.setdefault(rack, []).append(node)
    return racks


NO_NODE = "declared in gpu_fabric_racks, no Node of that name in the cluster"


def missing_reason(name: str, nodes: Sequence[Mapping[str, Any]], products: Sequence[str]) -> str:
    """Why a tray gpu_fabric_racks declares is no GPU tray of the cluster: no Node of its name, or a Node whose
    GPUs are not seen (GPU Feature Discovery, the device plugin) or are of a product without multi-node NVLink."""
    node = next((n for n in nodes if node_name(n) == name), None) or next(
        (n for n in nodes if short_name(node_name(n)) == short_name(name)), None
    )
    if node is None:
        return NO_NODE
    if not is_gpu_node(node):
        return (
            f"declared in gpu_fabric_racks; its Node {node_name(node)} shows no GPU (no nvidia.com/gpu.present label, "
            f"no {GPU_RESOURCE} capacity): check that GPU Feature Discovery and the device plugin run on it"
        )
    product = labels_of(node).get(PRODUCT_LABEL, "")
    return (
        f"declared in gpu_fabric_racks; its Node {node_name(node)} is a {product} node, not one of the multi-node "
        f"NVLink products ({', '.join(products)}; gpu_fabric_verify_mnnvl_products)"
    )


def declared_view(
    rack: str, members: Sequence[str], nodes: Sequence[Mapping[str, Any]], scope: Scope
) -> Tuple[List[str], List[Dict[str, str]], List[str]]:
    """A rack against gpu_fabric_racks: (its declared trays, the declared ones not among ``members`` with their
    reason, the ``members`` it does not declare); nothing for a rack it does not declare."""
    if rack not in scope.racks:
        return [], [], []
    declared = [str(name) for name in scope.racks[rack]]
    missing = [
        {"node": name, "reason": missing_reason(name, nodes, scope.mnnvl_products)}
        for name in declared
        if not any(declares([name], member) for member in members)
    ]
    undeclared = [member for member in members if not declares(declared, member)]
    return declared, missing, undeclared


def declared_plans(scope: Scope, reason: str) -> List[RackPlan]:
    """The racks gpu_fabric_racks declares, none of their trays read (``reason``: why): what a run that could not
    read the cluster accounts for, rack by rack, instead of one record of the fleet. A run narrowed to some racks
    (``Scope.cliques``, by rack name) or trays (``Scope.node_names``) accounts for those."""
    racks = {
        rack: trays
        for rack, trays in scope.racks.items()
        if (not scope.cliques or rack in scope.cliques)
        and (not scope.node_names or any(declares(trays, name) for name in scope.node_names))
    }
    return [
        RackPlan(
            name=rack,
            cliques=[],
            found=[],
            nodes=[],
            skipped=[{"node": str(name), "reason": reason} for name in by_name(str(n) for n in trays)],
            gpus_per_tray=scope.gpus_per_tray,
            gpu_product="",
            expected_trays=scope.trays_per_clique,
            is_declared=True,
            declared=[str(name) for name in trays],
        )
        for rack, trays in sorted(racks.items(), key=lambda item: natural_key(item[0]))
    ]


def plan_fleet(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    scope: Scope,
    uses_gpus: bool = True,
) -> FleetPlan:
    """The racks and trays a check covers. ``uses_gpus``: its pods request every GPU of a tray."""
    grouped = group_racks(nodes, scope)
    held = gpus_in_use(pods)
    wanted = set(scope.cliques)
    asked_nodes = set(scope.node_names)
    unknown: List[str] = []
    matched: set = set()
    plans: List[RackPlan] = []
    for rack in sorted(set(grouped) | set(scope.racks), key=natural_key):
        members = grouped.get(rack, [])
        cliques = sorted({labels_of(n).get(CLIQUE_LABEL, "") for n in members} - {""})
        if wanted:
            hits = wanted & ({rack} | set(cliques))
            if not hits:
                continue
            matched |= hits
        names = [node_name(n) for n in members]
        declared, missing, undeclared = declared_view(rack, names, nodes, scope)
        if asked_nodes and not asked_nodes & set(names + declared):
            continue
        if not members:  # declared and not in the cluster: the run accounts for it, it does not run there
            plans.append(
                RackPlan(
                    name=rack,
                    cliques=[],
                    found=[],
                    nodes=[],
                    skipped=[],
                    gpus_per_tray=scope.gpus_per_tray,
                    gpu_product="",
                    expected_trays=scope.trays_per_clique,
                    only_due=scope.only_due,
                    is_declared=True,
                    declared=declared,
                    missing=missing,
                )
            )
            continue
        gpus = scope.gpus_per_tray or max(allocatable_gpus(n) for n in members)
        product = _most_common(labels_of(n).get(PRODUCT_LABEL, "") for n in members)
        usable: List[str] = []
        skipped: List[Dict[str, str]] = []
        for node in members:
            name = node_name(node)
            if asked_nodes and name not in asked_nodes:
                skipped.append({"node": name, "reason": "not selected (not in the node list)"})
                continue
            if not labels_of(node).get(CLIQUE_LABEL):
                skipped.append({"node": name, "reason": f"no {CLIQUE_LABEL} label"})
                continue
            reason = unusable_reason(node, gpus if uses_gpus else 0, held.get(name, ()), scope.tolerations)
            if reason:
                skipped.append({"node": name, "reason": reason})
            else:
                usable.append(name)
        if len(cliques) > 1:
            # a split rack runs in its largest clique: a job cannot span two NVLink partitions
            by_clique = {c: [n for n in usable if labels_of(_find(members, n)).get(CLIQUE_LABEL) == c] for c in cliques}
            keep = max(cliques, key=lambda c: (len(by_clique[c]), c))
            for name in [n for n in usable if n not in by_clique[keep]]:
                skipped.append({"node": name, "reason": f"in another clique of the rack than {keep}"})
            usable = by_clique[keep]
        due: List[Dict[str, str]] = []
        partners: List[str] = []
        if scope.only_due:
            states = {name: read_state(_find(members, name)) for name in usable}
            now = scope.now or datetime.now(timezone.utc)
            due, partners, not_due = select_due(states, now, scope.due_within_hours, check=scope.due_check or None)
            skipped.extend(not_due)
            chosen = {d["node"] for d in due} | set(partners)
            usable = [name for name in usable if name in chosen]
        if scope.nodes_per_clique is not None and len(usable) > scope.nodes_per_clique:
            for name in usable[scope.nodes_per_clique :]:
                skipped.append(
                    {
                        "node": name,
                        "reason": f"not selected (gpu_fabric_verify_nodes_per_clique is {scope.nodes_per_clique})",
                    }
                )
            usable = usable[: scope.nodes_per_clique]
        skipped.sort(key=lambda s: natural_key(s["node"]))
        plans.append(
            RackPlan(
                name=rack,
                cliques=cliques,
                found=names,
                nodes=usable,
                skipped=skipped,
                gpus_per_tray=gpus,
                gpu_product=product,
                expected_trays=scope.trays_per_clique,
                only_due=scope.only_due,
                due=[d for d in due if d["node"] in usable],
                partners=[p for p in partners if p in usable],
                is_declared=rack in scope.racks,
                declared=declared,
                missing=missing,
                undeclared=undeclared,
            )
        )
    unknown.extend(sorted(wanted - matched))
    all_names = {node_name(n) for members in grouped.values() for n in members}
    all_names |= {str(name) for trays in scope.racks.values() for name in trays}
    unknown.extend(sorted(asked_nodes - all_names))
    gpu_nodes = sum(len(members) for members in grouped.values())
    return FleetPlan(racks=plans, gpu_nodes=gpu_nodes, unknown_selections=unknown)


def _find(members: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    return next(n for n in members if node_name(n) == name)


_NEVER = datetime.min.replace(tzinfo=timezone.utc)


def _verdict_time(state: TrayState, check: Optional[str]) -> datetime:
    """When the check (without one: the tray) was last verified on the tray; the oldest is a partner first."""
    entry = state.checks.get(check) if check is not None else None
    moment = entry.time if entry is not None else state.time
    return moment or _NEVER


def select_due(
    states: Mapping[str, TrayState],
    now: datetime,
    within_hours: float,
    min_trays: int = MIN_TRAYS,
    check: Optional[str] = None,
) -> Tuple[List[Dict[str, str]], List[str], List[Dict[str, str]]]:
    """Of a rack's usable trays (name -> state): the ones due for ``check`` with their reason, the partners they
    need, and the others skipped as not due (``tray_state.due_reason``; without ``check``: due as a whole).

    A check spanning trays measures at least ``min_trays``: too few due trays get the fewest not-due ones beside
    them, the oldest verdict of the check first, then by name. A rack with no due tray gets no partner: it is not
    run. A time on a Node that cannot be read makes its tray due with the reason, never stops the plan.
    """
    due = [{"node": name, "reason": due_reason(state, now, within_hours, check)} for name, state in states.items()]
    due = [d for d in due if d["reason"]]
    due_names = {d["node"] for d in due}
    rest = sorted(
        (name for name in states if name not in due_names),
        key=lambda name: (_verdict_time(states[name], check), natural_key(name)),
    )
    partners = rest[: max(0, min_trays - len(due))] if due else []
    not_due = [{"node": name, "reason": not_due_reason(states[name], check)} for name in rest if name not in partners]
    return (
        sorted(due, key=lambda d: natural_key(d["node"])),
        by_name(partners),
        not_due,
    )


def parse_nodes_per_clique(value: Any) -> Optional[int]:
    """``all`` (or empty) -> None; a positive integer -> that number."""
    text = str(value).strip().lower() if value is not None else "all"
    if text in ("", "all"):
        return None
    try:
        number = int(text)
    except ValueError:
        raise ValueError(  # noqa: B904 - the user's value, not the int() error, is the message
            f"gpu_fabric_verify_nodes_per_clique is {value!r}: give 'all' or a number of trays (2 or more)"
        )
    if number < MIN_TRAYS:
        raise ValueError(
            f"gpu_fabric_verify_nodes_per_clique is {number}: a multi-node check needs at least {MIN_TRAYS} trays"
        )
    return number


# -- names of the objects of one rack -----------------------------------------------------------------


def rack_namespace(prefix: str, check: str, rack: str) -> str:
    """The namespace of one check on one rack, e.g. ``gpu-fabric-verify-nvbandwidth-rack1``."""
    return dns_label(prefix, check.replace("_", "-"), rack)


_NAMESPACE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def given_namespaces(racks: Sequence[str], per_rack: Mapping[str, str], shared: str) -> Dict[str, str]:
    """Rack -> the existing namespace the site gives it (``per_rack`` first, then ``shared``).

    Empty when the site gives none: each check then creates and deletes its own namespace per rack.
    A rack left without one when only ``per_rack`` is set is an error, as is a name Kubernetes refuses.
    """
    per_rack = {str(rack): str(name or "") for rack, name in (per_rack or {}).items()}
    if not per_rack and not shared:
        return {}
    resolved: Dict[str, str] = {}
    missing = []
    for rack in racks:
        name = per_rack.get(rack) or shared
        if not name:
            missing.append(rack)
            continue
        if not _NAMESPACE_NAME.match(name):
            source = "gpu_fabric_verify_namespaces" if per_rack.get(rack) else "gpu_fabric_verify_namespace"
            raise ValueError(
                f"{source} gives rack {rack} the namespace {name!r}, which is not a valid namespace name "
                "(lower-case letters, digits and '-', at most 63)"
            )
        resolved[rack] = name
    if missing:
        raise ValueError(
            f"gpu_fabric_verify_namespaces gives no namespace to {plural(len(missing), 'rack')} "
            f"({', '.join(missing)}; it names {', '.join(sorted(per_rack)) or 'none'}): add them, or set "
            "gpu_fabric_verify_namespace for the racks it does not name"
        )
    return resolved


def missing_words(plan: RackPlan) -> str:
    """``missing gb200-r1-t17 (declared in gpu_fabric_racks, no Node of that name in the cluster)``, or ''."""
    if not plan.missing:
        return ""
    reasons: Dict[str, List[str]] = {}
    for entry in plan.missing:
        reasons.setdefault(entry["reason"], []).append(entry["node"])
    return "missing " + "; ".join(f"{', '.join(names)} ({reason})" for reason, names in reasons.items())


def coverage_note(plan: RackPlan) -> str:
    """`` (16 of 18 trays; skipped t3 cordoned, ...; missing t17 (declared in gpu_fabric_racks, ...))`` when not
    every tray was measured, else ''. The count is of the trays found and the declared ones missing."""
    if not plan.skipped and not plan.missing:
        return ""
    parts = [f"{len(plan.nodes)} of {len(plan.found) + len(plan.missing)} trays"]
    if plan.skipped:
        reasons = ", ".join(f"{s['node']} {s['reason']}" for s in plan.skipped[:3])
        more = f" and {len(plan.skipped) - 3} more" if len(plan.skipped) > 3 else ""
        parts.append(f"skipped {reasons}{more}")
    if plan.missing:
        parts.append(missing_words(plan))
    return f" ({'; '.join(parts)})"
