# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Compute a file's new text, show the diff, back up and write atomically.

Config-file editors in this collection work the same way: read the current text, compute the
whole new text in memory, compare, and only then (outside check mode) back the file up and
replace it. A file is never opened for writing in place: the new bytes go to a temporary file in
the same directory, which gets the old file's mode, owner and SELinux context and is flushed to
disk before it is renamed over the old one; the directory is flushed after the rename. A failure at
any point leaves either the old file or the new one, never a mix, and removes the temporary file.

This is ``AnsibleModule.atomic_move`` made strict: that helper silently gives the file to the
connecting user when it cannot keep the owner, does not flush the directory, and falls back to
copying in place on some errors.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from typing import Any, Optional

# The largest config file (containerd config.toml and its drop-ins, IMEX config.cfg and nodes file) the
# editors read: real ones are a few KiB, and a larger one is a wrong path or a runaway generator whose
# parse would take minutes in check mode. Refused in one line before it is read.
MAX_CONFIG_BYTES = 1024 * 1024
# The largest nvbandwidth output (``src``) read: a full NVL72 run with -v and its launcher log is a few MiB.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024

# The mode of a file this collection creates (config files are world-readable, as packages ship them).
NEW_FILE_MODE = 0o644


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


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` names, in words (``a regular file``, ``a FIFO (named pipe)``, ...)."""
    return next((kind for test, kind in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode) else "no file")


def read_regular_file(path: str, what: str = "", max_bytes: Optional[int] = None) -> Optional[bytes]:
    """The bytes of the regular file at ``path`` (a symlink to one will do), or None when nothing is there.

    Anything else (a FIFO, a device, a socket, a directory) is refused at once, naming it: reading a FIFO
    blocks until a writer comes, which may be never, and a device never ends. The file is opened without
    blocking and checked on its descriptor, so a path swapped for a FIFO after the check cannot block either.
    ``max_bytes`` refuses a larger file before it is read. ``what`` names the path in messages (``src``).
    """
    named = f"{what} {path}".strip()
    try:
        kind = file_kind(os.stat(path).st_mode)
        if kind == "a regular file":
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
            status = os.fstat(descriptor)
            kind = file_kind(status.st_mode)
            if kind != "a regular file":
                os.close(descriptor)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileEditError(f"cannot read {named}: {exc.strerror}. Run with become or fix the permissions.") from exc
    if kind != "a regular file":
        raise FileEditError(
            f"{named} is {kind}, not a regular file; refusing to read it (it could block forever or never end)."
            " Point the path at the file itself."
        )
    with os.fdopen(descriptor, "rb") as handle:
        if max_bytes is not None and status.st_size > max_bytes:
            raise FileEditError(
                f"{named} holds {status.st_size} bytes, more than the {max_bytes} this collection reads;"
                " refusing it. Check that the path names the right file."
            )
        try:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        except OSError as exc:
            raise FileEditError(f"cannot read {named}: {exc.strerror}.") from exc
    if max_bytes is not None and len(data) > max_bytes:
        raise FileEditError(
            f"{named} holds more than the {max_bytes} bytes this collection reads; refusing it."
            " Check that the path names the right file."
        )
    return data


def read_text(path: str, what: str = "", max_bytes: Optional[int] = None) -> Optional[str]:
    """The file's text (UTF-8, line endings kept), or None when the file does not exist.

    Only a regular file is read (see ``read_regular_file``).
    """
    data = read_regular_file(path, what, max_bytes)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileEditError(
            f"{path} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r}); "
            "refusing to edit it. Check that the path names the right file."
        ) from exc


def _fsync_directory(directory: str) -> None:
    """Flush a rename to disk; some file systems cannot flush a directory, which is not an error."""
    try:
        handle = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _owner(status: os.stat_result) -> tuple[int, int]:
    return status.st_uid, status.st_gid


def _check_writable(path: str, current: os.stat_result) -> None:
    if not stat.S_ISREG(current.st_mode):
        raise FileEditError(f"{path} is not a regular file; expected a file. Point the path at the file itself.")
    mode = stat.S_IMODE(current.st_mode)
    if not mode & 0o222 or not os.access(path, os.W_OK):
        raise FileEditError(
            f"{path} is read-only (mode {mode:04o}); it was left unchanged. Make it writable (chmod u+w) "
            "if it is meant to be edited, or run with become."
        )


def replace_file(path: str, data: bytes, module: Any = None) -> None:
    """Replace ``path`` with ``data`` atomically, keeping its mode, owner and SELinux context.

    A new file gets mode 0644. ``module`` (an AnsibleModule) supplies the SELinux context, when
    SELinux is on. Raises FileEditError, with the old file (or no file) in place, when any step fails.
    """
    directory = os.path.dirname(path) or "."
    try:
        current: Optional[os.stat_result] = os.stat(path)
    except FileNotFoundError:
        current = None
    if current is not None:
        _check_writable(path, current)
    try:
        handle, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise FileEditError(
            f"cannot write {path}: no temporary file can be created in {directory} ({exc.strerror}); "
            "it was left unchanged. Run with become or fix the directory's permissions."
        ) from exc
    try:
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                if current is not None:
                    if (current.st_uid, current.st_gid) != _owner(os.fstat(stream.fileno())):
                        os.fchown(stream.fileno(), current.st_uid, current.st_gid)
                    os.fchmod(stream.fileno(), stat.S_IMODE(current.st_mode))  # after fchown, which clears setuid
                else:
                    os.fchmod(stream.fileno(), NEW_FILE_MODE)
                os.fsync(stream.fileno())
            if module is not None and module.selinux_enabled():
                context = module.selinux_context(path) if current else module.selinux_default_context(path)
                module.set_context_if_different(tmp_path, context, False)
            os.replace(tmp_path, path)
        except PermissionError as exc:
            if current is not None and exc.filename is None:
                raise FileEditError(
                    f"cannot write {path} as its owner {current.st_uid}:{current.st_gid} ({exc.strerror}); "
                    "it was left unchanged. Run with become."
                ) from exc
            raise FileEditError(f"cannot write {path}: {exc.strerror}; it was left unchanged.") from exc
        except OSError as exc:
            raise FileEditError(f"cannot write {path}: {exc.strerror or exc}; it was left unchanged.") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        raise
    _fsync_directory(directory)


def _target(change: FileChange, create_parents: bool, create: bool = True) -> str:
    """The path ``change`` writes (a symlink's target), after checking that it can be written."""
    path = os.path.realpath(change.path) if os.path.islink(change.path) else change.path
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        if not create_parents:
            raise FileEditError(
                f"directory {directory} does not exist, so {change.path} cannot be written; "
                "create it first (is the package that owns it installed?)."
            )
        if create:
            try:
                os.makedirs(directory, mode=0o755, exist_ok=True)
            except OSError as exc:
                raise FileEditError(f"cannot create the directory {directory}: {exc.strerror}.") from exc
    elif not os.access(directory, os.W_OK | os.X_OK):
        raise FileEditError(
            f"directory {directory} is not writable, so {change.path} cannot be replaced; run with become."
        )
    if change.before is not None:
        with contextlib.suppress(FileNotFoundError):
            _check_writable(path, os.stat(path))
    return path


def write_change(module: Any, change: FileChange, backup: bool, create_parents: bool = False) -> Optional[str]:
    """Write ``change.after`` to ``change.path`` unless it is unchanged or in check mode.

    Returns the backup file's path when a backup of an existing file was made. A symbolic link is
    kept: the file it points to is the one replaced. See ``replace_file`` for how the file is written.
    """
    if not change.changed or module.check_mode:
        return None
    path = _target(change, create_parents)
    backup_file = module.backup_local(path) if backup and change.before is not None else None
    replace_file(path, change.after.encode("utf-8"), module)
    return backup_file


def write_changes(module: Any, changes: list[FileChange], backup: bool, create_parents: bool = False) -> dict[str, str]:
    """Write every change or none: each target is checked before the first is written, and a write that
    still fails puts back the files already written. Returns {path: backup file} of the backups made."""
    pending = [change for change in changes if change.changed]
    if not pending or module.check_mode:
        return {}
    for change in pending:
        _target(change, create_parents, create=False)
    backups: dict[str, str] = {}
    written: list[FileChange] = []
    try:
        for change in pending:
            backup_file = write_change(module, change, backup, create_parents)
            written.append(change)
            if backup_file:
                backups[change.path] = backup_file
    except (FileEditError, OSError) as exc:
        for done in reversed(written):
            with contextlib.suppress(FileEditError, OSError):
                if done.before is None:
                    os.unlink(_target(done, create_parents, create=False))
                else:
                    replace_file(_target(done, create_parents, create=False), done.before.encode("utf-8"), module)
        put_back = f" ({', '.join(done.path for done in written)} put back as it was)" if written else ""
        raise FileEditError(f"{exc}{put_back}") from exc
    return backups
