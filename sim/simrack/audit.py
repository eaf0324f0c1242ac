# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a ServiceAccount asked of the API server, from the API server's own audit log.

The sim's kube-apiserver writes an audit log (``logs/audit.log``, JSON lines) at the Metadata level for
requests authenticated as a ServiceAccount, and for nothing else. Every sim component (the controller
manager, the scheduler, KWOK, the stand-ins) authenticates with the admin token, so the log holds what a
playbook did when it ran with a ServiceAccount's token, as tests and benchmarks run the stages
(docs/rbac/), and none of the sim's own traffic.

:func:`requests` reads the log into :class:`Request` rows; :func:`writes` keeps the rows that changed
something stored (a create, update, patch or delete that is neither a dry run nor a review the server
answers without storing it).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # one event per request: when the answer is complete (a watch also logs when it started)
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}

MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# created through POST and answered, never stored
REVIEWS = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
        ("authorization.k8s.io", "localsubjectaccessreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
        ("authentication.k8s.io", "tokenreviews"),
    }
)


@dataclass(frozen=True)
class Request:
    """One request as the audit log recorded it."""

    received: datetime.datetime
    user: str
    user_agent: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    dry_run: bool
    stage: str

    @property
    def what(self) -> str:
        """``patch nodes/status gb200-r0-t1`` style, for a failure message."""
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        if self.group:
            resource = f"{resource}.{self.group}"
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.verb} {resource} {where}".rstrip() + f" ({self.code}, {self.user_agent})"

    @property
    def mutating(self) -> bool:
        return self.verb in MUTATING_VERBS

    @property
    def stores(self) -> bool:
        """A request that can change what etcd holds (whether or not the server then allowed it)."""
        return self.mutating and not self.dry_run and (self.group, self.resource) not in REVIEWS


def parse_time(text: str) -> datetime.datetime:
    """An audit timestamp (RFC 3339 with microseconds, in UTC) as an aware datetime."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def to_request(event: dict[str, Any]) -> Request:
    ref = event.get("objectRef") or {}
    user_agent = event.get("userAgent") or ""
    return Request(
        received=parse_time(event["requestReceivedTimestamp"]),
        user=(event.get("user") or {}).get("username", ""),
        user_agent=user_agent.split(" ", 1)[0],
        verb=event.get("verb", ""),
        group=ref.get("apiGroup", ""),
        resource=ref.get("resource", ""),
        subresource=ref.get("subresource", ""),
        namespace=ref.get("namespace", ""),
        name=ref.get("name", ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
        dry_run="dryRun=All" in event.get("requestURI", ""),
        stage=event.get("stage", ""),
    )


def read_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The events of an audit log's lines; a line cut short by a write in progress is left out."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue


def requests(log: Path, user: Optional[str] = None, since: Optional[datetime.datetime] = None) -> list[Request]:
    """Each request (one row per request: a watch's start is left out) of ``user`` received at or after
    ``since``, oldest first."""
    if not log.exists():
        return []
    with log.open(encoding="utf-8") as handle:
        rows = [to_request(event) for event in read_events(handle) if event.get("stage") != "ResponseStarted"]
    return [row for row in rows if (user is None or row.user == user) and (since is None or row.received >= since)]


def writes(rows: Iterable[Request]) -> list[Request]:
    """The rows that could change what the cluster stores."""
    return [row for row in rows if row.stores]


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"
