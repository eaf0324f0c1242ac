# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Level-triggered controller loop shared by the stand-ins.

Watches only wake the loop; every pass lists what it needs and converges (idempotent), so a
missed event, a restarted API server or a fault switched in ``faults.json`` is picked up on
the next pass. A pass also runs every ``resync`` seconds without any event.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Optional

from simrack.controllers.kube import Kube, Resource

log = logging.getLogger("simrack")

SIM_LABEL = "gpu-fabric.sim/managed-by"


def read_faults(state: Path) -> dict[str, dict[str, Any]]:
    """Active faults as written by ``sim/rack fault``: ``{"<name>": {<params>}}``."""
    try:
        data = json.loads((state / "faults.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): (v if isinstance(v, dict) else {}) for k, v in data.items()} if isinstance(data, dict) else {}


class Controller:
    """Subclasses set ``name`` and ``watched`` and implement ``reconcile``."""

    name = "controller"
    watched: tuple[Resource, ...] = ()
    resync = 5.0

    def __init__(self, kube: Kube, state: Path) -> None:
        self.kube = kube
        self.state = state
        self.faults: dict[str, dict[str, Any]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()

    def reconcile(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _watch_forever(self, res: Resource) -> None:
        while not self._stop.is_set():
            try:
                for _event in self.kube.watch(res, timeout_seconds=50):
                    self._wake.set()
            except Exception as err:  # the API server restarted, the CRD is not there yet, ...
                log.debug("watch %s: %s", res.plural, err)
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
