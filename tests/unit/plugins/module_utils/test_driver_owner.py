# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The driver owners and their driver roots: one table, read by the charts' values and the host preflight."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import chart_values, host_preflight
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.driver_owner import DRIVER_ROOT, OWNERS, driver_root


@pytest.mark.parametrize("owner,root", [("operator", "/run/nvidia/driver"), ("host", "/")])
def test_each_owner_has_its_driver_root(owner, root):
    assert driver_root(owner) == root


def test_an_unknown_owner_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"^gpu_fabric_driver_owner is 'both'; use operator or host$"):
        driver_root("both")


def test_the_charts_and_the_host_preflight_read_the_same_table():
    assert OWNERS == tuple(DRIVER_ROOT) == ("operator", "host")
    assert chart_values.DRIVER_ROOT is DRIVER_ROOT and chart_values.OWNERS is OWNERS
    assert host_preflight.DRIVER_ROOT is DRIVER_ROOT
    values = chart_values.chart_values("nvidia-dra-driver-gpu", "host", chart_name="nvidia-dra-driver-gpu")
    assert values["nvidiaDriverRoot"] == "/"
