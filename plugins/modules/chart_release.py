#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: chart_release
short_description: Install or upgrade one Helm release, its namespace and its chart's CRDs, in one process
version_added: 0.3.0
description:
  - The steps of one release of the cluster stage, in order, each changing only what differs.
  - Settles a release that an interrupted run left pending, as M(gpu_fabric.mnnvl.helm_release_settle) does.
  - Creates the namespace with O(namespace_labels), or sets the labels it lacks; its other labels stay.
  - Applies the CRDs of the chart version (C(helm show crds)) server-side with O(field_manager). Helm creates a
    chart's C(crds/) on the first install only and never upgrades them. Each CRD is read and compared first, and
    one already applied by O(field_manager) with every value of the chart's version is not sent, so that a run
    on an unchanged cluster writes nothing.
  - Reads the release's latest revision (C(helm history)) and its values (C(helm get values)), and installs or
    upgrades it (C(helm upgrade --install --reset-values --wait)) when it is absent, when its latest revision is
    not C(deployed), or when its chart, chart version or values differ from O(chart_name), O(chart_version) and
    O(values). No chart is downloaded for that decision, unless O(chart_version) is a range, which
    C(helm show chart) resolves.
  - Check mode reads everything and changes nothing; with C(--diff) it shows the release's values installed and
    wanted.
  - The connection options are kubernetes.core's, with its C(K8S_AUTH_*) environment variables; Helm gets the same
    cluster through C(KUBECONFIG), C(--kube-context), C(--kube-apiserver), C(--kube-insecure-skip-tls-verify)
    and C(--kube-ca-file); the bearer token goes in C(HELM_KUBETOKEN), never on Helm's command line, which any
    local user can read. A kubeconfig given as a mapping reaches the API
    client only.
author: gpu_fabric.mnnvl contributors (@gpu-fabric)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the release, the namespace and the CRDs, dry-runs the CRDs' apply on the API server, and changes nothing.
  diff_mode:
    support: full
    details:
      - The diff shows the release's values, installed and wanted, as YAML, when the release would change.
