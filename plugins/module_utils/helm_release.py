# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A Helm release left in a ``pending-*`` state, and what to do about it.

Helm marks a release ``pending-install`` / ``pending-upgrade`` / ``pending-rollback`` while an
operation runs, and refuses any other operation on it meanwhile ("another operation
(install/upgrade/rollback) is in progress"). A Helm client that is killed (Ctrl-C on the play, a lost
SSH session, an AWX job cancelled) leaves that mark for ever, and every later run fails on it. The mark
alone cannot tell a dead operation from a live one (another run of the same stage), so:

* a pending revision younger than ``stale_after`` (the operation's own ``--timeout`` plus a margin:
  a live Helm client gives up by then) is another run's: wait for it to end;
* an older one is a dead client's: roll back to the last good revision (``pending-upgrade`` /
  ``pending-rollback``), or uninstall a release that never had one (``pending-install``), so that the
  stage's install can run again.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import api_poll
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.times import parse_time

PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
GOOD = ("deployed", "superseded")


class HelmHistoryError(ValueError):
    """``helm history`` printed something that is not its JSON list (message: one line)."""


@dataclass(frozen=True)
class Revision:
    number: int
    status: str
    updated: Optional[datetime]
    chart: str = ""  # Helm's "<chart name>-<chart version>"
    description: str = ""
    app_version: str = ""


@dataclass(frozen=True)
class Action:
    """``none`` (nothing pending), ``wait`` (another operation is live), ``rollback`` or ``uninstall``."""

    kind: str
    message: str
    revision: Optional[int] = None  # rollback: the revision to go back to


def parse_history(text: str) -> List[Revision]:
    """``helm history <release> -o json``: the revisions, oldest first."""
    try:
        entries = json.loads(text or "[]")
    except ValueError as exc:
        raise HelmHistoryError(f"helm history printed no JSON ({exc})") from exc
    if not isinstance(entries, list):
        raise HelmHistoryError("helm history printed JSON that is not a list of revisions")
    revisions = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("revision"), int):
            raise HelmHistoryError(f"helm history printed a revision without a number: {entry!r}"[:200])
        revisions.append(
            Revision(
                number=entry["revision"],
                status=str(entry.get("status", "")),
                updated=parse_time(str(entry.get("updated", ""))),
                chart=str(entry.get("chart", "")),
                description=str(entry.get("description", "")),
                app_version=str(entry.get("app_version", "")),
            )
        )
    return sorted(revisions, key=lambda r: r.number)


def decide(release: str, revisions: List[Revision], now: datetime, stale_after: float) -> Action:
    """What the stage should do before installing or upgrading ``release``."""
    if not revisions or revisions[-1].status not in PENDING:
        return Action("none", f"release {release}: nothing pending")
    latest = revisions[-1]
    age = (now - latest.updated).total_seconds() if latest.updated else float("inf")
    what = f"release {release} revision {latest.number} ({latest.chart}) is {latest.status}"
    if age < stale_after:
        return Action(
            "wait",
            f"{what} since {age:.0f} s: another Helm operation is running on it; waiting for it to end "
            f"(it is taken as interrupted after {stale_after:.0f} s)",
        )
    good = [r for r in revisions[:-1] if r.status in GOOD]
    if good:
        target = good[-1].number
        return Action(
            "rollback",
            f"{what} since {age:.0f} s, longer than any live Helm operation takes: an interrupted one; "
            f"rolling back to revision {target}",
            revision=target,
        )
    return Action(
        "uninstall",
        f"{what} since {age:.0f} s, longer than any live Helm operation takes: an interrupted install; "
        "uninstalling it so that it can be installed again",
    )


def history_missing(stderr: str) -> bool:
    """``helm history`` of a release that does not exist (``Error: release: not found``)."""
    return "release: not found" in (stderr or "")


def summarize(revisions: List[Revision]) -> List[Any]:
    return [{"revision": r.number, "status": r.status, "chart": r.chart} for r in revisions[-5:]]


class SettleError(RuntimeError):
    """Helm's history could not be read or the repair failed (message: one line)."""


@dataclass(frozen=True)
class Settled:
    """What :func:`settle` found and did: ``action`` is ``none``, ``waited``, ``rollback`` or ``uninstall``.

    ``latest`` is the release's latest revision as the last history read showed it, when nothing was changed
    since (``None`` when there is no release, or after a rollback or uninstall: read it again then)."""

    changed: bool
    action: str
    msg: str
    revisions: List[Any] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    latest: Optional[Revision] = None


Helm = Callable[..., Tuple[int, str, str]]


