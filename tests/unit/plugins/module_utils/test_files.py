# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import files
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    FileChange,
    FileEditError,
    read_text,
    replace_file,
    write_change,
)

from tests.conftest import REPO_ROOT

NOBODY = 65534


def module(check_mode: bool = False) -> AnsibleModule:
    with patch_module_args({"_ansible_check_mode": check_mode}):
        return AnsibleModule(argument_spec={}, supports_check_mode=True)


def test_the_old_mode_and_owner_are_kept(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text("version = 2\n")
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    write_change(module(), FileChange(str(path), "version = 2\n", "version = 3\n"), backup=False)
    status = path.stat()
    assert path.read_text() == "version = 3\n"
    assert oct(status.st_mode & 0o7777) == "0o640"
    if os.geteuid() == 0:
        assert (status.st_uid, status.st_gid) == (NOBODY, NOBODY)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_a_new_file_gets_0644_whatever_the_umask(tmp_path: Path):
    path = tmp_path / "new.toml"
    old = os.umask(0o077)
    try:
        write_change(module(), FileChange(str(path), None, "version = 2\n"), backup=False)
    finally:
        os.umask(old)
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_the_file_and_its_directory_are_flushed_before_and_after_the_rename(tmp_path: Path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text("a\n")
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        files.os, "fsync", lambda fd: (events.append(("fsync", os.path.isdir(f"/proc/self/fd/{fd}"))), real_fsync(fd))
    )
    monkeypatch.setattr(files.os, "replace", lambda a, b: (events.append(("replace", None)), real_replace(a, b)))
    replace_file(str(path), b"b\n")
    assert events == [("fsync", False), ("replace", None), ("fsync", True)]


def test_a_read_only_file_is_refused_and_left_as_it_is(tmp_path: Path):
    path = tmp_path / "config.cfg"
    path.write_bytes(b"SERVER_PORT=50000\n")
    os.chmod(path, 0o444)
    with pytest.raises(FileEditError) as error:
        write_change(module(), FileChange(str(path), "SERVER_PORT=50000\n", "SERVER_PORT=1\n"), backup=True)
    assert str(error.value) == (
        f"{path} is read-only (mode 0444); it was left unchanged. Make it writable (chmod u+w) "
        "if it is meant to be edited, or run with become."
    )
    assert path.read_bytes() == b"SERVER_PORT=50000\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.cfg"]  # no backup, no temporary file


def test_an_unreadable_file_is_one_clean_error(tmp_path: Path):
    path = tmp_path / "config.cfg"
    path.write_bytes(b"SERVER_PORT=50000\n")
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.seteuid(NOBODY)  # root reads everything; read as an unprivileged user
    try:
        with pytest.raises(FileEditError) as error:
            read_text(str(path))
    finally:
        if os.getuid() == 0:
            os.seteuid(0)
    assert str(error.value) == f"cannot read {path}: Permission denied. Run with become or fix the permissions."


def test_a_failed_rename_leaves_the_old_file_and_no_temporary_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_bytes(b"old\n")

    def crash(src, dst):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(
        FileEditError, match=r"^cannot write .*config.toml: Input/output error; it was left unchanged.$"
    ):
        write_change(module(), FileChange(str(path), "old\n", "new\n"), backup=False)
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_a_symbolic_link_is_kept_and_its_target_edited(tmp_path: Path):
    target = tmp_path / "real.toml"
    target.write_text("a\n")
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    write_change(module(), FileChange(str(link), "a\n", "b\n"), backup=False)
    assert link.is_symlink()
    assert target.read_text() == "b\n"


WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import replace_file
path, n = sys.argv[2], 0
while True:
    n += 1
    replace_file(path, (str(n % 10) * 2_000_000).encode())
    print(n, flush=True)
"""


def test_a_writer_killed_at_any_moment_leaves_a_whole_old_or_new_file(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_bytes(b"0" * 2_000_000)
    collections = str(REPO_ROOT / ".tmp" / "collections")
    for delay in (0.05, 0.11, 0.23, 0.37):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, collections, str(path)], stdout=subprocess.PIPE)
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        data = path.read_bytes()
        assert len(data) == 2_000_000
        assert len(set(data)) == 1  # one whole version, never a mix or a truncation
    # a killed writer can leave its temporary file (hidden, named after the file), never a half-written config
    assert {p.name for p in tmp_path.iterdir()} - {"config.toml"} <= {
        p.name for p in tmp_path.iterdir() if p.name.startswith(".config.toml.") and p.name.endswith(".tmp")
    }


# ------------------------------------------------------------------ only regular files are read


@pytest.fixture
def no_hang():
    """Fail a test that blocks (reading a FIFO without a writer) instead of hanging the run."""

    def hung(_signum, _frame):
        raise AssertionError("the read blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_fifo_is_refused_at_once_naming_it(tmp_path: Path, no_hang):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(FileEditError) as raised:
        read_text(str(fifo), "config_path")
    assert str(raised.value) == (
        f"config_path {fifo} is a FIFO (named pipe), not a regular file; refusing to read it (it could block"
        " forever or never end). Point the path at the file itself."
    )
    link = tmp_path / "link.toml"
    link.symlink_to(fifo)
    with pytest.raises(FileEditError, match=r"link.toml is a FIFO \(named pipe\)"):
        read_text(str(link))


def test_a_device_or_a_directory_is_refused_and_a_symlink_to_a_file_is_read(tmp_path: Path, no_hang):
    with pytest.raises(FileEditError, match=r"^/dev/zero is a character device, not a regular file"):
        files.read_regular_file("/dev/zero")
    with pytest.raises(FileEditError, match=r"is a directory, not a regular file"):
        read_text(str(tmp_path))
    target = tmp_path / "real.cfg"
    target.write_text("A=1\r\n")
    (tmp_path / "link.cfg").symlink_to(target)
    assert read_text(str(tmp_path / "link.cfg")) == "A=1\r\n"
    assert read_text(str(tmp_path / "absent.cfg")) is None


def test_a_file_past_the_limit_is_refused_in_one_line(tmp_path: Path):
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * 101)
    with pytest.raises(FileEditError) as raised:
        files.read_regular_file(str(path), "path", max_bytes=100)
    assert str(raised.value) == (
        f"path {path} holds 101 bytes, more than the 100 this collection reads; refusing it."
        " Check that the path names the right file."
    )
    assert files.read_regular_file(str(path), max_bytes=101) == b"#" * 101
