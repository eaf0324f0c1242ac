# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The plan of one rack: its trays, the ones a check uses and the ones skipped with their reason.

The planner (``verification.plan_fleet``) makes it; the checks, the record (``record.record_for``) and the fleet
read it. It imports nothing of the collection, so a reader of a plan stands on no planner and no tray state.
A skip reason the run chose (``is_selection_skip``: not selected, not due) says nothing of the tray.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

MIN_TRAYS = 2  # a multi-node check needs two trays; a rack with fewer is incomplete

# The skips a run chooses (what the site narrowed the run to, or a tray that is not due): not the tray's state.
NOT_DUE = "not due"
SELECTION_SKIP_PREFIXES = ("not selected", NOT_DUE)


def is_not_due(reason: str) -> bool:
    """Whether a plan's skip reason is ``tray_state.not_due_reason``'s."""
    return str(reason).startswith(NOT_DUE)


def is_selection_skip(reason: str) -> bool:
    """Whether a plan's skip reason is the run's choice (narrowed, not due) rather than the tray's state."""
    return str(reason).startswith(SELECTION_SKIP_PREFIXES)


@dataclass
class RackPlan:
    """One rack of a run: its trays, the ones used and the ones skipped with their reason."""

    name: str
    cliques: List[str]  # clique values of its trays (more than one: the rack is split)
    found: List[str]  # every GPU tray of the rack
    nodes: List[str]  # the trays the check uses, sorted
    skipped: List[Dict[str, str]]  # [{node, reason}]
    gpus_per_tray: int
    gpu_product: str
    expected_trays: int = 0
    only_due: bool = False  # the run verifies only the due trays
    due: List[Dict[str, str]] = field(default_factory=list)  # [{node, reason}]: the due trays it uses
    # not due, measured with too few due ones (partners of the due trays): their verdicts are refreshed too
    partners: List[str] = field(default_factory=list)
    # the rack as gpu_fabric_racks declares it (``is_declared``): its trays, the declared ones without a GPU Node
    # ([{node, reason}]) and the trays of its clique the inventory does not list
    is_declared: bool = False
    declared: List[str] = field(default_factory=list)
    missing: List[Dict[str, str]] = field(default_factory=list)
    undeclared: List[str] = field(default_factory=list)

    @property
    def clique(self) -> Optional[str]:
        return self.cliques[0] if len(self.cliques) == 1 else None

    @property
    def absent(self) -> bool:
        """A rack gpu_fabric_racks declares and the cluster does not show: no GPU Node of its trays."""
        return self.is_declared and not self.found

    @property
    def nothing_due(self) -> bool:
        """An only-due run has no usable due tray here: the rack is not run, which is no failure."""
        return self.only_due and not self.due and not self.absent

    @property
    def incomplete(self) -> bool:
        return len(self.nodes) < MIN_TRAYS and not self.nothing_due and not self.absent

    def trays(self) -> Dict[str, Any]:
        trays: Dict[str, Any] = {
            "expected": self.expected_trays,
            "found": list(self.found),
            "skipped": [dict(s) for s in self.skipped],
        }
        if self.is_declared:
            trays.update(
                declared=list(self.declared),
                missing=[dict(m) for m in self.missing],
                undeclared=list(self.undeclared),
            )
        if self.only_due:
            trays.update(due=[dict(d) for d in self.due], partners=list(self.partners))
        return trays

    def to_dict(self) -> Dict[str, Any]:
        return {
            "rack": self.name,
            "clique": self.clique,
            "cliques": list(self.cliques),
            "nodes": list(self.nodes),
            "gpus_per_tray": self.gpus_per_tray,
            "gpu_product": self.gpu_product,
            "incomplete": self.incomplete,
            "absent": self.absent,
            "nothing_due": self.nothing_due,
            "due": [dict(d) for d in self.due],
            "partners": list(self.partners),
            "trays": self.trays(),
        }
