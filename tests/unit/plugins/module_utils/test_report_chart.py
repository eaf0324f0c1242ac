# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The trend charts: an inline SVG sparkline and a block-character one."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.report_chart import (
    block_sparkline,
    sparkline_points,
    sparkline_svg,
)


def parse(svg):
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    return root, {child.tag: child for child in root}


def points_of(polyline):
    return [tuple(float(v) for v in point.split(",")) for point in polyline.get("points").split()]


def test_the_points_span_the_box_and_the_values_scale():
    points, base_y = sparkline_points([820.0, 818.0, 776.0], 820.0, width=120, height=28)
    # x from the padding to width - padding, evenly; the highest value at the top, the lowest at the bottom
    assert [round(x, 1) for x, _y in points] == [3.0, 60.0, 117.0]
    assert [round(y, 2) for _x, y in points] == [3.0, 4.0, 25.0]  # 2 of the 44 GB/s span is 1 of the 22 units
    assert base_y == 3.0


def test_the_baseline_is_drawn_inside_the_box_also_above_every_value():
    root, children = parse(sparkline_svg([700.0, 710.0], "x", baseline=820.0))
    line = children["line"]
    assert (line.get("class"), line.get("y1"), line.get("y2"), line.get("stroke-dasharray")) == (
        "baseline",
        "3",
        "3",
        "3 2",
    )
    assert [y for _x, y in points_of(children["polyline"])] == [25.0, 23.2]
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("120", "28", "0 0 120 28")


def test_a_flagged_drop_marks_the_newest_point():
    root, children = parse(sparkline_svg([820.0, 818.0, 776.0], "drop", baseline=820.0, flagged=True))
    assert root.get("class") == "spark spark-drop"
    circle = children["circle"]
    assert (circle.get("class"), circle.get("cx"), circle.get("cy"), circle.get("r"), circle.get("fill")) == (
        "drop",
        "117",
        "25",
        "3",
        "#cf222e",
    )
    root, children = parse(sparkline_svg([820.0, 818.0], "fine", baseline=820.0))
    assert (root.get("class"), children["circle"].get("class"), children["circle"].get("r")) == ("spark", "latest", "2")


def test_a_single_point_is_a_mark_in_the_middle_without_a_line():
    _root, children = parse(sparkline_svg([820.0], "one run"))
    assert "polyline" not in children and "line" not in children
    assert (children["circle"].get("cx"), children["circle"].get("cy")) == ("60", "14")
    assert sparkline_svg([], "nothing") == ""


def test_equal_values_lie_on_the_middle_line():
    _root, children = parse(sparkline_svg([820.0, 820.0, 820.0], "flat", baseline=820.0))
    assert {y for _x, y in points_of(children["polyline"])} == {14.0}


def test_the_label_is_the_title_and_the_aria_label_escaped():
    label = 'rack <0> & "a", 820.00 GB/s'
    svg = sparkline_svg([1.0, 2.0], label)
    assert "<0>" not in svg and "&lt;0&gt; &amp;" in svg
    root, children = parse(svg)
    assert (root.get("role"), root.get("aria-label"), children["title"].text) == ("img", label, label)
    # nothing that fetches or runs: no script, no link, no style sheet, no href
    assert {element.tag for element in root.iter()} <= {"svg", "title", "line", "polyline", "circle"}
    assert not any("href" in key for element in root.iter() for key in element.attrib)


def test_block_sparkline_runs_from_the_lowest_to_the_highest_block():
    assert block_sparkline([776.0, 820.0, 798.0]) == "\u2581\u2588\u2585"
    assert block_sparkline([820.0, 820.0]) == "\u2584\u2584"
    assert block_sparkline([]) == ""
