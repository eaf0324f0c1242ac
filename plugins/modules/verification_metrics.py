#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: verification_metrics
short_description: Write the verification verdicts and figures as Prometheus metrics (textfile, Pushgateway)
version_added: 0.4.0
description:
  - Builds the report of the verification records in O(records_dir) as M(gpu_fabric.mnnvl.verification_report)
    does and renders it in the Prometheus text exposition format 0.0.4 - the run's verdict and finish time, per
    rack its verdict, trays, time of the last passing run and last verdict with its time (the kept runs in
    O(history_dir), the state file beside them and this run), per check and rack the verdict and duration, the
    lowest and median GPU pair bandwidth, the NCCL bus bandwidth, per tray its verdict and its lowest and median
    pair bandwidth. Bandwidth is in bytes per second, times in seconds; a figure that was not measured has no
    sample. docs/metrics.md lists every metric.
  - A run that reached no rack (its records are the rack C(fleet)) gives its C(error) to each rack of O(racks), else
    to each rack the kept runs know, so every rack's samples stay and each keeps its last verdict.
  - Each check's last verdict on each rack is the one of the newest run in which it judged the rack; the rack's
    last verdict is C(passed) only when every check of O(required_checks) passed in the newest run that judged it,
    C(failed) when a check's last verdict on it failed, else C(unverified), naming the required checks that gave no
    verdict - a run of some checks only (C(--tags cliques)) cannot pass a rack whose C(nvbandwidth) never ran.
  - With O(history_dir), keeps each rack's last-pass time and each check's last verdict on it in
    C(<history_dir>/metrics-state.json) (written atomically, only ever moved forward), so they outlive the
    retention of the kept runs.
  - With O(textfile), writes them to that C(.prom) file for node-exporter's textfile collector - a temporary file in
    the same directory renamed over it, mode 0644 for a new file - only when the content differs. A symbolic link,
    a directory or anything else but a regular file at that path is refused, never written through.
  - With O(pushgateway_url), pushes them to a Prometheus Pushgateway with a PUT to
    C(<pushgateway_url>/metrics/job/<job>[/<label>/<value>...]), which replaces every metric of that group.
    A connection failure, a timeout, 429 or a 5xx answer is tried again, up to O(push_attempts) tries with pauses
    of 1, 2, 4, 8 then 10 seconds; the last failure is one line naming the URL and fails the task, or only warns
    with O(push_failure=warn).
  - Without either, returns the metrics only.
  - Runs where the records are, normally on the controller.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
    details:
      - Writes no file and pushes nothing; says whether the textfile would change and that a push would be made.
  diff_mode:
    support: full
    details:
      - The textfile's old and new content.
