#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_verdict
short_description: Write the verification verdict of each GPU tray onto its Kubernetes Node
version_added: 0.1.0
description:
  - Keeps each tray's state per check on its Node, in the annotation C(<annotation_key>) (compact JSON) - per check
    its C(outcome) (V(passed) or V(failed)), C(run) (O(run_id)), C(time) (O(time)) and C(valid_until) (O(valid_hours)
    after it) under C(checks); the tray's C(verdict), C(time) and C(run) of its newest entry, C(summary) and, while it
    passed, C(valid_until).
  - The entries of the checks that measured a tray in this run (its C(checks) in O(trays)) replace the tray's entries
    of those checks, unless the Node holds an entry newer than O(time) - never is a newer verdict replaced by an
    older one, and the node's result says so (C(kept_newer)). The entries of other checks are kept. An annotation
    written before verdicts were per check holds no entries (every check is due on the tray).
  - The tray's verdict follows from its entries and O(required_checks) at the moment the nodes are read -
    V(failed) when any check's entry failed; V(passed) only while every required check passed within its validity;
    V(incomplete) otherwise (a required check never verified the tray, or its verdict expired). The label
    C(<label_key>) is that verdict, and C(<valid_until_label_key>) the earliest expiry among the required checks in
    Unix seconds, only while the tray passed (a workload's node affinity asks for C(In [passed]) and C(Gt) now).
  - A tray with verdict V(skipped) keeps its labels. When the run skipped it for its own state (GPUs held by a job,
    cordoned, not ready, tainted; its C(skip_reasons)) and it already carries a verdict, the annotation keeps its
    entries and gains C(skipped) (C(time), C(run), C(reason), C(checks) - the checks that skipped it), so that a run
    of the due trays verifies it next; entries of those checks drop it. A skip the run chose (C(not selected ...),
    C(not due ...)) and a tray never verified (due anyway) are not written.
  - Every time is checked before the first patch - O(time) (RFC 3339, 1970 to 9998, its validity before the year
    9999) and every time of the entries on the Nodes it merges into; one that cannot be read fails the module with
    one line naming the node and the value, and nothing is patched.
  - With O(taint_failed=true), a failed tray also gets the taint C(<taint_key>=true:NoSchedule), so that new
    workloads avoid it, and a tray that passed has that taint removed. Every other taint is kept, in its order.
  - With O(condition=true), each tray's Node status carries the condition O(condition_type) (as a node problem
    detector writes its own), for node readiness gates, dashboards and kube-state-metrics'
    C(kube_node_status_condition) - V(True) with reason C(Passed), V(False) with reason C(CheckFailed) (the message
    is the verdict's summary, naming the failing checks and the pairs or trays they blamed), V(Unknown) with
    reason C(VerdictExpired) once a required check's verdict is past its C(valid_until), or V(Unknown) with reason
    C(ChecksMissing) while a required check never verified the tray. C(lastHeartbeatTime) is the verdict's time
    (the expiry for V(Unknown)); C(lastTransitionTime) changes only when the status does. Every node that this
    run did not verify and whose verdict expired gets V(Unknown) (the nodes are listed once). The condition is
    written with a strategic merge patch of the C(status) subresource naming only its type, so the kubelet's
    conditions and those of other writers are kept.
  - With O(state=refreshed), no check runs and O(trays) and O(time) are not used - every node that carries
    per-check state gets the labels (and, with O(condition=true), the condition) its entries give now; a tray whose
    required check expired since the last run turns from V(passed) to V(incomplete), loses
    C(<valid_until_label_key>) and its condition turns V(Unknown)/C(VerdictExpired). A node written before verdicts
    were per check gets only the condition. The scheduled verification runs it between its runs
    (C(playbooks/refresh_state.yml)).
  - With O(state=absent), every node loses both labels, the annotation, the taint O(taint_key) and the condition
    O(condition_type) (the uninstall); O(trays) and O(time) are not used.
  - Each node's patch is computed from the Node as read and sent only when it changes something; a strategic
    merge patch for the label and the annotation, and for the taints a JSON merge patch with the whole new
    C(spec.taints) and the C(metadata.resourceVersion) it was computed from; when another writer changed the
    node in between (409 Conflict), the node is read again and the patch recomputed.
  - A node that does not exist any more gives a warning, not a failure. Connection errors, 429 and 5xx answers
    are retried a few times with a short back-off; a final failure names the node.
  - The step is opt-in; run it after a verification, with the per-tray verdicts of that run.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the nodes and reports what would change; nothing is written.
  diff_mode:
    support: full
    details:
      - Per changed node, the labels O(label_key) and O(valid_until_label_key), the annotation O(annotation_key), the
        whole C(spec.taints) list and (with O(condition=true)) the condition O(condition_type), before and after.
options:
  trays:
    description:
      - Node name -> the tray's outcome of the verification run.
      - Each value is a dict with C(verdict) (V(passed), V(failed) or V(skipped), required), C(summary) (one line
        that says why) and C(checks), check name -> C(outcome) (V(passed), V(failed) with its C(summary), or
        V(skipped) with its C(reason)), what each check of this run said of the tray. Without C(checks), the
        C(checks_failed) and C(checks_passed) lists stand for it; a V(passed) or V(failed) tray names at least one.
      - C(skip_reasons) (a list) tells why a skipped tray was skipped. C(rack) is accepted as well, so that the
        report's per-tray record (M(gpu_fabric.mnnvl.verification_report)'s C(trays)) can be passed as it is.
      - Required with O(state=present).
    type: dict
  time:
    description:
      - Finish time of the verification run, an RFC 3339 date-time (for example V(2026-12-01T10:15:00Z)).
      - Written into the annotation. Passing the same O(trays), O(time) and O(run_id) again changes nothing.
      - Required with O(state=present).
    type: str
  run_id:
    description: Identifier of the verification run, written as C(run) into the annotation.
    type: str
    default: ""
  valid_hours:
    description:
      - How long a verdict holds, in hours after O(time); the end is the label O(valid_until_label_key) and the
        annotation's C(valid_until).
    type: float
    default: 168.0
  state:
    description:
      - V(present) writes the verdicts of O(trays); V(refreshed) brings every node's labels and condition to what its
        per-check state says now (expired verdicts), without any check; V(absent) removes what this module writes
        from every node.
    type: str
    choices: [present, absent, refreshed]
    default: present
  required_checks:
    description:
      - The checks a tray must have passed, each within its validity, to read V(passed)
        (C(gpu_fabric_verify_required_checks)).
    type: list
    elements: str
    default: [cliques, imex_channel, nvbandwidth]
  label:
    description:
      - Write the label O(label_key), O(valid_until_label_key) and the annotation O(annotation_key) on the trays a
        check measured.
      - With V(false) only the taint is managed (when O(taint_failed=true)).
    type: bool
    default: true
  taint_failed:
    description:
      - Taint failed trays with C(<taint_key>=true:NoSchedule) and remove that taint from trays that passed.
      - With V(false) no taint is added or removed.
    type: bool
    default: false
  condition:
    description:
      - Write the Node condition O(condition_type) on every tray of O(trays) that carries a verdict, and turn it
        V(Unknown) on every node whose verdict expired.
      - Needs C(patch) on C(nodes/status).
    type: bool
    default: false
  label_key:
    description: Key of the verdict label.
    type: str
    default: gpu-fabric.nvidia.com/verified
  valid_until_label_key:
    description: Key of the label holding the end of the verdict's validity in Unix seconds.
    type: str
    default: gpu-fabric.nvidia.com/verified-until
  condition_type:
    description: Type of the Node condition.
    type: str
    default: GPUFabricVerified
  annotation_key:
    description: Key of the annotation that holds the verdict's time, value and summary.
    type: str
    default: gpu-fabric.nvidia.com/verification
  taint_key:
    description: Key of the taint put on failed trays (value V(true), effect V(NoSchedule)).
    type: str
    default: gpu-fabric.nvidia.com/unverified
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
seealso:
  - module: gpu_fabric.mnnvl.clique_info
  - module: kubernetes.core.k8s_taint
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Label and annotate the trays with the verdict of this run
  gpu_fabric.mnnvl.node_verdict:
    time: "2026-12-01T10:21:37Z"
    trays:
      gb200-r0-t0:
        verdict: passed
        rack: rack0
        checks_passed: [cliques, imex_channel, nvbandwidth]
        summary: "passed cliques, imex_channel, nvbandwidth"
      gb200-r0-t3:
        verdict: failed
        rack: rack0
        checks:
          cliques: {outcome: passed}
          imex_channel: {outcome: passed}
          nvbandwidth:
            outcome: failed
            summary: "GPU 12 -> 5 402.11 GB/s, below 765.00 GB/s (gb200-r0-t3 -> gb200-r0-t1)"
        summary: "nvbandwidth failed: GPU 12 -> 5 402.11 GB/s, below 765.00 GB/s (gb200-r0-t3 -> gb200-r0-t1)"
      gb200-r0-t4:
        verdict: skipped
        rack: rack0
        summary: "skipped: cordoned"
        skip_reasons: [cordoned]

