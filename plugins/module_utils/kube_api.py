# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes call layer of a verification run: each call retried while it fails transiently, each wait
one list and one watch (``kube_watch``), each failure one line, and the rights of an identity as RBAC grants
them. The checks (``fleet``) call the API server through this alone."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import (
    ApiException,
    DynamicApiError,
    NotFoundError,
    ResourceNotFoundError,
    Urllib3Error,
    api_failure_text,
    api_retry,
    get_object,
    is_transient,
    iter_page_dicts,
    iter_pages,
    json_page,
    to_dict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.retry import Backoff
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rights import Right
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

# The pauses between two tries of a call: 1, 2, 4, 8, then 10 s until the patience is spent.
API_BACKOFF = Backoff(1.0, 2.0, 10.0)
# What a call may raise that is worth another try when transient: an API error or no answer (and a helper's own
# errors raised from one of these, which the caller names: ``Api.call``'s ``wrapped``).
CALL_ERRORS: Tuple[Type[BaseException], ...] = (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError)


class ApiUnavailable(Exception):
    """An API call still failed after the retries (message: what and why, one line)."""


def refused(exc: ApiUnavailable) -> bool:
    """Whether the API server refused the call for its identity (401 or 403), rather than failing it."""
    return getattr(exc.__cause__, "status", None) in (401, 403)


def error_text(exc: BaseException, waited: float = 0.0, endpoint: str = "") -> str:
    """One line for an API failure: the server's status, or where the call went, for how long and why nothing
    answered (``k8s.api_failure_text``); never urllib3's text."""
    if isinstance(exc, (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError)):
        return one_line(api_failure_text(exc, waited, endpoint))[:300]
    return one_line(f"{type(exc).__name__}: {exc}")[:300]


