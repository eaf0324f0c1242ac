# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The names of the collection's checks, in the order the report shows them, and which of them a run selects (a
leaf: it imports nothing).

The registry (``checks``) holds each check's code, which reaches the Kubernetes client; the readers of records
(the report, the metrics) need only the names and their order, and take them from here, as do the playbooks'
filters (``checks_selected``, the tags): a filter is imported again by every task that uses it, in the task's own
process, so a filter that reached the client would cost every such task the client's import (about half a second).
The registry registers exactly these names in this order (``checks.REGISTRY``, under a unit test), so a check is
added in both places.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

CHECK_NAMES: Tuple[str, ...] = ("cliques", "imex_channel", "nvbandwidth", "nccl", "gpu_health", "dcgm_diag")

# The checks that playbooks/verify.yml runs through roles of their own (verify_cliques, ...), each under its name;
# the others run in the role verify_checks (its default verify_checks_own_roles is this list).
OWN_ROLE_CHECKS: Tuple[str, ...] = ("cliques", "imex_channel", "nvbandwidth", "nccl")


def check_key(check: str) -> Tuple[int, str]:
    """A sort key: the catalog's checks in its order, then any other (a record of a check since removed) by name."""
    return (CHECK_NAMES.index(check) if check in CHECK_NAMES else len(CHECK_NAMES), check)


def check_names(value: Any) -> List[str]:
    """The check names a site gives in ``gpu_fabric_verify_checks``: a list, or a string naming one check or a
    comma-separated list of them (``-e gpu_fabric_verify_checks=gpu_health``)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [name for name in (str(item).strip() for item in items) if name]


def selected(
    run_tags: Sequence[str], skip_tags: Sequence[str], enabled: Sequence[str], own_roles: Sequence[str]
) -> List[str]:
    """The checks a ``verify.yml`` run gives to the generic role (``verify_checks``), in the catalog's order.

    ``own_roles``: the checks the playbook runs through roles of their own (left out here). A check runs when
    the run names it in ``--tags``, or when the site enables it (``gpu_fabric_verify_checks``) and the run is
    not narrowed to other tags (no ``--tags``, or ``--tags verify``); never when ``--skip-tags`` names it.
    An enabled name that is no check raises ValueError.
    """
    unknown = [name for name in enabled if name not in CHECK_NAMES]
    if unknown:
        raise ValueError(
            f"gpu_fabric_verify_checks names {', '.join(unknown)}, which is no check; the checks are "
            + ", ".join(CHECK_NAMES)
        )
    whole_run = not run_tags or bool({"all", "verify"} & set(run_tags))
    return [
        name
        for name in CHECK_NAMES
        if name not in own_roles and name not in skip_tags and (name in run_tags or (whole_run and name in enabled))
    ]
