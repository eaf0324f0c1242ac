# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Numeric comparison of dotted version strings (NVIDIA drivers, kubelet, containerd, charts).

A string comparison gets NVIDIA driver versions wrong ("570.158.01" < "570.86.15" as text), so
every part is compared as a number:

>>> version_at_least("570.158.01", "570.86.15")
True
>>> parse_version("v1.34.2")
(1, 34, 2)

The public API is ``parse_version``, ``compare_versions`` and ``version_at_least``; all three
raise ``ValueError`` with a message naming the string when it is not a version.
"""

from __future__ import annotations

import re
from typing import Tuple

# An optional leading "v" (chart and Kubernetes versions), dot-separated numbers, then anything
# after the numbers ("-0ubuntu1", "+k3s1", "-rc.1") is ignored for ordering.
_VERSION_RE = re.compile(r"^\s*[vV]?(\d+(?:\.\d+)*)(?:[-+~_].*)?\s*$")


def parse_version(text: str) -> Tuple[int, ...]:
    """Return the numeric parts of a dotted version: ``"570.158.01"`` -> ``(570, 158, 1)``.

    Leading zeros do not matter (``01`` is 1). A leading ``v`` and a suffix after ``-``, ``+``,
    ``~`` or ``_`` are accepted and ignored. Anything else raises ``ValueError``.
    """
    if not isinstance(text, str):
        raise ValueError(f"version must be a string like 570.158.01, got {type(text).__name__} {text!r}")
    match = _VERSION_RE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a version: expected dot-separated numbers such as 570.158.01")
    return tuple(int(part) for part in match.group(1).split("."))


def compare_versions(left: str, right: str) -> int:
    """Return -1, 0 or 1 as ``left`` is older than, equal to or newer than ``right``.

    Missing trailing parts count as zero, so ``"570.158"`` equals ``"570.158.0"``.
    """
    a, b = parse_version(left), parse_version(right)
    width = max(len(a), len(b))
    a += (0,) * (width - len(a))
    b += (0,) * (width - len(b))
    return (a > b) - (a < b)


def version_at_least(found: str, floor: str) -> bool:
    """Return True when ``found`` is the same as or newer than ``floor``."""
    return compare_versions(found, floor) >= 0