def settle(
    helm: Helm,
    name: str,
    release: str,
    stale_after: float,
    poll_delay: float,
    check_mode: bool,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> Settled:
    """Wait out another run's live operation on ``name``, or repair what a dead one left pending.

    ``helm(*args)`` runs Helm in the release's namespace and returns ``(rc, stdout, stderr)``;
    ``release`` is ``namespace/name`` for the messages. Check mode reads and says, and changes nothing.
    """
    reads = 0

    def read() -> Optional[Tuple[List[Revision], Action]]:
        """The release's history and what it calls for; None when there is no release."""
        nonlocal reads
        reads += 1
        rc, out, err = helm("history", name, "--output", "json", "--max", "20")
        if rc != 0:
            if history_missing(err):
                return None
            raise SettleError(f"helm history {release} failed (rc {rc}): {one_line(err, 300)}")
        try:
            revisions = parse_history(out)
        except HelmHistoryError as exc:
            raise SettleError(f"release {release}: {exc}") from exc
        return revisions, decide(release, revisions, now(), stale_after)

    def settled(found: Optional[Tuple[List[Revision], Action]]) -> bool:
        # check mode says what it would wait for; a live operation has no deadline of ours: decide() takes it as
        # interrupted once it is older than stale_after
        return found is None or found[1].kind != "wait" or check_mode

    found = api_poll(read, settled, None, poll_delay, sleep)
    if found is None:
        return Settled(False, "none", f"release {release}: not installed")
    revisions, action = found
    summary = summarize(revisions)
    latest = revisions[-1] if revisions else None
    waited = (reads - 1) * poll_delay
    if action.kind in ("none", "wait"):  # "wait": check mode, which waits for nothing
        if not waited:
            return Settled(False, "none", action.message, summary, latest=latest)
        msg = f"release {release}: the other operation ended after {waited:.0f} s"
        return Settled(False, "waited", msg, summary, [msg], latest=latest)
    if check_mode:
        return Settled(True, action.kind, action.message, summary, latest=latest)
    if action.kind == "rollback":
        args = ["rollback", name, str(action.revision), "--wait", "--timeout", f"{stale_after:.0f}s"]
    else:
        args = ["uninstall", name, "--wait", "--timeout", f"{stale_after:.0f}s"]
    rc, _out, err = helm(*args)
    if rc != 0:
        raise SettleError(f"{action.message}; helm {args[0]} failed (rc {rc}): {one_line(err, 300)}")
    return Settled(True, action.kind, action.message, summary, [action.message])


def latest_revision(helm: Helm, name: str, release: str) -> Optional[Revision]:
    """The release's latest revision (``helm history --max 1``), ``None`` when there is no release."""
    rc, out, err = helm("history", name, "--output", "json", "--max", "1")
    if rc != 0:
        if history_missing(err):
            return None
        raise SettleError(f"helm history {release} failed (rc {rc}): {one_line(err, 300)}")
    try:
        revisions = parse_history(out)
    except HelmHistoryError as exc:
        raise SettleError(f"release {release}: {exc}") from exc
    return revisions[-1] if revisions else None


def url_credentials_problem(url: str, what: str) -> Optional[str]:
    """Why ``url`` cannot be handed to Helm: credentials in it (``https://user:pass@host``) would be on Helm's
    command line, which any local user reads in ``/proc/<pid>/cmdline``; None when it holds none."""
    try:
        parts = urllib.parse.urlsplit(str(url or ""))
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return (
        f"{what} {parts.scheme}://***@{parts.hostname or ''}{parts.path} carries credentials: they would be on Helm's "
        "command line, readable by any local user; give the URL without them and the user name and password as the "
        "repository's username and password"
    )


def repo_add_args(name: str, url: str, username: str = "", password: bool = False) -> List[str]:
    """``helm repo add`` of a named repository, the index fetched again (``--force-update``): the password, if
    any, goes on Helm's standard input (``--password-stdin``), never on its command line."""
    args = ["repo", "add", name, url, "--force-update"]
    if username:
        args += ["--username", username]
    if password:
        args.append("--password-stdin")
    return args


def connection_args(params: Mapping[str, Any]) -> List[str]:
    """Helm's global flags for the connection options kubernetes.core.helm takes (context, host,
    validate_certs, ca_cert). The kubeconfig and the bearer token go through the environment
    (``connection_env``): a command line is world-readable in ``/proc/<pid>/cmdline``."""
    args: List[str] = []
    if params.get("context"):
        args += ["--kube-context", str(params["context"])]
    if params.get("host"):
        args += ["--kube-apiserver", str(params["host"])]
    if params.get("validate_certs") is False:
        args.append("--kube-insecure-skip-tls-verify")
    if params.get("ca_cert"):
        args += ["--kube-ca-file", str(params["ca_cert"])]
    return args


def helm_connection(params: Mapping[str, Any], environ: Mapping[str, str]) -> Tuple[List[str], Dict[str, str]]:
    """Helm's flags and environment for a module that takes kubernetes.core's connection options
    (``AUTH_ARG_SPEC``, without fallbacks): each option, or else its ``K8S_AUTH_*`` variable, as
    kubernetes.core's client reads them, so that Helm talks to the cluster the module's API client does."""
    resolved = {
        "context": params.get("context") or environ.get("K8S_AUTH_CONTEXT"),
        "host": params.get("host") or environ.get("K8S_AUTH_HOST"),
        "api_key": params.get("api_key") or environ.get("K8S_AUTH_API_KEY"),
        "ca_cert": params.get("ca_cert") or environ.get("K8S_AUTH_SSL_CA_CERT"),
        "validate_certs": params.get("validate_certs"),
    }
    if resolved["validate_certs"] is None and environ.get("K8S_AUTH_VERIFY_SSL"):
        resolved["validate_certs"] = environ["K8S_AUTH_VERIFY_SSL"].strip().lower() not in ("0", "false", "no", "off")
    kubeconfig = params.get("kubeconfig")
    if not isinstance(kubeconfig, str) or not kubeconfig:
        kubeconfig = environ.get("K8S_AUTH_KUBECONFIG", "")
    return connection_args(resolved), connection_env(kubeconfig, resolved["api_key"])


def connection_env(kubeconfig: Optional[str], api_key: Optional[str]) -> Dict[str, str]:
    """Helm's environment for the kubeconfig path and the bearer token. Helm reads the token from
    ``HELM_KUBETOKEN`` as it would ``--kube-token``; a process's environment is readable only by its
    owner and root (``/proc/<pid>/environ`` is mode 0400), like a 0600 file, and leaves nothing on
    disk to remove after a crash."""
    env: Dict[str, str] = {}
    if kubeconfig:
        env["KUBECONFIG"] = kubeconfig
    if api_key:
        env["HELM_KUBETOKEN"] = str(api_key)
    return env
