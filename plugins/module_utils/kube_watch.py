# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A wait on the API server by one list and one watch, not by polling.

A poll reads every few seconds for as long as a wait lasts, so what it costs the API server grows with
the wait; and waits last longer on a busy cluster, where that cost matters most. Here a wait costs one
list and one watch per window (``WINDOW`` seconds, the watch's ``timeoutSeconds``) however long it lasts
and whatever the objects do meanwhile, as a client-go informer would. The judge sees the objects as the
watch keeps them, and is asked again after every event and at the end of every window.

A window begins with a list, so a watch the server expired (410 Gone, from a version it no longer keeps)
or one that broke (the API server restarted) starts again from what the server holds now: no event is
lost. A watch that ends at once is not opened again at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s import is_transient

WINDOW = 300.0  # seconds one watch lasts at most; the next window lists again (a resync)
RETRY_PAUSE = 1.0  # seconds before a window that follows one that ended at once

Objects = Dict[str, Dict[str, Any]]  # "namespace/name" -> the object as the API server sent it
Listing = Tuple[List[Dict[str, Any]], str]  # items, the list's resourceVersion


def key(obj: Dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def status_of(exc: BaseException) -> int:
    """The HTTP status of an API error, whichever client raised it (0: none)."""
    try:
        return int(getattr(exc, "status", 0) or 0)
    except (TypeError, ValueError):
        return 0


def worth_a_new_window(exc: BaseException) -> bool:
    """A watch that failed this way heals by listing again: the version expired (410 Gone), the server
    was busy (429, a 5xx), or the connection broke."""
    status = status_of(exc)
    return status == 410 or status == 429 or status >= 500 or is_transient(exc)


def apply_event(objects: Objects, event: Dict[str, Any]) -> bool:
    """``objects`` after one watch event; False when the event changes nothing the judge sees (a bookmark)."""
    kind = event.get("type")
    obj = event.get("raw_object")
    if not isinstance(obj, dict):
        obj = event.get("object") if isinstance(event.get("object"), dict) else None
    if kind not in ("ADDED", "MODIFIED", "DELETED") or obj is None:
        return False
    if kind == "DELETED":
        objects.pop(key(obj), None)
    else:
        objects[key(obj)] = obj
    return True


def expired_event(event: Dict[str, Any]) -> bool:
    """An ERROR event (the server's Status in the stream, 410 Gone when the version expired)."""
    return event.get("type") == "ERROR"


@dataclass
class Outcome:
    """What the judge last answered, the objects it saw, and what the wait cost the API server."""

    value: Any = None
    objects: Objects = field(default_factory=dict)
    lists: int = 0
    watches: int = 0
    events: int = 0


def until(
    list_objects: Callable[[], Listing],
    watch: Callable[[str, int], Iterable[Dict[str, Any]]],
    judge: Callable[[Objects], Any],
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    window: Union[float, Callable[[], float]] = WINDOW,
) -> Outcome:
    """Wait until ``judge`` (a function of the objects) answers something truthy, or ``deadline`` passes.

    ``list_objects`` lists (through the caller's retry of transient errors) and gives the list's
    resourceVersion; ``watch(resource_version, seconds)`` streams the events from it for ``seconds``.
    ``window`` (seconds, or a function asked before each window) bounds each watch: a judge that also
    decides on time (how long nothing happened) shortens it. Errors that a new list does not heal (403,
    a TLS failure) are raised; the caller words them.
    """
    outcome = Outcome()
    while True:
        items, version = list_objects()
        outcome.lists += 1
        outcome.objects = {key(item): item for item in items}
        outcome.value = judge(outcome.objects)
        left = deadline - clock()
        if outcome.value or left <= 0:
            return outcome
        seconds = max(1, math.ceil(min(window() if callable(window) else window, left)))
        opened = clock()
        stream = iter(watch(version, seconds))
        outcome.watches += 1
        try:
            for event in stream:
                if expired_event(event):
                    break
                if not apply_event(outcome.objects, event):
                    continue
                outcome.events += 1
                outcome.value = judge(outcome.objects)
                if outcome.value:
                    return outcome
        except Exception as exc:  # pylint: disable=broad-except
            if not worth_a_new_window(exc):
                raise
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # a generator's close ends the HTTP stream it holds
        if clock() - opened < RETRY_PAUSE and deadline - clock() > RETRY_PAUSE:
            sleep(RETRY_PAUSE)


def watch_of(client: Any) -> Callable[..., Iterable[Dict[str, Any]]]:
    """The dynamic client's ``watch``, also through kubernetes.core's ``K8SClient``, which wraps the
    ``DynamicClient`` as ``.client`` and has no ``watch`` of its own."""
    watch = getattr(client, "watch", None)
    return watch if watch is not None else client.client.watch


def pages_with_version(pages: Iterable[Dict[str, Any]]) -> Listing:
    """Every item of a paged list, with the first page's resourceVersion (the list's snapshot)."""
    items: List[Dict[str, Any]] = []
    version: Optional[str] = None
    for page in pages:
        if version is None:
            version = str((page.get("metadata") or {}).get("resourceVersion") or "")
        items.extend(page.get("items") or [])
    return items, version or ""
