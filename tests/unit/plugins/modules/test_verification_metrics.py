# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run the module through ansible itself against a real Pushgateway that the test starts, and read back what it
holds with Prometheus's own parser.

The Pushgateway is Debian's ``prometheus-pushgateway`` (.ci/run installs it; PUSHGATEWAY_BIN names another).
Without it the test is skipped on a workstation and fails in CI (``CI`` set), so CI never passes without it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ansible.module_utils.urls import open_url
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import replace_file
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.metrics_run import (
    MetricsError,
    request_from_params,
    write_metrics,
)

from tests.conftest import FIXTURES, REPO_ROOT

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client (requirements-test.txt)")

RECORDS = FIXTURES / "verification_records" / "records"
ANSIBLE = Path(sys.executable).parent / "ansible"
RUN = "20261201T101500Z-ab12"
GROUP = {"job": "gpu_fabric_verify", "instance": "", "fleet": "gb200-a"}


def pushgateway_binary() -> str:
    for candidate in (os.environ.get("PUSHGATEWAY_BIN"), "prometheus-pushgateway", "pushgateway"):
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    reason = "no Pushgateway binary: apt-get install prometheus-pushgateway, or set PUSHGATEWAY_BIN"
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (.ci/run installs it; CI must run this test)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:  # the test's own local Pushgateway
        return answer.read().decode("utf-8")


@pytest.fixture(scope="module")
def pushgateway():
    """A Pushgateway on a free local port, without persistence; its URL."""
    binary = pushgateway_binary()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file=", "--log.level=warn"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                get(f"{url}/-/ready")
                break
            except (urllib.error.URLError, OSError):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Pushgateway did not start: {process.stderr.read().decode()}")
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def pushed(url: str) -> dict:
    """(name, sorted labels) -> value of the gpu_fabric samples the Pushgateway holds."""
    found = {}
    for family in parser.text_string_to_metric_families(get(f"{url}/metrics")):
        for sample in family.samples:
            if sample.name.startswith("gpu_fabric_"):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def key(name: str, **labels: str) -> tuple:
    return (name, tuple(sorted(dict(GROUP, **labels).items())))


def run_module(args: dict, *flags: str) -> dict:
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    command = [str(ANSIBLE), "localhost", "-c", "local", "-m", "gpu_fabric.mnnvl.verification_metrics"]
    completed = subprocess.run(
        [*command, "-a", json.dumps(args), *flags], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    return json.loads(completed.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def push_again(args: dict, check_mode: bool = False) -> dict:
    """The module's runner in this process, with the module's HTTP call (``open_url``): faster than ansible."""
    params = dict(
        {"run_id": "", "history_dir": "", "textfile": "", "pushgateway_url": "", "job": "gpu_fabric_verify"},
        grouping={},
        headers={},
        url_username=None,
        url_password=None,
        validate_certs=True,
        timeout=10,
        push_attempts=2,
        push_failure="fail",
    )
    params.update(args)
    return write_metrics(request_from_params(params), write, open_url, check_mode, sleep=lambda _s: None)


def write(change) -> None:
    replace_file(change.path, change.after.encode("utf-8"))


def test_the_metrics_reach_a_real_pushgateway_and_a_second_push_replaces_them(pushgateway, tmp_path):
    textfile = tmp_path / "gpu_fabric.prom"
    args = {
        "records_dir": str(RECORDS),
        "textfile": str(textfile),
        "pushgateway_url": pushgateway,
        "grouping": {"fleet": "gb200-a"},
    }

    checked = push_again(args, check_mode=True)
    assert checked["changed"] and not checked["pushed"] and not textfile.exists(), checked
    assert pushed(pushgateway) == {}

    # every record counts: the NCCL record of the older run too
    first = run_module(args)
    assert first["changed"] and first["pushed"], first
    assert first["push_url"] == f"{pushgateway}/metrics/job/gpu_fabric_verify/fleet/gb200-a"
    assert stat.S_IMODE(os.stat(textfile).st_mode) == 0o644
    held = pushed(pushgateway)
    assert held[key("gpu_fabric_verification_verdict", verdict="failed")] == 1
    assert held[key("gpu_fabric_rack_verdict", rack="rack1", verdict="failed")] == 1
    nccl = key(
        "gpu_fabric_nccl_bus_bandwidth_average_bytes_per_second",
        rack="rack0",
        check="nccl",
        benchmark="all_reduce_perf",
    )
    assert held[nccl] == 787.804e9
    tray = key(
        "gpu_fabric_tray_weakest_gpu_bandwidth_bytes_per_second",
        node="gb200-r1-t15",
        rack="rack1",
        check="nvbandwidth",
        testcase="multinode_device_to_device_memcpy_read_ce",
    )
    assert held[tray] == 775.67e9
    # the textfile holds the same samples, without the group's labels
    in_file = {
        (sample.name, tuple(sorted(dict(sample.labels, **GROUP).items()))): sample.value
        for family in parser.text_string_to_metric_families(textfile.read_text())
        for sample in family.samples
    }
    assert in_file == held

    # this run only: the PUT replaces the group, so the older run's NCCL figures are gone from the Pushgateway
    second = push_again(dict(args, run_id=RUN))
    assert second["changed"] and second["pushed"], second
    held = pushed(pushgateway)
    assert nccl not in held and not [name for name, _labels in held if "nccl" in name]
    assert held[key("gpu_fabric_verification_run_info", run_id=RUN)] == 1
    assert held[tray] == 775.67e9

    again = push_again(dict(args, run_id=RUN, pushgateway_url=""))
    assert not again["changed"] and again["push_url"] is None, again


def test_a_pushgateway_that_is_down_fails_in_one_line_after_its_retries():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(MetricsError) as raised:
        push_again({"records_dir": str(RECORDS), "pushgateway_url": url, "push_attempts": 3})
    assert str(raised.value) == (
        f"cannot push the metrics to {url}/metrics/job/gpu_fabric_verify: [Errno 111] Connection refused "
        "(after 3 tries); check that the Pushgateway runs and the URL (pushgateway_url) is right"
    )
