#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: verification_report
short_description: Turn the verification records of a fleet into JSON, Markdown, JUnit XML and HTML reports
version_added: 0.1.0
description:
  - Reads the verification records in O(records_dir), one C(<check>/<rack>.json) per check and rack (written by
    M(gpu_fabric.mnnvl.fabric_verify) and the C(verify_*) roles), and writes to O(dest) C(report.json) (every
    record, the racks, the coverage of the GPU trays and the verdict of each tray), C(report.md) (the verdict, the
    fleet table of racks and checks, per rack and check what was measured, the failing pairs and low GPUs, the
    skipped trays), C(report.junit.xml) (one test case per check and rack) and C(report.html) (a map of every tray
    coloured by its verdict, the fleet table and a bandwidth heatmap per rack).
  - Both pages end with the trays due next (C(due)); with O(history_dir) they show the trend of the kept runs with a
    small chart per rack and per tray (an inline SVG in the HTML report, no script or external resource).
  - Records of 0.1.0, C(<check>.json), are read as the rack C(-).
  - With O(run_id), only the records of that run count; the others are named in one line of the report
    (C(not run this time)) and left out of the verdict.
  - A record that cannot be read, or lacks C(check), C(passed) or C(summary), is reported as a failed check that
    names the file.
  - A tray is V(failed) when a record blames it (C(failed_nodes)); V(skipped) when any record of the run skipped
    it (its NVLink was not measured by every check); V(passed) when the records that measured it passed (or
    failed blaming other trays only); V(skipped) otherwise.
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
    description: Directory holding the records, C(<records_dir>/<check>/<rack>.json).
    type: path
    required: true
  dest:
    description: Directory to write the reports to; created when missing.
    type: path
    required: true
  formats:
    description: The reports to write. V(markdown) and V(html) need jinja2.
    type: list
    elements: str
    choices: [json, markdown, junit, html]
    default: [json, markdown, junit, html]
  title:
    description: Title of the report.
    type: str
    default: GPU fabric verification
  run_id:
    description:
      - Identifier of the verification run to report (the C(run_id) the checks wrote into their records).
      - Empty - every record counts, whichever run wrote it.
    type: str
    default: ""
  history_dir:
    description:
      - Directory of the kept runs (M(gpu_fabric.mnnvl.verify_history)); the report adds a trend table - per check
        and rack with a bandwidth figure, the median of the medians and the lowest pair over the last O(trend_runs)
        runs, this run's median and the baseline's, and a drop flagged when this run's median is more than
        O(trend_tolerance) below the baseline's. Empty or missing - no trend.
    type: path
    default: ""
    version_added: 0.4.0
  trend_runs:
    description: Runs of the trend, the reported one and those before it.
    type: int
    default: 10
    version_added: 0.4.0
  trend_tolerance:
    description: Fraction of the baseline's median that this run's median may be below it before the drop is flagged.
    type: float
    default: 0.03
    version_added: 0.4.0
  valid_hours:
    description:
      - Hours a tray's verdict holds after the run, as M(gpu_fabric.mnnvl.node_verdict) writes it to the Node. The
        report's C(due next) section puts a tray that passed at the run's finish plus these hours, after the trays
        the run skipped or failed (due at its finish).
    type: float
    default: 168
    version_added: 0.4.0
requirements:
  - jinja2 (comes with ansible-core) for the Markdown and HTML reports
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
seealso:
  - module: gpu_fabric.mnnvl.fabric_verify
  - module: gpu_fabric.mnnvl.nvbandwidth_check
  - module: gpu_fabric.mnnvl.clique_info
"""

EXAMPLES = r"""
- name: Write the reports of the verification run next to its records
  gpu_fabric.mnnvl.verification_report:
    records_dir: ./report/records
    dest: ./report
    run_id: "{{ gpu_fabric_verify_run_id }}"
  register: report

- name: Say which trays failed
  ansible.builtin.debug:
    msg: "{{ report.trays | dict2items | selectattr('value.verdict', 'eq', 'failed') | map(attribute='key') | list }}"

- name: Only the JUnit file, for the CI system
  gpu_fabric.mnnvl.verification_report:
    records_dir: ./report/records
    dest: ./ci-results
    formats: [junit]
    title: GB200 NVL72 fleet a
"""

RETURN = r"""
trends:
  description:
    - Per check and rack with a bandwidth figure, over the kept runs - C(runs), C(median_gbps), C(min_gbps),
      C(latest_run), C(latest_median_gbps), C(baseline_run), C(baseline_source), C(baseline_median_gbps),
      C(drop_fraction), C(dropped). Empty without O(history_dir).
    - C(series) - each run's C(run_id), C(verdict), C(median_gbps) and C(min_gbps), oldest first.
    - C(trays) - per tray its lowest pair (the lowest GB/s of a GPU pair with a GPU of the tray at either end) -
      C(node), C(runs), C(series) (C(run_id), C(gbps), oldest first), C(latest_gbps), C(baseline_gbps) (its figure
      in the baseline run), C(drop_fraction) and C(dropped) (by the same O(trend_tolerance)).
  returned: always
  type: list
  elements: dict
