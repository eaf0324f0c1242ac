#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: verify_refusal
short_description: Write an error record for every check of a verify run that was refused before it ran
version_added: 0.4.0
description:
  - Called by C(gpu_fabric.mnnvl.verify) when a task before or between the checks fails (the variable check, the
    preflight, a role's arguments, a check that refuses its selection), so that the run still answers - the report,
    its JUnit test cases and C(gpu_fabric_verdict) say why no check ran; the play then fails.
  - The checks are those the run would have run - the checks with roles of their own that O(run_tags) and
    O(skip_tags) select (C(nccl) only with O(nccl)), then the checks of O(checks) or named in O(run_tags).
  - Each such check that wrote no record of the run O(run_id) in O(records_dir) gets one record
    C(<records_dir>/<check>/fleet.json) with outcome and verdict C(error) (the check could not run, nothing is said of
    the fabric), its summary naming O(task) and O(reason). A check that wrote its records keeps them.
  - In check mode nothing is written.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  reason:
    description: What the failed task said (C(ansible_failed_result.msg)).
      (Not C(message), a name Ansible keeps for itself.)
    type: raw
  task:
    description: The name of the failed task (C(ansible_failed_task.name)).
    type: str
    default: ""
  checks:
    description: The checks the site enables (C(gpu_fabric_verify_checks)) - a list, or a string naming one check or
      a comma-separated list; names that are no check are left out.
    type: raw
  run_tags:
    description: The run's C(--tags) (C(ansible_run_tags)).
    type: list
    elements: str
    default: []
  skip_tags:
    description: The run's C(--skip-tags) (C(ansible_skip_tags)).
    type: list
    elements: str
    default: []
  nccl:
    description: Whether the run runs the NCCL check (C(gpu_fabric_verify_nccl)).
    type: bool
    default: false
  run_id:
    description: The verification run (C(gpu_fabric_verify_run_id)); its records are the report's.
    type: str
    default: ""
  records_dir:
    description: Directory of the records, C(<records_dir>/<check>/<rack>.json); empty - nothing is written.
    type: path
    default: ""
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
seealso:
  - module: gpu_fabric.mnnvl.verify_preflight
  - module: gpu_fabric.mnnvl.verification_report
"""

EXAMPLES = r"""
- name: Say in the records why no check ran
  gpu_fabric.mnnvl.verify_refusal:
    reason: "{{ ansible_failed_result.msg | default('') }}"
    task: "{{ ansible_failed_task.name | default('') }}"
    checks: "{{ gpu_fabric_verify_checks | default([]) }}"
    run_tags: "{{ ansible_run_tags }}"
    skip_tags: "{{ ansible_skip_tags }}"
    run_id: "{{ gpu_fabric_verify_run_id }}"
    records_dir: ./report/records
"""

RETURN = r"""
message:
  description: Why no check ran, in one line - the task that refused the run and what it said.
  returned: always
  type: str
  sample: "the run was refused at the task 'Refuse what the run could not use before the first check runs' before
    this check ran, which says nothing of the fabric: gpu_fabric_verify_checks names 'gpu_helth', which is no check"
checks:
  description: The checks the run would have run.
  returned: always
  type: list
  elements: str
  sample: [cliques, imex_channel, nvbandwidth]
records:
  description: The error records written (in check mode, that would be written), by check.
  returned: always
  type: dict
files:
  description: The record files written.
  returned: always
  type: list
  elements: str
verdict:
  description: Always C(error) - no check ran, so nothing is known of the fabric.
  returned: always
  type: str
  sample: error
summary:
  description: The verdict in one line.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileEditError, read_text
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.fleet import write_records
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verify_refusal import refusal

ARGUMENT_SPEC = dict(
    reason=dict(type="raw"),
    task=dict(type="str", default=""),
    checks=dict(type="raw"),
    run_tags=dict(type="list", elements="str", default=[]),
    skip_tags=dict(type="list", elements="str", default=[]),
    nccl=dict(type="bool", default=False),
    run_id=dict(type="str", default=""),
    records_dir=dict(type="path", default=""),
)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    result = refusal(params, lambda path: read_text(path) or "")
    files = []
    if params["records_dir"] and not module.check_mode:
        try:
            for check, records in result["records"].items():
                files += write_records(module, check, params["records_dir"], records)
        except (FileEditError, OSError) as exc:
            module.fail_json(msg=f"could not write the records under {params['records_dir']}: {exc}", **result)
    module.exit_json(changed=bool(files), files=files, **result)


if __name__ == "__main__":
    main()
