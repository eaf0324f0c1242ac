# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nvbandwidth_parse and clique_groups filters on real captures and Node objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.mnnvl import (
    FilterModule,
    chart_values,
    checks_selected,
    clique_groups,
    download_failure,
    dra_api_problem,
    dra_api_version,
    dra_driver_problem,
    driver_owner_conflict,
    gpu_operator_problem,
    grub_cmdline_dropin,
    imex_driver_mismatch,
    kernel_args_missing,
    nvbandwidth_parse,
    openshift_detected,
    rack_clique_conflicts,
    rack_peers,
    rack_waves,
    release_set,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
NVBW = FIXTURES / "nvbandwidth"
MN = "multinode_device_to_device_memcpy_read_ce"
REAL_CLIQUE = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32766"


def test_filters_are_exported():
    assert FilterModule().filters() == {
        "nvbandwidth_parse": nvbandwidth_parse,
        "clique_groups": clique_groups,
        "openshift_detected": openshift_detected,
        "rack_waves": rack_waves,
        "rack_peers": rack_peers,
        "rack_clique_conflicts": rack_clique_conflicts,
        "imex_driver_mismatch": imex_driver_mismatch,
        "kernel_args_missing": kernel_args_missing,
        "grub_cmdline_dropin": grub_cmdline_dropin,
        "dra_api_version": dra_api_version,
        "dra_api_problem": dra_api_problem,
        "chart_values": chart_values,
        "driver_owner_conflict": driver_owner_conflict,
        "release_set": release_set,
        "gpu_operator_problem": gpu_operator_problem,
        "dra_driver_problem": dra_driver_problem,
        "checks_selected": checks_selected,
        "download_failure": download_failure,
    }


def test_checks_selected_refuses_a_name_that_is_no_check_in_one_line():
    assert checks_selected(["gpu_fabric_none"], [], [], ["nvbandwidth"]) == []
    assert checks_selected(["cliques"], [], [], []) == ["cliques"]
    with pytest.raises(AnsibleFilterError, match=r"^gpu_fabric_verify_checks names dcgm, which is no check"):
        checks_selected(["all"], [], ["dcgm"], [])


def test_checks_selected_reads_a_string_of_checks_as_names_not_letters():
    assert checks_selected([], [], "gpu_health", []) == ["gpu_health"]
    assert checks_selected([], [], "dcgm_diag, gpu_health", []) == ["gpu_health", "dcgm_diag"]


def test_dra_api_version_reads_k8s_cluster_info_apis():
    assert dra_api_version({"v1": {}, "resource.k8s.io/v1beta1": {}, "resource.k8s.io/v1beta2": {}}) == (
        "resource.k8s.io/v1beta2"
    )
    assert dra_api_version({"v1": {}}) == ""
    with pytest.raises(AnsibleFilterError, match="dra_api_version: expected"):
        dra_api_version(None)


def test_dra_api_problem_gives_the_advice_for_the_servers_version():
    assert dra_api_problem({"resource.k8s.io/v1": {}}, "v1.34.4") == ""
    text = dra_api_problem({"v1": {}}, "v1.33.13")
    assert "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true" in text
    assert dra_api_problem({"resource.k8s.io/v1beta2": {}}, "v1.33.13", "resource.k8s.io/v1").startswith(
        "the API server v1.33.13 serves resource.k8s.io/v1beta2 but not resource.k8s.io/v1"
    )


def test_openshift_detected_reads_k8s_cluster_info_apis():
    apis = {"v1": {}, "security.openshift.io/v1": {}, "config.openshift.io/v1": {}}
    assert openshift_detected(apis) is True
    assert openshift_detected({"v1": {}, "apps/v1": {}}) is False
    with pytest.raises(AnsibleFilterError, match="openshift_detected: expected"):
        openshift_detected(None)


