# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Text as the collection's messages show it: one line, at most so long; names in their natural order."""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Tuple

_DIGITS = re.compile(r"(\d+)")


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


def natural_key(name: Any) -> Tuple[Tuple[int, Any], ...]:
    """Sort key for names with numbers in them: rack2 before rack10, gb200-r0-t2 before gb200-r0-t10 (a number
    sorts before text at the same place). The one order of trays and racks in messages, records and reports."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(str(name)) if part)


def by_name(names: Iterable[str]) -> List[str]:
    """``names`` once each, in their natural order (``natural_key``)."""
    return sorted(set(names), key=natural_key)


def unquoted_number_hint(value: Any, choices: Iterable[str]) -> str:
    """``YAML reads an unquoted 25.10 as the number 25.1: quote it ('25.10')`` when ``value`` is a number (or its
    text) that a choice written as a number reads as, else ''.

    >>> unquoted_number_hint(25.1, ["26.7", "25.10"])
    "YAML reads an unquoted 25.10 as the number 25.1: quote it ('25.10')"
    >>> unquoted_number_hint("26.7", ["26.7", "25.10"])
    ''
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return ""
    for choice in choices:
        try:
            if float(choice) == number and str(choice) != str(value):
                return f"YAML reads an unquoted {choice} as the number {value}: quote it ('{choice}')"
        except ValueError:
            continue
    return ""
