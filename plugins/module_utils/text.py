# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text as the collection's messages show it: one line, at most so long."""

from __future__ import annotations

from typing import Any


def one_line(text: Any, limit: int = 0, cut: str = "") -> str:
    """``text`` with every run of whitespace (line breaks of folded messages and stderr included) as one space;
    at most ``limit`` characters when given, of which the last are ``cut`` (e.g. ``...``) when it was cut.
    None is the empty text (a command that wrote nothing to stderr)."""
    flat = " ".join(("" if text is None else str(text)).split())
    if not limit or len(flat) <= limit:
        return flat
    return flat[: max(limit - len(cut), 0)] + cut


def plural(count: int, noun: str) -> str:
    """``1 tray``, ``2 trays``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
