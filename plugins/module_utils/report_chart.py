# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The small charts of the report's trends: an inline SVG sparkline for the HTML page, block characters for Markdown.

The SVG is made here, in Python, from the figures (``sparkline_svg``): the templates only place it. It is
built as an ElementTree, so every text and attribute is escaped and the result is well-formed XML; it
draws with attributes alone (no style sheet, no script, no external resource), so the page opens offline.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Optional, Sequence

WIDTH = 120
HEIGHT = 28
PAD = 3.0  # room for the newest point's mark at the edges
LINE = "#0969da"
BASELINE = "#57606a"
DROP = "#cf222e"
BLOCKS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"  # ▁▂▃▄▅▆▇█


def _coordinate(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def sparkline_points(
    values: Sequence[float], baseline: Optional[float] = None, width: int = WIDTH, height: int = HEIGHT
) -> tuple[list[tuple[float, float]], Optional[float]]:
    """The points of ``values`` (oldest first) and the height of ``baseline`` in a ``width`` x ``height`` box.

    The vertical scale spans the values and the baseline, so the baseline is always inside the box; equal
    values lie on the middle line. One value sits in the middle of the box.
    """
    span = list(values) + ([baseline] if baseline is not None else [])
    low, high = min(span), max(span)

    def y(value: float) -> float:
        if high == low:
            return height / 2
        return PAD + (high - value) / (high - low) * (height - 2 * PAD)

    step = (width - 2 * PAD) / (len(values) - 1) if len(values) > 1 else 0.0
    points = [(PAD + i * step if len(values) > 1 else width / 2, y(value)) for i, value in enumerate(values)]
    return points, (y(baseline) if baseline is not None else None)


def sparkline_svg(
    values: Sequence[float],
    label: str,
    baseline: Optional[float] = None,
    flagged: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """An inline SVG of ``values`` (oldest first): their line, the baseline dashed, the newest point marked
    (red and larger when ``flagged``: a drop against the baseline). ``label`` (the numbers in words) is its
    ``<title>`` and ``aria-label``. No values: ''."""
    if not values:
        return ""
    points, base_y = sparkline_points(values, baseline, width, height)
    css = "spark spark-drop" if flagged else "spark"
    svg = ET.Element(
        "svg",
        {
            "class": css,
            "width": str(width),
            "height": str(height),
            "viewBox": f"0 0 {width} {height}",
            "role": "img",
            "aria-label": label,
        },
    )
    ET.SubElement(svg, "title").text = label
    if base_y is not None:
        ET.SubElement(
            svg,
            "line",
            {
                "class": "baseline",
                "x1": "0",
                "y1": _coordinate(base_y),
                "x2": str(width),
                "y2": _coordinate(base_y),
                "stroke": BASELINE,
                "stroke-width": "1",
                "stroke-dasharray": "3 2",
            },
        )
    if len(points) > 1:
        ET.SubElement(
            svg,
            "polyline",
            {
                "points": " ".join(f"{_coordinate(x)},{_coordinate(y)}" for x, y in points),
                "fill": "none",
                "stroke": LINE,
                "stroke-width": "1.5",
            },
        )
    x, y = points[-1]
    ET.SubElement(
        svg,
        "circle",
        {
            "class": "drop" if flagged else "latest",
            "cx": _coordinate(x),
            "cy": _coordinate(y),
            "r": "3" if flagged else "2",
            "fill": DROP if flagged else LINE,
        },
    )
    return ET.tostring(svg, encoding="unicode")


def block_sparkline(values: Sequence[float]) -> str:
    """``values`` as block characters, lowest ▁ to highest █ (equal values all ▄): the Markdown table's trend."""
    if not values:
        return ""
    low, high = min(values), max(values)
    if high == low:
        return BLOCKS[3] * len(values)
    return "".join(BLOCKS[round((value - low) / (high - low) * (len(BLOCKS) - 1))] for value in values)
