# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check ``cliques``: the labels of every GPU tray read, nothing created. Each rack must be one NVLink clique
(``nvidia.com/gpu.clique``), every tray labelled, with the trays and the GPUs per tray the site expects."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import CheckView, check_view
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import Check
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import cliques_table, detail_facts, shown
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.cliques import (
    CLIQUE_LABEL,
    GPU_RESOURCE,
    unlabelled_message,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import (
    OUTCOME_FAILED,
    OUTCOME_PASSED,
    Record,
    record_for,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import by_name, natural_key, plural
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verification import (
    Scope,
    allocatable_gpus,
    group_racks,
    labels_of,
    node_name,
)


class CliquesCheck(Check):
    name = "cliques"
    uses_gpus = False
    reads_only = True

    def __init__(self, gpus_per_tray: int = 0, trays_per_clique: int = 0, run_id: str = "") -> None:
        self.gpus_per_tray = gpus_per_tray
        self.trays_per_clique = trays_per_clique
        self.run_id = run_id

    @classmethod
    def view(cls, record: Mapping[str, Any]) -> CheckView:
        """The facts and the trays of each clique label (and those without one)."""
        details = record.get("details") or {}
        return check_view(facts=detail_facts(details), tables=shown(cliques_table(details)))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> CliquesCheck:
        return cls(params["gpus_per_tray"], params["trays_per_clique"], params["run_id"])

    def read_racks(self, nodes: Sequence[Mapping[str, Any]], plans: Sequence[RackPlan], scope: Scope) -> List[Record]:
        grouped = group_racks(nodes, scope)
        records = []
        for plan in plans:
            passed, summary, problems, details = judge_cliques(
                grouped.get(plan.name, []), plan, self.gpus_per_tray, self.trays_per_clique
            )
            # a missing tray is named, never blamed; when every problem names a tray the trays found stay vouched for
            named = {} if details["unnamed_violations"] else details.get("missing_problems") or {}
            record = record_for(
                self.name,
                plan,
                OUTCOME_PASSED if passed else OUTCOME_FAILED,
                summary,
                {key: value for key, value in details.items() if key != "missing_problems"},
                failed_nodes=list(problems),
                node_problems={**problems, **named},
                run_id=self.run_id,
            )
            # the labels of every tray were read: cordoned, busy or NotReady trays are not skipped here
            record["nodes"] = list(plan.found)
            record["trays"]["skipped"] = []
            records.append(record)
        return records


def judge_cliques(
    members: Sequence[Mapping[str, Any]],
    plan: RackPlan,
    gpus_per_tray: int,
    trays_per_clique: int,
) -> Tuple[bool, str, Dict[str, str], Dict[str, Any]]:
    """Labels, one clique, trays and GPUs of one rack: (passed, summary, node problems, details)."""
    problems: Dict[str, str] = {}
    violations: List[str] = []
    cliques: Dict[str, List[str]] = {}
    gpus: Dict[str, int] = {}
    for node in members:
        name = node_name(node)
        gpus[name] = allocatable_gpus(node)
        value = labels_of(node).get(CLIQUE_LABEL)
        if not value:
            problems[name] = unlabelled_message(name)
        else:
            cliques.setdefault(value, []).append(name)
    violations.extend(problems.values())
    if len(cliques) > 1:
        split = "; ".join(f"{value}: {', '.join(by_name(names))}" for value, names in sorted(cliques.items()))
        violations.append(
            f"rack {plan.name} spans {len(cliques)} cliques ({split}); the trays of one rack must share one NVLink "
            "clique: check the NVLink switch trays and each tray's fabric state"
        )
        minority = sorted(cliques, key=lambda v: (len(cliques[v]), v))[:-1]
        for value in minority:
            for name in cliques[value]:
                problems.setdefault(name, f"{name} is in clique {value}, apart from the rest of rack {plan.name}")
    missing_problems: Dict[str, str] = {}
    for entry in plan.missing:  # declared and not a GPU tray of the cluster: named, not blamed (no Node to blame)
        missing_problems[entry["node"]] = (
            f"{entry['node']} of rack {plan.name} is {entry['reason']}: bring the tray up and join it to the "
            "cluster, or correct gpu_fabric_racks"
        )
        violations.append(missing_problems[entry["node"]])
    explained = len(members) + len(plan.missing) == trays_per_clique  # the missing trays named above say it
    unnamed = 0  # violations that name no tray
    if trays_per_clique and len(members) != trays_per_clique and not explained:
        unnamed += 1
        violations.append(
            f"rack {plan.name} has {plural(len(members), 'GPU tray')}, expected {trays_per_clique} "
            "(gpu_fabric_trays_per_clique): a tray is down, unlabelled by GPU Feature Discovery or not joined"
        )
    if gpus_per_tray:
        for name, count in sorted(gpus.items(), key=lambda item: natural_key(item[0])):
            if count != gpus_per_tray:
                text = (
                    f"{name} has {count} allocatable {GPU_RESOURCE}, expected {gpus_per_tray} "
                    "(gpu_fabric_gpus_per_tray):"
                    " a GPU fell off the bus or the device plugin does not see it; check 'nvidia-smi -L' on the tray"
                )
                problems.setdefault(name, text)
                violations.append(text)
    details = {
        "gpu_nodes": len(members),
        "cliques": {value: by_name(names) for value, names in sorted(cliques.items())},
        "unlabelled_nodes": by_name(n for n in gpus if not any(n in v for v in cliques.values())),
        "gpus": gpus,
        "expected_trays": trays_per_clique,
        "expected_gpus_per_tray": gpus_per_tray,
        "violations": violations,
        "unnamed_violations": unnamed,
    }
    if plan.is_declared:
        details.update(
            declared=list(plan.declared),
            missing=[dict(entry) for entry in plan.missing],
            undeclared=list(plan.undeclared),
            missing_problems=missing_problems,
        )
    # a tray of the rack's clique that the inventory leaves out is measured with its rack and named, not failed
    notes = "".join(f"; {name} is in {plan.name}'s clique but not in gpu_fabric_racks" for name in plan.undeclared)
    if violations:
        head = f"rack {plan.name}: {plural(len(violations), 'problem')}: "
        return False, head + "; ".join(violations) + notes, problems, details
    value = next(iter(cliques))
    gpu_text = f", {gpus_per_tray} GPUs each" if gpus_per_tray else ""
    return (
        True,
        f"rack {plan.name}: {plural(len(members), 'GPU tray')} in one clique ({value}){gpu_text}{notes}",
        {},
        details,
    )


CHECK = CliquesCheck