options:
  name:
    description: Release name.
    type: str
    required: true
  namespace:
    description: Release namespace, created when missing.
    type: str
    required: true
  namespace_labels:
    description: Labels the namespace must carry (the charts' pods need Pod Security C(privileged)).
    type: dict
    default: {}
  chart_ref:
    description:
      - The chart to install, as Helm takes it - C(nvidia/gpu-operator), C(oci://...), or a name with O(chart_repo_url).
    type: str
    required: true
  chart_repo_url:
    description: The chart repository (C(--repo)); empty for an OCI reference or a named repository.
    type: str
    default: ""
  repo_name:
    description:
      - A named repository to add (C(helm repo add --force-update)) before the chart is read, for a repository
        with credentials; O(chart_ref) is then C(<repo_name>/<chart>). Empty - none is added.
      - The password goes on Helm's standard input (C(--password-stdin)), never on its command line, which any
        local user can read.
    type: str
    default: ""
  repo_url:
    description:
      - The URL of O(repo_name) (not used without it).
      - A URL with credentials in it (C(user:pass@)) is refused, as is such an O(chart_repo_url).
    type: str
    default: ""
  repo_username:
    description: The user name of O(repo_name) (not used without it).
    type: str
    default: ""
  repo_password:
    description: The password of O(repo_name) (not used without it).
    type: str
    default: ""
  chart_name:
    description: The chart's name; an installed release of another chart is upgraded. Empty - not compared.
    type: str
    default: ""
  chart_version:
    description: The chart version, or a range that C(helm show chart) resolves.
    type: str
    required: true
  values:
    description:
      - The release's values, exactly; values of an earlier revision are not carried over.
      - The module's arguments (shown with C(-vvv)) carry them as given; put credentials in O(secret_values).
    type: dict
    default: {}
  secret_values:
    description:
      - Values that hold credentials (a registry password, a token), merged over O(values) (mapping into
        mapping) before they are compared and handed to Helm.
      - Never shown - not in the module's arguments as C(-vvv) prints them, nor in RV(values_now), RV(values_wanted),
        the diff or a message - each of their strings is replaced by C(********) wherever it would appear.
    type: dict
    default: {}
  upgrade_crds:
    description: Apply the chart version's CRDs server-side.
    type: bool
    default: true
  foreign_crds:
    description:
      - Names of CRDs that another release owns (GPU Operator v26.7's chart carries the ComputeDomain CRDs that
        the DRA driver's release owns). The chart's copies are neither applied nor installed - Helm runs with
        C(--skip-crds), the chart's other CRDs having been applied first.
      - Refused, before anything changes, when the chart carries one of them and O(upgrade_crds) is off (Helm
        would install them from this chart).
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  forward_only_charts:
    description:
      - Charts a release never moves back from - a release whose latest revision is of one of them is not changed
        to another chart, and the module fails before anything changes (the DRA driver supports no downgrade from
        C(dra-driver-nvidia-gpu) to C(nvidia-dra-driver-gpu)).
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  field_manager:
    description: Field manager of the CRDs' server-side apply.
    type: str
    default: gpu-fabric
  take_ownership:
    description: Adopt the objects of an install that Helm did not make (C(--take-ownership), Helm 3.17 or later).
    type: bool
    default: false
  wait_timeout:
    description: Seconds Helm waits for the release's objects (C(--wait --timeout)).
    type: int
    default: 600
  stale_after:
    description: Seconds after which a pending revision is taken as interrupted; default O(wait_timeout) plus 60.
    type: int
  poll_delay:
    description: Seconds between two reads while another Helm operation on the release runs.
    type: float
    default: 5
  api_patience:
    description: Seconds a transient API error (429, 5xx, no answer) is retried before the module fails.
    type: int
    default: 10
  binary_path:
    description: The Helm binary.
    type: path
    default: helm
requirements:
  - helm (3.17 or later for O(take_ownership))
  - kubernetes (the Python client)
notes:
  - The comparison is Helm's own record of the release; objects changed behind Helm's back are not found here (the
    roles' readiness checks find what matters of them).
"""

EXAMPLES = r"""
- name: Install or upgrade the GPU Operator
  gpu_fabric.mnnvl.chart_release:
    name: gpu-operator
    namespace: gpu-operator
    namespace_labels:
      pod-security.kubernetes.io/enforce: privileged
    chart_ref: nvidia/gpu-operator
    chart_name: gpu-operator
    chart_version: v25.10.0
    values:
      driver:
        enabled: false
"""

RETURN = r"""
action:
  description: What was (or in check mode would be) done to the release - C(install), C(upgrade) or C(none).
  returned: always
  type: str
reasons:
  description: Why the release is installed or upgraded, one line per difference.
  returned: always
  type: list
  elements: str
  sample: ["values differ (logVerbosity)"]
release:
  description:
    - The release after the run (before it, in check mode) - name, namespace, revision, status, chart, app_version.
  returned: when the release exists
  type: dict
settle:
  description: What the pending-release check found (C(none), C(waited), C(rollback), C(uninstall)) and its message.
  returned: always
  type: dict
namespace:
  description: C(created), C(labelled) or C(unchanged).
  returned: always
  type: str
crds:
  description: The chart's CRDs applied, and those of them the apply changed (would change, in check mode).
  returned: when O(upgrade_crds)
  type: dict
  sample: {"applied": ["clusterpolicies.nvidia.com"], "changed": [], "left_to_their_owner": []}
values_now:
  description: The values of the installed release (empty when there is none); a value under a key that reads as a
    credential (password, secret, token, API or private key) is shown as C(********), here, in RV(values_wanted) and
    in the diff.
  returned: always
  type: dict
values_wanted:
  description: O(values), as Helm will store them, credentials shown as C(********) (see RV(values_now)).
  returned: always
  type: dict
command:
  description: The Helm command that installed or upgraded the release (that would, in check mode).
  returned: when the release is installed or upgraded
  type: list
  elements: str
msg:
  description: One line per step that did something, and the release's state.
  returned: always
  type: str
"""

import os

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.chart_release_runner import (
    ModuleHooks,
    ReleaseFailed,
    run_release,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import auth_argument_spec
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException


def build_module() -> AnsibleK8SModule:
    argument_spec = auth_argument_spec()
    argument_spec.update(
        name=dict(type="str", required=True),
        namespace=dict(type="str", required=True),
        namespace_labels=dict(type="dict", default={}),
        chart_ref=dict(type="str", required=True),
        chart_repo_url=dict(type="str", default=""),
        repo_name=dict(type="str", default=""),
        repo_url=dict(type="str", default=""),
        repo_username=dict(type="str", default=""),
        repo_password=dict(type="str", default="", no_log=True),
        chart_name=dict(type="str", default=""),
        chart_version=dict(type="str", required=True),
        values=dict(type="dict", default={}),
        secret_values=dict(type="dict", default={}, no_log=True),
        upgrade_crds=dict(type="bool", default=True),
        foreign_crds=dict(type="list", elements="str", default=[]),
        forward_only_charts=dict(type="list", elements="str", default=[]),
        field_manager=dict(type="str", default="gpu-fabric"),
        take_ownership=dict(type="bool", default=False),
        wait_timeout=dict(type="int", default=600),
        stale_after=dict(type="int"),
        poll_delay=dict(type="float", default=5.0),
        api_patience=dict(type="int", default=10),
        binary_path=dict(type="path", default="helm"),
    )
    return AnsibleK8SModule(argument_spec=argument_spec, supports_check_mode=True)


def main() -> None:
    module = build_module()
    hooks = ModuleHooks(
        run_command=module._module.run_command,
        connect=lambda: get_api_client(module=module),
        tmpdir=lambda: module._module.tmpdir,
        warn=module.warn,
        environ=os.environ,
    )
    try:
        result = run_release(module.params, hooks, module.check_mode, module._diff)
    except ReleaseFailed as exc:
        module.fail_json(msg=exc.message, **exc.result)
    except CoreException as exc:
        module.fail_from_exception(exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
