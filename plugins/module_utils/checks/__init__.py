# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The registry of verification checks: every check of the collection, in the order the report shows them.

Each check is one file of this folder that declares what it is (``checks.base.Check``); nothing else lists the
checks by hand. ``fabric_verify`` takes its choices and its option groups from here, the tests their cases; the
report takes their names and order from ``check_catalog``, which imports nothing. A check is added by its file,
one line below and its name in ``check_catalog`` (an import each: Ansible ships a module only the module_utils it
imports, so the registry names them rather than searching the folder).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple, Type

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import CHECK_NAMES
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import (
    cliques,
    dcgm_diag,
    gpu_health,
    imex_channel,
    nccl,
    nvbandwidth,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.base import Check

_REGISTERED = {
    module.CHECK.name: module.CHECK for module in (cliques, imex_channel, nvbandwidth, nccl, gpu_health, dcgm_diag)
}
# in the catalog's order (check_catalog: the names the record readers know without importing any check's code)
REGISTRY: Dict[str, Type[Check]] = {name: _REGISTERED[name] for name in CHECK_NAMES if name in _REGISTERED}


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


def with_settings(params: Mapping[str, Any]) -> Dict[str, Any]:
    """``params`` with every check's option groups: a group given in ``settings`` (by its name) replaces the
    module's option of that name; a group neither gives is the check's defaults. A group or option no check
    declares, or a value of the wrong type, raises ValueError with one line naming it."""
    specs = option_specs()
    given = params.get("settings") or {}
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise ValueError(
            f"settings: no check has an option group called {', '.join(unknown)}; the groups are "
            + ", ".join(sorted(specs))
        )
    merged = dict(params)
    for group, spec in specs.items():
        if group in given or merged.get(group) is None:
            result = ArgumentSpecValidator(dict(spec.get("options") or {})).validate(dict(given.get(group) or {}))
            if result.error_messages:
                raise ValueError(f"settings.{group}: " + "; ".join(result.error_messages))
            merged[group] = result.validated_parameters
    return merged
