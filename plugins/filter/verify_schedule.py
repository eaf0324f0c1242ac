# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filter ``verify_schedule_objects``: the objects of a scheduled verification (documentation: the YAML file
beside this one)."""

from __future__ import annotations

import json
from typing import Any, Dict

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_schedule as _verify_schedule
from jinja2 import Undefined


def verify_schedule_objects(settings: Any, rbac_text: Any) -> Dict[str, Any]:
    """The schedule's settings and the shipped verify RBAC's text -> its objects by group (and the refresh job's
    note)."""
    try:
        # plain values: Ansible's tagged strings and dicts are not what the YAML dumper of the inventory knows
        plain = json.loads(json.dumps(dict(settings or {})))
        return _verify_schedule.objects_from_text(plain, str(rbac_text))
    except (_verify_schedule.ScheduleError, TypeError) as exc:
        raise AnsibleFilterError(f"verify_schedule_objects: {exc}") from None


def verify_schedule_problems(settings: Any, rbac_text: Any) -> str:
    """What keeps the schedule's objects from being made of ``settings``, in one line; '' when they can be. For an
    ``assert`` before the objects are rendered: a filter that fails inside ``set_fact`` reaches the user wrapped in
    Ansible's "Finalization of task args ... Error while resolving value" text."""
    try:
        verify_schedule_objects(settings, rbac_text)
    except AnsibleFilterError as exc:
        return str(exc.message).removeprefix("verify_schedule_objects: ")
    return ""


def _defined(value: Any) -> Any:
    """json's hook for what it cannot write: Ansible's mark of an undefined value is refused with its message."""
    if isinstance(value, Undefined):
        raise ValueError(value._undefined_message)
    raise TypeError(f"a value of type {type(value).__name__} is not data")


def verify_schedule_site_vars(host_vars: Any) -> Dict[str, Any]:
    """A host's variables as the inventory sets them (``hostvars[inventory_hostname]``) -> the verify variables that
    the job's inventory carries, resolved here, as plain values. Only those names are read (and templated)."""
    values: Dict[str, Any] = {}
    for name in _verify_schedule.carried_names(host_vars.keys()):
        try:
            values[name] = json.loads(json.dumps(host_vars[name], default=_defined))
        except (AnsibleError, TypeError, ValueError) as exc:
            reason = (str(exc).strip().splitlines() or ["no value"])[0]
            raise AnsibleFilterError(
                f"verify_schedule_site_vars: the site's {name} cannot be resolved where the schedule is applied "
                f"({reason}); give it a value there, or set it in verify_schedule_verify_vars"
            ) from None
    return values


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {
            "verify_schedule_objects": verify_schedule_objects,
            "verify_schedule_problems": verify_schedule_problems,
            "verify_schedule_site_vars": verify_schedule_site_vars,
        }
