# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verification metrics of the fleet records, read back with Prometheus's own Python parser."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import metrics
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.history import record_run
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


def test_tray_figures_of_a_bisect_matrix_follow_its_row_pairs():
    details = {
        "gpus_per_node": 2,
        "matrix": [[700.0], [800.0], [None], [810.0]],
        "row_pairs": [[0, 2], [1, 3], [2, 0], [3, 1]],
    }
    assert metrics.matrix_pairs(details) == [(0, 2, 700.0), (1, 3, 800.0), (3, 1, 810.0)]
    figures = {"min": 700.0, "median": 800.0, "weakest_gpu": 700.0}  # GPU 0 and 2 share the 700 pair
    assert metrics.tray_bandwidth({"nodes": ["t0", "t1"], "details": details}) == {"t0": figures, "t1": figures}


def test_tray_figures_of_a_square_matrix_leave_out_its_diagonal():
    record = {
        "nodes": ["t0", "t1"],
        "details": {"gpus_per_node": 1, "matrix": [[None, 500.0], [700.0, 9999.0]]},
    }
    figures = {"min": 500.0, "median": 600.0, "weakest_gpu": 600.0}  # each GPU's median of its two pairs: 600
    assert metrics.tray_bandwidth(record) == {"t0": figures, "t1": figures}


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


@pytest.mark.parametrize(
    ("given", "text"),
    [(1, "1"), (0, "0"), (821450000000, "821450000000"), (105.786, "105.786"), (1.0, "1"), (1e300, "1e+300")],
)
def test_values_are_written_exactly(given, text):
    assert metrics.format_value(given) == text


def test_bandwidth_is_in_bytes_per_second():
    assert metrics.bytes_per_second(821.45) == 821_450_000_000
    assert metrics.bytes_per_second(None) is None
    assert metrics.bytes_per_second(float("nan")) is None
    assert metrics.bytes_per_second(True) is None


def test_no_sample_makes_no_text():
    assert metrics.render([metrics.Family("gpu_fabric_x", "gauge", "x", ("rack",))]) == ""
