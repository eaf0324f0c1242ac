#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: verification_report
short_description: Turn verification records into JSON, Markdown, JUnit XML and HTML reports
version_added: 0.1.0
description:
  - Reads every C(*.json) verification record in O(records_dir) (written by the C(verify_*) roles of this
    collection) and writes C(report.json), C(report.md), C(report.junit.xml) (one test case per check, for CI
    systems) and C(report.html) (with the bandwidth matrix as a heatmap, failing cells outlined) to O(dest).
  - A record that cannot be read, or lacks C(check), C(passed) or C(summary), is reported as a failed check
    that names the file.
  - The reports depend on the records alone, so the same records give the same files and no change.
  - Runs where the records are, normally on the controller.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - One diff per report file, old and new content.
options:
  records_dir:
    description: Directory holding the records, one C(<check>.json) per check.
    type: path
    required: true
  dest:
    description: Directory to write the reports to; created when missing.
    type: path
    required: true
  formats:
    description: The reports to write.
    type: list
    elements: str
    choices: [json, markdown, junit, html]
    default: [json, markdown, junit, html]
  title:
    description: Title of the report.
    type: str
    default: GPU fabric verification
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
seealso:
  - module: gpu_fabric.mnnvl.nvbandwidth_check
  - module: gpu_fabric.mnnvl.clique_info
"""

EXAMPLES = r"""
- name: Write the reports of the verification next to its records
  gpu_fabric.mnnvl.verification_report:
    records_dir: ./report/records
    dest: ./report

- name: Only the JUnit file, for the CI system
  gpu_fabric.mnnvl.verification_report:
    records_dir: ./report/records
    dest: ./ci-results
    formats: [junit]
    title: GB200 rack r0
"""

RETURN = r"""
files:
  description: Path of each report written (or that would be written in check mode), by format.
  returned: always
  type: dict
  sample: {"json": "/srv/report/report.json", "markdown": "/srv/report/report.md",
           "junit": "/srv/report/report.junit.xml", "html": "/srv/report/report.html"}
passed:
  description: Whether there was at least one record and every check passed.
  returned: always
  type: bool
  sample: false
totals:
  description: Counts of checks, passed and failed.
  returned: always
  type: dict
  sample: {"checks": 4, "passed": 3, "failed": 1}
checks:
  description: One entry per record, in report order.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description: Name of the check.
      type: str
      sample: nvbandwidth
    passed:
      description: Whether the check passed.
      type: bool
      sample: false
    summary:
      description: The record's one-line summary.
      type: str
      sample: "1 of 56 GPU pairs below 765.00 GB/s: 0->5 402.11"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    FileChange,
    FileEditError,
    read_text,
    write_change,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report import (
    FORMATS,
    build_report,
    load_records,
    render_report,
)

ARGUMENT_SPEC = dict(
    records_dir=dict(type="path", required=True),
    dest=dict(type="path", required=True),
    formats=dict(type="list", elements="str", choices=list(FORMATS), default=list(FORMATS)),
    title=dict(type="str", default="GPU fabric verification"),
)


def build_module() -> AnsibleModule:
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def main() -> None:
    module = build_module()
    params = module.params
    records_dir, dest = params["records_dir"], params["dest"]
    if not os.path.isdir(records_dir):
        module.fail_json(
            msg=f"the records directory {records_dir} does not exist; run the verify roles first "
            "(playbooks/verify.yml), or point records_dir at the directory they wrote to"
        )
    records = load_records(records_dir)
    if not records:
        module.fail_json(
            msg=f"no verification record (*.json) found in {records_dir}; run the verify roles first "
            "(playbooks/verify.yml) with the same report directory"
        )
    formats = list(dict.fromkeys(params["formats"]))
    rendered = render_report(records, params["title"], formats)
    report = build_report(records, params["title"])

    changed = False
    diffs = []
    files = {}
    for item in rendered:
        path = os.path.join(dest, item.name)
        files[item.format] = path
        try:
            change = FileChange(path=path, before=read_text(path), after=item.content)
            if not change.changed:
                continue
            changed = True
            diffs.append(change.diff())
            write_change(module, change, backup=False, create_parents=True)
        except FileEditError as exc:
            module.fail_json(msg=str(exc), files=files)

    result = dict(
        changed=changed,
        files=files,
        passed=report["passed"],
        totals=report["totals"],
        checks=[
            {"check": record["check"], "passed": record["passed"], "summary": record["summary"]}
            for record in report["checks"]
        ],
    )
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
