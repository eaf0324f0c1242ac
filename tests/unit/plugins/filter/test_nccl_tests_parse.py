# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.nccl_tests_parse import FilterModule, nccl_tests_parse

from tests.conftest import FIXTURES


def test_filter_is_registered_under_its_name():
    assert FilterModule().filters()["nccl_tests_parse"] is nccl_tests_parse


def test_filter_converts_string_arguments_from_templates():
    text = (FIXTURES / "nccl" / "gb200-2node-all_reduce_perf.txt").read_text()
    result = nccl_tests_parse(text, min_busbw_gbps="800", expected_ranks="8")
    assert result["passed"] is False
    assert result["violations"][0].startswith(
        "bus bandwidth below the floor 800 GB/s at 2 of 4 measurements of 4 GiB and more: 4 GiB out-of-place 798.86,"
    )
    # the floor held from 1 GiB on: the 1 and 2 GiB rows (760.16-786.38 GB/s) fail too
    wide = nccl_tests_parse(text, min_busbw_gbps="790", expected_ranks="8", min_bytes=str(1 << 30))
    assert wide["judged_busbw_gbps"] == 760.16
    assert "at 4 of 8 measurements of 1 GiB and more" in wide["violations"][0]


def test_filter_refuses_a_list_with_a_hint():
    with pytest.raises(AnsibleFilterError, match="log_lines"):
        nccl_tests_parse(["# Avg bus bandwidth    : 1"])


def test_filter_refuses_a_non_numeric_threshold():
    with pytest.raises(AnsibleFilterError, match="could not convert"):
        nccl_tests_parse("", min_busbw_gbps="fast")