- name: Also keep new workloads off the trays that failed, and say each tray's state in a Node condition
  gpu_fabric.mnnvl.node_verdict:
    time: "{{ verification.finished }}"
    run_id: "{{ verification.run_id }}"
    trays: "{{ verification.trays }}"
    valid_hours: 168
    taint_failed: true
    condition: true
  register: written

- name: Between runs, show on the Nodes the verdicts that expired (no check runs)
  gpu_fabric.mnnvl.node_verdict:
    state: refreshed
    required_checks: [cliques, imex_channel, nvbandwidth]
    condition: true

- name: Remove the verdicts from every node
  gpu_fabric.mnnvl.node_verdict:
    state: absent

- name: Show the nodes that were changed
  ansible.builtin.debug:
    var: written.changed_nodes
"""

RETURN = r"""
nodes:
  description:
    - Node name -> what the node carries after this run (predicted in check mode), for every tray given.
    - C(label) is the value of O(label_key) on the node (null when it has none, or the node does not exist).
    - C(taint) says whether the taint O(taint_key) was V(added), V(removed) or left V(unchanged).
    - C(condition) (with O(condition=true) only) is the status of the condition O(condition_type), null for none.
    - C(changed) says whether the node was patched.
    - C(kept_newer) (only when there is one) maps each check whose entry on the node is newer than O(time) to that
      entry's time - the run's older verdict of that check was not written.
    - With O(condition=true) the nodes outside O(trays) whose condition turned V(Unknown) are here as well; with
      O(state=absent), the nodes that were cleaned.
  returned: always
  type: dict
  sample: {"gb200-r0-t0": {"label": "passed", "taint": "removed", "changed": true},
           "gb200-r0-t3": {"label": "failed", "taint": "added", "changed": true},
           "gb200-r0-t4": {"label": "passed", "taint": "unchanged", "changed": true},
           "gb200-r0-t5": {"label": "passed", "taint": "unchanged", "changed": false,
                           "kept_newer": {"nvbandwidth": "2026-12-01T11:02:00Z"}}}
