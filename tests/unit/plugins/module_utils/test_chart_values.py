# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The charts' values: derived from the driver owner, merged in order, a contradiction refused in one line."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.mnnvl import FilterModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.chart_values import (
    ValuesError,
    chart_values,
    driver_owner_conflict,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.existing_install import merge

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
FILTERS = FilterModule().filters()


def test_merge_merges_mappings_key_by_key_and_replaces_everything_else():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}
    top = {"a": {"c": [3], "g": None}, "d": {"now": "a mapping"}, "e": "now a string"}
    assert merge(base, None, top) == {
        "a": {"b": 1, "c": [3], "g": None},
        "d": {"now": "a mapping"},
        "e": "now a string",
    }
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}  # the layers are not changed


def test_gpu_operator_values_follow_the_owner_and_the_user_has_the_last_word():
    values = chart_values(
        "gpu-operator",
        "operator",
        {"dcgm": {"enabled": False}, "toolkit": {"version": "v1.18.0"}},
        {"operator": {"repository": "mirror.example.com/nvidia"}},
        [GPU_TOLERATION],
        "auto",
    )
    assert values == {
        "driver": {"enabled": True},
        "dcgm": {"enabled": False},
        "daemonsets": {"tolerations": [GPU_TOLERATION]},
        "dcgmExporter": {"serviceMonitor": {"enabled": "auto"}},
        "operator": {"repository": "mirror.example.com/nvidia"},
        "toolkit": {"version": "v1.18.0"},
    }
    host = chart_values("gpu-operator", "host", service_monitor=True)
    assert host["driver"] == {"enabled": False}
    assert host["dcgmExporter"] == {"serviceMonitor": {"enabled": "true"}}  # the setting as the chart reads it


def test_dra_driver_values_follow_the_owner_and_keep_the_chart_affinity_where_a_control_plane_is_schedulable():
    values = chart_values(
        "nvidia-dra-driver-gpu", "operator", {}, {}, [GPU_TOLERATION], schedulable_control_plane=["cp-1"]
    )
    assert values == {
        "nvidiaDriverRoot": "/run/nvidia/driver",
        "resources": {"gpus": {"enabled": False}},
        "kubeletPlugin": {"tolerations": [GPU_TOLERATION]},
    }
    assert chart_values("nvidia-dra-driver-gpu", "host", schedulable_control_plane=["cp-1"])["nvidiaDriverRoot"] == "/"


def test_dra_driver_controller_affinity_is_replaced_where_no_control_plane_is_schedulable():
    fallback = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    values = chart_values("nvidia-dra-driver-gpu", "operator", controller_fallback_affinity=fallback)
    assert values["controller"] == {"affinity": fallback}
    # no fallback given: null, which removes the chart's required control-plane affinity
    assert chart_values("nvidia-dra-driver-gpu", "operator")["controller"] == {"affinity": None}
    # the user's own controller values still win
    mine = {"controller": {"affinity": {"podAffinity": {}}}}
    assert chart_values("nvidia-dra-driver-gpu", "operator", mine)["controller"] == {"affinity": {"podAffinity": {}}}


@pytest.mark.parametrize(
    "chart,owner,values",
    [
        ("gpu-operator", "operator", {}),
        ("gpu-operator", "operator", {"driver": {"enabled": True}}),
        ("gpu-operator", "operator", {"driver": {"enabled": "yes"}}),
        ("gpu-operator", "host", {"driver": {"enabled": False}}),
        ("gpu-operator", "host", {"driver": {"version": "580.95.05"}}),
        ("nvidia-dra-driver-gpu", "operator", {"nvidiaDriverRoot": "/run/nvidia/driver"}),
        ("nvidia-dra-driver-gpu", "host", {"nvidiaDriverRoot": "/"}),
        ("nvidia-dra-driver-gpu", "host", {"gpuResourcesEnabledOverride": True}),
    ],
)
def test_values_that_agree_with_the_owner_are_no_conflict(chart, owner, values):
    assert driver_owner_conflict(chart, owner, values) == ""


def test_a_gpu_operator_driver_setting_against_the_owner_names_both_ways_out():
    assert driver_owner_conflict("gpu-operator", "operator", {"driver": {"enabled": False}}) == (
        "gpu_operator_values sets driver.enabled=false but gpu_fabric_driver_owner=operator requires "
        "driver.enabled=true. Remove driver.enabled from gpu_operator_values, or set gpu_fabric_driver_owner to "
        "host (it also sets the DRA driver's nvidiaDriverRoot). Nothing was installed."
    )
    assert "set gpu_fabric_driver_owner to operator" in driver_owner_conflict(
        "gpu-operator", "host", {"driver": {"enabled": "true"}}
    )
    # not a boolean at all: refused as well, rather than read as false
    assert "driver.enabled=maybe" in driver_owner_conflict("gpu-operator", "operator", {"driver": {"enabled": "maybe"}})


def test_a_dra_driver_root_against_the_owner_says_where_the_driver_lives():
    assert driver_owner_conflict("nvidia-dra-driver-gpu", "operator", {"nvidiaDriverRoot": "/"}) == (
        "dra_driver_values sets nvidiaDriverRoot=/ but gpu_fabric_driver_owner=operator requires "
        "nvidiaDriverRoot=/run/nvidia/driver (the GPU Operator driver container mounts the driver at "
        "/run/nvidia/driver). Remove nvidiaDriverRoot from dra_driver_values, or set gpu_fabric_driver_owner to "
        "host (it also sets the GPU Operator's driver.enabled). Nothing was installed."
    )
    text = driver_owner_conflict("nvidia-dra-driver-gpu", "host", {"nvidiaDriverRoot": "/run/nvidia/driver"})
    assert "(a driver installed on the host lives under /)" in text
    assert "set gpu_fabric_driver_owner to operator" in text


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: chart_values("gpu-operatr", "operator"),
            "chart is 'gpu-operatr'; use one of gpu-operator, nvidia-dra-driver-gpu",
        ),
        (lambda: chart_values("gpu-operator", "nobody"), "gpu_fabric_driver_owner is 'nobody'; use operator or host"),
        (
            lambda: chart_values("gpu-operator", "host", ["driver"]),
            "gpu_operator_values must be a mapping of chart values, not list",
        ),
        (lambda: driver_owner_conflict("x", "host", {}), "chart is 'x'"),
    ],
)
def test_settings_that_cannot_make_values_say_what_to_use(call, message):
    with pytest.raises(ValuesError, match=re.escape(message)):
        call()


def test_the_filters_pass_the_role_variables_and_turn_bad_settings_into_filter_errors():
    values = FILTERS["chart_values"]({}, "nvidia-dra-driver-gpu", owner="host", schedulable_control_plane=["cp-1"])
    assert values["nvidiaDriverRoot"] == "/" and values["kubeletPlugin"] == {"tolerations": []}
    assert FILTERS["driver_owner_conflict"]({"nvidiaDriverRoot": "/"}, "nvidia-dra-driver-gpu", "host") == ""
    with pytest.raises(AnsibleFilterError, match=r"^chart_values: gpu_fabric_driver_owner is 'hots'"):
        FILTERS["chart_values"]({}, "gpu-operator", owner="hots")
    with pytest.raises(AnsibleFilterError, match=r"^driver_owner_conflict: chart is"):
        FILTERS["driver_owner_conflict"]({}, "mpi-operator", "host")
