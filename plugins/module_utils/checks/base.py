# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a verification check is: the contract every file of ``checks/`` fulfils.

A check declares its name, the module options it reads (an argument spec per option group), the
objects it creates and the rights it needs, how it is made from the module's parameters, how it
measures one rack (``measure``, called by ``rack_run.RackRun`` between the namespace and the cleanup)
and the rule it holds the fleet's records to once every rack is done. The registry
(``checks/__init__.py``) lists the checks; the module, the report and the tests read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import nvbandwidth_runtime as runtime
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import CheckView, check_view
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import detail_facts
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import Record
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rights import Right
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line, plural

if TYPE_CHECKING:  # the lifecycle calls the check, and the check the lifecycle's steps
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun

# Seconds a rack's check may take when neither the site nor the check's run-time model says otherwise.
DEFAULT_TIMEOUT = 900.0

OptionGroups = Mapping[str, Mapping[str, Any]]  # option group -> its argument spec (a ``dict`` option)


class CheckFailed(Exception):
    """The check ran and found a problem, or a step did not happen in time (message: one line)."""

    def __init__(
        self,
        summary: str,
        details: Optional[Dict[str, Any]] = None,
        failed_nodes: Sequence[str] = (),
        node_problems: Optional[Dict[str, str]] = None,
    ) -> None:
        super().__init__(summary)
        self.summary = one_line(summary)
        self.details = details or {}
        self.failed_nodes = list(failed_nodes)
        self.node_problems = node_problems or {}


class NotRun(Exception):
    """The check could not run on this cluster as it is (a component it needs is missing); one line."""


@dataclass
class Result:
    passed: bool
    summary: str
    details: Dict[str, Any] = field(default_factory=dict)
    failed_nodes: List[str] = field(default_factory=list)
    node_problems: Dict[str, str] = field(default_factory=dict)


class Check:
    """A verification check: its name, its options, its objects and how it measures one rack."""

    name = ""
    # option group -> argument spec of the module's option of that name; groups two checks share (mpi) are
    # the same object
    options: OptionGroups = {}
    uses_gpus = True  # the planner skips trays whose GPUs other pods hold
    reads_only = False  # reads the cluster and creates nothing: ``read_racks`` instead of the lifecycle
    pod_security_level = ""
    objects: Tuple[Tuple[str, str], ...] = ()
    rights: Tuple[Right, ...] = ()  # beyond RackRun.rights, in a given namespace

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Check:
        """The check as the module's parameters configure it (images already at the site's mirror); a setting
        it cannot run with raises ValueError with one line naming it."""
        raise NotImplementedError

    def measure(self, run: RackRun) -> Result:
        raise NotImplementedError

    def read_racks(self, nodes: Sequence[Mapping[str, Any]], plans: Sequence[RackPlan], scope: Any) -> List[Record]:
        """The records of a check that only reads (``reads_only``): one per rack of ``plans``."""
        raise NotImplementedError

    @classmethod
    def view(cls, record: Mapping[str, Any]) -> CheckView:
        """What the report shows of the check's record besides its summary, blamed trays and violations (written
        into the record by ``fleet``): the facts of its details (``checks.views.FACTS``); a check adds its tables
        and per-tray findings."""
        return check_view(facts=detail_facts(record.get("details") or {}))

    def fleet_rule(self, records: Sequence[Record]) -> List[Record]:
        """The records once every rack is done, held to what only the fleet shows (a rack slower than its
        peers); the records it fails are new ones (``record.failed_by``)."""
        return list(records)

    def owns_pod(self, run: RackRun, name: str) -> bool:
        """Whether the pod ``name`` is one this check makes on the rack of ``run`` (its claims are then ours)."""
        return False

    def cleanup_steps(self, run: RackRun) -> List[Tuple[str, Callable[[], None]]]:
        return []

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        """What the check would create on the rack (check mode)."""
        return {"namespace": run.namespace, "compute_domain": run.compute_domain, "nodes": list(run.plan.nodes)}

    def run_estimate(self, plan: RackPlan) -> Optional[runtime.Estimate]:
        """The modelled run time of the check on the rack of ``plan`` (None: the check has no model)."""
        return None

    def timeout(self, plan: RackPlan, configured: float) -> float:
        """Seconds the check may take on the rack: ``configured`` when > 0 (the site's), else the start
        allowance plus the modelled run x the safety factor (``nvbandwidth_runtime.wait_seconds``), else 900."""
        if configured > 0:
            return configured
        estimate = self.run_estimate(plan)
        return float(runtime.wait_seconds(estimate)) if estimate else DEFAULT_TIMEOUT


def by_name(objects: kube_watch.Objects) -> Dict[str, Dict[str, Any]]:
    """The watched objects of one namespace by name."""
    return {key.split("/", 1)[-1]: obj for key, obj in objects.items()}


def skipped_note(plan: RackPlan) -> str:
    """``; 2 trays skipped: t3 cordoned, ...`` for a summary, or '' when every tray was measured."""
    if not plan.skipped:
        return ""
    return (
        f"; {plural(len(plan.skipped), 'tray')} skipped: "
        + ", ".join(f"{s['node']} {s['reason']}" for s in plan.skipped[:3])
        + (" and more" if len(plan.skipped) > 3 else "")
    )
