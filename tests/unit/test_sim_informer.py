# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stand-ins' informer: one list, then a watch from its version kept in a store; listed again when the watch
breaks or its version is gone; a pass reads the store, filtered as the API server filters. The stand-ins on a real
API server: tests/integration (every test that starts a rack)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "sim"))

from simrack.controllers import base  # noqa: E402
from simrack.controllers.kube import PODS, ApiError  # noqa: E402


def pod(name: str, namespace: str = "ns", version: str = "1", **labels: str) -> dict:
    meta = {"name": name, "namespace": namespace, "resourceVersion": version, "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


class Server:
    """``Kube.list_at`` and ``Kube.watch`` as the API server answers them: each watch yields the next batch of
    events; what each call asked for is kept."""

    def __init__(self, items: list, version: str, *watches: list) -> None:
        self.items, self.version = items, version
        self.watches = list(watches)
        self.asked: list = []

    def list_at(self, res, namespace=None, label_selector=None):
        self.asked.append(("list",))
        return list(self.items), self.version

    def watch(self, res, timeout_seconds=60, resource_version=""):
        self.asked.append(("watch", resource_version))
        yield from self.watches.pop(0)

    def list(self, res, namespace=None, label_selector=None):
        self.asked.append(("api list", namespace, label_selector))
        return []


def names(objects: list) -> list:
    return sorted(o["metadata"]["name"] for o in objects)


def test_a_watch_goes_on_from_the_lists_version_and_keeps_the_store():
    server = Server(
        [pod("a"), pod("b")],
        "10",
        [
            {"type": "ADDED", "object": pod("c", version="11")},
            {"type": "MODIFIED", "object": pod("a", version="12", app="x")},
            {"type": "DELETED", "object": pod("b", version="13")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
        ],
        [],
    )
    informer = base.Informer(server, PODS)
    changes = list(informer.watch_once())
    assert len(changes) == 4  # the list, then three changes: a bookmark wakes nobody
    assert names(informer.list(None, base.label_matcher(""))) == ["a", "c"]
    assert names(informer.list(None, base.label_matcher("app=x"))) == ["a"]
    list(informer.watch_once())
    assert server.asked == [("list",), ("watch", "10"), ("watch", "20")]  # from the bookmark's version, no list


def test_a_version_the_server_no_longer_keeps_is_listed_again():
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    server = Server([pod("a")], "10", [gone], [])
    informer = base.Informer(server, PODS)
    list(informer.watch_once())
    server.items, server.version = [pod("b")], "30"
    list(informer.watch_once())
    assert server.asked == [("list",), ("watch", "10"), ("list",), ("watch", "30")]
    assert names(informer.list(None, base.label_matcher(None))) == ["b"]


def test_a_broken_watch_lists_again_and_a_kind_not_served_is_an_error_until_it_is():
    server = Server([], "", [])
    informer = base.Informer(server, PODS)
    with pytest.raises(ApiError):
        list(informer.watch_once())
    server.items, server.version = [pod("a")], "5"
    list(informer.watch_once())
    informer.broken()
    server.watches.append([])
    list(informer.watch_once())
    assert server.asked == [("list",), ("list",), ("watch", "5"), ("list",), ("watch", "5")]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a", "b", "c"]),
        ("app=x", ["a"]),
        ("app==x", ["a"]),
        ("app!=x", ["b", "c"]),
        ("app", ["a", "b"]),
        ("!app", ["c"]),
        ("app,tier=web", ["b"]),
    ],
)
def test_the_store_is_filtered_as_the_api_server_filters_a_selector(selector, expected):
    informer = base.Informer(Server([pod("a", app="x"), pod("b", app="y", tier="web"), pod("c")], "1", []), PODS)
    informer.relist()
    assert names(informer.list(None, base.label_matcher(selector))) == expected


def test_a_pass_reads_the_store_once_listed_and_the_api_server_otherwise():
    class Pods(base.Controller):
        watched = (PODS,)

    server = Server([pod("a"), pod("b", namespace="other")], "1", [])
    controller = Pods(server, Path("."))
    assert controller.list(PODS) == []  # not listed yet: asked of the API server
    controller.informers[PODS].relist()
    assert names(controller.list(PODS)) == ["a", "b"]
    assert names(controller.list(PODS, "other")) == ["b"]
    assert controller.list(PODS, label_selector="app in (x,y)") == []  # set-based: the API server's
    assert [a for a in server.asked if a[0] == "api list"] == [
        ("api list", None, None),
        ("api list", None, "app in (x,y)"),
    ]
