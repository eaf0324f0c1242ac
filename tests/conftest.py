"""Make ``ansible_collections.gpu_fabric.mnnvl`` importable from a clone of the repository.

The collection is laid out under ``.tmp/collections`` as a symlink back to the clone (the same
layout ``make layout`` creates), so tests import the plugins by their real, fully qualified path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO_ROOT / ".tmp" / "collections"
_LINK = COLLECTIONS / "ansible_collections" / "gpu_fabric" / "mnnvl"

if not _LINK.exists():
    _LINK.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("../../../..", _LINK)
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))

FIXTURES = REPO_ROOT / "tests" / "fixtures"
