# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The registry of verification checks: every check of the collection, in the order the report shows them.

Each check is one file of this folder that declares what it is (``checks.base.Check``); nothing else lists the
checks by hand. ``fabric_verify`` takes its choices and its option groups from here, the report its order, the
tests their cases. A check is added by its file and one line below (an import each: Ansible ships a module only
the module_utils it imports, so the registry names them rather than searching the folder).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple, Type

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import cliques, imex_channel, nccl, nvbandwidth
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import Check

REGISTRY: Dict[str, Type[Check]] = {
    module.CHECK.name: module.CHECK
    for module in (
        cliques,
        imex_channel,
        nvbandwidth,
        nccl,
    )
}


def names() -> Tuple[str, ...]:
    """Every check's name, in the report's order."""
    return tuple(REGISTRY)


def get(name: str) -> Type[Check]:
    """The check called ``name``; an unknown name raises ValueError naming the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"no check is called {name!r}: the checks are {', '.join(names())}") from None


def option_specs() -> Dict[str, Mapping[str, Any]]:
    """Every check's option groups as one argument spec (a group two checks read, such as mpi, is declared once)."""
    specs: Dict[str, Mapping[str, Any]] = {}
    for check in REGISTRY.values():
        for group, spec in check.options.items():
            if specs.setdefault(group, spec) is not spec:
                raise ValueError(f"the option group {group} of check {check.name} differs from another check's")
    return specs


def image_groups() -> Tuple[str, ...]:
    """The option groups that name an image (moved to the site's mirror before the check is made)."""
    return tuple(group for group, spec in option_specs().items() if "image" in (spec.get("options") or {}))
