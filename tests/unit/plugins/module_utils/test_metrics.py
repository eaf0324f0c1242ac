# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verification metrics of the fleet records, read back with Prometheus's own Python parser."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import metrics
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history_runs import record_run
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_model import build_report
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_records import load_records, normalise_record

from tests.conftest import FIXTURES

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client (requirements-test.txt)")

RECORDS = FIXTURES / "verification_records" / "records"
RUN = "20261201T101500Z-ab12"
OLD_RUN = "20261124T083000Z-7c01"
TESTCASE = "multinode_device_to_device_memcpy_read_ce"
FINISHED = datetime(2026, 12, 1, 10, 17, 31, 904466, tzinfo=timezone.utc).timestamp()  # the run's last record


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(name, sorted labels) -> value of every sample, as prometheus_client parses the text."""
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            assert sample.timestamp is None, sample
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def names(found) -> set[str]:
    return {name for name, _labels in found}


@pytest.fixture(scope="module")
def fleet_text() -> str:
    return metrics.render(metrics.metric_families(build_report(load_records(str(RECORDS)), "t", RUN)))


def test_the_fleet_records_give_the_verdicts_bandwidth_and_durations(fleet_text):
    found = samples(fleet_text)
    assert value(found, "gpu_fabric_verification_verdict", verdict="failed") == 1
    assert value(found, "gpu_fabric_verification_verdict", verdict="passed") == 0
    assert value(found, "gpu_fabric_verification_run_info", run_id=RUN) == 1
    assert value(found, "gpu_fabric_verification_finished_timestamp_seconds") == pytest.approx(FINISHED)
    assert value(found, "gpu_fabric_verification_passed", rack="rack1", check="nvbandwidth") == 0
    assert value(found, "gpu_fabric_verification_passed", rack="rack0", check="nvbandwidth") == 1  # allowed
    assert value(found, "gpu_fabric_check_verdict", rack="rack1", check="nvbandwidth", verdict="failed") == 1
    assert value(found, "gpu_fabric_rack_verdict", rack="rack0", verdict="incomplete") == 1
    assert value(found, "gpu_fabric_rack_verdict", rack="rack2", verdict="passed") == 1
    assert value(found, "gpu_fabric_rack_trays", rack="rack2", state="skipped") == 1
    assert value(found, "gpu_fabric_check_duration_seconds", rack="rack1", check="nvbandwidth") == 105.786
    bandwidth = {"check": "nvbandwidth", "testcase": TESTCASE}
    assert value(found, "gpu_fabric_rack_bandwidth_min_bytes_per_second", rack="rack1", **bandwidth) == 402.11e9
    assert value(found, "gpu_fabric_rack_bandwidth_median_bytes_per_second", rack="rack2", **bandwidth) == 821.45e9
    # the degraded pair GPU 13 -> GPU 45 lies on t3 and t11; GPU 62 on t15 lost one NVLink, which lowers one pair
    # with every tray: its median is the rule's own figure (low_gpus), t15's weakest GPU and no other tray's
    tray = dict(rack="rack1", **bandwidth)
    lowest, weakest = (
        "gpu_fabric_tray_bandwidth_min_bytes_per_second",
        "gpu_fabric_tray_weakest_gpu_bandwidth_bytes_per_second",
    )
    assert value(found, lowest, node="gb200-r1-t3", **tray) == 402.11e9
    assert value(found, lowest, node="gb200-r1-t11", **tray) == 402.11e9
    assert value(found, lowest, node="gb200-r1-t0", **tray) == 774.78e9
    assert value(found, weakest, node="gb200-r1-t15", **tray) == 775.67e9
    for node in ("gb200-r1-t0", "gb200-r1-t3", "gb200-r1-t11"):
        assert value(found, weakest, node=node, **tray) > 820e9
        assert value(found, "gpu_fabric_tray_bandwidth_median_bytes_per_second", node=node, **tray) > 820e9
    assert value(found, "gpu_fabric_tray_verified", node="gb200-r1-t3", rack="rack1", verdict="failed") == 1
    assert value(found, "gpu_fabric_tray_verified", node="gb200-r1-t3", rack="rack1", verdict="passed") == 0
    assert value(found, "gpu_fabric_tray_verified", node="gb200-r2-t7", rack="rack2", verdict="skipped") == 1
    # rack0 passed every check of the run (nvbandwidth incomplete, allowed), rack1 did not
    assert value(found, "gpu_fabric_last_pass_timestamp_seconds", rack="rack0") == pytest.approx(FINISHED)
    assert ("gpu_fabric_last_pass_timestamp_seconds", (("rack", "rack1"),)) not in found


def test_a_figure_not_measured_has_no_sample(fleet_text):
    found = samples(fleet_text)
    # rack0's nvbandwidth measured nothing (incomplete); its skipped trays and the older NCCL run neither
    assert not [key for key in found if "bandwidth" in key[0] and ("rack", "rack0") in key[1]]
    assert not [key for key in found if "bandwidth" in key[0] and ("node", "gb200-r2-t7") in key[1]]
    assert not [name for name in names(found) if name.startswith("gpu_fabric_nccl")]
    assert all(value != 0 for key, value in found.items() if "bytes_per_second" in key[0])


def test_the_nccl_bus_bandwidth_of_a_run_that_ran_it():
    report = build_report(load_records(str(RECORDS)), "t", OLD_RUN)
    found = samples(metrics.render(metrics.metric_families(report)))
    labels = {"rack": "rack0", "check": "nccl", "benchmark": "all_reduce_perf"}
    assert value(found, "gpu_fabric_nccl_bus_bandwidth_average_bytes_per_second", **labels) == 787.804e9
    assert value(found, "gpu_fabric_nccl_bus_bandwidth_max_bytes_per_second", **labels) == 805.64e9
    assert not [name for name in names(found) if name.startswith("gpu_fabric_rack_bandwidth")]


def test_every_family_has_help_and_type_once_and_a_base_unit(fleet_text):
    families = list(parser.text_string_to_metric_families(fleet_text))
    assert len({family.name for family in families}) == len(families)
    for family in families:
        assert family.name.startswith("gpu_fabric_") and family.type == "gauge" and family.documentation
        assert fleet_text.count(f"# HELP {family.name} ") == 1 and fleet_text.count(f"# TYPE {family.name} ") == 1
        assert "gbps" not in family.name and "gigabytes" not in family.name
    # one label set per family: node-exporter's textfile collector refuses a family whose label names differ
    for family in families:
        assert len({tuple(sorted(sample.labels)) for sample in family.samples}) == 1, family.name


def test_the_text_is_the_same_whatever_order_the_records_come_in(fleet_text):
    records = load_records(str(RECORDS))
    again = metrics.render(metrics.metric_families(build_report(list(reversed(records)), "t", RUN)))
    assert again == fleet_text
    assert fleet_text.index('node="gb200-r1-t2"') < fleet_text.index('node="gb200-r1-t10"')


def test_label_values_are_escaped_and_parse_back():
    raw = json.loads((RECORDS / "cliques" / "rack0.json").read_text())
    rack = 'rack "a"\\b\nc'
    raw.update(rack=rack, summary="x")
    record = normalise_record(raw, "records/cliques/odd.json", "cliques", rack)
    text = metrics.render(metrics.metric_families(build_report([record], "t")))
    assert 'rack="rack \\"a\\"\\\\b\\nc"' in text
    found = samples(text)
    assert value(found, "gpu_fabric_verification_passed", rack=rack, check="cliques") == 1
    assert metrics.escape_help("a\\b\nc") == "a\\\\b\\nc"


def test_a_check_that_could_not_run_gives_its_verdict_and_no_figure():
    raw = json.loads((RECORDS / "nvbandwidth" / "rack2.json").read_text())
    raw.update(outcome="error", passed=False, summary="the API server did not answer")
    record = normalise_record(raw, "records/nvbandwidth/rack2.json", "nvbandwidth", "rack2")
    found = samples(metrics.render(metrics.metric_families(build_report([record], "t"))))
    assert value(found, "gpu_fabric_check_verdict", rack="rack2", check="nvbandwidth", verdict="error") == 1
    assert value(found, "gpu_fabric_verification_verdict", verdict="error") == 1
    assert not [name for name in names(found) if "bandwidth" in name]


def test_a_record_without_a_median_or_in_another_unit_has_no_bandwidth_sample():
    raw = json.loads((RECORDS / "nvbandwidth" / "rack2.json").read_text())
    no_median = copy.deepcopy(raw)
    no_median["details"].update(median_gbps=None, min=None, matrix=None)
    latency = copy.deepcopy(raw)
    latency["details"]["unit"] = "us"
    for changed in (no_median, latency):
        record = normalise_record(changed, "records/nvbandwidth/rack2.json", "nvbandwidth", "rack2")
        found = samples(metrics.render(metrics.metric_families(build_report([record], "t"))))
        assert not [name for name in names(found) if "bandwidth" in name]
        assert value(found, "gpu_fabric_verification_passed", rack="rack2", check="nvbandwidth") == 1


def test_the_last_pass_of_each_rack_comes_from_the_kept_runs(tmp_path):
    history = tmp_path / "runs"
    records = [r for r in load_records(str(RECORDS)) if r["run_id"] == RUN]
    old = [dict(r, run_id=OLD_RUN) for r in load_records(str(RECORDS)) if r["run_id"] == OLD_RUN]
    record_run(str(history), OLD_RUN, old)
    record_run(str(history), RUN, records)
    passes = metrics.history_last_passes(str(history))
    # rack0 passed both runs (the newer counts); rack1 failed nvbandwidth in the only run it had; rack2 passed
    assert passes == {"rack0": pytest.approx(FINISHED), "rack2": pytest.approx(FINISHED)}
    assert metrics.history_last_passes(str(tmp_path / "none")) == {}


def test_a_rack_that_fails_now_keeps_the_time_it_last_passed():
    index = {
        "runs": [
            {"run_id": "r2", "started": "2026-12-02T10:00:00Z", "finished": "2026-12-02T10:05:00Z",
             "verdicts": {"cliques/rack1": "passed", "nvbandwidth/rack1": "failed"}},
            {"run_id": "r1", "started": "2026-12-01T10:00:00Z", "finished": "2026-12-01T10:05:00Z",
             "verdicts": {"cliques/rack1": "passed", "nvbandwidth/rack1": "passed", "nvbandwidth/rack9": "error"}},
        ]
    }  # fmt: skip
    passes = metrics.last_passes(index)
    assert passes == {"rack1": datetime(2026, 12, 1, 10, 5, tzinfo=timezone.utc).timestamp()}
    report = build_report(load_records(str(RECORDS)), "t", RUN)
    family = next(f for f in metrics.metric_families(report, passes) if f.name.endswith("last_pass_timestamp_seconds"))
    assert family.samples[("rack1",)] == passes["rack1"]  # this run failed rack1: the older pass stays
    assert family.samples[("rack2",)] == pytest.approx(FINISHED)  # this run passed rack2


def test_the_last_pass_passes_over_what_is_no_history_entry_and_reads_a_cut_index_rebuilt(tmp_path):
    index = {
        "runs": [
            {"run_id": "r3", "finished": "2026-12-03T10:05:00Z", "verdicts": "nvbandwidth/rack1: passed"},
            {"run_id": "r2", "finished": "2026-12-02T10:05:00Z", "verdicts": {"nvbandwidth/rack1": "passed"}},
            "r1",
        ]
    }
    assert metrics.last_passes(index) == {"rack1": datetime(2026, 12, 2, 10, 5, tzinfo=timezone.utc).timestamp()}
    history = tmp_path / "runs"
    record_run(str(history), RUN, [r for r in load_records(str(RECORDS)) if r["run_id"] == RUN])
    text = (history / "index.json").read_text()
    (history / "index.json").write_text(text[: len(text) // 3])
    warnings = []
    assert metrics.history_last_passes(str(history), warnings) == {
        "rack0": pytest.approx(FINISHED),
        "rack2": pytest.approx(FINISHED),
    }
    assert warnings[0].startswith(f"the history index {history}/index.json cannot be read (")


@pytest.mark.parametrize(
    ("given", "text"),
    [(1, "1"), (0, "0"), (821450000000, "821450000000"), (105.786, "105.786"), (1.0, "1"), (1e300, "1e+300")],
)
def test_values_are_written_exactly(given, text):
    assert metrics.format_value(given) == text


def test_no_sample_makes_no_text():
    assert metrics.render([metrics.Family("gpu_fabric_x", "gauge", "x", ("rack",))]) == ""


# ----------------------------------------------------------------------------------------- a run that reached no rack

UNREACHED_RUN = "20261202T101500Z-0e0e"
UNREACHED_AT = "2026-12-02T10:15:03.000000Z"


def unreached_records(check: str = "cliques") -> list[dict]:
    """The records ``fabric_verify`` writes when no API server answers: one ``error`` of the rack ``fleet``."""
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.fleet import (
        FLEET,
        error_records,
        unreachable_message,
    )
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import completed

    message = unreachable_message("the API server https://10.0.0.1:6443 did not answer")
    return [
        completed(r, UNREACHED_AT, UNREACHED_AT, {"host": "https://10.0.0.1:6443"})
        for r in error_records(check, [FLEET], message, UNREACHED_RUN)
    ]


def unreached_report() -> dict:
    records = [normalise_record(r, f"records/{r['check']}/fleet.json") for r in unreached_records()]
    return build_report(records, "t", UNREACHED_RUN)


def racks_labelled(found, name: str) -> set[str]:
    return {dict(labels)["rack"] for key, labels in found if key == name}


def test_the_fleet_s_records_are_those_of_the_runner_s_unreached_fleet():
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.record import FLEET

    assert FLEET.name == metrics.NO_RACK_REACHED
    assert {r["rack"] for r in unreached_records()} == {metrics.NO_RACK_REACHED}


def test_a_run_that_reached_no_rack_gives_its_error_to_each_declared_rack():
    families = metrics.metric_families(unreached_report(), declared=["rack2", "rack0", "rack1"])
    found = samples(metrics.render(families))
    for rack in ("rack0", "rack1", "rack2"):
        assert value(found, "gpu_fabric_rack_verdict", rack=rack, verdict="error") == 1
        assert value(found, "gpu_fabric_rack_verdict", rack=rack, verdict="failed") == 0
        assert value(found, "gpu_fabric_check_verdict", rack=rack, check="cliques", verdict="error") == 1
        assert value(found, "gpu_fabric_verification_passed", rack=rack, check="cliques") == 0
    assert not [labels for _name, labels in found if ("rack", "fleet") in labels]
    assert value(found, "gpu_fabric_verification_verdict", verdict="error") == 1
    # nothing was measured on a rack: no duration, no trays
    assert racks_labelled(found, "gpu_fabric_check_duration_seconds") == set()
    assert racks_labelled(found, "gpu_fabric_rack_trays") == set()


def test_without_declared_racks_the_error_goes_to_each_rack_the_history_knows_else_stays_the_fleet_s():
    known = {"cliques/rack1": ("failed", 100.0), "cliques/rack7": ("passed", 90.0)}
    found = samples(metrics.render(metrics.metric_families(unreached_report(), {"rack3": 80.0}, known)))
    assert racks_labelled(found, "gpu_fabric_rack_verdict") == {"rack1", "rack3", "rack7"}
    assert value(found, "gpu_fabric_rack_verdict", rack="rack3", verdict="error") == 1
    alone = samples(metrics.render(metrics.metric_families(unreached_report())))
    assert racks_labelled(alone, "gpu_fabric_rack_verdict") == {"fleet"}  # no rack known: the fleet's error


def test_a_check_that_reached_no_rack_joins_the_verdict_of_the_racks_another_check_reached():
    reached = [r for r in load_records(str(RECORDS)) if r["run_id"] == RUN and r["check"] == "nvbandwidth"]
    unreached = [normalise_record(dict(r, run_id=RUN), "records/cliques/fleet.json") for r in unreached_records()]
    report = build_report(reached + unreached, "t", RUN)
    found = samples(metrics.render(metrics.metric_families(report, declared=["rack0", "rack1", "rack2"])))
    # rack1 failed nvbandwidth (failed outranks error, as in report_model.rack_verdict); rack2 passed it
    assert value(found, "gpu_fabric_rack_verdict", rack="rack1", verdict="failed") == 1
    assert value(found, "gpu_fabric_rack_verdict", rack="rack2", verdict="error") == 1
    assert value(found, "gpu_fabric_rack_verdict", rack="rack2", verdict="passed") == 0
    assert value(found, "gpu_fabric_check_verdict", rack="rack2", check="nvbandwidth", verdict="passed") == 1
    assert value(found, "gpu_fabric_check_verdict", rack="rack2", check="cliques", verdict="error") == 1
    assert value(found, "gpu_fabric_rack_trays", rack="rack2", state="skipped") == 1  # the rack's own view stays


# ----------------------------------------------------------------------------------------- the last known verdict


def test_each_checks_last_verdict_is_that_of_the_newest_run_in_which_it_judged_the_rack():
    index = {
        "runs": [
            {"run_id": "r3", "started": "2026-12-03T10:00:00Z", "finished": "2026-12-03T10:01:00Z",
             "verdicts": {"cliques/fleet": "error"}},
            {"run_id": "r2", "started": "2026-12-02T10:00:00Z", "finished": "2026-12-02T10:05:00Z",
             "verdicts": {"cliques/rack1": "passed", "nvbandwidth/rack1": "failed", "cliques/rack2": "passed",
                          "nvbandwidth/rack2": "error"}},
            {"run_id": "r1", "started": "2026-12-01T10:00:00Z", "finished": None,
             "verdicts": {"cliques/rack2": "passed", "nvbandwidth/rack2": "passed"}},
            "not a run",
        ]
    }  # fmt: skip
    day = {n: datetime(2026, 12, n, 10, tzinfo=timezone.utc).timestamp() for n in (1, 2)}
    found = metrics.last_check_verdicts(index)
    assert found == {
        "cliques/rack1": ("passed", day[2] + 300),
        "nvbandwidth/rack1": ("failed", day[2] + 300),
        "cliques/rack2": ("passed", day[2] + 300),
        "nvbandwidth/rack2": ("passed", day[1]),  # r2 could not run it: r1 (no end: its start) is the last word
    }
    assert metrics.last_check_verdicts({"runs": "broken"}) == {}
    assert metrics.rack_last_verdicts(found, ["cliques", "nvbandwidth"]) == {
        "rack1": metrics.RackLastVerdict("failed", day[2] + 300),
        "rack2": metrics.RackLastVerdict("passed", day[2] + 300),  # when the last of its required checks passed
    }


def test_a_rack_passes_only_when_every_required_check_passed_in_the_newest_run_that_judged_it():
    found = {
        "cliques/rack1": ("passed", 30.0),
        "nvbandwidth/rack1": ("passed", 10.0),
        "cliques/rack2": ("passed", 30.0),
    }
    required = ["cliques", "imex_channel", "nvbandwidth"]
    assert metrics.rack_last_verdicts(found, required, ["rack3"]) == {
        "rack1": metrics.RackLastVerdict("unverified", 30.0, ("imex_channel",)),
        "rack2": metrics.RackLastVerdict("unverified", 30.0, ("imex_channel", "nvbandwidth")),
        "rack3": metrics.RackLastVerdict("unverified", None, tuple(required)),  # declared, never judged
    }
    # no required checks named: every check that judged the rack
    assert metrics.rack_last_verdicts(found)["rack2"] == metrics.RackLastVerdict("passed", 30.0)
    # a failure outranks what is missing, and any check's last failure fails the rack
    failed = dict(found, **{"nccl/rack2": ("failed", 5.0)})
    assert metrics.rack_last_verdicts(failed, required)["rack2"] == metrics.RackLastVerdict("failed", 5.0)


def test_the_last_verdict_family_keeps_a_failed_rack_failed_through_a_run_that_reached_no_rack():
    known = {"cliques/rack1": ("failed", 1000.0), "cliques/rack2": ("passed", 900.0), "cliques/rack9": ("failed", 10.0)}
    families = metrics.metric_families(unreached_report(), {"rack2": 900.0, "rack9": 5.0}, known, ["rack1", "rack2"])
    found = samples(metrics.render(families))
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="failed") == 1
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="passed") == 0
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack2", verdict="passed") == 1
    assert value(found, "gpu_fabric_rack_last_verdict_timestamp_seconds", rack="rack1") == 1000.0
    assert value(found, "gpu_fabric_last_pass_timestamp_seconds", rack="rack2") == 900.0
    # rack9 is no longer declared: no stale sample of it
    assert "rack9" not in racks_labelled(found, "gpu_fabric_rack_last_verdict")
    assert "rack9" not in racks_labelled(found, "gpu_fabric_last_pass_timestamp_seconds")


def test_this_run_s_verdicts_are_newer_than_the_kept_ones():
    report = build_report(load_records(str(RECORDS)), "t", RUN)
    known = {"cliques/rack1": ("passed", 10.0), "nvbandwidth/rack2": ("failed", FINISHED + 60)}  # rack2: a newer run
    found = samples(metrics.render(metrics.metric_families(report, None, known)))
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="failed") == 1
    assert value(found, "gpu_fabric_rack_last_verdict_timestamp_seconds", rack="rack1") == pytest.approx(FINISHED)
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack0", verdict="passed") == 1  # incomplete, allowed
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack2", verdict="failed") == 1


def test_docs_metrics_names_every_family():
    from tests.conftest import REPO_ROOT

    docs = (REPO_ROOT / "docs" / "metrics.md").read_text()
    for family in metrics.metric_families(unreached_report()):
        assert f"| `{family.name}` |" in docs, family.name


def test_error_records_that_name_each_declared_rack_keep_each_rack_s_last_verdict_too():
    named = [
        normalise_record(dict(r, rack=rack), f"records/cliques/{rack}.json")
        for r in unreached_records()
        for rack in ("rack1", "rack2")
    ]
    report = build_report(named, "t", UNREACHED_RUN)
    known = {"cliques/rack1": ("failed", 1000.0), "cliques/rack2": ("passed", 900.0)}
    found = samples(metrics.render(metrics.metric_families(report, {"rack2": 900.0}, known, ["rack1", "rack2"])))
    assert racks_labelled(found, "gpu_fabric_rack_verdict") == {"rack1", "rack2"}
    assert value(found, "gpu_fabric_rack_verdict", rack="rack1", verdict="error") == 1
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack1", verdict="failed") == 1
    assert value(found, "gpu_fabric_rack_last_verdict", rack="rack2", verdict="passed") == 1
    assert value(found, "gpu_fabric_last_pass_timestamp_seconds", rack="rack2") == 900.0


def test_a_declared_rack_the_cluster_does_not_show_counts_its_trays_missing():
    """The rack's tray counts are the report's coverage counts: found, verified and missing of each rack."""
    raw = json.loads((RECORDS / "nvbandwidth" / "rack2.json").read_text())
    missing = [
        {"node": f"gb200-r9-t{tray}", "reason": "declared in gpu_fabric_racks, no Node of that name"} for tray in (0, 1)
    ]
    raw.update(
        rack="rack9",
        outcome="error",
        passed=False,
        nodes=[],
        summary="rack rack9: declared in gpu_fabric_racks with 2 trays, none of them a GPU Node of the cluster",
        trays={
            "expected": 0,
            "found": [],
            "skipped": [],
            "declared": ["gb200-r9-t0", "gb200-r9-t1"],
            "missing": missing,
        },
    )
    record = normalise_record(raw, "records/nvbandwidth/rack9.json", "nvbandwidth", "rack9")
    found = samples(metrics.render(metrics.metric_families(build_report([record], "t"))))
    assert value(found, "gpu_fabric_rack_trays", rack="rack9", state="missing") == 2
    assert value(found, "gpu_fabric_rack_trays", rack="rack9", state="declared") == 2
    assert value(found, "gpu_fabric_rack_trays", rack="rack9", state="found") == 0
    assert value(found, "gpu_fabric_rack_verdict", rack="rack9", verdict="error") == 1
