# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.mnnvl import FilterModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.rolling import host_racks, rack_peers, rack_waves


def test_one_tray_per_rack_per_wave_in_the_given_order():
    hosts = ["r1-t01", "r1-t02", "r2-t01", "r1-t03", "r2-t02"]
    racks = {"r1-t01": "r1", "r1-t02": "r1", "r1-t03": "r1", "r2-t01": "r2", "r2-t02": "r2"}
    assert rack_waves(hosts, racks) == [["r1-t01", "r2-t01"], ["r1-t02", "r2-t02"], ["r1-t03"]]


def test_hosts_without_a_rack_go_one_at_a_time():
    assert rack_waves(["a", "b", "c"], {"c": "r1"}) == [["a", "c"], ["b"]]
    assert rack_waves(["a", "b"], {"a": "", "b": None}) == [["a"], ["b"]]


def test_no_hosts_no_waves_and_duplicates_once():
    assert rack_waves([], {}) == []
    assert rack_waves(["a", "a"], {"a": "r1"}) == [["a"]]


def test_filter_refuses_other_inputs():
    waves = FilterModule().filters()["rack_waves"]
    assert waves(["a", "b"], {"a": "r1", "b": "r2"}) == [["a", "b"]]
    with pytest.raises(AnsibleFilterError, match="list of host names"):
        waves("a", {})
    with pytest.raises(AnsibleFilterError, match="mapping of host name to rack"):
        waves(["a"], ["r1"])


def test_host_racks_from_the_host_variable_or_the_racks_map():
    host_vars = {"t1": {"gpu_fabric_rack": "r1"}, "t2": {}, "t3": {"gpu_fabric_rack": ""}, "t4": {}}
    racks = {"r2": ["t2", "t3"]}
    assert host_racks(["t1", "t2", "t3", "t4"], host_vars, "gpu_fabric_rack", racks) == {
        "t1": "r1",
        "t2": "r2",
        "t3": "r2",
        "t4": "",
    }


def test_rack_peers_keep_the_order_and_stay_in_the_rack():
    racks = {"r1-t1": "r1", "r2-t1": "r2", "r1-t2": "r1", "r2-t2": "r2"}
    hosts = ["r1-t1", "r2-t1", "r1-t2", "r2-t2"]
    assert rack_peers("r1-t2", hosts, racks) == ["r1-t1", "r1-t2"]
    assert rack_peers("r2-t1", hosts, racks) == ["r2-t1", "r2-t2"]
    # Without a rack the whole list is the domain, as before racks were known.
    assert rack_peers("lonely", hosts, racks) == hosts


def test_rack_peers_filter_reads_hostvars():
    peers = FilterModule().filters()["rack_peers"]
    hostvars = {"a": {"gpu_fabric_rack": "r1"}, "b": {"gpu_fabric_rack": "r2"}, "c": {}}
    assert peers(["a", "b", "c"], "a", hostvars) == ["a"]
    assert peers(["a", "b", "c"], "c", hostvars, racks={"r2": ["c"]}) == ["b", "c"]
    with pytest.raises(AnsibleFilterError, match="racks must map"):
        peers(["a"], "a", hostvars, racks=["r1"])
