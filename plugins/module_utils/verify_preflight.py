# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a verify run needs, checked before its first check runs: one line per problem.

A mistake found only when the step that reads it runs costs the whole run before it (cliques, IMEX and
nvbandwidth: 16 minutes and more on a full NVL72) and ends with no report. So ``playbooks/verify.yml`` calls the
module ``verify_preflight`` first, and it holds every setting of the run to the rule of the code that reads it
later: the check names to the registry, the check settings to each check's own ``from_params``, the metrics file
and Pushgateway to the metrics' rules, the kubeconfig to the Kubernetes client that loads it. It also says, in one
line, when the cluster cannot enforce the admission policies of the shipped verify RBAC (no
ValidatingAdmissionPolicy served: Kubernetes before 1.30).
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import check_catalog, checks, metrics_textfile
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import check_names
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import api_failure_text
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import PushTarget, target_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

CHECKS_VARIABLE = "gpu_fabric_verify_checks"
SETTINGS_VARIABLE = "gpu_fabric_verify_settings"
TEXTFILE_VARIABLE = "gpu_fabric_verify_metrics_textfile"
PUSHGATEWAY_VARIABLE = "gpu_fabric_verify_pushgateway_url"
KUBECONFIG_VARIABLE = "gpu_fabric_kubeconfig"
KUBECONFIG_ENVIRONMENT = "K8S_AUTH_KUBECONFIG"
# Where kubernetes.core finds a cluster without a kubeconfig: its host option's environment, or inside a pod.
NO_KUBECONFIG_NEEDED = ("K8S_AUTH_HOST", "KUBERNETES_SERVICE_HOST")
DEFAULT_KUBECONFIG = "~/.kube/config"
# What the parameters of fabric_verify give a check beyond its option groups; a check's from_params reads them,
# and none of them changes whether its settings are valid.
RUN_PARAMS: Dict[str, Any] = {"history_dir": "", "run_id": "", "gpus_per_tray": 0, "trays_per_clique": 0}
# What the shipped verify RBAC's admission policies (docs/rbac/verify-stage.yaml) need the API server to serve.
ADMISSION_GROUP_VERSION = "admissionregistration.k8s.io/v1"
ADMISSION_POLICY_RESOURCE = "validatingadmissionpolicies"
RBAC_FILE = "docs/rbac/verify-stage.yaml"


def unknown_check_problems(names: Sequence[str]) -> List[str]:
    """One line per name that is no check of the registry, with the nearest check's name."""
    known = list(checks.names())
    problems = []
    for name in names:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        problems.append(f"{CHECKS_VARIABLE} names {name!r}, which is no check{hint}; the checks are {', '.join(known)}")
    return problems


def _named(message: str) -> str:
    """A registry message about ``settings`` said of the variable the site sets."""
    if message.startswith("settings"):
        return SETTINGS_VARIABLE + message[len("settings") :]
    return f"{SETTINGS_VARIABLE}: {message}"


def settings_problems(settings: Any, selected: Sequence[str]) -> List[str]:
    """What the checks refuse in ``gpu_fabric_verify_settings``: a group no check has, a value of the wrong type
    (``checks.with_settings``), and what each check of ``selected`` refuses when it is made (its ``from_params``)."""
    if settings is None:
        settings = {}
    if not isinstance(settings, Mapping):
        return [
            f"{SETTINGS_VARIABLE} is {one_line(settings, 80)!r}: give a mapping of the checks' option groups by "
            "name, e.g. {gpu_health: {xid_window_hours: 48}}"
        ]
    try:
        params = checks.with_settings(dict(RUN_PARAMS, settings=dict(settings)))
    except ValueError as exc:
        return [_named(one_line(exc))]
    problems = []
    for name in selected:
        try:
            checks.get(name).from_params(params)
        except ValueError as exc:
            problems.append(_named(one_line(exc)))
    return problems


