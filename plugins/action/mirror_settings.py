# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpu_fabric.mnnvl.mirror_settings: a pure computation of the task's arguments, so it runs on
the controller in the task's own process instead of a module process on the target (0.25-0.8 s per call there).
The options and the computation are plugins/module_utils/mirror.py's, the same the module runs."""

from __future__ import annotations

import copy

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.mirror import SETTINGS_SPEC, settings


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _validation, params = self.validate_argument_spec(argument_spec=copy.deepcopy(SETTINGS_SPEC))
        try:
            result.update(settings(params))
        except ValueError as exc:
            raise AnsibleActionFail(str(exc)) from None
        return result
