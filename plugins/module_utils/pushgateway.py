# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Push metrics to a Prometheus Pushgateway: the group's URL and one PUT, retried under the collection's rule.

A PUT to ``<url>/metrics/job/<job>[/<label>/<value>...]`` replaces every metric of that group, so a verdict
that is gone (a tray removed, a check no longer run) does not linger. A value that is empty or holds a ``/``
is sent base64url-encoded (``<label>@base64/<value>``), as the Pushgateway's API asks. A connection failure,
a timeout, 429 or a 5xx answer is tried again (``retry.retry``, a ``Backoff``); any other answer fails at
once. The failure is one line naming the URL; the HTTP call is injected, so tests need no Ansible.

Credentials go through the module's ``no_log`` options only (``username``/``password`` or ``bearer_token``): a URL
that carries them and an ``Authorization`` among the plain ``headers`` are refused before anything is sent.
"""

from __future__ import annotations

import base64
import http.client
import re
import time
import urllib.error
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote, urlsplit

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import Backoff, retry
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DEFAULT_JOB = "gpu_fabric_verify"
# 1 s, 2 s, 4 s, ... at most 10 s between two tries
PUSH_BACKOFF = Backoff(1.0, 2.0, 10.0)
# How much of an answer's body a message quotes (the Pushgateway explains a refused push in it).
BODY_LIMIT = 300
ERRORS: Tuple[type, ...] = (OSError, http.client.HTTPException)  # urllib's URLError and HTTPError are OSErrors


class PushError(Exception):
    """The metrics could not be pushed; one line naming the URL and what to do."""


@dataclass(frozen=True)
class PushTarget:
    """Where and how to push: the Pushgateway's base URL, the group and the HTTP options."""

    url: str
    job: str = DEFAULT_JOB
    grouping: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    username: Optional[str] = None
    password: Optional[str] = None
    bearer_token: Optional[str] = None
    validate_certs: bool = True
    timeout: float = 30.0
    attempts: int = 4


def _segment(name: str, value: str) -> str:
    """``/<name>/<value>``, or ``/<name>@base64/<base64url value>`` for a value URL paths cannot carry."""
    if not value or "/" in value:
        encoded = base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii") or "="
        return f"/{name}@base64/{encoded}"
    return f"/{name}/{quote(value, safe='')}"


def group_url(target: PushTarget) -> str:
    """The group's URL: ``<url>/metrics/job/<job>`` and a segment per grouping label, in name order."""
    return (
        target.url.rstrip("/")
        + "/metrics"
        + _segment("job", target.job)
        + "".join(_segment(name, str(target.grouping[name])) for name in sorted(target.grouping))
    )


# Where a push's credentials are given: the module's no_log options and the report role's variables that feed them.
CREDENTIAL_OPTIONS = (
    "username and password (report_pushgateway_username, report_pushgateway_password) or bearer_token "
    "(report_pushgateway_bearer_token)"
)


def _userinfo(url: str) -> Tuple[Optional[str], Optional[str]]:
    try:
        parts = urlsplit(str(url or ""))
    except ValueError:
        return None, None
    return parts.username, parts.password


def given_secrets(url: str, headers: Optional[Mapping[str, Any]]) -> Tuple[str, ...]:
    """The secrets a caller put where no ``no_log`` covers them: the password of a URL's userinfo (its user name
    when it has no password: a token given as the user), and the value of an ``Authorization`` header.

    The module adds them to what Ansible masks, so the refusal (``target_problems``) that follows shows none of
    them, not even in the arguments ``-vvv`` prints.
    """
    username, password = _userinfo(url)
    found = [password if password else username]
    found += [str(value) for name, value in (headers or {}).items() if str(name).lower() == "authorization"]
    return tuple(secret for secret in found if secret)


def _credentials_problem(target: PushTarget) -> str:
    # Refused, not redacted: the docs never promised a URL with credentials (pushgateway_url is a base URL), and the
    # URL goes into the result (push_url), every message and warning, urllib's own errors and the arguments -vvv
    # shows; masking it in each of those is a rule in many places, where a refusal keeps the secret out of all of them.
    # chart_release refuses a chart repository URL with credentials the same way.
    username, password = _userinfo(target.url)
    if username is not None or password is not None:
        parts = urlsplit(target.url)
        host = parts.netloc.rpartition("@")[2]
        return (
            f"pushgateway_url {parts.scheme}://***@{host}{parts.path} carries credentials, which "
            f"would show in the task's result, its messages and its -vvv arguments; give the URL without them and "
            f"the credentials as {CREDENTIAL_OPTIONS}"
        )
    if any(str(name).lower() == "authorization" for name in target.headers):
        return (
            "headers holds Authorization, whose value would show in the task's arguments (-vvv); remove it from "
            f"headers (report_pushgateway_headers) and give the credentials as {CREDENTIAL_OPTIONS}"
        )
    if target.bearer_token and (target.username or target.password):
        return (
            "both bearer_token and username/password are set, and a push carries one Authorization; set "
            "bearer_token (report_pushgateway_bearer_token) or username and password, not both"
        )
    if target.password and not target.username:
        return (
            "password is set without username, so no basic authentication would be sent; set username "
            "(report_pushgateway_username) too"
        )
    return ""


