# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A stand-in cluster for fabric_verify's one-pod-per-tray checks, run as Ansible runs the module: an API server
that lists one rack's GPU trays, and a rack run whose pods succeed at once and print the log given per tray.
Nothing sleeps; the check's own judge reads the logs."""

from __future__ import annotations

import types
from typing import Any, Dict, Sequence

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import fleet, k8s, kube_api, rack_run
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import fabric_verify

from tests.unit.plugins.modules.runner import run_module

HOST = "https://127.0.0.1:1"
CLIQUE = "5c0d8b4e-0000-4000-8000-000000000000.1"
TRAYS = ("gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2")


def tray(name: str) -> Dict[str, Any]:
    """A Ready GB200 tray Node of the rack's clique with 4 allocatable GPUs."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.clique": CLIQUE}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "4"},
            "capacity": {"nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


class FakeClient:
    """kubernetes.core's client as the module uses it before the rack runs: the Nodes, no Pod, the API groups."""

    def __init__(self, nodes: Sequence[str] = TRAYS) -> None:
        self.nodes = list(nodes)
        self.configuration = types.SimpleNamespace(host=HOST)
        self.client = types.SimpleNamespace(
            version={"kubernetes": {"gitVersion": "v1.34.2"}},
            request=lambda method, path: {"kind": "APIGroupList", "groups": []},
        )

    def resource(self, kind: str, api_version: str) -> str:
        return kind

    def get(self, resource: str, serialize: bool = True, **params: Any) -> Dict[str, Any]:
        items = [tray(name) for name in self.nodes] if resource == "Node" else []
        return {"kind": f"{resource}List", "metadata": {}, "items": items}


def stand_in(monkeypatch: Any, pod_prefix: str, logs: Dict[str, str]) -> None:
    """fabric_verify against FakeClient; each tray's pod ``<pod_prefix>-<tray>`` prints ``logs[tray]`` (read when
    the rack runs, so a test may change ``logs`` after this call)."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def clock() -> float:
        return now[0]

    monkeypatch.setattr(
        fleet, "connect", lambda make_client, patience: k8s.connect(make_client, patience, sleep=sleep, clock=clock)
    )
    monkeypatch.setattr(fleet, "Api", lambda *args, **kwargs: kube_api.Api(*args, sleep=sleep, clock=clock, **kwargs))
    monkeypatch.setattr(fabric_verify, "get_api_client", lambda module: FakeClient())
    monkeypatch.setattr(rack_run.RackRun, "create_namespace", lambda self: None)
    monkeypatch.setattr(rack_run.RackRun, "create_pod", lambda self, body: body)
    monkeypatch.setattr(rack_run.RackRun, "watch_for", lambda self, *args, **kwargs: True)
    monkeypatch.setattr(rack_run.RackRun, "read_log", lambda self, pod: logs[pod[len(pod_prefix) + 1 :]])
    monkeypatch.setattr(rack_run.RackRun, "clean_up", lambda self: [])
    monkeypatch.setattr(rack_run.RackRun, "count_left", lambda self: (0, []))


def verify(tmp_path: Any, check: str, **settings: Any) -> Dict[str, Any]:
    """The module's result for one rack of TRAYS under ``check`` (``settings``: the check's option group)."""
    args = dict(check=check, api_patience=60, records_dir=str(tmp_path), run_id="r1", trays_per_clique=len(TRAYS))
    if settings:
        args["settings"] = {check: settings}
    return run_module(fabric_verify.main, args)
