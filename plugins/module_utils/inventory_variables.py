# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The collection's variables, and the inventory variables that look like one of them but are not.

A misspelled variable (``verify_nvbandwith_timeout``, ``containerd_verison``) is silently ignored by Ansible:
the role runs with its default. The stages therefore compare the
host's variables with what the roles document (``meta/argument_specs.yml``), what the roles set themselves
(``register:``, ``set_fact:``) and the shared ``gpu_fabric_*`` variables the roles and playbooks read, and
report the rest that looks like ours, with the closest known name. Pure functions; the action plugin
``gpu_fabric.mnnvl.variable_check`` reads the files and the host's variables.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import unquoted_number_hint

SHARED_PREFIX = "gpu_fabric"
SHARED_NAME = re.compile(r"\bgpu_fabric_[a-z0-9_]*[a-z0-9]\b")
SET_FACT_ACTIONS = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
TASK_LISTS = ("block", "rescue", "always")
# how close a name must be to a known one to count as a misspelling of it when it has none of our prefixes
CLOSE_ENOUGH = 0.85
# a role default that is a shared variable's value: dra_driver_registry: "{{ gpu_fabric_registry }}" (the gpu_fabric
# role defines it), verify_common_parallel_racks: "{{ gpu_fabric_verify_parallel_racks | default(8) }}"
PASSED_ON = re.compile(r"^\{\{\s*(gpu_fabric_[a-z0-9_]*[a-z0-9])\s*(?:\}\}|\|\s*default\()")
# keys of an argument spec option that say nothing about the value's type
NOT_TYPE = ("required", "description", "default", "version_added")
PLAYBOOKS = "playbooks"
# The shared variables that the playbooks read themselves (no role's option passes them on), typed here.
PLAYBOOK_VARIABLES: Dict[str, Dict[str, Any]] = {
    "gpu_fabric_check_variables": {"type": "bool"},
    "gpu_fabric_check_tags": {"type": "bool"},
    "gpu_fabric_verify_nccl": {"type": "bool"},
    "gpu_fabric_gpu_hosts": {"type": "str"},
    "gpu_fabric_serial": {"type": "raw"},  # Ansible's serial: a count, a percentage or a list of them
    # host variables whose names nvidia_driver_rack_var, nvidia_imex_rack_var, nvidia_imex_node_address_var give
    "gpu_fabric_rack": {"type": "str"},
    "gpu_fabric_imex_address": {"type": "str"},
}


@dataclass(frozen=True)
class UnknownVariable:
    """A variable that looks like the collection's but is none of its variables."""

    name: str
    suggestion: Optional[str] = None

    def text(self) -> str:
        return f"{self.name} (did you mean {self.suggestion}?)" if self.suggestion else self.name