def test_nvbandwidth_parse_gb200_text():
    parsed = nvbandwidth_parse((NVBW / "gb200-2node-multinode_device_to_device_memcpy_read_ce.txt").read_text())
    assert list(parsed) == [MN]
    record = parsed[MN]
    assert record["status"] == "Passed"
    assert record["description"] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"
    assert record["unit"] == "GB/s"
    assert record["sum"] == 45997.93
    assert record["matrix"][0] == [None, 822.16, 821.69, 821.92, 821.45, 821.30, 821.53, 821.69]
    assert record["min"] == 820.35 and record["max"] == 822.16


def test_nvbandwidth_parse_json_string_and_decoded_give_the_same():
    text = (NVBW / "h200x2-device_to_device_memcpy_read_ce.json").read_text()
    from_text = nvbandwidth_parse(text)
    from_dict = nvbandwidth_parse(json.loads(text))
    assert from_text == from_dict
    assert from_text["device_to_device_memcpy_read_ce"]["matrix"] == [[None, 393.763], [393.745, None]]


def test_nvbandwidth_parse_bidirectional_parts():
    parsed = nvbandwidth_parse((NVBW / "invented-h200x2-bidirectional_read_ce.txt").read_text())
    record = parsed["device_to_device_bidirectional_memcpy_read_ce"]
    assert record["matrix"] == [[None, 744.85], [744.73, None]]
    assert sorted(record["matrices"]) == ["read1", "read2", "total"]
    assert record["matrices"]["read1"]["sum"] == 744.79
    assert record["matrices"]["read1"]["matrix"] == [[None, 372.41], [372.38, None]]


def test_nvbandwidth_parse_statuses_of_bad_runs():
    assert nvbandwidth_parse((NVBW / "invented-unknown-testcase.txt").read_text())["no_such_test"]["status"] == "ERROR"
    error = nvbandwidth_parse((NVBW / "invented-testcase-error.txt").read_text())["device_to_device_memcpy_read_ce"]
    assert error["status"] == "Error"
    assert error["message"] == "Unable to enable peer access between device 0 and device 1"
    assert error["matrix"] is None
    truncated = nvbandwidth_parse((NVBW / "invented-gb200-truncated.txt").read_text())[MN]
    assert truncated["status"] == "Incomplete"
    assert truncated["sum"] is None
    assert len(truncated["matrix"]) == 5


def test_nvbandwidth_parse_refuses_non_strings():
    with pytest.raises(AnsibleFilterError, match="expects the nvbandwidth output as a string"):
        nvbandwidth_parse(["a", "list"])
    with pytest.raises(AnsibleFilterError, match=r"no .* JSON document found"):
        nvbandwidth_parse("plain text", format="json")
    with pytest.raises(AnsibleFilterError, match="format is 'xml'"):
        nvbandwidth_parse("x", format="xml")


def _node(name, labels, gpus=None):
    status = {"capacity": {"nvidia.com/gpu": str(gpus)}} if gpus is not None else {}
    return {"metadata": {"name": name, "labels": labels}, "status": status}


def _guide_nodes():
    rows = [line.split() for line in (FIXTURES / "k8s" / "gb200-clique-labels.txt").read_text().splitlines()[1:]]
    return [_node(name, {label: value, "nvidia.com/gpu.present": "true"}, 4) for name, label, value in rows]


def test_clique_groups_guide_nodes():
    assert clique_groups(_guide_nodes()) == {
        REAL_CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"],
        "_unlabelled": [],
    }


def test_clique_groups_unlabelled_and_non_gpu():
    nodes = [*_guide_nodes(), _node("gb200-pod2-f06-node07", {}, 4), _node("control-plane-0", {})]
    assert clique_groups(nodes) == {
        REAL_CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"],
        "_unlabelled": ["gb200-pod2-f06-node07"],
    }
    assert clique_groups({"resources": nodes}, unlabelled_key="missing", non_gpu_key="cpu_only") == {
        REAL_CLIQUE: ["gb200-pod2-f06-node05", "gb200-pod2-f06-node06"],
        "missing": ["gb200-pod2-f06-node07"],
        "cpu_only": ["control-plane-0"],
    }