changed_nodes:
  description: Sorted names of the nodes that were patched (that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["gb200-r0-t0", "gb200-r0-t3"]
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_condition import DEFAULT_CONDITION_TYPE
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_plan import (
    DEFAULT_ANNOTATION_KEY,
    DEFAULT_LABEL_KEY,
    DEFAULT_VALID_UNTIL_LABEL_KEY,
    Settings,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_taint import DEFAULT_TAINT_KEY
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_verdict import (
    NodeVerdictError,
    Request,
    call_with_retries,
    write_verdicts,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.tray_state import (
    DEFAULT_REQUIRED_CHECKS,
    DEFAULT_VALID_HOURS,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

ARGUMENT_SPEC = dict(
    trays=dict(type="dict"),
    time=dict(type="str"),
    run_id=dict(type="str", default=""),
    valid_hours=dict(type="float", default=DEFAULT_VALID_HOURS),
    state=dict(type="str", choices=["present", "absent", "refreshed"], default="present"),
    label=dict(type="bool", default=True),
    taint_failed=dict(type="bool", default=False),
    condition=dict(type="bool", default=False),
    required_checks=dict(type="list", elements="str", default=list(DEFAULT_REQUIRED_CHECKS)),
    label_key=dict(type="str", default=DEFAULT_LABEL_KEY, no_log=False),
    valid_until_label_key=dict(type="str", default=DEFAULT_VALID_UNTIL_LABEL_KEY, no_log=False),
    annotation_key=dict(type="str", default=DEFAULT_ANNOTATION_KEY, no_log=False),
    taint_key=dict(type="str", default=DEFAULT_TAINT_KEY, no_log=False),
    condition_type=dict(type="str", default=DEFAULT_CONDITION_TYPE),
)


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(ARGUMENT_SPEC)
    return AnsibleK8SModule(
        argument_spec=argument_spec,
        supports_check_mode=True,
        required_if=[("state", "present", ("trays", "time"))],
    )


def request_from_params(params: dict, check_mode: bool) -> Request:
    return Request(
        trays=params["trays"] or {},
        time=params["time"] or "",
        settings=Settings(
            label=params["label"],
            taint_failed=params["taint_failed"],
            condition=params["condition"],
            valid_hours=params["valid_hours"],
            label_key=params["label_key"],
            valid_until_label_key=params["valid_until_label_key"],
            annotation_key=params["annotation_key"],
            taint_key=params["taint_key"],
            condition_type=params["condition_type"],
            required_checks=tuple(params["required_checks"]),
        ),
        check_mode=check_mode,
        run_id=params["run_id"],
        state=params["state"],
    )


def main() -> None:
    module = build_module()
    try:
        # creating the client already asks the API server for its version
        client = call_with_retries("connect to the Kubernetes API", lambda: get_api_client(module=module))
        result = write_verdicts(client, request_from_params(module.params, module.check_mode))
    except NodeVerdictError as exc:
        partial = dict(exc.result)
        for warning in partial.pop("warnings", []):
            module.warn(warning)
        if not module._diff:
            partial.pop("diff", None)
        module.fail_json(msg=exc.message, **partial)
    except CoreException as exc:
        module.fail_from_exception(exc)
    for warning in result.pop("warnings"):
        module.warn(warning)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
