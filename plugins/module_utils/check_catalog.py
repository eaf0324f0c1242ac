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


# The tags that select every check a verify run enables: no --tags, all, or the verify stage's own tag.
WHOLE_RUN_TAGS: Tuple[str, ...] = ("all", "verify")
# The generic role's own tag: --tags verify_checks runs the checks the site enables there, and none of the others.
GENERIC_ROLE_TAG = "verify_checks"


def _whole_run(run_tags: Sequence[str]) -> bool:
    return not run_tags or bool(set(WHOLE_RUN_TAGS) & set(run_tags))


def selected(
    run_tags: Sequence[str], skip_tags: Sequence[str], enabled: Sequence[str], own_roles: Sequence[str]
) -> List[str]:
    """The checks a ``verify.yml`` run gives to the generic role (``verify_checks``), in the catalog's order.

    ``own_roles``: the checks the playbook runs through roles of their own (left out here). A check runs when
    the run names it in ``--tags``, or when the site enables it (``gpu_fabric_verify_checks``) and the run is
    not narrowed to other tags (no ``--tags``, ``--tags verify``, or the role's own ``--tags verify_checks``);
    never when ``--skip-tags`` names it. An enabled name that is no check raises ValueError.
    """
    unknown = [name for name in enabled if name not in CHECK_NAMES]
    if unknown:
        raise ValueError(
            f"gpu_fabric_verify_checks names {', '.join(unknown)}, which is no check; the checks are "
            + ", ".join(CHECK_NAMES)
        )
    whole_run = _whole_run(run_tags) or GENERIC_ROLE_TAG in run_tags
    if GENERIC_ROLE_TAG in skip_tags:
        return []
    return [
        name
        for name in CHECK_NAMES
        if name not in own_roles and name not in skip_tags and (name in run_tags or (whole_run and name in enabled))
    ]


def own_role_checks(run_tags: Sequence[str], skip_tags: Sequence[str], nccl: bool) -> List[str]:
    """The checks of ``OWN_ROLE_CHECKS`` that a verify run with these tags runs, each selected by its name or its
    role's name (``verify_<name>``); nccl only when the site enables it (``gpu_fabric_verify_nccl``)."""
    chosen = []
    for name in OWN_ROLE_CHECKS:
        tags = {name, f"verify_{name}"}
        if name == "nccl" and not nccl:
            continue
        if tags & set(skip_tags) or not (_whole_run(run_tags) or tags & set(run_tags)):
            continue
        chosen.append(name)
    return chosen


def run_checks(run_tags: Sequence[str], skip_tags: Sequence[str], enabled: Any, nccl: bool) -> List[str]:
    """Every check a ``verify.yml`` run with these tags runs, in the verify stage's order: its own roles', then the
    checks of the catalog that ``enabled`` (gpu_fabric_verify_checks; the names that are no check left out) or
    the tags select. Empty: the run verifies nothing (``--tags cluster``), so it has no report to write."""
    known = [name for name in check_names(enabled) if name in CHECK_NAMES]
    others = selected(list(run_tags), list(skip_tags), known, OWN_ROLE_CHECKS)
    return own_role_checks(run_tags, skip_tags, nccl) + others
