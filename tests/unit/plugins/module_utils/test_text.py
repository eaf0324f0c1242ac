# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""one_line: the one rule every message, record and annotation uses to stay on one line."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

STDERR = "Error: INSTALLATION FAILED: context deadline exceeded\n\n  (waited 600s)\t for pods\n"


def test_whitespace_and_line_breaks_become_single_spaces():
    assert one_line(STDERR) == "Error: INSTALLATION FAILED: context deadline exceeded (waited 600s) for pods"


@pytest.mark.parametrize(
    ("limit", "cut", "expected"),
    [
        (0, "", "Error: INSTALLATION FAILED: context deadline exceeded (waited 600s) for pods"),
        (16, "", "Error: INSTALLAT"),
        (16, "...", "Error: INSTAL..."),
        (200, "...", "Error: INSTALLATION FAILED: context deadline exceeded (waited 600s) for pods"),
    ],
    ids=["no limit", "cut hard", "cut with a marker", "short enough"],
)
def test_a_limit_cuts_to_exactly_that_many_characters(limit, cut, expected):
    flat = one_line(STDERR, limit, cut)
    assert flat == expected
    assert len(flat) <= (limit or len(flat))


def test_nothing_is_the_empty_text_and_anything_else_its_str():
    assert one_line(None) == ""
    assert one_line(ValueError("bad\nvalue")) == "bad value"
    assert one_line(42) == "42"
