# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters ``tag_problems`` and ``host_stage_selected`` (a run's tags held to the playbooks' tags) and
``fleet_problems`` (the trays' variable checks said once); documentation: the YAML files beside this one; the rules:
plugins/module_utils/playbook_tags.py."""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import playbook_tags as _tags


def tag_problems(run_tags: Any, skip_tags: Any) -> str:
    """The run's tags -> one line per tag that selects nothing, '' when every tag selects something."""
    return "\n".join(_tags.tag_problems(list(run_tags or []), list(skip_tags or [])))


def host_stage_selected(run_tags: Any, skip_tags: Any) -> bool:
    """The run's tags -> whether they run a host role on the trays."""
    return _tags.host_stage_selected(list(run_tags or []), list(skip_tags or []))


def fleet_problems(hosts: Any, host_vars: Any, result: str) -> str:
    """The play's hosts, hostvars and the name each registered its variable check as -> each problem once, one line
    each ('' when none)."""
    found = {}
    for host in hosts or []:
        registered = (host_vars.get(host) or {}).get(result) or {}
        found[str(host)] = list(registered.get("problems") or [])
    return "\n".join(_tags.once_per_fleet(found))


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {
            "tag_problems": tag_problems,
            "host_stage_selected": host_stage_selected,
            "fleet_problems": fleet_problems,
        }
