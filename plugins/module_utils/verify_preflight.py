# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a verify run needs, checked before its first check runs: one line per problem.

A mistake found only when the step that reads it runs costs the whole run before it (cliques, IMEX and
nvbandwidth: 16 minutes and more on a full NVL72) and ends with no report. So ``playbooks/verify.yml`` calls the
module ``verify_preflight`` first, and it holds every setting of the run to the rule of the code that reads it
later: the check names to the registry, the check settings to each check's own ``from_params``, the metrics file
and Pushgateway to the metrics' rules, the kubeconfig to the Kubernetes client that loads it, and the API server
to one question asked with the patience every check would give it: an API server that does not answer is said
once, here, instead of by every check after waiting for it again. It also says, in one line, when the cluster
cannot enforce the admission policies of the shipped verify RBAC (no ValidatingAdmissionPolicy served:
Kubernetes before 1.30).
"""

from __future__ import annotations

import difflib
import json
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import check_catalog, checks, metrics_textfile
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.api_unreachable import unreachable_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_catalog import check_names
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    API_ERRORS,
    ApiException,
    DynamicApiError,
    api_failure_text,
    api_retry,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kubeconfig import kubeconfig_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.pushgateway import PushTarget, target_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

CHECKS_VARIABLE = "gpu_fabric_verify_checks"
SETTINGS_VARIABLE = "gpu_fabric_verify_settings"
TEXTFILE_VARIABLE = "gpu_fabric_verify_metrics_textfile"
PUSHGATEWAY_VARIABLE = "gpu_fabric_verify_pushgateway_url"
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


# Between two questions to an API server that does not answer (each waits at most 15 s for its answer).
ASK_AGAIN_SECONDS = 2.0


def cluster_findings(
    discover: Callable[[str], Optional[Sequence[str]]],
    patience: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Tuple[List[str], List[str]]:
    """The problems and notes of the API server the checks will use, from one question
    (``discover(group_version)``: the served resources, None when not served), asked again while nothing
    answers, for ``patience`` seconds (``gpu_fabric_verify_api_patience``, what each check would wait).

    No answer for the whole patience is a problem, in the collection's one wording for it: every check would
    wait as long again and then not run. An answer that is an error (refused, not found) is a note, never an
    answer about the policies; the checks meet it again and say it in their records."""
    started = clock()
    try:
        served = api_retry(lambda: discover(ADMISSION_GROUP_VERSION), patience, ASK_AGAIN_SECONDS, sleep, clock)
    except (ApiException, DynamicApiError) as exc:  # the server answered, with an error
        return [], [_not_asked(exc)]
    except API_ERRORS as exc:  # pylint: disable=catching-non-exception  # no answer (refused, timed out, TLS)
        return [unreachable_line(api_failure_text(exc, clock() - started))], []
    except Exception as exc:  # anything else of the client: said, never taken as an answer
        return [], [_not_asked(exc)]
    note = admission_policy_note(served)
    return [], [note] if note else []


def _not_asked(exc: BaseException) -> str:
    return (
        f"could not ask the API server whether it serves ValidatingAdmissionPolicy ({ADMISSION_GROUP_VERSION}), "
        f"which the admission policies of {RBAC_FILE} need: {api_failure_text(exc)}"
    )


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


def preflight(
    params: Mapping[str, Any],
    environ: Mapping[str, str],
    load: Callable[..., Any],
    discover: Optional[Callable[[str], Optional[Sequence[str]]]] = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Any]:
    """Every problem of the verify run's settings, one line each (an API server that does not answer for the
    run's ``api_patience`` among them), the checks it names, those it gives the generic role (``selected``) and
    every check it runs (``runs``; none: the run verifies nothing, needs no cluster and has no report);
    ``notes``: what the cluster cannot enforce (asked through ``discover`` once the kubeconfig loads; None: not
    asked)."""
    names = check_names(params.get("checks"))
    problems = unknown_check_problems(names)
    known = [name for name in names if name in checks.REGISTRY]
    selected = check_catalog.selected(
        [str(t) for t in params.get("run_tags") or []],
        [str(t) for t in params.get("skip_tags") or []],
        known,
        [str(c) for c in params.get("own_roles") or []],
    )
    runs = check_catalog.run_checks(
        [str(t) for t in params.get("run_tags") or []],
        [str(t) for t in params.get("skip_tags") or []],
        known,
        bool(params.get("nccl")),
    )
    problems += settings_problems(params.get("settings"), selected)
    problems += textfile_problems(params.get("metrics_textfile") or "")
    problems += pushgateway_problems(params.get("pushgateway_url") or "")
    notes: List[str] = []
    if not runs:  # a run of another stage (site.yml --tags hosts) needs no cluster here
        return {"checks": names, "selected": selected, "runs": runs, "problems": problems, "notes": notes}
    problems += kubeconfig_problems(params.get("kubeconfig") or "", params.get("kube_context") or "", environ, load)
    # the cluster is asked only of a run its settings let go on: a refused run answers at once
    if discover is not None and not problems:
        unreachable, notes = cluster_findings(discover, float(params.get("api_patience") or 0), sleep, clock)
        problems += unreachable
        notes = notes if params.get("admission_policy", True) else []
    return {"checks": names, "selected": selected, "runs": runs, "problems": problems, "notes": notes}