def target_problems(target: PushTarget, metric_labels: Sequence[str]) -> str:
    """What is wrong with ``target`` before anything is sent (one line), or ``''``.

    A grouping label that a pushed sample also carries would be refused by the Pushgateway for every sample
    whose value differs, so those names are refused here, naming them. Credentials anywhere but the ``no_log``
    options are refused, naming none of them.
    """
    credentials = _credentials_problem(target)
    if credentials:
        return credentials
    parts = urlsplit(target.url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"pushgateway_url {target.url!r} is not an http(s) URL; expected e.g. http://pushgateway.monitoring:9091"
    if not target.job:
        return "the Pushgateway job is empty; set it (default gpu_fabric_verify)"
    bad = sorted(name for name in target.grouping if not LABEL_NAME.match(name) or name == "job")
    if bad:
        return (
            f"grouping label names {', '.join(bad)} are not allowed; use Prometheus label names "
            "([a-zA-Z_][a-zA-Z0-9_]*) other than job"
        )
    clash = sorted(set(target.grouping) & set(metric_labels))
    if clash:
        return (
            f"grouping labels {', '.join(clash)} are also labels of the pushed metrics "
            f"({', '.join(metric_labels)}); choose other names, e.g. site or fleet"
        )
    return ""


def is_transient(exc: BaseException) -> bool:
    """Whether a failed push may succeed when tried again: no answer, a timeout, 429 or a 5xx."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code == 429 or exc.code >= 500
    return isinstance(exc, ERRORS)


def _body(exc: urllib.error.HTTPError) -> str:
    try:
        return one_line(exc.read().decode("utf-8", "replace"), BODY_LIMIT, "...")
    except (OSError, http.client.HTTPException, AttributeError):
        return ""


def failure_message(url: str, exc: BaseException, tries: int) -> str:
    """One line: the URL, what answered (or did not) and, for a refusal, the Pushgateway's own words."""
    after = f" (after {tries} tries)" if tries > 1 else ""
    if isinstance(exc, urllib.error.HTTPError):
        body = _body(exc)
        said = f": {body}" if body else ""
        return f"the Pushgateway at {url} answered HTTP {exc.code} {one_line(exc.reason)}{said}{after}"
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return (
        f"cannot push the metrics to {url}: {one_line(reason) or type(exc).__name__}{after}; "
        "check that the Pushgateway runs and the URL (pushgateway_url) is right"
    )


Opener = Callable[..., Any]  # ansible.module_utils.urls.open_url's signature


def push(
    target: PushTarget,
    text: str,
    content_type: str,
    opener: Opener,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Any]:
    """PUT ``text`` to the group of ``target`` with ``opener`` (``open_url``), retried while it fails transiently.

    Returns ``{"url", "status", "tries"}``; raises PushError with one line when the last try fails.
    """
    url = group_url(target)
    headers = {"Content-Type": content_type, **dict(target.headers)}
    if target.bearer_token:
        headers["Authorization"] = f"Bearer {target.bearer_token}"
    tries = 0

    def put() -> int:
        nonlocal tries
        tries += 1
        response = opener(
            url,
            data=text.encode("utf-8"),
            method="PUT",
            headers=headers,
            url_username=target.username,
            url_password=target.password,
            force_basic_auth=bool(target.username),
            validate_certs=target.validate_certs,
            timeout=target.timeout,
        )
        try:
            return int(response.getcode())
        finally:
            response.close()

    try:
        status = retry(
            put,
            None,
            PUSH_BACKOFF,
            sleep,
            clock,
            is_transient,
            attempts=max(target.attempts, 1),
            errors=ERRORS,
        )
    except ERRORS as exc:  # pylint: disable=catching-non-exception
        raise PushError(failure_message(url, exc, tries)) from exc
    return {"url": url, "status": status, "tries": tries}