due:
  description:
    - Every tray of the run by when it is due for its next verification - C(node), C(rack), C(due) (RFC 3339),
      C(reason), C(verdict). First the trays the run skipped for their state or could not verify and the failed
      ones (due at the run's finish), then the passed ones by the end of their validity (O(valid_hours) after the
      run's finish), last the trays the run chose to leave (not selected, not due; C(due) null).
  returned: always
  type: list
  elements: dict
  sample:
    - {"node": "gb200-r2-t7", "rack": "rack2", "due": "2026-12-01T10:17:31Z", "verdict": "skipped",
       "reason": "skipped: NotReady (NodeStatusUnknown)"}
    - {"node": "gb200-r2-t0", "rack": "rack2", "due": "2026-12-08T10:17:31Z", "verdict": "passed",
       "reason": "passed cliques, imex_channel, nvbandwidth"}
files:
  description: Path of each report written (or that would be written in check mode), by format.
  returned: always
  type: dict
  sample: {"json": "/srv/report/report.json", "markdown": "/srv/report/report.md",
           "junit": "/srv/report/report.junit.xml", "html": "/srv/report/report.html"}
passed:
  description: Whether there was at least one record of the run and every one of them passed.
  returned: always
  type: bool
  sample: false
verdict:
  description:
    - C(passed); C(failed) (a check ran and found a problem of the racks); C(error) (no fabric failure, but a
      check could not run or finish - the API server unreachable, a component missing, its objects left behind,
      a record unreadable, or no record of the run at all - so nothing is known of those racks; run it again).
    - A fabric failure wins over an error.
  returned: always
  type: str
  choices: [passed, failed, error]
  sample: failed
summary:
  description: The verdict in one line, with the counts and the coverage (the first line of C(report.md)).
  returned: always
  type: str
  sample: "FAILED: 3 racks, 8 of 9 checks passed; failed: nvbandwidth (rack1); incomplete, allowed:
    nvbandwidth (rack0); 33 of 54 GPU trays verified; 18 skipped; 3 failed"
totals:
  description:
    - Counts of the run's records (one per check and rack) - C(checks), C(passed) (an allowed incomplete one
      included), C(failed), C(errors) (could not run), C(incomplete); of C(racks); and of the records of other
      runs (C(not_current)).
  returned: always
  type: dict
  sample: {"racks": 3, "checks": 9, "passed": 8, "failed": 1, "errors": 0, "incomplete": 1, "not_current": 1}
checks:
  description: One entry per record of the run, by rack then check.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description: Name of the check.
      type: str
      sample: nvbandwidth
    rack:
      description: The rack (C(-) for a record of 0.1.0).
      type: str
      sample: rack1
    clique:
      description: The rack's C(nvidia.com/gpu.clique) value, or null.
      type: str
      sample: 5e6f7a8b-1111-4000-8000-00000000c11f.1
    outcome:
      description: V(passed), V(failed) or V(incomplete).
      type: str
      sample: failed
    passed:
      description: Whether the check passed on the rack (an incomplete one passes when it was allowed).
      type: bool
      sample: false
    summary:
      description: The record's one-line summary.
      type: str
      sample: "rack rack1: 143 of 5112 GPU pairs below the threshold: ..."
racks:
  description:
    - Per rack of the run, its clique, verdict, the outcome of each check and the counts of its trays (those of
      RV(coverage), and C(expected), C(gpu_fabric_trays_per_clique)); the trays skipped, missing and failed.
  returned: always
  type: dict
  sample:
    rack2:
      clique: 9c0d1e2f-2222-4000-8000-00000000c120.1
      verdict: passed
      checks: {"cliques": "passed", "imex_channel": "passed", "nvbandwidth": "passed"}
      trays: {"trays": 18, "declared": 18, "found": 18, "verified": 17, "failed": 0, "skipped": 1, "unverified": 0,
              "unmeasured": 0, "missing": 0, "expected": 18}
      skipped_trays: [{"node": "gb200-r2-t7", "reason": "NotReady (NodeStatusUnknown)"}]
      missing_trays: []
      failed_trays: []
