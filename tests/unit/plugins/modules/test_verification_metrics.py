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
from datetime import datetime, timezone
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


# ----------------------------------------------------------------------------------------- as Ansible runs the module

UNREACHED_RUN = "20261202T101500Z-0e0e"
UNREACHED_AT = "2026-12-02T10:15:03.000000Z"
FINISHED = datetime(2026, 12, 1, 10, 17, 31, 904466, tzinfo=timezone.utc).timestamp()  # the end of the run RUN


def in_process(args: dict, check_mode: bool = False) -> dict:
    from ansible_collections.gpu_fabric.mnnvl.plugins.modules.verification_metrics import main

    from tests.unit.plugins.modules.runner import run_module as run

    return run(main, args, check_mode=check_mode)


def parsed(text: str) -> dict:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(found: dict, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def unreached_run(records_dir: Path, history: Path) -> None:
    """What fabric_verify and verify_history write when no API server answers: the check's records, one ``error``
    of the rack ``fleet`` in place of the racks', kept in the history as a run of its own."""
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.fleet import (
        FLEET,
        error_records,
        unreachable_message,
    )
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import completed

    message = unreachable_message("the API server https://10.0.0.1:6443 did not answer")
    records = [
        completed(r, UNREACHED_AT, UNREACHED_AT, {"host": "https://10.0.0.1:6443"})
        for r in error_records("cliques", [FLEET], message, UNREACHED_RUN)
    ]
    (records_dir / "cliques").mkdir(parents=True)
    (records_dir / "cliques" / "fleet.json").write_text(json.dumps(records[0]))
    record_run(str(history), UNREACHED_RUN, records)


def kept_fixture_run(history: Path) -> None:
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import load_records

    record_run(str(history), RUN, [r for r in load_records(str(RECORDS)) if r["run_id"] == RUN])


def test_a_run_that_reached_no_rack_keeps_each_declared_rack_and_its_last_verdict(tmp_path):
    history, records = tmp_path / "runs", tmp_path / "records"
    kept_fixture_run(history)  # last night: rack1 failed nvbandwidth, rack0 and rack2 passed
    unreached_run(records, history)  # tonight: no API server answered
    result = in_process(
        {"records_dir": str(records), "run_id": UNREACHED_RUN, "history_dir": str(history),
         "racks": ["rack0", "rack1", "rack2"]}
    )  # fmt: skip
    assert not result["failed"], result
    found = parsed(result["metrics"])
    assert not [labels for _name, labels in found if ("rack", "fleet") in labels]
    for rack in ("rack0", "rack1", "rack2"):
        assert sample(found, "gpu_fabric_rack_verdict", rack=rack, verdict="error") == 1
        assert sample(found, "gpu_fabric_check_verdict", rack=rack, check="cliques", verdict="error") == 1
    # last night's failed rack stays failed until a run judges it again
    assert sample(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="failed") == 1
    assert sample(found, "gpu_fabric_rack_last_verdict_timestamp_seconds", rack="rack1") == pytest.approx(FINISHED)
    assert sample(found, "gpu_fabric_rack_last_verdict", rack="rack2", verdict="passed") == 1
    assert sample(found, "gpu_fabric_last_pass_timestamp_seconds", rack="rack2") == pytest.approx(FINISHED)
    assert result["verdict"] == "error"


def test_the_last_pass_survives_the_retention_of_the_run_it_came_from(tmp_path):
    history, records = tmp_path / "runs", tmp_path / "records"
    kept_fixture_run(history)
    first = in_process({"records_dir": str(RECORDS), "run_id": RUN, "history_dir": str(history)})
    assert first["changed"] and first["state_file"] == str(history / "metrics-state.json"), first
    # retention drops last night's run; tonight no API server answers
    index = json.loads((history / "index.json").read_text())
    (history / "index.json").write_text(json.dumps(dict(index, runs=[])))
    shutil.rmtree(history / RUN)
    unreached_run(records, history)
    checked = in_process({"records_dir": str(records), "run_id": UNREACHED_RUN, "history_dir": str(history)}, True)
    result = in_process({"records_dir": str(records), "run_id": UNREACHED_RUN, "history_dir": str(history)})
    assert checked["metrics"] == result["metrics"]
    found = parsed(result["metrics"])
    assert sample(found, "gpu_fabric_last_pass_timestamp_seconds", rack="rack0") == pytest.approx(FINISHED)
    assert sample(found, "gpu_fabric_last_pass_timestamp_seconds", rack="rack2") == pytest.approx(FINISHED)
    assert sample(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="failed") == 1
    # no racks declared: the error goes to the racks the metrics knew
    assert {dict(labels)["rack"] for name, labels in found if name == "gpu_fabric_rack_verdict"} == {
        "rack0",
        "rack1",
        "rack2",
    }


def test_the_module_refuses_a_symlink_at_the_textfile_and_writes_nothing_through_it(tmp_path):
    target = tmp_path / "authorized_keys"
    target.write_text("ssh-ed25519 AAAA... admin\n")
    textfile = tmp_path / "gpu_fabric.prom"
    textfile.symlink_to(target)
    result = in_process({"records_dir": str(RECORDS), "run_id": RUN, "textfile": str(textfile)})
    assert result["failed"] is True
    assert result["msg"] == (
        f"textfile {textfile} is a symbolic link (to {target}); the metrics are written to a regular file only, never "
        "through a link: remove the link, or set textfile (report_metrics_textfile) to the file itself"
    )
    assert target.read_text() == "ssh-ed25519 AAAA... admin\n" and textfile.is_symlink()


def test_the_module_replaces_a_regular_textfile_keeping_its_mode(tmp_path):
    textfile = tmp_path / "gpu_fabric.prom"
    textfile.write_text("# old\n")
    textfile.chmod(0o640)
    result = in_process({"records_dir": str(RECORDS), "run_id": RUN, "textfile": str(textfile)})
    assert result["changed"] and not result["failed"], result
    assert textfile.read_text() == result["metrics"] and stat.S_IMODE(os.stat(textfile).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["gpu_fabric.prom"]


TONIGHT = "20261202T101500Z-c11q"
TONIGHT_AT = "2026-12-02T10:15:02Z"


def cliques_only_run(records_dir: Path) -> None:
    """A run of the cliques check alone (``--tags cliques``) tonight: it passed on every rack."""
    (records_dir / "cliques").mkdir(parents=True)
    for rack in ("rack0", "rack1", "rack2"):
        record = json.loads((RECORDS / "cliques" / f"{rack}.json").read_text())
        record.update(run_id=TONIGHT, started=TONIGHT_AT, finished=TONIGHT_AT)
        assert record["passed"] is True
        (records_dir / "cliques" / f"{rack}.json").write_text(json.dumps(record))


REQUIRED = ["cliques", "imex_channel", "nvbandwidth"]


def test_a_run_of_some_checks_passes_no_rack_whose_required_check_failed_or_never_ran(tmp_path):
    history, records = tmp_path / "runs", tmp_path / "records"
    kept_fixture_run(history)  # last night: rack1 failed nvbandwidth, rack0 and rack2 passed every check
    cliques_only_run(records)
    args = {"records_dir": str(records), "run_id": TONIGHT, "racks": ["rack0", "rack1", "rack2"]}
    result = in_process(dict(args, history_dir=str(history), required_checks=REQUIRED))
    assert not result["failed"], result
    found = parsed(result["metrics"])
    tonight = datetime(2026, 12, 2, 10, 15, 2, tzinfo=timezone.utc).timestamp()
    assert sample(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="failed") == 1
    assert sample(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="passed") == 0
    assert sample(found, "gpu_fabric_rack_last_verdict_timestamp_seconds", rack="rack1") == pytest.approx(FINISHED)
    assert sample(found, "gpu_fabric_rack_check_last_verdict", rack="rack1", check="nvbandwidth", verdict="failed") == 1
    assert sample(found, "gpu_fabric_rack_check_last_verdict", rack="rack1", check="cliques", verdict="passed") == 1
    assert sample(
        found, "gpu_fabric_rack_check_last_verdict_timestamp_seconds", rack="rack1", check="cliques"
    ) == pytest.approx(tonight)
    # rack0 passed every required check, cliques tonight and the others last night
    assert sample(found, "gpu_fabric_rack_last_verdict", rack="rack0", verdict="passed") == 1
    assert sample(found, "gpu_fabric_rack_last_verdict_timestamp_seconds", rack="rack0") == pytest.approx(tonight)

    # a new history: tonight's cliques are the only evidence, so no rack passes and each names what is missing
    alone = parsed(in_process(dict(args, history_dir=str(tmp_path / "new"), required_checks=REQUIRED))["metrics"])
    for rack in ("rack0", "rack1", "rack2"):
        assert sample(alone, "gpu_fabric_rack_last_verdict", rack=rack, verdict="passed") == 0
        assert sample(alone, "gpu_fabric_rack_last_verdict", rack=rack, verdict="unverified") == 1
    missing = {
        (dict(labels)["rack"], dict(labels)["check"]) for name, labels in alone if name.endswith("missing_check")
    }
    assert missing == {(rack, check) for rack in ("rack0", "rack1", "rack2") for check in REQUIRED[1:]}
