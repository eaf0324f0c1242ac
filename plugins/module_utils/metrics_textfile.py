# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the metrics go on the tray: node-exporter's textfile, which the writer (``metrics_run``) and the verify
preflight (``verify_preflight``, before any check runs) hold to one rule."""

from __future__ import annotations

import os
import stat

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    FileChange,
    FileEditError,
    file_kind,
    read_text,
)

TEXTFILE_SUFFIX = ".prom"  # the only files node-exporter's textfile collector reads
# The textfile is small (a 54-tray fleet: about 60 KiB); a larger file at the path is not ours.
MAX_TEXTFILE_BYTES = 16 * 1024 * 1024


class MetricsError(Exception):
    """The metrics could not be made, written or pushed; one line saying what to do."""


def textfile_change(path: str, text: str) -> FileChange:
    """The textfile's change; only a regular file (or none) at ``path``, in a directory that exists.

    A symbolic link at the path is refused rather than followed: the textfile directory is often writable by more
    than the one who runs the play, and a link planted there would have the module overwrite whatever it points to.
    """
    if not path.endswith(TEXTFILE_SUFFIX):
        raise MetricsError(
            f"textfile {path} does not end in {TEXTFILE_SUFFIX}; node-exporter's textfile collector reads only "
            f"*{TEXTFILE_SUFFIX} files in its --collector.textfile.directory"
        )
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise MetricsError(
            f"textfile {path} cannot be written: its directory {directory} does not exist; create it (node-exporter's "
            "--collector.textfile.directory) or set textfile (report_metrics_textfile) to a file in that directory"
        )
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        status = None
    except OSError as exc:
        raise MetricsError(
            f"cannot look at textfile {path}: {exc.strerror}; run with become or fix its permissions"
        ) from exc
    if status is not None and stat.S_ISLNK(status.st_mode):
        raise MetricsError(
            f"textfile {path} is a symbolic link (to {os.readlink(path)}); the metrics are written to a regular file "
            "only, never through a link: remove the link, or set textfile (report_metrics_textfile) to the file itself"
        )
    if status is not None and file_kind(status.st_mode) != "a regular file":
        inside = f", e.g. {os.path.join(path, 'gpu_fabric.prom')}" if stat.S_ISDIR(status.st_mode) else ""
        raise MetricsError(
            f"textfile {path} is {file_kind(status.st_mode)}, not a regular file; set textfile "
            f"(report_metrics_textfile) to a {TEXTFILE_SUFFIX} file{inside}"
        )
    try:
        return FileChange(path=path, before=read_text(path, "textfile", MAX_TEXTFILE_BYTES), after=text)
    except FileEditError as exc:
        raise MetricsError(str(exc)) from exc
