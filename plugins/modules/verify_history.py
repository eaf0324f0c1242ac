#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: verify_history
short_description: Keep every verification run's records, apply retention, pin the baseline run
version_added: 0.4.0
description:
  - Keeps the records of one check of one verification run under C(<history_dir>/<run_id>/<check>/<rack>.json)
    and lists the run in C(<history_dir>/index.json) (run id, start and finish times, the verdict of every check and
    rack, whether it is pinned). The checks of one run land in one entry; a check run again in the same run replaces
    that check's records.
  - Every file is written to a temporary file and moved into place; the index is read, changed and written under an
    exclusive C(flock) of C(<history_dir>/.lock), so two runs at once both complete with an intact history.
  - Retention, after each write - the newest O(keep_runs) runs not older than O(keep_days) days are kept; the pinned
    run, the run being written, each check's last passing run of each rack and the run that is each rack's baseline
    (per check and testcase, the run the V(nvbandwidth) check is held against, chosen by the same rule) are never
    removed. Runs are ordered by the instant they started, whatever time
    zone their start names; a run whose start names no RFC 3339 time counts as the oldest, with a warning naming
    it.
  - The index is read before anything is written. One that is missing, cannot be read or is no history index (a
    hand edit, a truncated file) is rebuilt from the run directories, pin included, with a warning that says so;
    when the run directories cannot be read either, the module fails in one line naming the path and writes nothing.
  - O(pin) names the run the site holds as its baseline (the one pinned run); the V(nvbandwidth) check of
    M(gpu_fabric.mnnvl.fabric_verify) holds each rack against that run's record of the rack, else its last passing
    run's.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is written; the result says what would be.
  diff_mode:
    support: none
options:
  history_dir:
    description: Directory of the kept runs (the verify roles use C(<report dir>/runs)).
    type: path
    required: true
  run_id:
    description: The run the O(records) belong to; required with O(records).
    type: str
    default: ""
  records:
    description: The records of one check, as M(gpu_fabric.mnnvl.fabric_verify) returns them; empty - nothing kept.
    type: list
    elements: dict
    default: []
  keep_runs:
    description: Runs kept, newest first; V(0) - any number.
    type: int
    default: 30
  keep_days:
    description: Days a run is kept after it started; V(0) - any age.
    type: int
    default: 90
  pin:
    description:
      - Run id to pin as the site's baseline (it must be in the history); the run pinned before is unpinned.
      - Empty - the pin is left as it is.
    type: str
    default: ""
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
seealso:
  - module: gpu_fabric.mnnvl.fabric_verify
  - module: gpu_fabric.mnnvl.verification_report
"""

EXAMPLES = r"""
- name: Keep this run's nvbandwidth records
  gpu_fabric.mnnvl.verify_history:
    history_dir: /var/lib/gpu-fabric/report/runs
    run_id: "{{ gpu_fabric_verify_run_id }}"
    records: "{{ nvbandwidth.records }}"

- name: Hold every later run against the run of the rack's acceptance
  gpu_fabric.mnnvl.verify_history:
    history_dir: /var/lib/gpu-fabric/report/runs
    pin: 20261201T101500123456Z
"""

RETURN = r"""
run_dir:
  description: Directory of the run's records; empty without O(records).
  returned: always
  type: str
files:
  description: Paths of the records kept.
  returned: always
  type: list
  elements: str
removed_runs:
  description: Run ids that retention removed.
  returned: always
  type: list
  elements: str
kept_last_passing:
  description:
    - The runs retention kept only because each is the last passing run of a check on a rack - run id to the
      C(<check>/<rack>) it holds the last pass of.
  returned: always
  type: dict
  sample: {"20261201T101500123456Z": ["nvbandwidth/rack3"]}
kept_baseline:
  description:
    - The runs retention kept only because each is a rack's baseline (the pinned run, else the newest run that
      passed against a product reference) - run id to the C(<check>/<rack>/<testcase>) it is the baseline of
      (C(<check>/<rack>) for records that name no testcase).
  returned: always
  type: dict
  sample: {"20261201T101500123456Z": ["nvbandwidth/rack3/device_to_device_memcpy_read_ce"]}
pinned:
  description: The pinned run, empty when none.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import history, history_runs
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_retention import (
    DEFAULT_KEEP_DAYS,
    DEFAULT_KEEP_RUNS,
)

ARGUMENT_SPEC = dict(
    history_dir=dict(type="path", required=True),
    run_id=dict(type="str", default=""),
    records=dict(type="list", elements="dict", default=[]),
    keep_runs=dict(type="int", default=DEFAULT_KEEP_RUNS),
    keep_days=dict(type="int", default=DEFAULT_KEEP_DAYS),
    pin=dict(type="str", default=""),
)


def build_module() -> AnsibleModule:
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def main() -> None:
    module = build_module()
    params = module.params
    directory = params["history_dir"]
    result = dict(
        changed=False, run_dir="", files=[], removed_runs=[], kept_last_passing={}, kept_baseline={}, pinned=""
    )
    if params["records"] and not params["run_id"]:
        module.fail_json(msg="records were given without run_id; set run_id to the run they belong to", **result)
    if module.check_mode:
        result["changed"] = bool(params["records"] or params["pin"])
        module.exit_json(**result)
    warnings: list = []
    error = ""
    try:
        if params["pin"]:
            result["changed"] = history_runs.pin_run(directory, params["pin"], warnings)
        if params["records"]:
            kept = history_runs.record_run(
                directory, params["run_id"], params["records"], params["keep_runs"], params["keep_days"]
            )
            warnings.extend(kept.pop("warnings"))
            result.update(kept)
            result["changed"] = True
        if os.path.isdir(directory):
            pinned = [e for e in history.read_index(directory, warnings)["runs"] if e.get("pinned")]
            result["pinned"] = str(pinned[0]["run_id"]) if pinned else ""
    except (history.HistoryError, OSError) as exc:
        error = f"could not keep the run in the history {directory}: {exc}"
    for warning in dict.fromkeys(warnings):
        module.warn(warning)
    if error:
        module.fail_json(msg=error, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
