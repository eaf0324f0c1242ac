# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check ``nccl`` (opt-in): nccl-tests in one MPIJob per rack with multi-node NVLink on, the bus bandwidth
held to the product's reference and peak (``judges.judge_nccl_log``) and each rack to the fleet's median."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import CheckView, check_view
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.mpijob import MPI_OPTIONS, MpiJobCheck
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import detail_facts, nccl_rows_table, shown
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.judges import judge_fleet_busbw, judge_nccl_log
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import Record

if TYPE_CHECKING:  # the lifecycle runs the check: its type only
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rack_run import RackRun


class NcclCheck(MpiJobCheck):
    name = "nccl"
    options = {
        "mpi": MPI_OPTIONS,
        "nccl": dict(
            type="dict",
            default={},
            options=dict(
                image=dict(type="str", default=""),
                binary=dict(type="str", default="all_reduce_perf"),
                args=dict(type="list", elements="str", default=["-b", "1G", "-e", "8G", "-f", "2", "-g", "1"]),
                mpirun_args=dict(
                    type="list",
                    elements="str",
                    default=[
                        "-x",
                        "NCCL_DEBUG=INFO",
                        "-x",
                        "NCCL_DEBUG_SUBSYS=INIT",
                        "-x",
                        "NCCL_MNNVL_ENABLE=1",
                        "-x",
                        "NCCL_CUMEM_ENABLE=1",
                    ],
                ),
                require_mnnvl=dict(type="bool", default=True),
                min_busbw_gbps=dict(type="float", default=0),
                min_fraction_of_reference=dict(type="float", default=0.9),
                min_fraction_of_peak=dict(type="float", default=0.6),
                min_fraction_of_fleet_median=dict(type="float", default=0.9),
                peak_gbps=dict(type="float", default=0),
                peak_gbps_by_product=dict(type="list", elements="dict", default=[]),
            ),
        ),
    }

    def __init__(
        self,
        image: str,
        mpi: Mapping[str, Any],
        binary: str,
        args: Sequence[str],
        mpirun_args: Sequence[str],
        judge: Callable[..., Dict[str, Any]],
    ) -> None:
        super().__init__(image, mpi, judge)
        self.binary = binary
        self.args = list(args)
        self.mpirun_args = list(mpirun_args)
        self.min_fraction_of_fleet_median: Optional[float] = None

    @classmethod
    def view(cls, record: Mapping[str, Any]) -> CheckView:
        """The facts and the bus bandwidth of each message size."""
        details = record.get("details") or {}
        return check_view(facts=detail_facts(details), tables=shown(nccl_rows_table(details)))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> NcclCheck:
        nccl = params["nccl"]
        if not nccl["image"]:
            raise ValueError(
                "nccl.image is empty: there is no official NVIDIA nccl-tests image; build one with nccl-tests "
                "(MPI=1), Open MPI and sshd and set verify_nccl_image"
            )
        check = cls(
            nccl["image"],
            params["mpi"],
            nccl["binary"],
            nccl["args"],
            nccl["mpirun_args"],
            lambda log, plan, nodes: judge_nccl_log(log, plan, nccl, nodes),
        )
        check.min_fraction_of_fleet_median = nccl["min_fraction_of_fleet_median"]
        return check

    def fleet_rule(self, records: Sequence[Record]) -> List[Record]:
        """A rack's bus bandwidth held against the fleet's median of the same run (``judges.judge_fleet_busbw``)."""
        return judge_fleet_busbw(records, self.min_fraction_of_fleet_median)

    def launcher_args(self, run: RackRun) -> List[str]:
        return ["-q", *self.mpirun_args, self.binary, *self.args]


CHECK = NcclCheck