class Api:
    """The Kubernetes calls of a run; every call retries transient failures until ``patience`` runs out."""

    def __init__(
        self,
        client: Any,
        patience: float = 90.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.patience = patience
        self.sleep = sleep
        self.clock = clock
        self._resources: Dict[Tuple[str, str], Any] = {}
        self._answers: Dict[Tuple[Right, str], bool] = {}
        self._username = ""
        self._lock = threading.Lock()

    def call(self, what: str, fn: Callable[[], Any], wrapped: Tuple[Type[BaseException], ...] = ()) -> Any:
        """``fn()`` under ``k8s.api_retry`` (``API_BACKOFF``, for ``patience`` seconds); a failure that stays, or
        one not worth a retry, is :class:`ApiUnavailable` naming ``what``. ``wrapped``: a helper's own errors
        (``compute_domain.ComputeDomainError``): one raised from a transient error is retried too; one that failed
        for another reason goes to the caller as it is."""
        started = self.clock()
        errors = CALL_ERRORS + wrapped
        try:
            return api_retry(fn, self.patience, API_BACKOFF, self.sleep, self.clock, started=started, errors=errors)
        except errors as exc:
            if wrapped and isinstance(exc, wrapped) and not is_transient(exc):
                raise
            endpoint = str(getattr(getattr(self.client, "configuration", None), "host", "") or "")
            raise ApiUnavailable(f"{what}: {error_text(exc, self.clock() - started, endpoint)}") from exc

    def resource(self, kind: str, api_version: str) -> Any:
        key = (kind, api_version)
        with self._lock:  # discovery is not thread-safe; resolve each kind once
            if key not in self._resources:
                try:
                    self._resources[key] = self.call(
                        f"look up {kind} in {api_version}", lambda: self.client.resource(kind, api_version)
                    )
                except ResourceNotFoundError as exc:
                    # kept too: each miss makes the client rediscover the whole API, which races with the
                    # racks' other threads (resource.k8s.io/v1 is missed on every call on Kubernetes 1.33)
                    self._resources[key] = exc
            found = self._resources[key]
            if isinstance(found, ResourceNotFoundError):
                raise found
            return found

    def served(self, kind: str, api_version: str) -> bool:
        """Whether the server serves the kind (a CRD that is not installed: False)."""
        try:
            self.resource(kind, api_version)
            return True
        except ResourceNotFoundError:
            return False

    def get(self, kind: str, api_version: str, name: str, namespace: Optional[str] = None) -> Optional[Dict[str, Any]]:
        resource = self.resource(kind, api_version)
        return self.call(
            f"read {kind} {namespace + '/' if namespace else ''}{name}",
            lambda: get_object(self.client, resource, name, namespace),
        )

    def list(
        self, kind: str, api_version: str, namespace: Optional[str] = None, label_selector: str = ""
    ) -> List[Dict[str, Any]]:
        resource = self.resource(kind, api_version)
        params: Dict[str, Any] = {"namespace": namespace} if namespace else {}
        if label_selector:
            params["label_selector"] = label_selector
        what = f"list {kind}" + (f" in {namespace}" if namespace else "")
        # each page is one call, retried on its own: a restart between pages does not lose the pages read
        return list(
            iter_pages(
                lambda **page: self.call(what, lambda: json_page(self.client.get(resource, serialize=False, **page))),
                **params,
            )
        )

    def watch_until(
        self,
        kind: str,
        api_version: str,
        namespace: str,
        judge: Callable[[kube_watch.Objects], Any],
        deadline: float,
        label_selector: str = "",
        name: str = "",
        window: Union[float, Callable[[], float]] = kube_watch.WINDOW,
    ) -> kube_watch.Outcome:
        """Wait on the objects of a kind in ``namespace`` (those of ``label_selector``, or the one ``name``)
        until ``judge`` answers something truthy or ``deadline`` passes: one list and one watch per window
        (``kube_watch.until``), each list retried as every call is."""
        resource = self.resource(kind, api_version)
        params: Dict[str, Any] = {"namespace": namespace}
        if label_selector:
            params["label_selector"] = label_selector
        if name:
            params["field_selector"] = f"metadata.name={name}"
        what = f"{kind} {namespace}/{name}" if name else f"{kind} in {namespace}"

        def list_objects() -> kube_watch.Listing:
            return kube_watch.pages_with_version(
                iter_page_dicts(
                    lambda **page: self.call(
                        f"list {what}", lambda: json_page(self.client.get(resource, serialize=False, **page))
                    ),
                    **params,
                )
            )

        def watch(version: str, seconds: int) -> Any:
            return kube_watch.watch_of(self.client)(
                resource, resource_version=version or None, timeout=seconds, **params
            )

        try:
            return kube_watch.until(list_objects, watch, judge, deadline, self.clock, self.sleep, window)
        except (DynamicApiError, ApiException, Urllib3Error, ConnectionError, TimeoutError) as exc:
            endpoint = str(getattr(getattr(self.client, "configuration", None), "host", "") or "")
            raise ApiUnavailable(f"watch {what}: {error_text(exc, 0.0, endpoint)}") from exc

    def create(self, body: Dict[str, Any]) -> Dict[str, Any]:
        kind, meta = body["kind"], body["metadata"]
        resource = self.resource(kind, body["apiVersion"])
        namespace = meta.get("namespace")

        def create() -> Dict[str, Any]:
            try:
                return to_dict(self.client.create(resource, body, namespace=namespace))
            except DynamicApiError as exc:
                if int(getattr(exc, "status", 0) or 0) == 409:  # left by an earlier try of this call
                    return self.get(kind, body["apiVersion"], meta["name"], namespace) or {}
                raise

        return self.call(f"create {kind} {namespace + '/' if namespace else ''}{meta['name']}", create)

    def delete(
        self, kind: str, api_version: str, name: str, namespace: Optional[str] = None, propagation: str = "Background"
    ) -> None:
        resource = self.resource(kind, api_version)

        def delete() -> None:
            with contextlib.suppress(NotFoundError):
                self.client.delete(resource, name=name, namespace=namespace, body={"propagationPolicy": propagation})

        self.call(f"delete {kind} {namespace + '/' if namespace else ''}{name}", delete)

    def can(self, right: Right, namespace: str, again: bool = False) -> bool:
        """Whether the identity of the run holds ``right`` in ``namespace`` (a SelfSubjectAccessReview, which
        every authenticated user may create); each answer is asked once per run, unless ``again`` (a grant just
        made, waited for until the authorizer holds it)."""
        key = (right, namespace)
        with self._lock:
            if key in self._answers and not again:
                return self._answers[key]
        resource = self.resource("SelfSubjectAccessReview", "authorization.k8s.io/v1")
        attributes = {"namespace": namespace, "verb": right.verb, "group": right.group, "resource": right.resource}
        if right.subresource:
            attributes["subresource"] = right.subresource
        if right.resource == "namespaces":
            attributes["name"] = namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        review = self.call(
            f"ask whether this identity may {right} in namespace {namespace}",
            lambda: to_dict(self.client.create(resource, body)),
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        with self._lock:
            self._answers[key] = allowed
        return allowed

    def username(self) -> str:
        """The user name the API server knows this identity by (a SelfSubjectReview, which every authenticated
        user may create), e.g. ``system:serviceaccount:gpu-fabric:gpu-fabric-verify``; asked once per run."""
        with self._lock:
            if self._username:
                return self._username
        resource = self.resource("SelfSubjectReview", "authentication.k8s.io/v1")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        review = self.call("ask who this identity is", lambda: to_dict(self.client.create(resource, body)))
        name = str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")
        if not name:
            raise ApiUnavailable("ask who this identity is: the SelfSubjectReview names no user")
        with self._lock:
            self._username = name
        return name

    def log(self, pod: str, namespace: str) -> str:
        resource = self.resource("Pod", "v1")
        response = self.call(
            f"read the log of pod {namespace}/{pod}",
            lambda: resource.log.get(name=pod, namespace=namespace, serialize=False),
        )
        return response.data.decode("utf-8", errors="replace")
