# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters the containerd and gpu_operator roles read a containerd configuration back through."""

from __future__ import annotations

import base64

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.containerd import FilterModule

from tests.conftest import FIXTURES

FILTERS = FilterModule().filters()
PATH = "/etc/containerd/config.toml"


def test_filters_are_exported():
    assert sorted(FILTERS) == ["containerd_effective", "containerd_imports_report"]


def test_the_imports_report_of_a_looped_slurp():
    text = (FIXTURES / "containerd/realworld/nvidia-ctk-v3-minimal-after-toplevel.toml").read_text(encoding="utf-8")
    results = [
        {"item": "tray-0", "content": base64.b64encode(text.encode()).decode(), "encoding": "base64"},
        {"item": "tray-1", "failed": True, "msg": f"file not found: {PATH}"},
    ]
    report = FILTERS["containerd_imports_report"](
        results, ["/etc/containerd/conf.d/*.toml", "/etc/site.d/*.toml"], PATH
    )
    assert report == {
        "lost": ['tray-0: imports = ["/etc/containerd/conf.d/*.toml"] lacks /etc/site.d/*.toml'],
        "unread": [f"tray-1 (file not found: {PATH})"],
    }


def test_the_imports_report_refuses_what_is_not_a_list_of_results():
    with pytest.raises(AnsibleFilterError, match="expects the results of a looped slurp, got dict"):
        FILTERS["containerd_imports_report"]({"results": []}, [], PATH)


def test_the_effective_settings_of_a_dump():
    dump = (FIXTURES / "containerd/config-default-2.1.9.toml").read_text(encoding="utf-8")
    assert FILTERS["containerd_effective"](dump) == {
        "enable_cdi": True,
        "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"],
        "systemd_cgroup": False,
    }


def test_a_dump_that_is_not_toml_fails_in_one_line():
    with pytest.raises(AnsibleFilterError) as raised:
        FILTERS["containerd_effective"]("containerd: failed to load TOML\n")
    assert str(raised.value).startswith("containerd_effective: containerd config dump is not valid TOML at line 1")
