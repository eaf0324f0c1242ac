# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""fabric_verify with an API server that does not answer: retried for the patience, then an ``error`` record
(never a module failure with urllib3's text), so that the report is still written. The clock is injected:
nothing sleeps."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import urllib3
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import fleet, k8s, kube_api
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import fabric_verify
from urllib3.exceptions import MaxRetryError

from tests.unit.plugins.modules.runner import run_module

HOST = "https://127.0.0.1:1"
UNREACHABLE = f"cannot reach the Kubernetes API at {HOST} for 60 s: connection refused"
ADVICE = (
    "; the check did not run, which says nothing of the fabric: check that the API server runs and that the "
    "kubeconfig (gpu_fabric_kubeconfig, K8S_AUTH_KUBECONFIG) or the host options point at it, then run it again"
)


def refused() -> MaxRetryError:
    """urllib3's error for a closed port, as the client raises it (nothing listens on port 1)."""
    pool = urllib3.HTTPSConnectionPool("127.0.0.1", 1, retries=urllib3.Retry(0))
    with pytest.raises(MaxRetryError) as caught:
        pool.request("GET", "/version")
    return caught.value


def tray(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.clique": "c0ffee.1"},
        },
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "4"},
            "capacity": {"nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


class FakeClient:
    """kubernetes.core's client as the module uses it; ``down`` lists what does not answer."""

    def __init__(self, down=(), nodes=("gb200-r0-t0", "gb200-r0-t1")):
        self.nodes = list(nodes)
        self.configuration = types.SimpleNamespace(host=HOST)
        self.client = types.SimpleNamespace(
            version={"kubernetes": {"gitVersion": "v1.34.2"}}, request=self.request_groups
        )
        self.down = set(down)

    def resource(self, kind, api_version):
        return kind

    def get(self, resource, serialize=True, **params):
        if resource in self.down:
            raise refused()
        items = [tray(name) for name in self.nodes] if resource == "Node" else []
        return {"kind": f"{resource}List", "metadata": {}, "items": items}

    def request_groups(self, method, path):
        if "groups" in self.down:
            raise refused()
        return {"kind": "APIGroupList", "groups": []}


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    """Every wait of the module on the fake clock: the connection (k8s.connect) and every call (kube_api.Api)."""
    fake = FakeClock()
    monkeypatch.setattr(
        fleet,
        "connect",
        lambda make_client, patience: k8s.connect(make_client, patience, sleep=fake.sleep, clock=fake),
    )
    monkeypatch.setattr(fleet, "Api", functools.partial(kube_api.Api, sleep=fake.sleep, clock=fake))
    return fake


def client_after(monkeypatch, failures: int, client=None):
    """get_api_client refuses ``failures`` times (reading /version), then returns ``client``."""
    tries = []

    def get_api_client(module):
        tries.append(1)
        if client is None or len(tries) <= failures:
            raise refused()
        return client

    monkeypatch.setattr(fabric_verify, "get_api_client", get_api_client)
    return tries


def verify(tmp_path, check="cliques", **args):
    return run_module(
        fabric_verify.main,
        dict(check=check, api_patience=60, records_dir=str(tmp_path), run_id="r1", **args),
    )


@pytest.mark.parametrize("check", ["cliques", "imex_channel", "nvbandwidth"])
def test_an_api_server_that_never_answers_is_an_error_record_after_the_patience(monkeypatch, tmp_path, clock, check):
    tries = client_after(monkeypatch, failures=10**6)
    result = verify(tmp_path, check)
    assert not result["failed"], result.get("msg")
    assert clock.slept == [2.0] * 30 and len(tries) == 31
    (record,) = result["records"]
    assert (record["check"], record["rack"], record["verdict"], record["outcome"]) == (check, "fleet", "error", "error")
    assert record["summary"] == UNREACHABLE + ADVICE
    assert record["cluster"] == {"server_version": "unknown", "host": HOST}
    assert not result["passed"] and result["failed_racks"] == ["fleet"]
    assert "HTTPSConnectionPool" not in json.dumps(result) and "Max retries" not in json.dumps(result)
    written = json.loads((tmp_path / check / "fleet.json").read_text())
    assert (written["verdict"], written["summary"], written["run_id"]) == ("error", UNREACHABLE + ADVICE, "r1")
    assert result["files"] == [str(tmp_path / check / "fleet.json")]


def test_an_api_server_that_comes_up_within_the_patience_is_waited_for(monkeypatch, tmp_path, clock):
    tries = client_after(monkeypatch, failures=3, client=FakeClient())
    result = verify(tmp_path)
    assert clock.slept == [2.0] * 3 and len(tries) == 4
    (record,) = result["records"]
    assert (record["rack"], record["verdict"]) == ("clique-c0ffee-1", "passed")
    assert record["nodes"] == ["gb200-r0-t0", "gb200-r0-t1"]


def test_a_client_from_the_discovery_cache_then_no_answer_is_an_error_record(monkeypatch, tmp_path, clock):
    client_after(monkeypatch, failures=0, client=FakeClient(down={"Node"}))
    result = verify(tmp_path)
    assert not result["failed"], result.get("msg")
    (record,) = result["records"]
    assert record["rack"] == "fleet" and record["verdict"] == "error"
    # kube_api.Api's backoff under k8s.api_retry: the last pause is cut short, the last try is at the patience
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 5.0]
    assert record["summary"] == (
        f"could not list Node: cannot reach the Kubernetes API at {HOST} for 60 s: connection refused" + ADVICE
    )


