#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_verdict
short_description: Write the verification verdict of each GPU tray onto its Kubernetes Node
version_added: 0.1.0
description:
  - Labels every tray whose verdict is V(passed) or V(failed) with C(<label_key>=passed) or C(<label_key>=failed)
    and annotates it with C(<annotation_key>), a compact JSON object with the keys C(time), C(verdict) and
    C(summary) (the summary on one line, cut to 500 characters). Trays with verdict V(skipped) are left as they are.
  - With O(taint_failed=true), a failed tray also gets the taint C(<taint_key>=true:NoSchedule), so that new
    workloads avoid it, and a tray that passed has that taint removed. Every other taint is kept, in its order.
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
      - Per changed node, the label O(label_key), the annotation O(annotation_key) and the whole
        C(spec.taints) list before and after.
options:
  trays:
    description:
      - Node name -> the tray's outcome of the verification run.
      - Each value is a dict with C(verdict) (V(passed), V(failed) or V(skipped), required) and C(summary)
        (one line that says why). C(rack) and C(checks_failed) (a list of check names) are accepted as well,
        so that the run's per-tray record can be passed as it is; they are not written to the node.
    type: dict
    required: true
  time:
    description:
      - Finish time of the verification run, an RFC 3339 date-time (for example V(2026-12-01T10:15:00Z)).
      - Written into the annotation. Passing the same O(trays) and O(time) again changes nothing.
    type: str
    required: true
  label:
    description:
      - Write the label O(label_key) and the annotation O(annotation_key) on trays that passed or failed.
      - With V(false) only the taint is managed (when O(taint_failed=true)).
    type: bool
    default: true
  taint_failed:
    description:
      - Taint failed trays with C(<taint_key>=true:NoSchedule) and remove that taint from trays that passed.
      - With V(false) no taint is added or removed.
    type: bool
    default: false
  label_key:
    description: Key of the verdict label.
    type: str
    default: gpu-fabric.nvidia.com/verified
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
        checks_failed: []
        summary: "rack0: 4 of 4 checks passed"
      gb200-r0-t3:
        verdict: failed
        rack: rack0
        checks_failed: [nvbandwidth]
        summary: "rack0 nvbandwidth: GPU 12 -> 5 402.11 GB/s, below 765.00 GB/s (gb200-r0-t3 -> gb200-r0-t1)"
      gb200-r0-t4:
        verdict: skipped
        rack: rack0
        summary: "gb200-r0-t4 cordoned"

- name: Also keep new workloads off the trays that failed
  gpu_fabric.mnnvl.node_verdict:
    time: "{{ verification.finished }}"
    trays: "{{ verification.trays }}"
    taint_failed: true
  register: written

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
    - C(changed) says whether the node was patched.
  returned: always
  type: dict
  sample: {"gb200-r0-t0": {"label": "passed", "taint": "removed", "changed": true},
           "gb200-r0-t3": {"label": "failed", "taint": "added", "changed": true},
           "gb200-r0-t4": {"label": null, "taint": "unchanged", "changed": false}}
changed_nodes:
  description: Sorted names of the nodes that were patched (that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["gb200-r0-t0", "gb200-r0-t3"]
"""

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.node_verdict import (
    DEFAULT_ANNOTATION_KEY,
    DEFAULT_LABEL_KEY,
    DEFAULT_TAINT_KEY,
    NodeVerdictError,
    Request,
    Settings,
    call_with_retries,
    write_verdicts,
)
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

ARGUMENT_SPEC = dict(
    trays=dict(type="dict", required=True),
    time=dict(type="str", required=True),
    label=dict(type="bool", default=True),
    taint_failed=dict(type="bool", default=False),
    label_key=dict(type="str", default=DEFAULT_LABEL_KEY, no_log=False),
    annotation_key=dict(type="str", default=DEFAULT_ANNOTATION_KEY, no_log=False),
    taint_key=dict(type="str", default=DEFAULT_TAINT_KEY, no_log=False),
)


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(ARGUMENT_SPEC)
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def request_from_params(params: dict, check_mode: bool) -> Request:
    return Request(
        trays=params["trays"],
        time=params["time"],
        settings=Settings(
            label=params["label"],
            taint_failed=params["taint_failed"],
            label_key=params["label_key"],
            annotation_key=params["annotation_key"],
            taint_key=params["taint_key"],
        ),
        check_mode=check_mode,
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
