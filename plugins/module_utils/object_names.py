# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The names of the objects a check creates: valid DNS-1123 labels, cut names kept apart by a hash.

A leaf: the planner, the objects' manifests and the checks name their objects here without importing one another.
"""

from __future__ import annotations

import hashlib
import re

_DNS_LABEL_MAX = 63
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def dns_label(*parts: str, limit: int = _DNS_LABEL_MAX) -> str:
    """``parts`` joined into a valid DNS-1123 label; a hash keeps cut names apart."""
    text = "-".join(_NOT_DNS.sub("-", part.lower()).strip("-") for part in parts if part)
    text = re.sub(r"-{2,}", "-", text).strip("-") or "x"
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: limit - 9].rstrip('-')}-{digest}"