def spec_options(argument_specs: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Every option of every entry point of one role's ``meta/argument_specs.yml`` (parsed)."""
    options: Dict[str, Dict[str, Any]] = {}
    for entry in ((argument_specs or {}).get("argument_specs") or {}).values():
        options.update((entry or {}).get("options") or {})
    return options


def task_names(tasks: Any) -> Set[str]:
    """Variables a task list sets itself: ``register:`` targets and ``set_fact`` keys, blocks included."""
    names: Set[str] = set()
    for task in tasks or []:
        if not isinstance(task, Mapping):
            continue
        if isinstance(task.get("register"), str):
            names.add(task["register"])
        for action in SET_FACT_ACTIONS:
            if isinstance(task.get(action), Mapping):
                names.update(str(key) for key in task[action] if key != "cacheable")
        for key in TASK_LISTS:
            names |= task_names(task.get(key))
    return names


def shared_names(texts: Iterable[str]) -> Set[str]:
    """The ``gpu_fabric_*`` variables that the roles' defaults, tasks and the playbooks read or set."""
    found: Set[str] = set()
    for text in texts:
        found.update(SHARED_NAME.findall(text))
    return found


def is_private(name: str, prefixes: Sequence[str]) -> bool:
    """``preflight__commands``: a role's own internal name (two underscores after the prefix)."""
    return any(name.startswith(f"{prefix}__") for prefix in prefixes)


def looks_like_ours(name: str, prefixes: Sequence[str]) -> bool:
    return any(name.startswith(f"{prefix}_") for prefix in prefixes)


def unknown_variables(
    known: Iterable[str],
    prefixes: Iterable[str],
    names: Iterable[str],
    cutoff: float = CLOSE_ENOUGH,
) -> List[UnknownVariable]:
    """The ``names`` (a host's variables) that look like ours but are not ``known``, sorted.

    A name looks like ours when it starts with ``<prefix>_`` for one of ``prefixes`` (the role names and
    ``gpu_fabric``), or when it is within ``cutoff`` (difflib ratio) of a known name -- that catches a
    misspelled prefix (``verify_nvbandwith_timeout``). Private names (``<role>__x``) and Ansible's own
    (``ansible_*``) are never reported. Each comes with the closest known name, if one is close.
    """
    known_set = set(known)
    known_list = sorted(known_set)
    prefix_list = sorted(set(prefixes), key=len, reverse=True)
    found = []
    for name in sorted(set(names)):
        if name in known_set or name.startswith("ansible_") or is_private(name, prefix_list):
            continue
        close = difflib.get_close_matches(name, known_list, n=1, cutoff=0.6)
        if looks_like_ours(name, prefix_list):
            found.append(UnknownVariable(name, close[0] if close else None))
        elif close and difflib.SequenceMatcher(None, name, close[0]).ratio() >= cutoff:
            found.append(UnknownVariable(name, close[0]))
    return found


def unknown_message(unknown: Sequence[UnknownVariable]) -> str:
    """One line naming every unknown variable, its suggestion, and where the real names are documented."""
    if not unknown:
        return ""
    verb = "is not a variable" if len(unknown) == 1 else "are not variables"
    return (
        f"{', '.join(item.text() for item in unknown)} {verb} of the gpu_fabric.mnnvl roles (misspelled in the "
        "inventory or the extra vars?); the roles' variables are listed in roles/<role>/meta/argument_specs.yml"
    )


def type_spec(option: Mapping[str, Any]) -> Dict[str, Any]:
    """What an argument spec option says of the value: type, choices, elements, ... (no docs, default, required)."""
    return {key: value for key, value in option.items() if key not in NOT_TYPE}


def passed_on(defaults: Mapping[str, Any]) -> Dict[str, str]:
    """A role's options whose default is a shared variable's value (alone or ``| default(...)``): option -> variable."""
    found = {}
    for name, value in (defaults or {}).items():
        match = PASSED_ON.match(value.strip()) if isinstance(value, str) else None
        if match:
            found[str(name)] = match.group(1)
    return found


def shared_types(
    options_by_role: Mapping[str, Mapping[str, Dict[str, Any]]],
    defaults_by_role: Mapping[str, Mapping[str, Any]],
) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """The one table of the shared ``gpu_fabric_*`` variables' types: variable -> owner -> type spec.

    An owner is a role that declares the variable in its argument spec, or a role with an option whose default
    passes the variable on (``verify_common_parallel_racks: "{{ gpu_fabric_verify_parallel_racks | default(8) }}"``
    gives ``gpu_fabric_verify_parallel_racks`` the type of ``verify_common_parallel_racks``: that option refuses any
    other when the role runs), or ``playbooks`` (PLAYBOOK_VARIABLES). Read from the roles, so it cannot drift.
    """
    table: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for role in sorted(options_by_role):
        options = options_by_role[role]
        for name, option in options.items():
            if name.startswith(f"{SHARED_PREFIX}_"):
                table.setdefault(name, {})[role] = type_spec(option)
        for option_name, shared in passed_on(defaults_by_role.get(role) or {}).items():
            if option_name in options and shared not in options:
                table.setdefault(shared, {}).setdefault(role, type_spec(options[option_name]))
    for name, spec in PLAYBOOK_VARIABLES.items():
        table.setdefault(name, {})[PLAYBOOKS] = dict(spec)
    return table


def with_shared_types(
    options_by_role: Mapping[str, Mapping[str, Dict[str, Any]]], table: Mapping[str, Mapping[str, Dict[str, Any]]]
) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Each owner's options with the shared variables it types (``playbooks`` among the owners)."""
    options = {role: dict(role_options) for role, role_options in options_by_role.items()}
    for name, owners in table.items():
        for owner, spec in owners.items():
            options.setdefault(owner, {}).setdefault(name, spec)
    return options


def set_by_user(raw_values: Mapping[str, Any], defaults: Mapping[str, Any]) -> List[str]:
    """The names in ``raw_values`` (not yet templated) that are not their role's default, sorted.

    A role default is not the user's: ``dra_driver_driver_owner: "{{ gpu_fabric_driver_owner }}"`` would only
    repeat, under a name the user never wrote, what the check says of ``gpu_fabric_driver_owner`` itself.
    """
    return sorted(name for name, value in raw_values.items() if name not in defaults or value != defaults[name])


def _owners(owners: Sequence[str]) -> str:
    roles = [owner for owner in owners if owner != PLAYBOOKS]
    said = [f"role{'s' if len(roles) > 1 else ''} {', '.join(roles)}"] if roles else []
    return " and ".join(said + (["the playbooks"] if PLAYBOOKS in owners else []))


NUMBER_TYPES = {"int": "a whole number", "float": "a number"}


def number_problem(name: str, option: Mapping[str, Any], value: Any) -> str:
    """``gpu_fabric_verify_valid_hours is 'week': give a number of hours`` for a number option given a word, or ''.

    Ansible's own message names its internal string class for a float (``<class '..._AnsibleTaggedStr'>``), so a
    word given to a number is said here; the unit is the option name's last word when it is plural."""
    kind = NUMBER_TYPES.get(str(option.get("type")))
    if kind is None or not isinstance(value, str):
        return ""
    try:
        int(value) if option.get("type") == "int" else float(value)
    except ValueError:
        unit = name.rsplit("_", 1)[-1]
        return f"{name} is '{value}': give {kind}" + (f" of {unit}" if unit.endswith("s") and unit != name else "")
    return ""


def choice_problem(name: str, option: Mapping[str, Any], value: Any) -> str:
    """Ansible's message for a value that is none of the option's choices, with the quoting hint when YAML read a
    choice such as ``25.10`` as a number (``25.1``), or ''."""
    choices = [str(choice) for choice in option.get("choices") or []]
    hint = unquoted_number_hint(value, choices) if choices and not isinstance(value, bool) else ""
    if not hint:  # no choice reads as this number, or the value is the choice as written
        return ""
    return f"value of {name} must be one of: {', '.join(choices)}, got: {value}; {hint}"


def type_problems(
    options_by_role: Mapping[str, Mapping[str, Dict[str, Any]]],
    values: Mapping[str, Any],
    validate: Any,
) -> List[str]:
    """What a role's argument spec would refuse in ``values`` (only the variables given), checked for every
    role at once, before any of them runs.

    ``validate(argument_spec, parameters)`` returns the error messages (Ansible's ArgumentSpecValidator in the
    action plugin); ``required`` is dropped, since a role's own defaults are not among ``values``.
    """
    roles_by_message: Dict[str, List[str]] = {}
    for role in sorted(options_by_role):
        spec = {name: type_spec(option) for name, option in options_by_role[role].items() if name in values}
        if not spec:
            continue
        given = {name: values[name] for name in spec}
        for name in sorted(spec):
            said = number_problem(name, spec[name], given[name]) or choice_problem(name, spec[name], given[name])
            if said:  # said in words here; the rest of the spec is Ansible's to validate
                roles_by_message.setdefault(said, []).append(role)
                del spec[name], given[name]
        for message in validate(spec, given):
            roles_by_message.setdefault(message, []).append(role)
    # a shared variable (gpu_fabric_driver_owner) declared by several roles: said once, naming them all
    return [f"{_owners(roles)}: {message}" for message, roles in roles_by_message.items()]
