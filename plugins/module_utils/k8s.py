# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes helpers shared by the collection's Kubernetes-facing modules.

The connection itself comes from kubernetes.core (``get_api_client``), so kubeconfig, context,
host, api_key, validate_certs and the ``K8S_AUTH_*`` variables behave exactly as in kubernetes.core.
What lives here: making the client under the same retries as every call (:func:`connect`), paginated
listing, reading an object that may be absent, one clean line for a failed call, and short summaries of
workloads for failure messages.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type, TypeVar, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import retry as _retry

try:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError
except ImportError:  # reported by AnsibleK8SModule's requires("kubernetes")

    class DynamicApiError(Exception):  # type: ignore[no-redef]
        pass

    NotFoundError = ResourceNotFoundError = DynamicApiError  # type: ignore[assignment,misc]

try:
    # what a watch raises for an error the API server sends inside its stream (410 Gone)
    from kubernetes.client.exceptions import ApiException  # pylint: disable=unused-import  # re-exported
except ImportError:

    class ApiException(Exception):  # type: ignore[no-redef]
        pass


try:
    from urllib3.exceptions import HTTPError as Urllib3Error
    from urllib3.exceptions import MaxRetryError, NewConnectionError
    from urllib3.exceptions import SSLError as Urllib3SSLError
    from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
except ImportError:  # urllib3 comes with the kubernetes client

    class Urllib3Error(Exception):  # type: ignore[no-redef]
        pass

    MaxRetryError = NewConnectionError = Urllib3SSLError = Urllib3TimeoutError = Urllib3Error  # type: ignore[assignment,misc]

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 500
# Accept header of a list that returns each item's metadata alone (names, labels, annotations). A server
# that cannot answer so sends the whole objects: the second media type.
PARTIAL_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"


# kubernetes.core's connection options that hold a credential. kubernetes.core marks ``kubeconfig``
# no_log from 5.1.0 on, while the collection accepts 5.0.0: a kubeconfig given as a mapping (its token,
# its client key) would be printed with the module's arguments under -vvv.
SECRET_AUTH_OPTIONS = ("kubeconfig", "api_key", "password")


