# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""one_line: the one rule every message, record and annotation uses to stay on one line."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import (
    by_name,
    natural_key,
    one_line,
    plural,
    unquoted_number_hint,
)

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


def test_trays_and_racks_sort_by_their_numbers_in_the_one_natural_order():
    trays = ["gb200-r0-t10", "gb200-r1-t0", "gb200-r0-t2", "gb200-r0-t1"]
    assert sorted(trays, key=natural_key) == ["gb200-r0-t1", "gb200-r0-t2", "gb200-r0-t10", "gb200-r1-t0"]
    assert sorted(["rack10", "rack2", "-", "rack1"], key=natural_key) == ["-", "rack1", "rack2", "rack10"]
    # a number before text at the same place; a name that is not text sorts as its str
    assert sorted(["a", "1a"], key=natural_key) == ["1a", "a"]
    assert natural_key(7) == natural_key("7")


def test_names_come_once_each_in_their_natural_order():
    assert by_name(["t10", "t2", "t10", "t1"]) == ["t1", "t2", "t10"]


def test_plural():
    assert (plural(1, "tray"), plural(0, "tray"), plural(18, "tray")) == ("1 tray", "0 trays", "18 trays")


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (25.1, "YAML reads an unquoted 25.10 as the number 25.1: quote it ('25.10')"),
        ("25.1", "YAML reads an unquoted 25.10 as the number 25.1: quote it ('25.10')"),
        (26.7, ""),  # the number's text is the choice: nothing was lost
        ("26.7", ""),
        ("week", ""),
        (None, ""),
        (24.1, ""),
    ],
)
def test_a_choice_that_yaml_read_as_a_number_gets_the_quoting_hint(value, hint):
    assert unquoted_number_hint(value, ["26.7", "25.10", "latest"]) == hint
