#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: variable_check
short_description: Refuse misspelled and mistyped variables of the collection's roles before anything runs
version_added: 0.2.0
description:
  - Runs on the controller (an action plugin). Compares the host's variables (inventory, extra vars) with the
    variables of every role of the collection - the options of its C(meta/argument_specs.yml), what its tasks
    register or set, and the shared C(gpu_fabric_*) variables that the roles and playbooks read.
  - A variable that starts with a role's name or C(gpu_fabric_), or is within a few letters of a known name, and
    is none of them is reported with the closest known name (V(verify_nvbandwith_timeout), did you mean
    V(verify_nvbandwidth_timeout)?).
  - Every variable of every role that is set is also checked against its role's argument spec (type, choices,
    elements), so a wrong type for a role that runs late in the play fails before the first role changes anything.
    A word given to a number is said in words, with the unit its name gives (V(gpu_fabric_verify_valid_hours) is
    V(week) - give a number of hours), never as Ansible's internal class.
  - A shared C(gpu_fabric_*) variable is checked under its own name, once, naming the roles that type it - the roles
    that declare it, and those with an option whose default passes it on (V(gpu_fabric_verify_parallel_racks) has
    the type of C(verify_common_parallel_racks)); the few that only the playbooks read are typed in the
    collection's C(inventory_variables) module utils. A role's option that keeps its default is not checked apart
    (its value is that of the shared variable).
  - Every playbook calls it first, on the controller and before any tray is reached - the first play of
    C(gpu_fabric.mnnvl.site) and C(gpu_fabric.mnnvl.hosts) (with each tray's own variables, no connection needed),
    and the first task of C(gpu_fabric.mnnvl.verify) and C(gpu_fabric.mnnvl.uninstall); the C(preflight) and
    C(cluster_preflight) roles call it again when they are used alone.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  prefixes:
    description: Name prefixes that mark a variable as the collection's; empty - every role's name and V(gpu_fabric).
    type: list
    elements: str
    default: []
  fail_on_problems:
    description: Fail when a problem is found; with V(false) the problems are only returned (a preflight role
      collects them with its other findings).
    type: bool
    default: true
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Refuse misspelled or mistyped variables of the collection
  gpu_fabric.mnnvl.variable_check:
"""

RETURN = r"""
unknown:
  description: The variables that look like the collection's but are none of its variables, with the closest name.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "verify_nvbandwith_timeout", "suggestion": "verify_nvbandwidth_timeout"}]
type_problems:
  description: What the roles' argument specs refuse in the variables that are set, one line each.
  returned: always
  type: list
  elements: str
problems:
  description: Every problem as one line (the unknown variables together, then each type problem).
  returned: always
  type: list
  elements: str
"""
