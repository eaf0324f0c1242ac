# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The names of the collection's checks, in the order the report shows them (a leaf: it imports nothing).

The registry (``checks``) holds each check's code, which reaches the Kubernetes client; the readers of records
(the report, the metrics) need only the names and their order, and take them from here. The registry registers
exactly these names in this order (``checks.REGISTRY``, under a unit test), so a check is added in both places.
"""

from __future__ import annotations

from typing import Tuple

CHECK_NAMES: Tuple[str, ...] = ("cliques", "imex_channel", "nvbandwidth", "nccl", "gpu_health", "dcgm_diag")

# The checks that playbooks/verify.yml runs through roles of their own (verify_cliques, ...), each under its name;
# the others run in the role verify_checks (its default verify_checks_own_roles is this list).
OWN_ROLE_CHECKS: Tuple[str, ...] = ("cliques", "imex_channel", "nvbandwidth", "nccl")


def check_key(check: str) -> Tuple[int, str]:
    """A sort key: the catalog's checks in its order, then any other (a record of a check since removed) by name."""
    return (CHECK_NAMES.index(check) if check in CHECK_NAMES else len(CHECK_NAMES), check)
