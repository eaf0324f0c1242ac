# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.versions import (
    compare_versions,
    parse_version,
    version_at_least,
)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("570.158.01", (570, 158, 1)),
        ("580.159.04", (580, 159, 4)),
        ("570.86.15", (570, 86, 15)),
        ("v1.34.2", (1, 34, 2)),
        ("v25.10.0", (25, 10, 0)),
        ("1.7.29", (1, 7, 29)),
        ("570.211.01-0ubuntu1.24.04.1", (570, 211, 1)),
        ("1.34.2+k3s1", (1, 34, 2)),
        (" 13.0 ", (13, 0)),
        ("580", (580,)),
    ],
)
def test_parse_version_reads_numbers(text, parts):
    assert parse_version(text) == parts


@pytest.mark.parametrize("text", ["", "N/A", "latest", "570..158", "570.158.", ".570", "5a0.1", "v"])
def test_parse_version_refuses_non_versions(text):
    with pytest.raises(ValueError, match="is not a version"):
        parse_version(text)


def test_parse_version_refuses_non_strings():
    with pytest.raises(ValueError, match=r"got float 570\.158"):
        parse_version(570.158)


@pytest.mark.parametrize(
    ("found", "floor", "expected"),
    [
        # The case a text comparison gets wrong: 158 > 86.
        ("570.158.01", "570.86.15", True),
        ("570.86.15", "570.158.01", False),
        ("570.158.01", "570.158.01", True),
        ("570.158.1", "570.158.01", True),
        ("580.95.05", "570.158.01", True),
        ("535.183.01", "570.158.01", False),
        ("570.158", "570.158.01", False),
        ("570.158.0", "570.158", True),
        ("1.34.1", "1.34.2", False),
        ("v1.34.10", "1.34.2", True),
    ],
)
def test_version_at_least(found, floor, expected):
    assert version_at_least(found, floor) is expected


def test_compare_versions_orders_and_pads():
    assert compare_versions("570.158.01", "570.86.15") == 1
    assert compare_versions("570.86.15", "570.158.01") == -1
    assert compare_versions("570.158", "570.158.0.0") == 0
    versions = ["580.95.05", "535.183.01", "570.158.01", "570.86.15", "580.159.04"]
    ordered = sorted(versions, key=parse_version)
    assert ordered == ["535.183.01", "570.86.15", "570.158.01", "580.95.05", "580.159.04"]