def test_racks_listed_then_no_answer_is_an_error_record_per_rack(monkeypatch, tmp_path, clock):
    client_after(monkeypatch, failures=0, client=FakeClient(down={"groups"}))
    result = verify(tmp_path, "imex_channel")
    assert not result["failed"], result.get("msg")
    (record,) = result["records"]
    assert (record["rack"], record["verdict"], record["nodes"]) == (
        "clique-c0ffee-1",
        "error",
        ["gb200-r0-t0", "gb200-r0-t1"],
    )
    assert record["summary"].startswith(
        f"rack clique-c0ffee-1: could not list the served API groups: cannot reach the Kubernetes API at {HOST} for "
    )
    assert json.loads((tmp_path / "imex_channel" / "clique-c0ffee-1.json").read_text())["verdict"] == "error"


def test_verify_yml_against_a_closed_port_writes_the_report_with_the_error(tmp_path, closed_port_kubeconfig):
    """The playbook as a user runs it, the kubeconfig pointing at a port nothing listens on: the report,
    its JUnit and the job's stats say ``error``, in one line without urllib3's text."""
    repo = Path(__file__).resolve().parents[4]
    (tmp_path / "hosts.yml").write_text(
        "k8s_controller:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    report = tmp_path / "report"
    env = dict(
        os.environ, ANSIBLE_CONFIG=str(repo / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_SHOW_CUSTOM_STATS="true"
    )
    env.pop("K8S_AUTH_KUBECONFIG", None)
    completed = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(tmp_path / "hosts.yml"),
            str(repo / "playbooks" / "verify.yml"),
            "--tags",
            "cliques",
            "-e",
            f"gpu_fabric_kubeconfig={closed_port_kubeconfig}",
            "-e",
            "gpu_fabric_verify_api_patience=1",
            "-e",
            f"gpu_fabric_report_dir={report}",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 2, output  # the last task fails the play on the report's verdict
    assert "Max retries exceeded" not in output and "HTTPSConnectionPool" not in output
    verdict = json.loads((report / "report.json").read_text())
    assert verdict["verdict"] == "error"
    record = json.loads((report / "records" / "cliques" / "fleet.json").read_text())
    assert record["verdict"] == "error"
    # said once, by the preflight, after the patience (not a pause past it); before, each check waited for it again
    assert record["summary"] == (
        "cliques did not run, which says nothing of the fabric; the run was refused at the task 'Refuse what the run "
        "could not use before the first check runs': "
        + UNREACHABLE.replace("60 s", "1 s")
        + "; "
        + ADVICE.split(": ", 1)[1]
    )
    assert 'errors="1"' in (report / "report.junit.xml").read_text()
    assert re.search(r"CUSTOM STATS:.*gpu_fabric_verdict: error", output, re.S), output


def test_write_records_keeps_the_record_of_a_run_that_overlaps_and_removes_an_earlier_ones(tmp_path):
    with patch_module_args({}):
        module = basic.AnsibleModule(argument_spec={})

    def record(rack, run_id, started, finished):
        return {"check": "nvbandwidth", "rack": rack, "run_id": run_id, "started": started, "finished": finished}

    # yesterday's run on rack2, then two runs at once: one on rack0, one on rack1, ending in either order
    old = record("rack2", "old", "2026-12-05T10:00:00Z", "2026-12-05T10:01:00Z")
    fleet.write_records(module, "nvbandwidth", str(tmp_path), [old])
    fleet.write_records(
        module, "nvbandwidth", str(tmp_path), [record("rack1", "b", "2026-12-06T01:02:48.5Z", "2026-12-06T01:02:57.7Z")]
    )
    fleet.write_records(
        module, "nvbandwidth", str(tmp_path), [record("rack0", "a", "2026-12-06T01:02:48.6Z", "2026-12-06T01:02:57.8Z")]
    )
    kept = {path.stem: json.loads(path.read_text())["run_id"] for path in (tmp_path / "nvbandwidth").glob("*.json")}
    assert kept == {"rack0": "a", "rack1": "b"}  # rack2's was an earlier run's: removed by the first of the two


# -- the fleet as declared (gpu_fabric_racks) ----------------------------------------------------------

FOUR_RACKS = {f"rack{r}": [f"gb200-r{r}-t0", f"gb200-r{r}-t1"] for r in range(4)}
NO_NODE = "declared in gpu_fabric_racks, no Node of that name in the cluster"


@pytest.mark.parametrize("check", ["cliques", "imex_channel"])
def test_declared_racks_the_cluster_does_not_show_fail_the_run_by_name(monkeypatch, tmp_path, clock, check):
    """Four racks declared, the cluster shows rack0's Nodes (a wrong context, racks not joined): each of the other
    three is an ``error`` record naming it and its trays, and the run does not pass."""
    client_after(monkeypatch, failures=0, client=FakeClient(down={"groups"} if check == "imex_channel" else ()))
    result = verify(tmp_path, check, racks=FOUR_RACKS)
    assert not result["failed"], result.get("msg")
    assert [(r["rack"], r["verdict"]) for r in result["records"]][1:] == [
        ("rack1", "error"),
        ("rack2", "error"),
        ("rack3", "error"),
    ]
    assert not result["passed"] and result["failed_racks"][-3:] == ["rack1", "rack2", "rack3"]
    rack3 = result["records"][3]
    assert rack3["summary"] == (
        "rack rack3: declared in gpu_fabric_racks with 2 trays, none of them a GPU Node of the cluster (missing "
        f"gb200-r3-t0, gb200-r3-t1 ({NO_NODE})); the {check} check did not run there, which says nothing of its "
        "fabric: check that the kubeconfig and its context (gpu_fabric_kubeconfig) are this site's cluster, that the "
        "trays joined it and that GPU Feature Discovery labels them, or remove the rack from gpu_fabric_racks"
    )
    assert rack3["trays"]["missing"] == [
        {"node": "gb200-r3-t0", "reason": NO_NODE},
        {"node": "gb200-r3-t1", "reason": NO_NODE},
    ]
    assert (rack3["nodes"], rack3["failed_nodes"]) == ([], [])
    assert json.loads((tmp_path / check / "rack3.json").read_text())["verdict"] == "error"


def test_a_declared_tray_the_cluster_lacks_is_named_in_its_racks_record(monkeypatch, tmp_path, clock):
    client_after(monkeypatch, failures=0, client=FakeClient())
    racks = {"rack0": ["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]}
    result = verify(tmp_path, racks=racks, trays_per_clique=3)
    (record,) = result["records"]
    assert (record["rack"], record["verdict"], record["failed_nodes"]) == ("rack0", "failed", [])
    assert "gb200-r0-t2 of rack rack0 is declared in gpu_fabric_racks, no Node of that name" in record["summary"]
    assert record["trays"]["missing"] == [{"node": "gb200-r0-t2", "reason": NO_NODE}]
    assert record["trays"]["found"] == ["gb200-r0-t0", "gb200-r0-t1"]
    assert list(record["node_problems"]) == ["gb200-r0-t2"]  # named as the problem, not blamed


def test_a_tray_of_a_declared_racks_clique_the_inventory_leaves_out_joins_that_rack(monkeypatch, tmp_path, clock):
    client_after(monkeypatch, failures=0, client=FakeClient(nodes=["gb200-r0-t0", "gb200-r0-t1", "gb200-r0-t2"]))
    result = verify(tmp_path, racks={"rack0": ["gb200-r0-t0", "gb200-r0-t1"]}, trays_per_clique=3)
    (record,) = result["records"]  # no invented one-tray rack clique-c0ffee-1
    assert (record["rack"], record["verdict"]) == ("rack0", "passed")
    assert record["summary"].endswith("; gb200-r0-t2 is in rack0's clique but not in gpu_fabric_racks")
    assert record["trays"]["undeclared"] == ["gb200-r0-t2"]


def test_an_api_server_that_never_answers_gives_an_error_record_per_declared_rack(monkeypatch, tmp_path, clock):
    client_after(monkeypatch, failures=10**6)
    result = verify(tmp_path, racks={"rack0": ["gb200-r0-t0"], "rack1": ["gb200-r1-t0"]})
    assert [(r["rack"], r["verdict"]) for r in result["records"]] == [("rack0", "error"), ("rack1", "error")]
    assert result["records"][1]["summary"] == "rack rack1: " + UNREACHABLE + ADVICE
    assert result["records"][1]["trays"]["skipped"] == [
        {"node": "gb200-r1-t0", "reason": "not read: the API server did not answer"}
    ]
    assert result["failed_racks"] == ["rack0", "rack1"]


def test_check_mode_names_the_declared_racks_the_cluster_does_not_show(monkeypatch, tmp_path, clock):
    client_after(monkeypatch, failures=0, client=FakeClient())
    result = run_module(
        fabric_verify.main,
        dict(check="imex_channel", api_patience=60, records_dir=str(tmp_path), run_id="r1", racks=FOUR_RACKS),
        check_mode=True,
    )
    assert [(r["rack"], r["absent"]) for r in result["racks"]] == [
        ("rack0", False),
        ("rack1", True),
        ("rack2", True),
        ("rack3", True),
    ]
    assert result["summary"].startswith("check mode: imex_channel would run on 1 of 4 rack(s); nothing created")
    assert result["summary"].endswith(
        "; declared in gpu_fabric_racks, not in the cluster (the run fails): rack1, rack2, rack3"
    )
    assert not (tmp_path / "imex_channel").exists()
