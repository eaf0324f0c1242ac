# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Level-triggered controller loop shared by the stand-ins.

Watches wake the loop; every pass reads what it needs and converges (idempotent), so a missed
event, a restarted API server or a fault switched in ``faults.json`` is picked up on the next
pass. A pass also runs every ``resync`` seconds without any event.

The pods a pass reads come from an informer, as a real controller's do (client-go's shared
informers): one LIST, then a WATCH from its resourceVersion applied to a store in the process,
listed again when the watch breaks. A pass that listed every pod of the cluster from the API
server instead (several controllers, on every pod event, 250 operand pods on a two-rack fleet)
made the API server encode hundreds of megabytes of JSON a minute.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from simrack.controllers.kube import PODS, ApiError, Kube, Resource

log = logging.getLogger("simrack")

SIM_LABEL = "gpu-fabric.sim/managed-by"


def read_faults(state: Path) -> dict[str, dict[str, Any]]:
    """Active faults as written by ``sim/rack fault``: ``{"<name>": {<params>}}``."""
    try:
        data = json.loads((state / "faults.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): (v if isinstance(v, dict) else {}) for k, v in data.items()} if isinstance(data, dict) else {}


def label_matcher(selector: Optional[str]) -> Optional[Callable[[dict[str, str]], bool]]:
    """A test of labels for an equality-based label selector (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, joined by
    commas); None for a set-based one (``in``, ``notin``), which the caller asks the API server for instead."""
    terms: list[Callable[[dict[str, str]], bool]] = []
    for term in (t.strip() for t in (selector or "").split(",")):
        if not term:
            continue
        if " " in term or "(" in term:
            return None
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            terms.append(lambda labels, k=term[1:]: k not in labels)
        else:
            terms.append(lambda labels, k=term: k in labels)
    return lambda labels: all(test(labels) for test in terms)


class Informer:
    """The objects of one kind as the API server last told them: listed once, then kept by a watch from the list's
    resourceVersion; listed again when the watch breaks or its version is too old (410 Gone)."""

    def __init__(self, kube: Kube, res: Resource) -> None:
        self.kube = kube
        self.res = res
        self.synced = threading.Event()
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._version = ""
        self._lock = threading.Lock()

    @staticmethod
    def _key(obj: dict[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def relist(self) -> None:
        items, version = self.kube.list_at(self.res)
        with self._lock:
            self._objects = {self._key(obj): obj for obj in items}
            self._version = version
        self.synced.set()

    def apply(self, event: dict[str, Any]) -> bool:
        """One watch event into the store; False when the watch must start again from a new list."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":  # 410 Gone: the version is older than the server keeps
            with self._lock:
                self._version = ""
            return False
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            if kind in ("ADDED", "MODIFIED"):
                self._objects[self._key(obj)] = obj
            elif kind == "DELETED":
                self._objects.pop(self._key(obj), None)
            if version:
                self._version = version
        return True

    def watch_once(self, timeout_seconds: int = 50) -> Iterator[None]:
        """List when there is no version to go on from, then one watch, yielding after each change it applied."""
        if not self._version:
            self.relist()
            yield None
        if not self._version:  # not served (a CRD not installed yet): the next watch lists again
            raise ApiError(404, "", f"LIST {self.res.path()}")
        for event in self.kube.watch(self.res, timeout_seconds=timeout_seconds, resource_version=self._version):
            if not self.apply(event):
                return
            if event.get("type") != "BOOKMARK":
                yield None

    def broken(self) -> None:
        """The watch failed (the API server restarted, ...): list again before the next one."""
        with self._lock:
            self._version = ""

    def list(self, namespace: Optional[str], matches: Callable[[dict[str, str]], bool]) -> list[dict[str, Any]]:
        """The stored objects in ``namespace`` (None: all) whose labels ``matches``: shared, to be read only."""
        with self._lock:
            objects = list(self._objects.values())
        return [
            obj
            for obj in objects
            if (namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace)
            and matches(labels_of(obj))
        ]


class Controller:
    """Subclasses set ``name`` and ``watched`` and implement ``reconcile``; a pass reads through :meth:`list`."""

    name = "controller"
    watched: tuple[Resource, ...] = ()
    # the watched kinds a pass lists from an informer rather than the API server
    informed: tuple[Resource, ...] = (PODS,)
    resync = 5.0

    def __init__(self, kube: Kube, state: Path) -> None:
        self.kube = kube
        self.state = state
        self.faults: dict[str, dict[str, Any]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.informers = {res: Informer(kube, res) for res in self.watched if res in self.informed}

    def reconcile(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def list(
        self, res: Resource, namespace: Optional[str] = None, label_selector: Optional[str] = None
    ) -> list[dict[str, Any]]:
        """The objects a pass reads: from the kind's informer once it has listed (to be read only, shared with the
        next pass), else from the API server."""
        informer = self.informers.get(res)
        matches = label_matcher(label_selector)
        if informer is None or matches is None or not informer.synced.is_set():
            return self.kube.list(res, namespace, label_selector)
        return informer.list(namespace, matches)

    def _watch_forever(self, res: Resource) -> None:
        informer = self.informers.get(res)
        while not self._stop.is_set():
            try:
                if informer is None:
                    for _event in self.kube.watch(res, timeout_seconds=50):
                        self._wake.set()
                else:
                    for _change in informer.watch_once(timeout_seconds=50):
                        self._wake.set()
            except Exception as err:  # the API server restarted, the CRD is not there yet, ...
                log.debug("watch %s: %s", res.plural, err)
                if informer is not None:
                    informer.broken()
                time.sleep(2)
            self._wake.set()

    def _faults_mtime(self) -> float:
        try:
            return os.stat(self.state / "faults.json").st_mtime
        except OSError:
            return 0.0

    def run(self) -> None:
        for res in self.watched:
            threading.Thread(target=self._watch_forever, args=(res,), daemon=True, name=f"watch-{res.plural}").start()
        last_pass = 0.0
        faults_seen = -1.0
        failures = 0
        while not self._stop.is_set():
            self._wake.wait(timeout=0.5)
            mtime = self._faults_mtime()
            due = time.monotonic() - last_pass >= self.resync
            if not (self._wake.is_set() or due or mtime != faults_seen):
                continue
            time.sleep(0.2)  # let a burst of events coalesce into one pass
            self._wake.clear()
            faults_seen = mtime
            self.faults = read_faults(self.state)
            try:
                self.reconcile()
                if failures:
                    log.info("%s: reconciling again after %d failures", self.name, failures)
                failures = 0
            except Exception as err:
                failures += 1
                if failures == 1 or failures % 30 == 0:  # an API server restart is not news every second
                    log.warning("%s: reconcile failed (%d in a row): %s", self.name, failures, err)
                time.sleep(min(5.0, 0.5 * failures))
            last_pass = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def runs(pod: dict[str, Any], command: str) -> Optional[dict[str, Any]]:
    """The pod's container that runs ``command`` (a driver binary), directly or from a shell script, if any.

    The DRA driver's pods are found by what they run: their names and label keys follow the chart's
    name (and nameOverride), which the real driver's function does not depend on.
    """
    program = re.compile(rf"(^|[\s/]){re.escape(command)}(\s|$)", re.MULTILINE)
    for container in (pod.get("spec") or {}).get("containers") or []:
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        # the program itself, or a shell script that runs it (the real 0.4 chart's kubelet plugin: bash -c "...")
        if argv[:1] == [command] or any(program.search(str(word)) for word in argv):
            return container
    return None


def is_running(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    return (pod.get("status") or {}).get("phase") == "Running" and not meta.get("deletionTimestamp")


def is_ready(pod: dict[str, Any]) -> bool:
    if not is_running(pod):
        return False
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