def test_clique_groups_errors():
    with pytest.raises(AnsibleFilterError, match="expects a list of Node objects"):
        clique_groups("node05")
    with pytest.raises(AnsibleFilterError, match="no metadata"):
        clique_groups([{"metadata": {}}])
    with pytest.raises(AnsibleFilterError, match="a clique is named '_unlabelled'"):
        clique_groups([_node("x", {"nvidia.com/gpu.clique": "_unlabelled"})])


SPLIT_CLIQUE = "69a19a31-f41c-45a5-8245-579b6bce5bdd.32767"


def tray_vars(name, rack=None, clique=None):
    """Host variables of a tray as the nvidia_driver role leaves them (no clique fact: not checked yet)."""
    variables = {"inventory_hostname": name, "gpu_fabric_rack": rack}
    if rack is not None:
        variables["nvidia_driver__rack"] = rack
    if clique is not None:
        variables["nvidia_driver__clique"] = clique
    return variables


def test_rack_clique_conflicts_reads_the_play_hosts_variables():
    trays = [tray_vars(f"gb200-r01-t{tray:02d}", "r01", REAL_CLIQUE) for tray in range(1, 19)]
    trays[4]["nvidia_driver__clique"] = SPLIT_CLIQUE
    trays.append(tray_vars("gb200-r01-t19", "r01"))  # in a later serial batch: not checked yet
    trays.append(tray_vars("gb200-r02-t01", "r02", SPLIT_CLIQUE))
    result = rack_clique_conflicts(trays, "gb200-r01-t01", "r01", REAL_CLIQUE, rack_var="gpu_fabric_rack")
    assert result["conflicts"] == {"gb200-r01-t05": SPLIT_CLIQUE}
    assert result["msg"] == (
        f"Hosts of rack r01 are in different NVLink cliques: gb200-r01-t01 is in '{REAL_CLIQUE}' and gb200-r01-t05 in "
        f"{SPLIT_CLIQUE}. An NVL72 rack is one NVLink domain: check the trays' fabric (nvidia-smi -q, Fabric section) "
        "and the NVLink switch trays, or fix gpu_fabric_rack."
    )
    assert rack_clique_conflicts(trays, "gb200-r02-t01", "r02", SPLIT_CLIQUE) == {"conflicts": {}, "msg": ""}


def test_rack_clique_conflicts_takes_a_mapping_and_other_keys():
    peers = {"t1": ["rack-a", REAL_CLIQUE], "t2": ["rack-a", None], "t3": ["rack-b", SPLIT_CLIQUE]}
    result = rack_clique_conflicts(peers, "t1", "rack-a", REAL_CLIQUE, rack_var="rack")
    assert result["conflicts"] == {"t2": ""}
    assert result["msg"].endswith(
        "t1 is in '" + REAL_CLIQUE + "' and t2 in ''. An NVL72 rack is one NVLink domain:"
        " check the trays' fabric (nvidia-smi -q, Fabric section) and the NVLink switch"
        " trays, or fix rack."
    )
    hosts = [
        {"inventory_hostname": "t1", "my_rack": "a", "my_clique": "x"},
        {"inventory_hostname": "t2", "my_rack": "a", "my_clique": "y"},
    ]
    found = rack_clique_conflicts(hosts, "t1", "a", "x", rack_key="my_rack", clique_key="my_clique")
    assert found["conflicts"] == {"t2": "y"}
    assert rack_clique_conflicts(hosts, "t1", "", "x", rack_key="my_rack", clique_key="my_clique")["conflicts"] == {}


def test_rack_clique_conflicts_errors():
    with pytest.raises(AnsibleFilterError, match="expected \\[rack, clique\\]"):
        rack_clique_conflicts({"t1": "rack-a"}, "t1", "rack-a", REAL_CLIQUE)
    with pytest.raises(AnsibleFilterError, match="with inventory_hostname"):
        rack_clique_conflicts([{"nvidia_driver__clique": REAL_CLIQUE}], "t1", "rack-a", REAL_CLIQUE)
    with pytest.raises(AnsibleFilterError, match="got str"):
        rack_clique_conflicts("t1", "t1", "rack-a", REAL_CLIQUE)
