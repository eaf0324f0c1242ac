# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Compute a file's new text, show the diff, back up and write atomically.

Config-file editors in this collection work the same way: read the current text, compute the
whole new text in memory, compare, and only then (outside check mode) back the file up and
replace it through ``module.atomic_move``. A file is never opened for writing in place, so a
failure part way leaves the old bytes intact.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Optional


class FileEditError(Exception):
    """A file could not be read or written; the message says which and why."""


@dataclass
class FileChange:
    """The text of one file before and after an edit (``before`` is None when it does not exist)."""

    path: str
    before: Optional[str]
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> dict[str, str]:
        """The diff in the shape ``ini_file`` returns, which ``--diff`` renders as a unified diff."""
        return {
            "before": self.before if self.before is not None else "",
            "after": self.after,
            "before_header": self.path if self.before is not None else f"{self.path} (absent)",
            "after_header": self.path,
        }


def read_text(path: str) -> Optional[str]:
    """The file's text (UTF-8, line endings kept), or None when the file does not exist."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise FileEditError(f"{path} is a directory; expected a file. Point the path at the file itself.") from exc
    except OSError as exc:
        raise FileEditError(f"cannot read {path}: {exc.strerror}. Run with become or fix the permissions.") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileEditError(
            f"{path} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
            "refusing to edit it. Check that the path names the right file."
        ) from exc


def write_change(module: Any, change: FileChange, backup: bool, create_parents: bool = False) -> Optional[str]:
    """Write ``change.after`` to ``change.path`` unless it is unchanged or in check mode.

    Returns the backup file's path when a backup of an existing file was made. The new text goes
    to a temporary file in the destination directory and is moved over the old file, which keeps
    the old file's owner, mode and SELinux context (``atomic_move``).
    """
    if not change.changed or module.check_mode:
        return None
    directory = os.path.dirname(change.path) or "."
    if not os.path.isdir(directory):
        if not create_parents:
            raise FileEditError(
                f"directory {directory} does not exist, so {change.path} cannot be written; "
                "create it first (is the package that owns it installed?)."
            )
        os.makedirs(directory, mode=0o755, exist_ok=True)
    backup_file = None
    if backup and change.before is not None:
        backup_file = module.backup_local(change.path)
    fd, tmp_path = tempfile.mkstemp(prefix=".gpu_fabric-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(change.after.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if change.before is None:
            # mkstemp creates 0600; a new config file gets the usual 0644.
            os.chmod(tmp_path, 0o644)
        module.atomic_move(tmp_path, change.path, unsafe_writes=module.params.get("unsafe_writes", False))
    finally:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
    return backup_file
