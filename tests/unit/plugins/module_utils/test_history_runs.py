# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""history_runs: a run's records kept (directory, index entry) and the pin, also by two writers at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import HistoryError, read_index
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import pin_run, record_run
from kept_runs import NOW, keep, nvb_record, run_ids


def test_two_runs_keep_both(tmp_path):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2, median=700.0, verdict="failed")
    assert run_ids(tmp_path) == ["r2", "r1"]
    index = read_index(str(tmp_path))
    assert index["runs"][0]["verdicts"] == {"nvbandwidth/rack0": "failed"}
    assert index["runs"][1]["started"] == "2026-12-01T10:00:00Z"
    assert index["runs"][1]["pinned"] is False
    for run_id, median in (("r1", 820.0), ("r2", 700.0)):
        with open(tmp_path / run_id / "nvbandwidth" / "rack0.json", encoding="utf-8") as handle:
            assert json.load(handle)["details"]["median_gbps"] == median
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


def test_checks_of_one_run_merge_into_one_entry(tmp_path):
    keep(tmp_path, "r1", 1)
    cliques = {"check": "cliques", "rack": "rack0", "verdict": "passed", "started": "2026-12-01T09:59:00Z"}
    record_run(str(tmp_path), "r1", [cliques], now=NOW)
    (entry,) = read_index(str(tmp_path))["runs"]
    assert entry["verdicts"] == {"cliques/rack0": "passed", "nvbandwidth/rack0": "passed"}
    assert entry["started"] == "2026-12-01T09:59:00Z"
    assert entry["finished"] == "2026-12-01T10:00:30Z"
    # the same check again in the same run replaces its racks: rack1 only now
    record_run(str(tmp_path), "r1", [nvb_record("r1", rack="rack1")], now=NOW)
    (entry,) = read_index(str(tmp_path))["runs"]
    assert entry["verdicts"] == {"cliques/rack0": "passed", "nvbandwidth/rack1": "passed"}
    assert sorted(os.listdir(tmp_path / "r1" / "nvbandwidth")) == ["rack1.json"]


def test_pin_names_one_run_and_refuses_an_unknown_one(tmp_path):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2)
    assert pin_run(str(tmp_path), "r1") is True
    assert pin_run(str(tmp_path), "r1") is False
    pin_run(str(tmp_path), "r2")
    assert [e["run_id"] for e in read_index(str(tmp_path))["runs"] if e["pinned"]] == ["r2"]
    with pytest.raises(HistoryError, match=r"the baseline run r9 is not in the history .* \(newest runs: r2, r1\)"):
        pin_run(str(tmp_path), "r9")


def test_the_pin_moves_its_mark_with_it(tmp_path):
    keep(tmp_path, "r1", 1)
    keep(tmp_path, "r2", 2)
    pin_run(str(tmp_path), "r1")
    pin_run(str(tmp_path), "r2")
    assert (os.path.exists(tmp_path / "r1" / ".pinned"), os.path.exists(tmp_path / "r2" / ".pinned")) == (False, True)
    pin_run(str(tmp_path), "")
    assert not os.path.exists(tmp_path / "r2" / ".pinned")


def test_a_run_id_that_is_no_directory_name_is_refused(tmp_path):
    with pytest.raises(HistoryError, match=r"run id '\.\./x' cannot name a history directory"):
        record_run(str(tmp_path), "../x", [nvb_record("x")])
    with pytest.raises(HistoryError, match=r"a record of run r1 has check 'nvbandwidth' and rack '\.\./etc'"):
        record_run(str(tmp_path), "r1", [nvb_record("r1", rack="../etc")])
    assert not os.path.exists(tmp_path / "r1")


def _writer(directory, name, count):
    for i in range(count):
        run_id = f"{name}{i:02d}"
        record_run(directory, run_id, [nvb_record(run_id, started=f"2026-12-01T10:{i:02d}:00Z")], keep_runs=0, now=NOW)


def test_two_concurrent_processes_leave_an_intact_index(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(tmp_path), name, 15)) for name in ("a", "b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    ids = run_ids(tmp_path)
    assert sorted(ids) == sorted([f"a{i:02d}" for i in range(15)] + [f"b{i:02d}" for i in range(15)])
    assert all((tmp_path / run_id / "nvbandwidth" / "rack0.json").exists() for run_id in ids)


def test_two_concurrent_threads_leave_an_intact_index(tmp_path):
    threads = [threading.Thread(target=_writer, args=(str(tmp_path), name, 10)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(run_ids(tmp_path)) == 20
