# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU Operator's ClusterPolicy: readiness as the operator writes it, the ServiceMonitor setting."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import cluster_policy


@pytest.mark.parametrize(
    ("setting", "served", "wanted"),
    [("auto", True, True), ("auto", False, False), ("true", False, True), ("false", True, False), (True, False, True)],
)
def test_service_monitor_auto_follows_the_api(setting, served, wanted):
    assert cluster_policy.service_monitor_wanted(setting, served) is wanted


def test_service_monitor_refuses_other_words():
    with pytest.raises(ValueError, match="not auto, true or false"):
        cluster_policy.service_monitor_wanted("sometimes", True)


@pytest.mark.parametrize(
    ("setting", "served", "expected"),
    [("auto", False, False), ("auto", True, True), ("true", False, True), ("false", True, False), (True, False, True)],
)
def test_the_service_monitor_in_the_chart_values_is_decided(setting, served, expected):
    values = {"driver": {"enabled": True}, "dcgmExporter": {"serviceMonitor": {"enabled": setting, "interval": "15s"}}}
    resolved = cluster_policy.resolve_service_monitor(values, served)
    assert resolved["dcgmExporter"]["serviceMonitor"] == {"enabled": expected, "interval": "15s"}
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] == setting  # the input is left as it was


def test_values_without_a_service_monitor_are_left_alone():
    values = {"driver": {"enabled": False}}
    assert cluster_policy.resolve_service_monitor(values, True) == {"driver": {"enabled": False}}
    with pytest.raises(ValueError, match="not auto, true or false"):
        cluster_policy.resolve_service_monitor({"dcgmExporter": {"serviceMonitor": {"enabled": "sometimes"}}}, True)
