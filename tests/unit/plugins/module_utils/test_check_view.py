# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import re

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.check_view import (
    TrayFindings,
    check_view,
    fact,
    number,
    table,
    valid_view,
    view_of,
    view_problems,
)


def a_view():
    return check_view(
        facts=[fact("test", "multinode_device_to_device_memcpy_read_ce"), fact("channel0", "crw-rw-rw- 1 0 0", True)],
        tables=[table(("clique", "trays"), [["c.1", "t0, t1"]], title="Cliques:", note="")],
        findings=[TrayFindings(tray="gb200-r0-t1", problems=["GPU 2: NVLink 7 inactive"], notes=[])],
    )


def test_a_view_of_facts_tables_and_findings_is_valid_and_read_back_as_written():
    view = a_view()
    assert view_problems(view) == []
    assert valid_view(view) == view
    assert view_of({"check": "x", "view": view}) == view
    assert view["facts"][1] == {"label": "channel0", "value": "crw-rw-rw- 1 0 0", "code": True}


def test_a_record_without_a_view_has_an_empty_one():
    assert view_of({"check": "nvbandwidth"}) == {"facts": [], "tables": [], "findings": []}


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda v: v.pop("tables"), "the view lacks tables"),
        (lambda v: v["facts"].append({"label": "ranks", "value": 8}), "facts[2] is not a label and a value, both text"),
        (lambda v: v["facts"][0].update(code="yes"), "facts[0].code is not true or false"),
        (lambda v: v["tables"][0]["rows"].append(["c.2"]), "tables[0].rows[1] is not 2 texts"),
        (lambda v: v["tables"][0].update(columns=[]), "tables[0].columns is not a list of texts"),
        (lambda v: v["tables"][0].update(note=3), "tables[0].note is not text"),
        (lambda v: v["findings"].append({"problems": [], "notes": []}), "findings[1] names no tray"),
        (
            lambda v: v["findings"][0].update(notes="GPU 1: a note"),
            "findings[0] (gb200-r0-t1): problems and notes are not lists of texts",
        ),
    ],
)
def test_a_view_of_the_wrong_shape_is_refused_naming_the_place(change, problem):
    view = a_view()
    change(view)
    assert view_problems(view) == [problem]
    with pytest.raises(ValueError, match=re.escape(problem)):
        valid_view(view)


def test_a_view_that_is_no_object_is_refused():
    assert view_problems(["facts"]) == ["the view is a list, not an object"]


def test_numbers_show_two_digits_and_none_as_not_available():
    assert (number(820.456), number(0.9371, 3), number(None), number("x"), number(True)) == (
        "820.46",
        "0.937",
        "N/A",
        "x",
        "True",
    )
