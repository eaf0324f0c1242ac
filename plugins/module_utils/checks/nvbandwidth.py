# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check ``nvbandwidth``: NVIDIA's nvbandwidth over every GPU pair of the rack in one MPIJob, each pair held to
the floor, the rack's median and its baseline (``judge_nvbandwidth_log``); the wait follows from the pairs
(``nvbandwidth_runtime``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history, history_baseline
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import nvbandwidth_runtime as runtime
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.bandwidth_thresholds import (
    DEFAULT_MIN_FRACTION_OF_PEAK,
    Baseline,
    peak_table_problems,
    reference_table_problems,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import CheckView, check_view
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import NotRun, Result
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.mpijob import MPI_OPTIONS, MpiJobCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import (
    detail_facts,
    low_gpus_table,
    pairs_table,
    shown,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.judges import (
    coverage_refusal,
    gpu_coverage,
    nvbandwidth_thresholds,
    peak_table,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.nvbandwidth import check_nvbandwidth
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_plan import RackPlan
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun


# The check's own judge, not one of ``judges``: the nccl check, which reads ``judges``, then stands on no nvbandwidth
# parser and rule, and no chain of imports grows past 7 floors (tests/unit/plugins/test_import_layers.py).
def judge_nvbandwidth_log(
    log: str, plan: RackPlan, options: Mapping[str, Any], nodes: Optional[Sequence[str]] = None
) -> Dict[str, Any]:
    """The verdict on one rack's nvbandwidth run over ``plan.nodes`` x ``plan.gpus_per_tray`` GPUs.

    ``nodes``: the tray of each worker in rank order (GPU i on ``nodes[i // gpus_per_tray]``); default the
    rack's trays in name order.
    """
    nodes = list(nodes or plan.nodes)
    verdict = check_nvbandwidth(
        log,
        testcase=options.get("testcase"),
        thresholds=nvbandwidth_thresholds(options),
        gpu_product=plan.gpu_product,
        nodes=nodes,
        gpus_per_node=plan.gpus_per_tray,
        peak_table=peak_table(options),
        product_references=options.get("product_references") or None,
        baseline=Baseline.from_record(options.get("baseline")),
    )
    result = verdict.to_result()
    expected = len(plan.nodes) * plan.gpus_per_tray
    errors = list(result["errors"])
    listed = [(int(d["index"]), str(d["host"] or ""), int(d["device"])) for d in result["devices"]]
    coverage = gpu_coverage(
        "nvbandwidth", listed, nodes, plan.gpus_per_tray, result["gpus"] or None, listing="Process line"
    )
    details = {
        "testcase": result["testcase"],
        # the driver the run measured on: a later run on another branch does not take this run as its baseline
        "driver_version": result["driver_version"],
        "rank_nodes": nodes,
        "gpus_per_node": plan.gpus_per_tray,
        "gpu_product": plan.gpu_product,
        "peak_gbps": result["peak_gbps"],
        "min_fraction_of_peak": result["min_fraction_of_peak"],
        "min_fraction_of_median": result["min_fraction_of_median"],
        "median_gbps": result["median_gbps"],
        "median_threshold_gbps": result["median_threshold_gbps"],
        "reference": result["reference"],
        "references": result["references"],
        "threshold_gbps": result["threshold_gbps"],
        "threshold_explanation": result["threshold_explanation"],
        "unit": result["unit"] or "GB/s",
        "matrix": result["matrix"],
        "row_pairs": result["row_pairs"],
        "sum": result["sum"],
        "min": result["min"],
        "max": result["max"],
        "mean": result["mean"],
        "failing_pairs": result["failing_pairs"],
        "low_gpus": result["low_gpus"],
        "expected_gpus": expected,
        "missing_gpus": coverage.trays,
        "violations": coverage.problems + errors + list(result["violations"]),
        "warnings": result["warnings"],
    }
    if coverage.problems:  # no evidence of every planned GPU: no figure is judged, the trays that lack one are named
        return coverage_refusal(coverage, details)
    if errors:
        return {
            "passed": False,
            "summary": "the nvbandwidth output does not show a completed run: "
            + "; ".join(one_line(e) for e in errors[:3]),
            "details": details,
            "failed_nodes": [],
        }
    judgement = verdict.judgement
    return {
        "passed": bool(result["passed"]),
        "summary": one_line(result["summary"]),
        "details": details,
        "failed_nodes": list(result["failed_nodes"]),
        "node_problems": dict(judgement.node_problems)
        if judgement is not None and hasattr(judgement, "node_problems")
        else {},
    }


class NvbandwidthCheck(MpiJobCheck):
    name = "nvbandwidth"
    options = {
        "mpi": MPI_OPTIONS,
        "nvbandwidth": dict(
            type="dict",
            default={},
            options=dict(
                image=dict(type="str", default="ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163"),
                testcase=dict(type="str", default="multinode_device_to_device_memcpy_read_ce"),
                extra_args=dict(type="list", elements="str", default=[]),
                min_gbps=dict(type="float", default=0),
                min_fraction_of_peak=dict(type="float", default=DEFAULT_MIN_FRACTION_OF_PEAK),
                peak_gbps=dict(type="float", default=0),
                peak_gbps_by_product=dict(type="list", elements="dict", default=[]),
                product_references=dict(type="list", elements="dict", default=[]),
                min_fraction_of_median=dict(type="float"),
            ),
        ),
    }

    def __init__(
        self,
        image: str,
        mpi: Mapping[str, Any],
        testcase: str,
        extra_args: Sequence[str],
        judge: Callable[..., Dict[str, Any]],
    ) -> None:
        super().__init__(image, mpi, judge)
        self.testcase = testcase
        self.extra_args = list(extra_args)
        # the rack's options with its baseline from the history (from_params sets it; none without a history)
        self.options_of: Callable[[str], Dict[str, Any]] = lambda rack: {}

    @classmethod
    def view(cls, record: Mapping[str, Any]) -> CheckView:
        """The facts, the low GPUs and the failing pairs no low GPU explains (the heatmap comes from the matrix)."""
        details = record.get("details") or {}
        tables = shown(low_gpus_table(details), pairs_table(details, list(record.get("nodes") or [])))
        return check_view(facts=detail_facts(details), tables=tables)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> NvbandwidthCheck:
        nvb = params["nvbandwidth"]
        problems = peak_table_problems(nvb.get("peak_gbps_by_product")) + reference_table_problems(
            nvb.get("product_references")
        )
        if problems:
            raise ValueError("nvbandwidth: " + "; ".join(problems))
        runtime.run_options(nvb["extra_args"])  # a buffer or sample count that is no number: refused
        history_dir, run_id = params["history_dir"], params["run_id"]

        def options_of(rack: str) -> Dict[str, Any]:
            """The options with the rack's baseline; a kept record that cannot be one refuses the check."""
            try:
                return history_baseline.options_with_baseline(nvb, history_dir, cls.name, rack, run_id)
            except history.HistoryError as exc:
                raise NotRun(str(exc)) from exc

        check = cls(
            nvb["image"],
            params["mpi"],
            nvb["testcase"],
            nvb["extra_args"],
            lambda log, plan, nodes: judge_nvbandwidth_log(log, plan, options_of(plan.name), nodes),
        )
        check.options_of = options_of
        return check

    def launcher_args(self, run: RackRun) -> List[str]:
        return ["--report-bindings", "-q", "nvbandwidth", "-t", self.testcase, *self.extra_args]

    def run_estimate(self, plan: RackPlan) -> Optional[runtime.Estimate]:
        gpus = plan.gpus_per_tray * len(plan.nodes)
        return runtime.estimate_for(self.testcase, gpus, self.extra_args, plan.gpu_product) if gpus else None

    def measure(self, run: RackRun) -> Result:
        self.options_of(run.plan.name)  # a kept record that cannot be the baseline: refused before the job runs
        result = super().measure(run)
        estimate = self.run_estimate(run.plan)
        if estimate is not None:  # what the model expected, next to the record's timings: the model checked
            result.details.setdefault("expected_run", estimate.to_dict())
        return result

    def describe(self, run: RackRun) -> str:
        """The pods, and what the run-time model expected (in the message of a wait that ran out)."""
        estimate = self.run_estimate(run.plan)
        if estimate is None:
            return super().describe(run)
        return (
            f"{super().describe(run)}; the run models to {runtime.duration_text(estimate.seconds)} "
            f"({estimate.pairs} pairs) after the start, the wait was {runtime.duration_text(run.timeout)}: "
            "if the rack is only slow, raise verify_nvbandwidth_timeout"
        )

    def plan_view(self, run: RackRun) -> Dict[str, Any]:
        view = super().plan_view(run)
        estimate = self.run_estimate(run.plan)
        if estimate is not None:
            view.update(
                expected_run=estimate.to_dict(),
                timeout_s=run.timeout,
                expected=runtime.plan_text(estimate, int(run.timeout)),
            )
        return view


CHECK = NvbandwidthCheck