coverage:
  description:
    - Every GPU tray the run accounts for, each once, as the trays' own verdicts (RV(trays)) count them - found
      (C(trays)), V(passed) (C(verified)), V(failed) (C(failed)), skipped by a check (C(skipped), with the reasons
      and the checks), measured by a check that failed naming no tray or could not run (C(unverified)), measured
      by none (C(unmeasured)), and declared in C(gpu_fabric_racks) with no GPU Node (C(missing), with the reason).
    - C(counts) has each of these; C(counts.trays) is the trays found or skipped plus the missing ones (named, or
      fewer trays than C(gpu_fabric_trays_per_clique)); C(counts.declared) the trays the site declares (a rack's
      C(gpu_fabric_racks) list, else C(gpu_fabric_trays_per_clique)). JUnit's test suite carries the same counts
      as C(gpu_trays_<count>) properties.
  returned: always
  type: dict
  sample:
    trays: ["gb200-r0-t0", "..."]
    verified: ["gb200-r0-t0", "..."]
    skipped: [{"node": "gb200-r2-t7", "rack": "rack2", "reason": "NotReady (NodeStatusUnknown)",
               "checks": ["cliques", "imex_channel", "nvbandwidth"]}]
    failed: ["gb200-r1-t3", "gb200-r1-t11", "gb200-r1-t15"]
    unverified: []
    unmeasured: []
    missing: []
    counts: {"trays": 54, "declared": 54, "found": 54, "verified": 33, "failed": 3, "skipped": 18, "unverified": 0,
             "unmeasured": 0, "missing": 0}
trays:
  description: Per GPU tray, its verdict over the records of the run (what a node-labelling step reads).
  returned: always
  type: dict
  contains:
    verdict:
      description: V(failed) (a record blames the tray), V(passed) (no record skipped it and every record that
        measured it vouches for it) or V(skipped) (skipped by a check, not measured, or measured by a failure
        that names no tray).
      type: str
    rack:
      description: The tray's rack.
      type: str
    checks_failed:
      description: The checks that blame the tray.
      type: list
      elements: str
    checks_passed:
      description: The checks that measured the tray and passed.
      type: list
      elements: str
    summary:
      description: One line - what failed (the record's words for the tray), or what passed and what did not measure it.
      type: str
    skip_reasons:
      description:
        - The reasons the checks skipped the tray for, each once (empty when no check skipped it). A reason the
          run chose (V(not selected ...), V(not due ...)) says nothing of the tray; M(gpu_fabric.mnnvl.node_verdict)
          writes the others to the tray's annotation.
      type: list
      elements: str
    checks:
      description:
        - Check -> what its record of this run said of the tray - C(outcome) V(passed) (measured and vouched for),
          V(failed) (with C(summary), the record's words on the tray) or V(skipped) (with C(reason)); a check that
          measured the tray without a verdict on it is left out. M(gpu_fabric.mnnvl.node_verdict) merges it into
          the tray's per-check state.
      type: dict
  sample:
    gb200-r1-t3:
      verdict: failed
      rack: rack1
      checks_failed: [nvbandwidth]
      checks_passed: [cliques, imex_channel]
      summary: "nvbandwidth failed: GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s
        (floor rule)"
      skip_reasons: []
      checks:
        cliques: {outcome: passed}
        imex_channel: {outcome: passed}
        nvbandwidth:
          outcome: failed
          summary: "GPU 13 (gb200-r1-t3) -> GPU 45 (gb200-r1-t11): 402.11 GB/s < 765.00 GB/s (floor rule)"
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import write_change
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_render import (
    FORMATS,
    HAS_JINJA2,
    JINJA2_IMPORT_ERROR,
    TEMPLATE_FORMATS,
    ReportError,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_run import request_from_params, write_reports
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import DEFAULT_VALID_HOURS

ARGUMENT_SPEC = dict(
    records_dir=dict(type="path", required=True),
    dest=dict(type="path", required=True),
    formats=dict(type="list", elements="str", choices=list(FORMATS), default=list(FORMATS)),
    title=dict(type="str", default="GPU fabric verification"),
    run_id=dict(type="str", default=""),
    history_dir=dict(type="path", default=""),
    trend_runs=dict(type="int", default=10),
    trend_tolerance=dict(type="float", default=0.03),
    valid_hours=dict(type="float", default=DEFAULT_VALID_HOURS),
)


def build_module() -> AnsibleModule:
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def main() -> None:
    module = build_module()
    request = request_from_params(module.params)
    if not HAS_JINJA2 and set(request.formats) & set(TEMPLATE_FORMATS):
        module.fail_json(
            msg=missing_required_lib("jinja2", reason="for the Markdown and HTML reports"),
            exception=str(JINJA2_IMPORT_ERROR),
        )
    try:
        result = write_reports(request, lambda change: write_change(module, change, backup=False, create_parents=True))
    except ReportError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    for warning in result.pop("warnings"):
        module.warn(warning)
    if not module._diff:
        del result["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
