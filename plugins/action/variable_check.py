# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of gpu_fabric.mnnvl.variable_check: runs on the controller, where the roles and the host's
variables are; the rule itself is plugins/module_utils/inventory_variables.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import inventory_variables as iv

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    yaml = None  # type: ignore[assignment]

COLLECTION = Path(__file__).resolve().parents[2]


def _load(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def collection_variables(root: Path = COLLECTION) -> Dict[str, Any]:
    """The options of every role and the shared variables each types (owner -> name -> spec), the table of the
    shared variables' types, the roles' defaults, the names the roles set, the known names and the prefixes."""
    options: Dict[str, Dict[str, Dict[str, Any]]] = {}
    defaults_by_role: Dict[str, Dict[str, Any]] = {}
    internal: set = set()
    texts: List[str] = []
    for role in sorted(p for p in (root / "roles").iterdir() if p.is_dir()):
        spec = role / "meta" / "argument_specs.yml"
        if spec.is_file():
            options[role.name] = iv.spec_options(_load(spec))
        for tasks in sorted((role / "tasks").glob("*.yml")):
            internal |= iv.task_names(_load(tasks))
            texts.append(tasks.read_text(encoding="utf-8"))
        for defaults in sorted((role / "defaults").glob("*.yml")):
            defaults_by_role.setdefault(role.name, {}).update(_load(defaults) or {})
            texts.append(defaults.read_text(encoding="utf-8"))
    texts.extend(p.read_text(encoding="utf-8") for p in sorted((root / "playbooks").glob("*.yml")))
    known = {name for role_options in options.values() for name in role_options} | internal | iv.shared_names(texts)
    shared = iv.shared_types(options, defaults_by_role)
    return {
        "options": iv.with_shared_types(options, shared),
        "shared": shared,
        "defaults": {name: value for role in defaults_by_role.values() for name, value in role.items()},
        "set": internal,
        "known": known,
        "prefixes": [*sorted(options), iv.SHARED_PREFIX],
    }


def validate(spec: Dict[str, Any], values: Dict[str, Any]) -> List[str]:
    return list(ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        fail = self._task.args.get("fail_on_problems", True)
        found = collection_variables()
        prefixes = self._task.args.get("prefixes") or found["prefixes"]
        hostvars = (task_vars.get("hostvars") or {}).get(task_vars.get("inventory_hostname"), {})
        names = set(hostvars.keys()) if hasattr(hostvars, "keys") else set()
        names |= set(task_vars)
        unknown = iv.unknown_variables(found["known"], prefixes, names)

        values: Dict[str, Any] = {}
        wanted = {name for role_options in found["options"].values() for name in role_options}
        for name in iv.set_by_user({name: task_vars[name] for name in wanted & set(task_vars)}, found["defaults"]):
            try:
                values[name] = self._templar.template(task_vars[name])
            except Exception:  # a value that needs a role's defaults: that role validates it when it runs
                continue
        types = iv.type_problems(found["options"], values, validate)

        problems = ([iv.unknown_message(unknown)] if unknown else []) + types
        result.update(
            changed=False,
            unknown=[{"name": item.name, "suggestion": item.suggestion} for item in unknown],
            type_problems=types,
            problems=problems,
            msg="; ".join(problems) if problems else "every gpu_fabric.mnnvl variable is known and of its type",
        )
        if problems and fail:
            result["failed"] = True
        return result
