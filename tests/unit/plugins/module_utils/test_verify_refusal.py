# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""verify_refusal: which checks a refused verify run could not run, and the error record each gets."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import verify_refusal as vr


def read(path: str) -> str:
    return Path(path).read_text()


def test_the_message_names_the_task_and_what_it_said_in_one_line():
    assert vr.refusal_message("Refuse it", "a\n  b") == "the run was refused at the task 'Refuse it': a b"
    assert vr.refusal_message("", None) == "the run was refused: (no message)"


def test_every_check_without_a_record_of_the_run_gets_an_error_record_naming_why(tmp_path):
    kept = {"check": "cliques", "rack": "rack1", "run_id": "run2", "passed": True}
    (tmp_path / "cliques").mkdir()
    (tmp_path / "cliques" / "rack1.json").write_text(json.dumps(kept))
    (tmp_path / "nvbandwidth").mkdir()
    (tmp_path / "nvbandwidth" / "rack1.json").write_text(json.dumps(dict(kept, check="nvbandwidth", run_id="run1")))
    result = vr.refusal(
        {"task": "Check the NVLink bandwidth", "reason": "no rack", "run_id": "run2", "records_dir": str(tmp_path)},
        read,
    )
    assert result["checks"] == ["cliques", "imex_channel", "nvbandwidth"]
    assert sorted(result["records"]) == ["imex_channel", "nvbandwidth"]
    [record] = result["records"]["nvbandwidth"]
    assert (record["rack"], record["run_id"], record["outcome"], record["verdict"], record["passed"]) == (
        "fleet",
        "run2",
        "error",
        "error",
        False,
    )
    assert record["summary"] == (
        "nvbandwidth did not run, which says nothing of the fabric; the run was refused at the task 'Check the NVLink "
        "bandwidth': no rack"
    )
    assert (result["verdict"], result["summary"]) == (
        "error",
        "ERROR: the run was refused at the task 'Check the NVLink bandwidth': no rack",
    )


def test_without_a_run_id_or_records_no_record_counts_as_written(tmp_path):
    (tmp_path / "cliques").mkdir()
    (tmp_path / "cliques" / "rack1.json").write_text("not json")
    assert not vr.has_record(str(tmp_path), "cliques", "run1", read)
    assert not vr.has_record(str(tmp_path), "imex_channel", "run1", read)
    assert not vr.has_record("", "cliques", "run1", read)
