# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The ``chart_release`` module's run: the steps of one Helm release, in order, each changing only what differs.

:func:`run_release` takes the module's parameters and what it needs of the module (:class:`ModuleHooks`: its
``run_command`` for Helm, a connection to the API server, its temporary directory, its warnings), and returns the
module's result, or raises :class:`ReleaseFailed` with one line. The decisions and the messages are
:mod:`chart_release`'s; the pending-release check and Helm's connection are :mod:`helm_release`'s.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_release as cr
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import helm_release
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    DynamicApiError,
    NotFoundError,
    Urllib3Error,
    api_error_text,
    api_retry,
    json_page,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.release_sets import (
    downgrade_problem,
    foreign_crds_problem,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.server_side_apply import apply_reason
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class ReleaseFailed(Exception):
    """The release cannot be brought to what was asked: ``message`` (one line) and the result known by then."""

    def __init__(self, message: str, result: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = dict(result or {})


@dataclass(frozen=True)
class ModuleHooks:
    """What the run needs of the Ansible module."""

    run_command: Callable[..., Tuple[int, str, str]]  # AnsibleModule.run_command's signature
    connect: Callable[[], Any]  # kubernetes.core's API client; called once the namespace is to be read
    tmpdir: Callable[[], str]  # the module's temporary directory (made when first asked for), for the values file
    warn: Callable[[str], None]
    environ: Mapping[str, str]  # the K8S_AUTH_* variables Helm's connection follows


class Api:
    """The raw API calls of the module (no discovery: every path is known), a transient error retried."""

    def __init__(self, client, patience: float, sleep=time.sleep, clock=time.monotonic):
        self.client = client
        self.patience = patience
        self.sleep = sleep
        self.clock = clock

    def call(self, method: str, path: str, **params):
        response = api_retry(
            lambda: self.client.client.request(method, path, serialize=False, **params),
            self.patience,
            1.0,
            self.sleep,
            self.clock,
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


def run_release(
    params: Mapping[str, Any], hooks: ModuleHooks, check_mode: bool = False, diff: bool = False
) -> Dict[str, Any]:
    """Settle, label, apply the CRDs of, and install or upgrade the release of ``params`` (the module's options);
    the module's result (``changed``, ``action``, ``msg``, ...)."""
    return _ReleaseRun(params, hooks, check_mode, diff).run()


class _ReleaseRun:
    """One run of :func:`run_release`: each step a method, the result and the message's lines gathered here."""

    def __init__(self, params: Mapping[str, Any], hooks: ModuleHooks, check_mode: bool, diff: bool) -> None:
        self.p = params
        self.hooks = hooks
        self.check_mode = check_mode
        self.diff = diff
        self.name, self.namespace = params["name"], params["namespace"]
        self.release = f"{self.namespace}/{self.name}"
        self.flags, self.env = helm_release.helm_connection(params, hooks.environ)
        self.chart_args = [params["chart_ref"], "--version", params["chart_version"]]
        if params["chart_repo_url"]:
            self.chart_args += ["--repo", params["chart_repo_url"]]
        self.secret = cr.plain(params["secret_values"])
        self.wanted = cr.merge_values(cr.plain(params["values"]), self.secret)
        self.result: Dict[str, Any] = dict(changed=False, values_wanted=cr.redact(self.wanted, hidden=self.secret))
        self.lines: List[str] = []

    def run(self) -> Dict[str, Any]:
        self.refuse_urls_with_credentials()
        self.add_repository()
        crds, carried = self.chart_crds()
        settled = self.settle()
        self.ensure_namespace_and_crds(crds, carried)
        installed, the_plan = self.plan(settled)
        if the_plan.action != "none":
            self.install_or_upgrade(installed, the_plan)
        return dict(self.result, msg=cr.summary(self.lines))

    # -- Helm ---------------------------------------------------------------------------------
    def helm(self, *args: str) -> Tuple[int, str, str]:
        argv = [self.p["binary_path"], *self.flags, *args, "--namespace", self.namespace]
        return self.hooks.run_command(argv, environ_update=self.env)

    def helm_read(self, what: str, *args: str) -> str:
        rc, out, err = self.helm(*args)
        if rc != 0:
            raise ReleaseFailed(f"{what} for {self.release} failed (rc {rc}): {one_line(err, 300)}")
        return out

    # -- the steps ----------------------------------------------------------------------------
    def refuse_urls_with_credentials(self) -> None:
        for url, what in ((self.p["chart_repo_url"], "chart_repo_url"), (self.p["repo_url"], "repo_url")):
            problem = helm_release.url_credentials_problem(url, what)
            if problem:
                raise ReleaseFailed(f"release {self.release}: {problem}")

    def add_repository(self) -> None:
        """The controller's Helm client setting, written again each run so that a rotated password applies: no
        change to the cluster, and made in check mode too, so that check mode can read the chart."""
        p = self.p
        if not p["repo_name"]:
            return
        args = helm_release.repo_add_args(p["repo_name"], p["repo_url"], p["repo_username"], bool(p["repo_password"]))
        rc, _out, err = self.hooks.run_command(
            [p["binary_path"], *args], data=p["repo_password"] or None, binary_data=True, environ_update=self.env
        )
        if rc != 0:
            raise ReleaseFailed(f"helm repo add {p['repo_name']} failed (rc {rc}): {one_line(err, 300)}")

    def chart_crds(self) -> Tuple[List[Dict[str, Any]], List[str]]:
        """The chart's CRDs to apply (those another release owns left out), and the names of all it carries."""
        p = self.p
        if not (p["upgrade_crds"] or p["foreign_crds"]):
            return [], []
        try:
            crds = cr.crd_documents(self.helm_read("helm show crds", "show", "crds", *self.chart_args))
        except cr.ChartReleaseError as exc:
            raise ReleaseFailed(f"release {self.release}: {exc}") from None
        carried = [crd["metadata"]["name"] for crd in crds]
        problem = foreign_crds_problem(self.release, carried, p["foreign_crds"], p["upgrade_crds"])
        if problem:
            raise ReleaseFailed(problem)
        # the CRDs another release owns are left to it: this chart's copies are neither applied nor installed
        return [crd for crd in crds if crd["metadata"]["name"] not in p["foreign_crds"]], carried

    def settle(self) -> helm_release.Settled:
        p = self.p
        stale_after = p["stale_after"] if p["stale_after"] is not None else p["wait_timeout"] + 60
        try:
            settled = helm_release.settle(
                self.helm, self.name, self.release, stale_after, p["poll_delay"], self.check_mode
            )
        except helm_release.SettleError as exc:
            raise ReleaseFailed(str(exc)) from None
        for warning in settled.warnings:
            self.hooks.warn(warning)
        self.result["settle"] = {"action": settled.action, "msg": settled.msg}
        self.result["changed"] |= settled.changed
        if settled.action != "none":
            self.lines.append(settled.msg)
        return settled

    def ensure_namespace_and_crds(self, crds: Sequence[Dict[str, Any]], carried: Sequence[str]) -> None:
        p, result = self.p, self.result
        try:
            api = Api(self.hooks.connect(), p["api_patience"])
            result["namespace"] = ensure_namespace(api, self.namespace, p["namespace_labels"], self.check_mode)
            if result["namespace"] != "unchanged":
                result["changed"] = True
                self.lines.append(f"namespace {self.namespace} {result['namespace']}")
            if p["upgrade_crds"]:
                changed = apply_crds(api, crds, p["field_manager"], self.check_mode)
                result["crds"] = {
                    "applied": [crd["metadata"]["name"] for crd in crds],
                    "changed": changed,
                    "left_to_their_owner": sorted(set(carried) & set(p["foreign_crds"])),
                }
                if changed:
                    result["changed"] = True
                    self.lines.append(f"CRDs {'would change' if self.check_mode else 'changed'}: {', '.join(changed)}")
        except (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError) as exc:
            message = f"release {self.release}: the API server refused the namespace or CRDs: {api_error_text(exc)}"
            raise ReleaseFailed(message) from None
        except cr.ChartReleaseError as exc:
            raise ReleaseFailed(f"release {self.release}: {exc}") from None

    def plan(self, settled: helm_release.Settled) -> Tuple[Optional[cr.Installed], cr.Plan]:
        """The release as installed (its latest revision and values) against the one asked for."""
        p = self.p
        try:
            # the pending-release check read the history; after a rollback or an uninstall it is old: read it again
            settled_as_read = settled.action in ("none", "waited") or self.check_mode
            latest = (
                settled.latest if settled_as_read else helm_release.latest_revision(self.helm, self.name, self.release)
            )
            installed = None
            if latest is not None:
                values = self.helm_read("helm get values", "get", "values", self.name, "--output", "json")
                installed = cr.installed_release(latest, cr.parse_values(values), p["chart_name"])
            version = p["chart_version"]
            if installed is not None and not cr.is_exact_version(version):
                version = cr.parse_chart_version(self.helm_read("helm show chart", "show", "chart", *self.chart_args))
            if installed is not None:
                problem = downgrade_problem(
                    self.release, installed.chart_name, p["chart_name"], p["forward_only_charts"]
                )
                if problem:
                    raise ReleaseFailed(problem)
            the_plan = cr.plan(installed, p["chart_name"], version, self.wanted)
        except cr.ChartReleaseError as exc:
            raise ReleaseFailed(f"release {self.release}: {exc}") from None
        except helm_release.SettleError as exc:
            raise ReleaseFailed(str(exc)) from None
        self.result.update(
            action=the_plan.action,
            reasons=the_plan.reasons,
            values_now=cr.redact(installed.values, hidden=self.secret) if installed else {},
            release=release_info(latest, self.name, self.namespace),
        )
        self.lines.append(cr.release_line(self.release, p["chart_name"], version, the_plan, self.check_mode))
        return installed, the_plan

    def install_or_upgrade(self, installed: Optional[cr.Installed], the_plan: cr.Plan) -> None:
        p, result = self.p, self.result
        result["changed"] = True
        if self.diff:
            result["diff"] = cr.values_diff(
                self.release, installed.values if installed else {}, self.wanted, self.secret
            )
        values_file = os.path.join(self.hooks.tmpdir(), "values.json")
        args = cr.upgrade_args(
            self.name,
            p["chart_ref"],
            p["chart_version"],
            values_file,
            p["wait_timeout"],
            chart_repo_url=p["chart_repo_url"],
            take_ownership=p["take_ownership"],
            skip_crds=bool(p["foreign_crds"]) and p["upgrade_crds"],
        )
        result["command"] = [p["binary_path"], *args, "--namespace", self.namespace]
        if self.check_mode:
            return
        with open(values_file, "w", encoding="utf-8") as handle:
            json.dump(self.wanted, handle)
        rc, _stdout, err = self.helm(*args)
        if rc != 0:
            raise ReleaseFailed(
                f"helm upgrade --install of {self.release} failed (rc {rc}): {one_line(err, 300)}", result
            )
        try:
            result["release"] = release_info(
                helm_release.latest_revision(self.helm, self.name, self.release), self.name, self.namespace
            )
        except helm_release.SettleError as exc:
            raise ReleaseFailed(f"release {self.release} was installed, then: {exc}", result) from None