def auth_argument_spec(base: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """kubernetes.core's connection options (``AUTH_ARG_SPEC``, or ``base``) for a module's argument spec,
    each that holds a credential (``SECRET_AUTH_OPTIONS``) no_log whatever kubernetes.core's version says."""
    if base is None:
        from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC

        base = AUTH_ARG_SPEC
    spec = {name: dict(option) for name, option in base.items()}
    for name in SECRET_AUTH_OPTIONS:
        if name in spec:
            spec[name]["no_log"] = True
    return spec


def to_dict(obj: Any) -> Dict[str, Any]:
    """A dynamic-client ResourceInstance (or a dict) as a plain dict."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    return obj.to_dict()


def resource_api(client: Any, api_version: str, kind: str) -> Any:
    """The dynamic-client resource for ``kind`` in ``api_version`` (kubernetes.core's lookup)."""
    return client.resource(kind, api_version)


def first_served_resource(client: Any, kind: str, api_versions: Sequence[str]) -> Optional[Any]:
    """The resource for the first of ``api_versions`` the server serves, or None."""
    for api_version in api_versions:
        try:
            return client.resource(kind, api_version)
        except ResourceNotFoundError:
            continue
    return None


def iter_pages(
    list_page: Callable[..., Any], limit: int = DEFAULT_PAGE_SIZE, **params: Any
) -> Iterator[Dict[str, Any]]:
    """Yield every item of a list call, following ``metadata.continue`` page by page."""
    for page in iter_page_dicts(list_page, limit, **params):
        yield from page.get("items") or []


def iter_page_dicts(
    list_page: Callable[..., Any], limit: int = DEFAULT_PAGE_SIZE, **params: Any
) -> Iterator[Dict[str, Any]]:
    """Yield each page of a list call as a dict (its ``metadata`` holds the list's resourceVersion)."""
    token: Optional[str] = None
    while True:
        kwargs = dict(params, limit=limit)
        if token:
            kwargs["_continue"] = token
        page = to_dict(list_page(**kwargs))
        yield page
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def list_all(
    client: Any,
    api_version: str,
    kind: str,
    namespace: Optional[str] = None,
    label_selector: Optional[str] = None,
    limit: int = DEFAULT_PAGE_SIZE,
    metadata_only: bool = False,
) -> List[Dict[str, Any]]:
    """Every object of a kind, read in pages of ``limit`` (large clusters list in chunks).

    With ``metadata_only`` the items are ``PartialObjectMetadata`` (``metadata`` alone), which is
    what a grouping by labels needs, at a fraction of the bytes.
    """
    resource = resource_api(client, api_version, kind)
    params: Dict[str, Any] = {}
    if namespace:
        params["namespace"] = namespace
    if label_selector:
        params["label_selector"] = label_selector
    if metadata_only:
        params["header_params"] = {"Accept": PARTIAL_METADATA_LIST}
    return list(iter_pages(lambda **kw: json_page(client.get(resource, serialize=False, **kw)), limit=limit, **params))


def json_page(response: Any) -> Dict[str, Any]:
    """A list response as plain dicts, parsed straight from its JSON body.

    Asked with ``serialize=False``, the dynamic client returns the HTTP response instead of wrapping
    every field of every item in its ``ResourceInstance``/``ResourceField`` objects, the cost that
    grows with the fleet (a Node list of 1,152 trays). A dict or a ``ResourceInstance`` (what a
    client answers that ignores ``serialize``) is converted as before.
    """
    data = getattr(response, "data", None)
    if not isinstance(data, (bytes, str)):
        return to_dict(response)
    page = json.loads(data)
    # The API server leaves kind and apiVersion off a list's items; name them as the client's model does,
    # since what reads the items (workload_summary, the checks' diagnostics) tells kinds apart by them.
    kind, api_version = str(page.get("kind") or ""), page.get("apiVersion")
    if kind.endswith("List"):
        for item in page.get("items") or []:
            if isinstance(item, dict):
                item.setdefault("kind", kind[: -len("List")])
                if api_version:
                    item.setdefault("apiVersion", api_version)
    return page


def list_served(
    client: Any, api_version: str, kind: str, label_selector: Optional[str] = None, namespace: Optional[str] = None
) -> List[Dict[str, Any]]:
    """Every object of a kind, or none when the cluster does not serve the kind.

    A CRD deleted since the client's discovery cache was written still resolves, and its list answers
    404: that is "none" too (the uninstall deletes CRDs, and the next run reads the same kinds).
    """
    try:
        return list_all(client, api_version, kind, namespace=namespace, label_selector=label_selector)
    except (ResourceNotFoundError, NotFoundError):
        return []


def get_object(client: Any, resource: Any, name: str, namespace: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The object as a dict, or None when it does not exist."""
    try:
        return to_dict(client.get(resource, name=name, namespace=namespace))
    except NotFoundError:
        return None


def is_transient(exc: BaseException) -> bool:
    """Worth another try: 429, a 5xx, or no answer at all (connection refused or reset, a timeout).

    Not transient: every other status, a TLS failure (the client reports one as status 0, or as the
    reason of urllib3's MaxRetryError; a certificate does not heal by waiting), and anything else.
    An error raised from a transient one (``raise ... from exc``, as the ComputeDomain helpers do) is
    transient too.
    """
    if isinstance(exc, DynamicApiError):
        status = int(getattr(exc, "status", None) or 0)
        return status == 429 or status >= 500
    if isinstance(exc, MaxRetryError):
        return not isinstance(getattr(exc, "reason", None), Urllib3SSLError)
    if isinstance(exc, Urllib3SSLError):
        return False
    if isinstance(exc, (Urllib3Error, ConnectionError, TimeoutError)):
        return True
    return exc.__cause__ is not None and is_transient(exc.__cause__)


# What a read or a call raises when the API server refused it or gave no answer; ``is_transient`` says which of
# these are worth another try.
API_ERRORS = (DynamicApiError, Urllib3Error, ConnectionError, TimeoutError)


# The collection's one rule for waiting and retrying (``retry.poll``, ``retry.retry``), with the API's errors:
# a read or call that fails transiently is tried again, any other API error propagates at once.
def api_poll(
    read: Callable[[], T],
    done: Callable[[T], bool],
    timeout: Optional[float],
    delay: Union[float, _retry.Backoff],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    transient: Callable[[BaseException], bool] = is_transient,
    *,
    attempts: int = 0,
    started: Optional[float] = None,
    errors: Tuple[Type[BaseException], ...] = API_ERRORS,
) -> T:
    """``retry.poll`` with the API's errors: a read that fails transiently is read again."""
    return _retry.poll(
        read, done, timeout, delay, sleep, clock, transient, attempts=attempts, started=started, errors=errors
    )


def api_retry(
    call: Callable[[], T],
    patience: Optional[float],
    delay: Union[float, _retry.Backoff],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    transient: Callable[[BaseException], bool] = is_transient,
    *,
    attempts: int = 0,
    started: Optional[float] = None,
    errors: Tuple[Type[BaseException], ...] = API_ERRORS,
) -> T:
    """``retry.retry`` with the API's errors: a call that fails transiently is tried again."""
    return _retry.retry(
        call, patience, delay, sleep, clock, transient, attempts=attempts, started=started, errors=errors
    )


def api_error_text(exc: BaseException, limit: int = 300) -> str:
    """One clean line for a failed API call: ``<status> <reason>: <the server's message>``.

    Never the client's ``str()`` of the error, which carries the HTTP response headers and the raw
    body over several lines; a body that is not a Status object (a proxy's HTML page) gives its
    words without the markup. Anything else: the exception's first line.
    """
    status = getattr(exc, "status", None)
    if status is None:
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        return _cut(first, limit)
    reason = str(getattr(exc, "reason", "") or "").strip()
    message = _body_message(getattr(exc, "body", None))
    head = f"{status} {reason}".strip()
    return _cut(f"{head}: {message}" if message else head, limit)


def _body_message(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body.strip():
        return ""
    try:
        parsed = json.loads(body)
    except ValueError:
        return " ".join(re.sub(r"<[^>]*>", " ", body).split())  # an HTML error page: its words
    if isinstance(parsed, dict) and parsed.get("message"):
        return " ".join(str(parsed["message"]).split())
    return " ".join(body.split())


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


_ERRNO_TEXT = re.compile(r"\[Errno -?\d+\]\s*([^'\")\]]+)")
_SSL_TEXT = re.compile(r"\[SSL(?:: [A-Z_]+)?\]\s*([^(]+)")


class ApiUnreachable(Exception):
    """The API server did not answer (or kept refusing) for the whole patience; the message is one line."""


def api_endpoint(exc: BaseException) -> str:
    """``https://host:port`` of the connection pool behind a urllib3 error, or empty."""
    pool = getattr(exc, "pool", None)
    host = getattr(pool, "host", None)
    if not host:
        return ""
    port = getattr(pool, "port", None)
    return f"{getattr(pool, 'scheme', None) or 'https'}://{host}" + (f":{port}" if port else "")


def connection_reason(exc: BaseException) -> str:
    """Why a connection got no answer, in a few words: ``connection refused``, ``name or service not known``,
    ``timed out``, ``TLS: certificate verify failed ...``; never urllib3's repr of its objects."""
    reason = getattr(exc, "reason", None) if isinstance(exc, MaxRetryError) else exc
    reason = reason if isinstance(reason, BaseException) else exc
    causes = [reason, reason.__cause__, reason.__context__, *[a for a in reason.args if isinstance(a, BaseException)]]
    text = " ".join(str(c) for c in causes if c is not None)
    if isinstance(reason, Urllib3SSLError) or "[SSL" in text:
        found = _SSL_TEXT.search(text)
        return _cut(f"TLS: {found.group(1).strip() if found else text}", 200)
    for cause in causes:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.strip().lower()
    found = _ERRNO_TEXT.search(text)
    if found:
        return found.group(1).strip().lower()
    # urllib3 2 makes NewConnectionError a ConnectTimeoutError: a refusal without errno is not a timeout
    if isinstance(reason, (Urllib3TimeoutError, TimeoutError)) and not isinstance(reason, NewConnectionError):
        return "timed out"
    first = next((line.strip() for line in str(reason).splitlines() if line.strip()), type(reason).__name__)
    first = re.sub(r"<urllib3\.[^>]*>:?\s*|^(None|\w*Connection(Pool)?\([^)]*\)):\s*", "", first)
    return _cut(first[:1].lower() + first[1:], 200)


def api_failure_text(exc: BaseException, waited: float = 0.0, endpoint: str = "") -> str:
    """One line for a call that failed for good: the server's answer (:func:`api_error_text`), or where the
    call went, for how long it was tried and why nothing answered: ``cannot reach the Kubernetes API at
    https://10.0.0.1:6443 for 90 s: connection refused``."""
    if isinstance(exc, DynamicApiError):
        return api_error_text(exc)
    if not isinstance(exc, (Urllib3Error, ConnectionError, TimeoutError)):
        return api_error_text(exc)
    where = api_endpoint(exc) or endpoint
    at = f" at {where}" if where else ""
    span = f" for {waited:.0f} s" if waited >= 1 else ""
    return f"cannot reach the Kubernetes API{at}{span}: {connection_reason(exc)}"


def retry(
    call: Callable[[], Any],
    patience: float,
    what: str = "",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    delay: float = 2.0,
) -> Any:
    """``call()``, tried again while it fails transiently (:func:`is_transient`) for ``patience`` seconds
    (:data:`api_retry`); a failure that stays, or one not worth a retry, raises :class:`ApiUnreachable`
    with one line (``<what>: `` first when given)."""
    started = clock()
    try:
        return api_retry(call, patience, delay, sleep, clock, started=started)
    # no answer, or one worth waiting out (API_ERRORS: a tuple of exception classes)
    except API_ERRORS as exc:  # pylint: disable=catching-non-exception
        line = api_failure_text(exc, clock() - started)
        raise ApiUnreachable(f"{what}: {line}" if what else line) from exc


def connect(
    make_client: Callable[[], Any],
    patience: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """The API client from ``make_client`` (kubernetes.core's ``get_api_client``, which reads ``/version``
    and the API groups unless the discovery cache holds them), made under the same retries as every call:
    an API server that does not answer yet is waited for ``patience`` seconds, then :class:`ApiUnreachable`
    says where and why in one line. A wrong kubeconfig (kubernetes.core's ``CoreException``) goes to the
    caller as it is."""
    return retry(make_client, patience, sleep=sleep, clock=clock)


def workload_summary(obj: Dict[str, Any]) -> str:
    """``Deployment ns/name 1/1 ready`` style line for a Deployment or DaemonSet."""
    kind = obj.get("kind", "")
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if kind == "DaemonSet":
        desired = status.get("desiredNumberScheduled", 0)
        ready = status.get("numberReady", 0)
    else:
        desired = (obj.get("spec") or {}).get("replicas", 1)
        ready = status.get("readyReplicas", 0)
    return f"{kind} {meta.get('namespace')}/{meta.get('name')} {ready or 0}/{desired or 0} ready"


def pod_summary(pod: Dict[str, Any]) -> str:
    """``pod name on node: phase (container: waiting reason)`` for failure messages."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    details = []
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = container.get("state") or {}
        for key in ("waiting", "terminated"):
            reason = (state.get(key) or {}).get("reason")
            if reason:
                details.append(f"{container.get('name')}: {reason}")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            details.append(f"unschedulable: {condition.get('message', '')}".strip())
    text = f"pod {meta.get('name')} on {spec.get('nodeName') or 'no node'}: {status.get('phase', 'Unknown')}"
    return text + (f" ({'; '.join(details)})" if details else "")