options:
  records_dir:
    description: Directory holding the verification records, C(<records_dir>/<check>/<rack>.json).
    type: path
    required: true
  run_id:
    description:
      - The verification run whose records count (as for M(gpu_fabric.mnnvl.verification_report)).
      - Empty - every record counts, whichever run wrote it.
    type: str
    default: ""
  history_dir:
    description:
      - Directory of the kept runs (M(gpu_fabric.mnnvl.verify_history)); the time of each rack's last passing run
        comes from its index. Empty or missing - only this run counts.
      - The file C(metrics-state.json) in it keeps what the metrics published of each rack (its last-pass time and
        each check's last verdict on it) after retention removes the runs they came from; a file that cannot be read
        is a warning and is written again.
    type: path
    default: ""
  racks:
    description:
      - The site's declared racks (the keys of C(gpu_fabric_racks)). A record of a run that reached no rack speaks
        for each of them, and the last-pass and last-verdict samples are those of these racks and of this run's.
      - Empty - the racks the kept runs and this run know.
    type: list
    elements: str
    default: []
  required_checks:
    description:
      - The checks a rack's last verdict needs passed (C(gpu_fabric_verify_required_checks)), each in the newest run
        that judged it; one that gave no verdict keeps the rack C(unverified) and is named in
        C(gpu_fabric_rack_last_verdict_missing_check).
      - Empty - every check that judged the rack.
    type: list
    elements: str
    default: []
  textfile:
    description:
      - Path of the C(.prom) file to write, in the directory node-exporter reads with
        C(--collector.textfile.directory). The directory must exist; the path must be a regular file or nothing (a
        symbolic link there is refused, not followed).
      - Empty - no file.
    type: path
    default: ""
  pushgateway_url:
    description:
      - Base URL of a Prometheus Pushgateway (V(http://pushgateway.monitoring:9091)) to push the metrics to.
      - A URL with credentials in it (C(https://user:pass@host)) is refused, naming none of them; give them as
        O(username) and O(password) or O(bearer_token).
      - Empty - nothing is pushed.
    type: str
    default: ""
  job:
    description: The Pushgateway job (the C(job) label of the pushed metrics and the first key of their group).
    type: str
    default: gpu_fabric_verify
  grouping:
    description:
      - More labels of the Pushgateway group, such as C(site=dc1); each fleet that pushes needs a group of its own.
      - The metrics' own label names (C(rack), C(node), C(check), C(verdict), ...) and C(job) are refused.
    type: dict
    default: {}
  headers:
    description:
      - More HTTP headers of the push, such as C(X-Scope-OrgID). They are shown in the module's arguments (C(-vvv)),
        so they hold no secret - C(Authorization) is refused; give credentials as O(username) and O(password) or
        O(bearer_token).
    type: dict
    default: {}
  username:
    description:
      - User name for HTTP basic authentication to the Pushgateway, with O(password).
      - A O(pushgateway_url) with credentials in it (C(https://user:pass@host)) is refused; give them here.
    type: str
    aliases: [url_username]
  password:
    description: Password for HTTP basic authentication to the Pushgateway (with O(username)); never shown.
    type: str
    aliases: [url_password]
  bearer_token:
    description:
      - Token sent as C(Authorization) C(Bearer <token>) (an authenticating proxy in front of the Pushgateway);
        never shown. Not with O(username) or O(password).
    type: str
  validate_certs:
    description: Verify the Pushgateway's TLS certificate.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the Pushgateway's answer, per try.
    type: int
    default: 30
  push_attempts:
    description: Tries of the push while it fails transiently (no answer, 429, a 5xx).
    type: int
    default: 4
  push_failure:
    description:
      - What a push that still fails after the last try does - V(fail) the task, or V(warn) and go on (the
        textfile is written either way).
    type: str
    choices: [fail, warn]
    default: fail
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
seealso:
  - module: gpu_fabric.mnnvl.verification_report
  - module: gpu_fabric.mnnvl.verify_history
  - name: The textfile collector of node-exporter
    description: How node-exporter reads C(*.prom) files.
    link: https://github.com/prometheus/node_exporter#textfile-collector
  - name: The Pushgateway's API
    description: The PUT this module sends.
    link: https://github.com/prometheus/pushgateway#api
"""

EXAMPLES = r"""
- name: Write the metrics for node-exporter's textfile collector
  gpu_fabric.mnnvl.verification_metrics:
    records_dir: ./report/records
    history_dir: ./report/runs
    run_id: "{{ gpu_fabric_verify_run_id }}"
    racks: "{{ gpu_fabric_racks | list }}"
    textfile: /var/lib/node_exporter/textfile_collector/gpu_fabric.prom

- name: Push them to the Pushgateway of the monitoring namespace; a Pushgateway down only warns
  gpu_fabric.mnnvl.verification_metrics:
    records_dir: ./report/records
    run_id: "{{ gpu_fabric_verify_run_id }}"
    pushgateway_url: http://pushgateway.monitoring.svc:9091
    grouping:
      fleet: gb200-a
    push_failure: warn
"""

RETURN = r"""
metrics:
  description: The metrics in the Prometheus text exposition format 0.0.4.
  returned: always
  type: str
  sample: "# HELP gpu_fabric_verification_verdict The run's verdict ...\n# TYPE gpu_fabric_verification_verdict gauge\n
    gpu_fabric_verification_verdict{verdict=\"error\"} 0\n..."
families:
  description: The names of the metric families written (those with a sample).
  returned: always
  type: list
  elements: str
  sample: [gpu_fabric_verification_verdict, gpu_fabric_rack_verdict, gpu_fabric_tray_verified]
samples:
  description: The number of samples.
  returned: always
  type: int
  sample: 346
textfile:
  description: The textfile written (or that would be, in check mode), or null.
  returned: always
  type: str
  sample: /var/lib/node_exporter/textfile_collector/gpu_fabric.prom
state_file:
  description: The state file of the last-pass times and last verdicts (C(<history_dir>/metrics-state.json)), or null
    without a history directory.
  returned: always
  type: str
  sample: /srv/gpu-fabric/report/runs/metrics-state.json
pushed:
  description: Whether the metrics were pushed to the Pushgateway (never in check mode).
  returned: always
  type: bool
  sample: true
push_url:
  description: The group's URL the metrics were (or would be) pushed to, or null.
  returned: always
  type: str
  sample: http://pushgateway.monitoring.svc:9091/metrics/job/gpu_fabric_verify/fleet/gb200-a
verdict:
  description: The run's verdict, V(passed), V(failed) or V(error), as M(gpu_fabric.mnnvl.verification_report) gives it.
  returned: always
  type: str
  sample: failed
summary:
  description: The report's one-line summary.
  returned: always
  type: str
  sample: "FAILED: 3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); 33 of 54 GPU trays verified; 18 skipped;
    3 failed"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.metrics_run import (
    PUSH_FAILURE,
    MetricsError,
    request_from_params,
    textfile_writer,
    write_metrics,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import DEFAULT_JOB, given_secrets

ARGUMENT_SPEC = dict(
    records_dir=dict(type="path", required=True),
    run_id=dict(type="str", default=""),
    history_dir=dict(type="path", default=""),
    racks=dict(type="list", elements="str", default=[]),
    required_checks=dict(type="list", elements="str", default=[]),
    textfile=dict(type="path", default=""),
    pushgateway_url=dict(type="str", default=""),
    job=dict(type="str", default=DEFAULT_JOB),
    grouping=dict(type="dict", default={}),
    headers=dict(type="dict", default={}),
    username=dict(type="str", aliases=["url_username"]),
    password=dict(type="str", no_log=True, aliases=["url_password"]),
    bearer_token=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    timeout=dict(type="int", default=30),
    push_attempts=dict(type="int", default=4),
    push_failure=dict(type="str", choices=list(PUSH_FAILURE), default="fail"),
)


def build_module() -> AnsibleModule:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # credentials given where no no_log covers them are refused; masked, so not even -vvv's arguments show them
    module.no_log_values.update(given_secrets(module.params["pushgateway_url"], module.params["headers"]))
    return module


def main() -> None:
    module = build_module()
    try:
        result = write_metrics(
            request_from_params(module.params),
            textfile_writer(module),
            open_url,
            module.check_mode,
        )
    except MetricsError as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    if not module._diff:
        del result["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
