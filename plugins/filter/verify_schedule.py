# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filter ``verify_schedule_objects``: the objects of a scheduled verification (documentation: the YAML file
beside this one)."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_schedule as _verify_schedule


def verify_schedule_objects(settings: Any, rbac_text: Any) -> Dict[str, List[Dict[str, Any]]]:
    """The schedule's settings and the shipped verify RBAC's text -> its objects by group."""
    try:
        # plain values: Ansible's tagged strings and dicts are not what the YAML dumper of the inventory knows
        plain = json.loads(json.dumps(dict(settings or {})))
        return _verify_schedule.objects_from_text(plain, str(rbac_text))
    except (_verify_schedule.ScheduleError, TypeError) as exc:
        raise AnsibleFilterError(f"verify_schedule_objects: {exc}") from None


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"verify_schedule_objects": verify_schedule_objects}
