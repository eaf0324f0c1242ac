#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: verify_preflight
short_description: Check everything a verify run will need before its first check runs
version_added: 0.4.0
description:
  - Called by C(gpu_fabric.mnnvl.verify) right after M(gpu_fabric.mnnvl.variable_check), before the first check, so
    that a mistake fails the run at once instead of after the checks that run before the step that reads it; each
    mistake is one line naming the variable and what to give.
  - O(checks) (C(gpu_fabric_verify_checks)) is a list of check names or one string naming a check or a
    comma-separated list of them; every name is held to the registry of checks, and an unknown one is named with
    the nearest check.
  - O(settings) (C(gpu_fabric_verify_settings)) is held to every check's option groups, and each check that this
    run gives to the role C(verify_checks) (by O(run_tags), O(skip_tags) and O(checks)) is made from them as
    M(gpu_fabric.mnnvl.fabric_verify) makes it, so what the check refuses is refused here.
  - O(metrics_textfile) is held to the rule of M(gpu_fabric.mnnvl.verification_metrics), which writes it - it ends in
    C(.prom), its directory exists, and the path holds a regular file or nothing (never a link); O(pushgateway_url)
    must be an http(s) URL with a host.
  - The kubeconfig (O(kubeconfig), else the environment's C(K8S_AUTH_KUBECONFIG), else C(KUBECONFIG) or
    C(~/.kube/config); none is needed inside a pod or with C(K8S_AUTH_HOST)) must exist and load with the context
    O(kube_context), as the Kubernetes client loads it.
  - Once the kubeconfig loads, the API server is asked one question (which resources it serves in
    C(admissionregistration.k8s.io/v1)), asked again while nothing answers, for O(api_patience) seconds. An API server
    that does not answer for that long is a problem, in one line naming the server and what to set; every check
    would wait for it as long again and then not run, so it is said once, here.
  - With O(admission_policy), when the API server does not serve ValidatingAdmissionPolicy (Kubernetes 1.30 or
    later), the admission policies of C(docs/rbac/verify-stage.yaml) do not apply, and one line says so in
    RV(notes) and as a warning. The run goes on.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  checks:
    description: The checks the site enables (C(gpu_fabric_verify_checks)) - a list, or a string naming one check
      or a comma-separated list.
    type: raw
  settings:
    description: The checks' option groups by group name (C(gpu_fabric_verify_settings)).
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
  own_roles:
    description: The checks that run through roles of their own (C(verify_checks_own_roles)); the others are those
      O(settings) configures.
    type: list
    elements: str
    default: [cliques, imex_channel, nvbandwidth, nccl]
  metrics_textfile:
    description: The C(.prom) file the run's metrics go to (C(gpu_fabric_verify_metrics_textfile)); empty - none.
    type: str
    default: ""
  pushgateway_url:
    description: The Pushgateway the run's metrics go to (C(gpu_fabric_verify_pushgateway_url)); empty - none.
    type: str
    default: ""
  kubeconfig:
    description: The kubeconfig path (C(gpu_fabric_kubeconfig)); empty - kubernetes.core's defaults.
    type: str
    default: ""
  kube_context:
    description: The kubeconfig's context (C(gpu_fabric_kube_context)); empty - its current context.
    type: str
    default: ""
  admission_policy:
    description: Note when the API server does not serve ValidatingAdmissionPolicy, which the shipped verify RBAC's
      admission policies need.
    type: bool
    default: true
  api_patience:
    description: Seconds an API server that does not answer is asked again before the run is refused (what each
      check would wait for it; C(gpu_fabric_verify_api_patience)).
    type: int
    default: 90
  nccl:
    description: Whether the site runs the nccl check (C(gpu_fabric_verify_nccl)), for RV(runs).
    type: bool
    default: false
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Check what the verify run needs before the first check
  gpu_fabric.mnnvl.verify_preflight:
    checks: "{{ gpu_fabric_verify_checks | default([]) }}"
    settings: "{{ gpu_fabric_verify_settings | default({}) }}"
    run_tags: "{{ ansible_run_tags }}"
    skip_tags: "{{ ansible_skip_tags }}"
    metrics_textfile: "{{ gpu_fabric_verify_metrics_textfile | default('') }}"
    kubeconfig: "{{ gpu_fabric_kubeconfig | default('') }}"
"""

RETURN = r"""
checks:
  description: The check names of O(checks), as a list.
  returned: always
  type: list
  elements: str
  sample: [gpu_health]
selected:
  description: The checks of O(checks) and O(run_tags) that the role C(verify_checks) runs in this run.
  returned: always
  type: list
  elements: str
  sample: [gpu_health]
runs:
  description: Every check this run runs, in the verify stage's order (its own roles', then the others). Empty when
    the tags select no check of the verify stage (C(--tags cluster)); such a run has no record and so no report.
  returned: always
  type: list
  elements: str
  sample: [cliques, imex_channel, nvbandwidth]
problems:
  description: Every problem found, one line each; the module fails when there is one.
  returned: always
  type: list
  elements: str
  sample: ["gpu_fabric_verify_checks names 'gpu_helth', which is no check (did you mean gpu_health?); the checks are
    cliques, imex_channel, nvbandwidth, nccl, gpu_health, dcgm_diag"]
notes:
  description: What the cluster cannot enforce, one line each (also given as warnings); empty when it can or when
    O(admission_policy) is false, the kubeconfig has a problem or the API server does not answer.
  returned: always
  type: list
  elements: str
  sample: ["the API server does not serve ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.30
    or later): the admission policies of docs/rbac/verify-stage.yaml do not apply on this cluster, ..."]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import OWN_ROLE_CHECKS
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kubeconfig import kubeconfig_path, load_kubeconfig
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import given_secrets
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.verify_preflight import discovery, preflight

ARGUMENT_SPEC = dict(
    checks=dict(type="raw"),
    settings=dict(type="raw"),
    run_tags=dict(type="list", elements="str", default=[]),
    skip_tags=dict(type="list", elements="str", default=[]),
    own_roles=dict(type="list", elements="str", default=list(OWN_ROLE_CHECKS)),
    metrics_textfile=dict(type="str", default=""),
    pushgateway_url=dict(type="str", default=""),
    kubeconfig=dict(type="str", default=""),
    kube_context=dict(type="str", default=""),
    admission_policy=dict(type="bool", default=True),
    api_patience=dict(type="int", default=90),
    nccl=dict(type="bool", default=False),
)


def build_module() -> AnsibleModule:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.no_log_values.update(given_secrets(module.params["pushgateway_url"], {}))
    return module


def main() -> None:
    module = build_module()
    params = module.params
    discover = None
    path = kubeconfig_path(params["kubeconfig"], os.environ)
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    if path or in_cluster:  # with K8S_AUTH_HOST alone the connection's options are kubernetes.core's own
        discover = discovery(path, params["kube_context"] or None, in_cluster)
    result = preflight(params, os.environ, load_kubeconfig, discover)
    for note in result["notes"]:
        module.warn(note)
    if result["problems"]:
        module.fail_json(msg="\n".join(result["problems"]), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