def textfile_problems(path: str) -> List[str]:
    """The metrics textfile as the metrics' writer holds it before it writes (``metrics_run``): a ``.prom`` file, in a
    directory that exists, a regular file or none (never a link)."""
    if not path:
        return []
    try:
        # the writer's own rule; it reads the file as it is (text "" stands for the metrics, which do not exist yet)
        metrics_textfile.textfile_change(os.path.abspath(os.path.expanduser(path)), "")
    except metrics_textfile.MetricsError as exc:
        return [f"{TEXTFILE_VARIABLE}: {one_line(exc)}"]
    return []


def pushgateway_problems(url: str) -> List[str]:
    """The Pushgateway URL as the push holds it (``pushgateway.target_problems``): an http(s) URL with a host."""
    if not url:
        return []
    problem = target_problems(PushTarget(url=url), ())
    return [f"{PUSHGATEWAY_VARIABLE}: {problem}"] if problem else []


def kubeconfig_problems(
    kubeconfig: str,
    context: str,
    environ: Mapping[str, str],
    load: Callable[[str, Optional[str]], Any],
    is_file: Callable[[str], bool] = os.path.isfile,
) -> List[str]:
    """The kubeconfig the checks will connect with: ``kubeconfig`` (gpu_fabric_kubeconfig), else the environment's
    K8S_AUTH_KUBECONFIG, else kubernetes.core's defaults (KUBECONFIG, ~/.kube/config; none needed inside a pod or
    with K8S_AUTH_HOST). It must exist and ``load(path, context)`` (the Kubernetes client's loader) must take it."""
    if kubeconfig:
        path, variable = kubeconfig, KUBECONFIG_VARIABLE
    elif environ.get(KUBECONFIG_ENVIRONMENT):
        path, variable = environ[KUBECONFIG_ENVIRONMENT], KUBECONFIG_ENVIRONMENT
    elif any(environ.get(name) for name in NO_KUBECONFIG_NEEDED):
        return []
    else:
        path = (environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or DEFAULT_KUBECONFIG
        variable = "KUBECONFIG" if environ.get("KUBECONFIG") else ""
        if not is_file(os.path.expanduser(path)):
            return [
                f"no kubeconfig: {KUBECONFIG_VARIABLE} and {KUBECONFIG_ENVIRONMENT} are unset and {path} does not "
                f"exist; set {KUBECONFIG_VARIABLE} to the kubeconfig of the cluster to verify"
            ]
    named = f"the kubeconfig {path}" + (f" ({variable})" if variable else "")
    if not is_file(os.path.expanduser(path)):
        return [f"{named} does not exist: set {variable or KUBECONFIG_VARIABLE} to the kubeconfig file of the cluster"]
    try:
        load(os.path.expanduser(path), context or None)
    except Exception as exc:  # the client's loader raises its ConfigException, YAML and OS errors alike
        return [
            f"{named} does not load: {one_line(exc, 300)}; give {variable or KUBECONFIG_VARIABLE} a kubeconfig of "
            "the cluster" + (f" that has the context {context} (gpu_fabric_kube_context)" if context else "")
        ]
    return []


def admission_policy_note(served: Optional[Sequence[str]]) -> str:
    """One line when the API server cannot enforce the shipped admission policies, else ''. ``served``: the resources
    the API server serves in admissionregistration.k8s.io/v1 (its discovery answer), None when it serves no such
    group version."""
    if served is not None and ADMISSION_POLICY_RESOURCE in served:
        return ""
    return (
        f"the API server does not serve ValidatingAdmissionPolicy ({ADMISSION_GROUP_VERSION}, Kubernetes 1.30 or "
        f"later): the admission policies of {RBAC_FILE} do not apply on this cluster, so nothing keeps the verify "
        "account to its own namespaces and to restricted pods; upgrade the cluster, or bind the account with "
        "docs/rbac/verify-stage-namespaced.yaml in namespaces the site made"
    )


def admission_policy_notes(discover: Callable[[str], Optional[Sequence[str]]]) -> List[str]:
    """The note of :func:`admission_policy_note` from ``discover(group_version)`` (the served resources, None when
    not served); a discovery that fails is said as such, never taken as an answer."""
    try:
        served = discover(ADMISSION_GROUP_VERSION)
    except Exception as exc:  # unreachable, refused, a TLS error: the checks meet it again and fail on it
        return [
            f"could not ask the API server whether it serves ValidatingAdmissionPolicy ({ADMISSION_GROUP_VERSION}), "
            f"which the admission policies of {RBAC_FILE} need: {api_failure_text(exc)}"
        ]
    note = admission_policy_note(served)
    return [note] if note else []


def kubeconfig_path(kubeconfig: str, environ: Mapping[str, str]) -> str:
    """The kubeconfig the checks connect with (as :func:`kubeconfig_problems` finds it); '' without one."""
    if kubeconfig:
        return kubeconfig
    if environ.get(KUBECONFIG_ENVIRONMENT):
        return environ[KUBECONFIG_ENVIRONMENT]
    if any(environ.get(name) for name in NO_KUBECONFIG_NEEDED):
        return ""
    return (environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or DEFAULT_KUBECONFIG


def discovery(path: str, context: Optional[str], in_cluster: bool) -> Callable[[str], Optional[List[str]]]:
    """``discover(group_version)`` through the Kubernetes client: the resource names the API server serves in
    ``/apis/<group_version>``, None when it answers 404 (not served)."""

    def discover(group_version: str) -> Optional[List[str]]:
        # one GET through the client's REST layer, whose request() takes these keywords in every release of the
        # Kubernetes client (ApiClient.call_api does not); no discovery of every group first, a 15 s limit
        from kubernetes.client import Configuration
        from kubernetes.client.rest import ApiException, RESTClientObject
        from kubernetes.config import load_incluster_config, load_kube_config

        configuration = Configuration()
        if path:
            load_kube_config(config_file=os.path.expanduser(path), context=context, client_configuration=configuration)
        elif in_cluster:
            load_incluster_config(client_configuration=configuration)
        headers = {"Accept": "application/json"}
        for setting in configuration.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        url = f"{configuration.host}/apis/{group_version}"
        try:
            answer = RESTClientObject(configuration).request("GET", url, headers=headers, _request_timeout=15)
        except ApiException as exc:  # the older clients raise on a status that is no success
            if exc.status == 404:
                return None
            raise
        if answer.status == 404:
            return None
        if not 200 <= answer.status < 300:
            raise ApiException(status=answer.status, reason=answer.reason)
        data = answer.data if answer.data is not None else answer.read()
        served = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data or "{}")
        return [str(item.get("name")) for item in served.get("resources") or [] if isinstance(item, dict)]

    return discover


def load_kubeconfig(path: str, context: Optional[str]) -> None:
    """Load ``path`` (and ``context``) as the Kubernetes client does, into a configuration of its own."""
    from kubernetes.client import Configuration
    from kubernetes.config import load_kube_config

    load_kube_config(config_file=path, context=context, client_configuration=Configuration())


def preflight(
    params: Mapping[str, Any],
    environ: Mapping[str, str],
    load: Callable[..., Any],
    discover: Optional[Callable[[str], Optional[Sequence[str]]]] = None,
) -> Dict[str, Any]:
    """Every problem of the verify run's settings, one line each, and the checks it names and selects; ``notes``:
    what the cluster cannot enforce (asked through ``discover`` once the kubeconfig loads; None: not asked)."""
    names = check_names(params.get("checks"))
    problems = unknown_check_problems(names)
    known = [name for name in names if name in checks.REGISTRY]
    selected = check_catalog.selected(
        [str(t) for t in params.get("run_tags") or []],
        [str(t) for t in params.get("skip_tags") or []],
        known,
        [str(c) for c in params.get("own_roles") or []],
    )
    problems += settings_problems(params.get("settings"), selected)
    problems += textfile_problems(params.get("metrics_textfile") or "")
    problems += pushgateway_problems(params.get("pushgateway_url") or "")
    kube_problems = kubeconfig_problems(params.get("kubeconfig") or "", params.get("kube_context") or "", environ, load)
    problems += kube_problems
    notes: List[str] = []
    if discover is not None and not kube_problems:
        notes = admission_policy_notes(discover)
    return {"checks": names, "selected": selected, "problems": problems, "notes": notes}
