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

import json
import os
import time

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_release as cr
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import helm_release
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    NotFoundError,
    Urllib3Error,
    api_error_text,
    auth_argument_spec,
    json_page,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import (
    downgrade_problem,
    foreign_crds_problem,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rollout import poll
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.server_side_apply import apply_reason
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


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


class Api:
    """The raw API calls of the module (no discovery: every path is known), a transient error retried."""

    def __init__(self, client, patience: float, sleep=time.sleep, clock=time.monotonic):
        self.client = client
        self.patience = patience
        self.sleep = sleep
        self.clock = clock

    def call(self, method: str, path: str, **params):
        response = poll(
            lambda: self.client.client.request(method, path, serialize=False, **params),
            lambda _: True,
            self.patience,
            1.0,
            sleep=self.sleep,
            clock=self.clock,
        )
        return json_page(response)

    def get(self, path: str):
        try:
            return self.call("get", path)
        except NotFoundError:
            return None


def ensure_namespace(api: Api, name: str, labels, check_mode: bool) -> str:
    namespace = api.get(f"/api/v1/namespaces/{name}")
    missing = cr.namespace_labels_patch(namespace, labels)
    if namespace is None:
        if not check_mode:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": missing}}
            api.call("post", "/api/v1/namespaces", body=body)
        return "created"
    if not missing:
        return "unchanged"
    if not check_mode:
        patch = {"metadata": {"labels": missing}}
        api.call("patch", f"/api/v1/namespaces/{name}", body=patch, content_type="application/merge-patch+json")
    return "labelled"


def apply_crds(api: Api, crds, field_manager: str, check_mode: bool):
    """Apply server-side each CRD that the apply would change (read and compared first, so an unchanged CRD
    costs one read and no write); the names of those the apply changed (would change)."""
    changed = []
    for crd in crds:
        name = crd["metadata"]["name"]
        live = api.get(f"{CRD_PATH}/{name}")
        if apply_reason(live, crd, field_manager) is None:
            continue
        params = dict(content_type="application/apply-patch+yaml", field_manager=field_manager, force_conflicts=True)
        if check_mode:
            params["dry_run"] = "All"
        after = api.call("patch", f"{CRD_PATH}/{name}", body=crd, **params).get("metadata") or {}
        old = (live or {}).get("metadata")
        if old is None:
            changed.append(name)
        elif check_mode:
            keys = ("generation", "labels", "annotations")
            if any((old.get(key) or None) != (after.get(key) or None) for key in keys):
                changed.append(name)
        elif old.get("resourceVersion") != after.get("resourceVersion"):
            changed.append(name)
    return changed


def release_info(latest, name: str, namespace: str):
    """The RETURN's ``release``: the latest revision as ``helm history`` gives it."""
    if latest is None:
        return None
    return {
        "name": name,
        "namespace": namespace,
        "revision": latest.number,
        "status": latest.status,
        "chart": latest.chart,
        "app_version": latest.app_version,
    }


def main() -> None:
    module = build_module()
    p = module.params
    name, namespace = p["name"], p["namespace"]
    release = f"{namespace}/{name}"
    flags, env = helm_release.helm_connection(p, os.environ)
    stale_after = p["stale_after"] if p["stale_after"] is not None else p["wait_timeout"] + 60

    def helm(*args: str):
        argv = [p["binary_path"], *flags, *args, "--namespace", namespace]
        return module._module.run_command(argv, environ_update=env)

    for url, what in ((p["chart_repo_url"], "chart_repo_url"), (p["repo_url"], "repo_url")):
        problem = helm_release.url_credentials_problem(url, what)
        if problem:
            module.fail_json(msg=f"release {release}: {problem}")
    if p["repo_name"]:
        # the controller's Helm client setting, written again each run so that a rotated password applies: no
        # change to the cluster, and made in check mode too, so that check mode can read the chart
        args = helm_release.repo_add_args(p["repo_name"], p["repo_url"], p["repo_username"], bool(p["repo_password"]))
        rc, _out, err = module._module.run_command(
            [p["binary_path"], *args], data=p["repo_password"] or None, binary_data=True, environ_update=env
        )
        if rc != 0:
            module.fail_json(msg=f"helm repo add {p['repo_name']} failed (rc {rc}): {one_line(err, 300)}")

    def helm_read(what: str, *args: str) -> str:
        rc, out, err = helm(*args)
        if rc != 0:
            module.fail_json(msg=f"{what} for {release} failed (rc {rc}): {one_line(err, 300)}")
        return out

    chart_args = [p["chart_ref"], "--version", p["chart_version"]]
    if p["chart_repo_url"]:
        chart_args += ["--repo", p["chart_repo_url"]]
    secret = cr.plain(p["secret_values"])
    wanted = cr.merge_values(cr.plain(p["values"]), secret)
    result = dict(changed=False, values_wanted=cr.redact(wanted, hidden=secret))
    lines = []

    crds, carried = [], []
    if p["upgrade_crds"] or p["foreign_crds"]:
        try:
            crds = cr.crd_documents(helm_read("helm show crds", "show", "crds", *chart_args))
        except cr.ChartReleaseError as exc:
            module.fail_json(msg=f"release {release}: {exc}")
        carried = [crd["metadata"]["name"] for crd in crds]
        problem = foreign_crds_problem(release, carried, p["foreign_crds"], p["upgrade_crds"])
        if problem:
            module.fail_json(msg=problem)
        # the CRDs another release owns are left to it: this chart's copies are neither applied nor installed
        crds = [crd for crd in crds if crd["metadata"]["name"] not in p["foreign_crds"]]

    try:
        settled = helm_release.settle(helm, name, release, stale_after, p["poll_delay"], module.check_mode)
    except helm_release.SettleError as exc:
        module.fail_json(msg=str(exc))
    for warning in settled.warnings:
        module.warn(warning)
    result["settle"] = {"action": settled.action, "msg": settled.msg}
    result["changed"] |= settled.changed
    if settled.action != "none":
        lines.append(settled.msg)

    try:
        api = Api(get_api_client(module=module), p["api_patience"])
        result["namespace"] = ensure_namespace(api, namespace, p["namespace_labels"], module.check_mode)
        if result["namespace"] != "unchanged":
            result["changed"] = True
            lines.append(f"namespace {namespace} {result['namespace']}")
        if p["upgrade_crds"]:
            changed = apply_crds(api, crds, p["field_manager"], module.check_mode)
            result["crds"] = {
                "applied": [crd["metadata"]["name"] for crd in crds],
                "changed": changed,
                "left_to_their_owner": sorted(set(carried) & set(p["foreign_crds"])),
            }
            if changed:
                result["changed"] = True
                lines.append(f"CRDs {'would change' if module.check_mode else 'changed'}: {', '.join(changed)}")
    except CoreException as exc:
        module.fail_from_exception(exc)
    except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:
        module.fail_json(msg=f"release {release}: the API server refused the namespace or CRDs: {api_error_text(exc)}")
    except cr.ChartReleaseError as exc:
        module.fail_json(msg=f"release {release}: {exc}")

    def read_release(latest):
        """The release whose latest revision is ``latest`` (``None``: no release), with its values."""
        if latest is None:
            return None
        values = cr.parse_values(helm_read("helm get values", "get", "values", name, "--output", "json"))
        return cr.installed_release(latest, values, p["chart_name"])

    try:
        # the pending-release check read the history; after a rollback or an uninstall it is old: read it again
        settled_as_read = settled.action in ("none", "waited") or module.check_mode
        latest = settled.latest if settled_as_read else helm_release.latest_revision(helm, name, release)
        installed = read_release(latest)
        version = p["chart_version"]
        if installed is not None and not cr.is_exact_version(version):
            version = cr.parse_chart_version(helm_read("helm show chart", "show", "chart", *chart_args))
        if installed is not None:
            problem = downgrade_problem(release, installed.chart_name, p["chart_name"], p["forward_only_charts"])
            if problem:
                module.fail_json(msg=problem)
        plan = cr.plan(installed, p["chart_name"], version, wanted)
    except cr.ChartReleaseError as exc:
        module.fail_json(msg=f"release {release}: {exc}")
    except helm_release.SettleError as exc:
        module.fail_json(msg=str(exc))
    result.update(
        action=plan.action,
        reasons=plan.reasons,
        values_now=cr.redact(installed.values, hidden=secret) if installed else {},
        release=release_info(latest, name, namespace),
    )
    lines.append(cr.release_line(release, p["chart_name"], version, plan, module.check_mode))

    if plan.action != "none":
        result["changed"] = True
        if module._diff:
            result["diff"] = cr.values_diff(release, installed.values if installed else {}, wanted, secret)
        values_file = os.path.join(module._module.tmpdir, "values.json")
        args = cr.upgrade_args(
            name,
            p["chart_ref"],
            p["chart_version"],
            values_file,
            p["wait_timeout"],
            chart_repo_url=p["chart_repo_url"],
            take_ownership=p["take_ownership"],
            skip_crds=bool(p["foreign_crds"]) and p["upgrade_crds"],
        )
        result["command"] = [p["binary_path"], *args, "--namespace", namespace]
        if not module.check_mode:
            with open(values_file, "w", encoding="utf-8") as handle:
                json.dump(wanted, handle)
            rc, _stdout, err = helm(*args)
            if rc != 0:
                failure = f"helm upgrade --install of {release} failed (rc {rc}): {one_line(err, 300)}"
                module.fail_json(msg=failure, **result)
            try:
                result["release"] = release_info(helm_release.latest_revision(helm, name, release), name, namespace)
            except helm_release.SettleError as exc:
                module.fail_json(msg=f"release {release} was installed, then: {exc}", **result)
    module.exit_json(msg=cr.summary(lines), **result)


if __name__ == "__main__":
    main()
