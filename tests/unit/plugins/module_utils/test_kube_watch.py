# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A wait by one list and one watch: what it costs, and how it heals an expired or broken watch."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import kube_watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError
from urllib3.exceptions import ProtocolError


def pod(name: str, phase: str = "Pending", version: str = "1") -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "v", "resourceVersion": version}, "status": {"phase": phase}}


def event(kind: str, obj: Dict[str, Any]) -> Dict[str, Any]:
    return {"type": kind, "raw_object": obj, "object": object()}  # the client's ResourceInstance is never read


class Server:
    """What the API server answers: ``listings`` one per list, ``streams`` one per watch (a list of events,
    or an exception raised after them); a clock that moves ``seconds`` per watch that ends by its timeout."""

    def __init__(self, listings: List[List[Dict[str, Any]]], streams: List[Any]) -> None:
        self.listings, self.streams = listings, streams
        self.now = 0.0
        self.lists = 0
        self.watched: List[tuple] = []
        self.slept: List[float] = []

    def list(self):
        self.lists += 1
        items = self.listings.pop(0)
        return items, f"rv{self.lists}"

    def watch(self, version: str, seconds: int):
        self.watched.append((version, seconds))
        stream = self.streams.pop(0) if self.streams else []
        failure = None
        if isinstance(stream, tuple):
            stream, failure = stream
        yield from stream
        if failure is not None:
            raise failure
        self.now += seconds  # the server ended the watch at its timeoutSeconds

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def all_running(objects):
    return bool(objects) and all(o["status"]["phase"] == "Running" for o in objects.values())


def wait(server: Server, judge=all_running, deadline: float = 900.0, window: Any = kube_watch.WINDOW):
    return kube_watch.until(server.list, server.watch, judge, deadline, server.clock, server.sleep, window)


def test_a_wait_costs_one_list_and_one_watch_however_many_changes_it_sees():
    changes = [event("MODIFIED", pod(f"p{i}", "Running")) for i in range(18)]
    server = Server([[pod(f"p{i}") for i in range(18)]], [changes])

    outcome = wait(server)

    assert outcome.value is True
    assert (outcome.lists, outcome.watches, outcome.events) == (1, 1, 18)
    assert server.watched == [("rv1", 300)]  # from the list's version, for one window


def test_what_is_already_true_costs_one_list_and_no_watch():
    server = Server([[pod("p0", "Running")]], [])
    assert (wait(server).watches, server.watched) == (0, [])


def test_added_and_deleted_objects_are_followed_and_bookmarks_change_nothing():
    stream = [
        event("ADDED", pod("p1")),
        {"type": "BOOKMARK", "raw_object": {"metadata": {"resourceVersion": "9"}}},
        event("DELETED", pod("p0")),
    ]
    server = Server([[pod("p0")]], [stream])
    seen = []

    outcome = wait(server, lambda objects: seen.append(sorted(objects)) or sorted(objects) == ["v/p1"])

    assert outcome.value is True
    assert seen == [["v/p0"], ["v/p0", "v/p1"], ["v/p1"]]  # asked after the list and after each change


def test_an_expired_watch_lists_again_and_loses_no_change():
    # the version the list gave is gone (410) before the pod ran: the next list has the pod Running
    expired = {"type": "ERROR", "raw_object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    server = Server([[pod("p0")], [pod("p0", "Running")]], [[expired]])

    outcome = wait(server)

    assert outcome.value is True and (outcome.lists, outcome.watches) == (2, 1)


@pytest.mark.parametrize(
    "failure",
    [
        ApiException(status=410, reason="Expired: too old resource version"),
        ProtocolError("Connection broken: IncompleteRead"),
        ConnectionResetError(104, "Connection reset by peer"),
        ApiException(status=500, reason="Internal Server Error"),
    ],
    ids=["410 raised by the client", "a broken stream", "a reset", "500"],
)
def test_a_watch_that_fails_in_a_way_a_new_list_heals_starts_a_new_window(failure):
    server = Server([[pod("p0")], [pod("p0", "Running")]], [([event("MODIFIED", pod("p0", "Pending", "2"))], failure)])

    outcome = wait(server)

    assert outcome.value is True and (outcome.lists, outcome.watches, outcome.events) == (2, 1, 1)
    assert server.slept == [kube_watch.RETRY_PAUSE]  # a watch that ended at once is not reopened at once


def test_a_refused_watch_is_raised_for_the_caller_to_word():
    forbidden = DynamicApiError(ApiException(status=403, reason="Forbidden"))
    server = Server([[pod("p0")]], [([], forbidden)])
    with pytest.raises(DynamicApiError):
        wait(server)


def test_past_the_deadline_the_judges_last_answer_is_returned_after_one_window_per_timeout():
    server = Server([[pod("p0")]] * 4, [])

    outcome = wait(server, deadline=700.0)

    assert outcome.value is False and outcome.objects == {"v/p0": pod("p0")}
    # windows of 300, 300 and the 100 s left; the last list is judged at the deadline
    assert [seconds for _version, seconds in server.watched] == [300, 300, 100]
    assert outcome.lists == 4


def test_a_judge_that_decides_on_time_shortens_the_window():
    server = Server([[pod("p0")]] * 3, [])
    calls = []

    def judge(objects):
        calls.append(server.now)
        return server.now >= 60  # e.g. no status 60 s after the job was created

    outcome = wait(server, judge, window=lambda: 60 - server.now if server.now < 60 else 300)

    assert outcome.value is True and calls == [0.0, 60.0]
    assert server.watched == [("rv1", 60)]


def test_the_generator_of_an_ended_wait_is_closed():
    closed = []

    def stream():
        try:
            yield event("MODIFIED", pod("p0", "Running"))
            yield event("MODIFIED", pod("p0", "Running", "3"))
        finally:
            closed.append(True)  # the client's Watch closes its HTTP response here

    server = Server([], [])
    outcome = kube_watch.until(lambda: ([pod("p0")], "rv1"), lambda v, s: stream(), all_running, 100.0, server.clock)

    assert outcome.value is True and closed == [True]


def test_a_paged_list_keeps_the_first_pages_version():
    pages = [
        {"metadata": {"resourceVersion": "41", "continue": "x"}, "items": [pod("a")]},
        {"metadata": {"resourceVersion": "41"}, "items": [pod("b")]},
    ]
    items, version = kube_watch.pages_with_version(pages)
    assert [kube_watch.key(i) for i in items] == ["v/a", "v/b"] and version == "41"


def test_the_watch_is_found_through_kubernetes_cores_client_wrapper():
    class Dynamic:
        def watch(self, *args, **kwargs):
            return "streamed"

    class K8SClient:  # kubernetes.core's wrapper: the DynamicClient as .client, no watch of its own
        client = Dynamic()

    assert kube_watch.watch_of(K8SClient())() == "streamed"
    assert kube_watch.watch_of(Dynamic())() == "streamed"
