# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The views the checks write of their records (checks.views, Check.view), over the stored fleet records."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import view_problems
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks.views import (
    LIST_LIMIT,
    binary_size,
    detail_facts,
    pairs_table,
)

from tests.conftest import FIXTURES

RECORDS = FIXTURES / "verification_records" / "records"


def stored(name: str) -> dict:
    return json.loads((RECORDS / f"{name}.json").read_text())


def facts(view: dict) -> dict:
    return {item["label"]: item["value"] for item in view["facts"]}


def test_the_bandwidth_view_lists_the_facts_the_low_gpu_and_the_pairs_it_does_not_explain():
    record = stored("nvbandwidth/rack1")
    view = checks.get("nvbandwidth").view(record)
    shown = facts(view)
    assert shown["threshold (GB/s)"] == "765.00 (0.85 x 900.00 GB/s NVLink peak of NVIDIA-GB200)"
    assert shown["fraction of the peak required"] == "0.85"
    assert shown["min / mean / max (GB/s)"] == "402.11 / 820.05 / 822.16"
    low, pairs = view["tables"]
    assert low["rows"] == [["62", "gb200-r1-t15", "142", "775.68", "775.67", "0.944"]]
    assert pairs["rows"] == [["13", "45", "402.11", "0.490", "floor", "gb200-r1-t3 -> gb200-r1-t11"]]
    assert pairs["note"] == "142 more failing pairs involve the low GPUs above; report.json lists every pair."
    assert view["findings"] == []


def test_a_long_list_of_pairs_stops_at_the_limit_and_says_how_many_more():
    details = {
        "failing_pairs": [{"src": 0, "dst": dst, "gbps": 770.0, "rule": "median"} for dst in range(1, 31)],
        "gpus_per_node": 4,
        "matrix": [[1.0] * 8 for _row in range(8)],
    }
    pairs = pairs_table(details, ["t0", "t1"])
    assert len(pairs["rows"]) == LIST_LIMIT
    assert pairs["rows"][4] == ["0", "5", "770.00", "", "median", "t0 -> t1"]
    assert pairs["note"] == "10 more failing pairs not listed here; report.json lists every pair."


def test_the_cliques_and_nccl_views_show_their_tables():
    cliques = checks.get("cliques").view(stored("cliques/rack0"))
    assert facts(cliques) == {"GPU nodes": "18"}
    (labels,) = cliques["tables"]
    assert labels["columns"] == ["clique", "trays"]
    assert labels["rows"][0][1].startswith("gb200-r0-t0, gb200-r0-t1, ")
    nccl = checks.get("nccl").view(stored("nccl/rack0"))
    assert facts(nccl)["arguments"] == "-b, 1G, -e, 8G, -f, 2, -g, 1"
    assert nccl["tables"][0]["rows"][0][:2] == ["1 GiB", "1073741824"]


def test_the_channel_listing_is_quoted_as_it_came():
    shown = detail_facts({"channel0": "crw-rw-rw-  1 0 0\n235, 0 channel0", "namespace": "ns"})
    assert shown == [
        {"label": "namespace", "value": "ns"},
        {"label": "channel0", "value": "crw-rw-rw-  1 0 0 235, 0 channel0", "code": True},
    ]


def test_the_tray_pod_checks_show_each_trays_problems_and_notes_and_leave_out_a_clean_tray():
    record = {
        "check": "gpu_health",
        "details": {
            "namespace": "gpu-fabric-verify-gpu-health-rack0",
            "trays": {
                "gb200-r0-t10": {"problems": [], "notes": ["GPU 0 NVLink 3: replay errors 4"]},
                "gb200-r0-t2": {"problems": ["GPU 2: NVLink 7 inactive (17 of 18 links up)"], "notes": []},
                "gb200-r0-t3": {"problems": [], "notes": []},
            },
        },
    }
    for name in ("gpu_health", "dcgm_diag"):
        view = checks.get(name).view(record)
        assert view["findings"] == [
            {"tray": "gb200-r0-t2", "problems": ["GPU 2: NVLink 7 inactive (17 of 18 links up)"], "notes": []},
            {"tray": "gb200-r0-t10", "problems": [], "notes": ["GPU 0 NVLink 3: replay errors 4"]},
        ]
        assert facts(view) == {"namespace": "gpu-fabric-verify-gpu-health-rack0"}


@pytest.mark.parametrize("name", checks.names())
def test_every_check_writes_a_valid_view_of_its_record(name):
    paths = sorted(RECORDS.glob(f"{name}/*.json"))
    records = [json.loads(path.read_text()) for path in paths] or [{"check": name, "details": {}}]
    for record in records:
        assert view_problems(checks.get(name).view(record)) == []


def test_sizes_show_in_binary_units():
    assert [binary_size(size) for size in (512, 1024, 1073741824, 8589934592, 1536, -1)] == [
        "512 B",
        "1 KiB",
        "1 GiB",
        "8 GiB",
        "1536 B",
        "-1",
    ]
