# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Times as the collection writes and reads them: RFC 3339, UTC."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional


def parse_time(value: Any) -> Optional[datetime]:
    """An RFC 3339 date-time (a record's, the history's, a Node annotation's, Helm's) as an aware datetime (UTC when
    it names no offset), or None. The collection's one reader of times.

    A fraction of more than six digits (Helm's nanoseconds, ``2026-12-01T12:59:01.599972874Z``) is cut to the
    microsecond, which is what a datetime holds.
    """
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("z", "Z")
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    head, dot, rest = text.partition(".")
    if dot:
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        text = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}" if digits else text
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def rfc3339(moment: datetime) -> str:
    """``2026-12-06T17:40:00Z``: UTC, whole seconds."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
