# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest
import tomlkit
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import containerd_config

from tests.conftest import FIXTURES
from tests.unit.plugins.modules.runner import run_module as run

CONTAINERD = FIXTURES / "containerd"


def run_module(args: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    return run((containerd_config.main), args, check_mode=check_mode)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def config_1_7(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    shutil.copyfile(CONTAINERD / "config-default-1.7.24.toml", path)
    return path


def test_build_module_reads_the_documented_defaults():
    with patch_module_args({}):
        module = containerd_config.build_module()
    assert module.params["path"] == "/etc/containerd/config.toml"
    assert module.params["imports_state"] == "present"
    assert module.params["create_version"] == 2
    assert module.params["backup"] is False
    assert module.check_mode is False


def test_enable_cdi_writes_the_file_and_returns_the_ini_file_style_diff(config_1_7: Path):
    before = config_1_7.read_text()
    result = run_module({"path": str(config_1_7), "enable_cdi": True})
    expected = before.replace("    enable_cdi = false\n", "    enable_cdi = true\n")
    assert result["failed"] is False
    assert result["changed"] is True
    assert result["config_version"] == 2
    assert result["changed_keys"] == ["plugins.io.containerd.grpc.v1.cri.enable_cdi"]
    assert result["diff"] == {
        "before": before,
        "after": expected,
        "before_header": str(config_1_7),
        "after_header": str(config_1_7),
    }
    assert "backup_file" not in result
    assert config_1_7.read_text() == expected
    assert sorted(p.name for p in config_1_7.parent.iterdir()) == ["config.toml"]  # no temp file left


def test_second_run_reports_no_change_and_leaves_the_file_alone(config_1_7: Path):
    args = {
        "path": str(config_1_7),
        "enable_cdi": True,
        "imports": ["/etc/containerd/conf.d/*.toml"],
        "systemd_cgroup": True,
        "runtimes": {"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}},
    }
    assert run_module(args)["changed"] is True
    digest, mtime = sha256(config_1_7), config_1_7.stat().st_mtime_ns
    again = run_module(args)
    assert again["changed"] is False
    assert again["changed_keys"] == []
    assert again["diff"]["before"] == again["diff"]["after"]
    assert sha256(config_1_7) == digest
    assert config_1_7.stat().st_mtime_ns == mtime


def test_check_mode_reports_the_change_and_writes_nothing(config_1_7: Path):
    digest = sha256(config_1_7)
    result = run_module({"path": str(config_1_7), "enable_cdi": True, "backup": True}, check_mode=True)
    assert result["changed"] is True
    assert "    enable_cdi = true\n" in result["diff"]["after"]
    assert "backup_file" not in result
    assert sha256(config_1_7) == digest
    assert sorted(p.name for p in config_1_7.parent.iterdir()) == ["config.toml"]


def test_backup_keeps_the_old_bytes(config_1_7: Path):
    before = config_1_7.read_bytes()
    result = run_module({"path": str(config_1_7), "enable_cdi": True, "backup": True})
    backup = Path(result["backup_file"])
    assert backup.parent == config_1_7.parent
    assert backup.name.startswith("config.toml.")
    assert backup.read_bytes() == before
    assert config_1_7.read_bytes() != before


def test_unparseable_file_fails_naming_the_line_and_keeps_its_bytes(config_1_7: Path):
    # invented breakage of the real file: an unclosed table header on line 38
    lines = config_1_7.read_text().splitlines(keepends=True)
    assert lines[37] == '  [plugins."io.containerd.gc.v1.scheduler"]\n'
    lines[37] = '  [plugins."io.containerd.gc.v1.scheduler"\n'
    config_1_7.write_text("".join(lines))
    digest = sha256(config_1_7)
    result = run_module({"path": str(config_1_7), "enable_cdi": True, "backup": True})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{config_1_7} is not valid TOML at line 38, column ")
    assert sha256(config_1_7) == digest
    assert sorted(p.name for p in config_1_7.parent.iterdir()) == ["config.toml"]  # no backup, no temp file


def test_version_1_file_is_refused_unchanged(config_1_7: Path):
    config_1_7.write_text('root = "/var/lib/containerd"\n[plugins.cri]\n  enable_cdi = false\n')
    digest = sha256(config_1_7)
    result = run_module({"path": str(config_1_7), "enable_cdi": True})
    assert result["failed"] is True
    assert "has no 'version' key, so containerd reads it as config version 1" in result["msg"]
    assert sha256(config_1_7) == digest


def test_create_writes_a_minimal_valid_file(tmp_path: Path):
    path = tmp_path / "etc" / "containerd" / "config.toml"
    result = run_module({"path": str(path), "create": True, "create_version": 3, "enable_cdi": True})
    expected = 'version = 3\n\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = true\n'
    assert result["changed"] is True
    assert result["config_version"] == 3
    assert result["diff"]["before"] == ""
    assert result["diff"]["before_header"] == f"{path} (absent)"
    assert path.read_text() == expected
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert run_module({"path": str(path), "create": True, "create_version": 3, "enable_cdi": True})["changed"] is False


def test_create_in_check_mode_writes_nothing(tmp_path: Path):
    path = tmp_path / "config.toml"
    result = run_module({"path": str(path), "create": True, "enable_cdi": True}, check_mode=True)
    assert result["changed"] is True
    assert result["diff"]["after"] == 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'
    assert not path.exists()


def test_missing_file_without_create_fails(tmp_path: Path):
    path = tmp_path / "config.toml"
    result = run_module({"path": str(path), "enable_cdi": True})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{path} does not exist. Install containerd")
    assert not path.exists()


def test_bad_runtime_entry_fails_before_reading_the_file(config_1_7: Path):
    digest = sha256(config_1_7)
    result = run_module({"path": str(config_1_7), "runtimes": {"nvidia": {"binary": "/usr/bin/x"}}})
    assert result["failed"] is True
    assert (
        result["msg"] == "runtimes.nvidia has unknown key(s) binary; expected only runtime_type, binary_name, options."
    )
    assert sha256(config_1_7) == digest


def test_missing_tomlkit_is_reported_with_missing_required_lib(monkeypatch, config_1_7: Path):
    monkeypatch.setattr(containerd_config, "HAS_TOMLKIT", False)
    result = run_module({"path": str(config_1_7), "enable_cdi": True})
    assert result["failed"] is True
    assert "Failed to import the required Python library (tomlkit)" in result["msg"]


# -- the real containerd reads the edited file ------------------------------------------------


def containerd_binary(version: str) -> Optional[str]:
    env = {"1.6.20": "CONTAINERD_BIN_1_6", "1.7.24": "CONTAINERD_BIN_1_7", "2.1.9": "CONTAINERD_BIN_2"}[version]
    for candidate in (os.environ.get(env), f"/tmp/containerd-{version}/containerd", shutil.which("containerd")):
        if candidate and os.access(candidate, os.X_OK):
            found = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False).stdout
            if f" {version}" in found or f" v{version}" in found:
                return candidate
    return None


def config_dump(binary: str, path: Path) -> dict[str, Any]:
    """``containerd config dump``: the configuration containerd would run with (no daemon, no root)."""
    run = subprocess.run([binary, "--config", str(path), "config", "dump"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return tomlkit.parse(run.stdout).unwrap()


@pytest.mark.parametrize(
    ("version", "fixture", "cri_table"),
    [
        ("1.7.24", "config-default-1.7.24.toml", "io.containerd.grpc.v1.cri"),
        ("1.7.24", "debian-package-config.toml", "io.containerd.grpc.v1.cri"),
        ("2.1.9", "config-default-2.1.9.toml", "io.containerd.cri.v1.runtime"),
        # containerd 2.x migrates a version 2 file (Debian ships one with 2.1.9) when it loads it
        ("2.1.9", "debian-package-config.toml", "io.containerd.cri.v1.runtime"),
    ],
)
def test_containerd_loads_the_edited_file_with_the_requested_values(tmp_path: Path, version, fixture, cri_table):
    binary = containerd_binary(version)
    if binary is None:
        pytest.skip(f"no containerd {version} binary (set CONTAINERD_BIN_* or see tests/fixtures/containerd/README.md)")
    path = tmp_path / "config.toml"
    shutil.copyfile(CONTAINERD / fixture, path)
    result = run_module(
        {
            "path": str(path),
            "enable_cdi": True,
            "cdi_spec_dirs": ["/var/run/cdi", "/etc/cdi"],
            "systemd_cgroup": True,
            "runtimes": {"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}},
            "default_runtime_name": "nvidia",
        }
    )
    assert result["changed"] is True
    effective = config_dump(binary, path)
    cri = effective["plugins"][cri_table]
    assert cri["enable_cdi"] is True
    assert cri["cdi_spec_dirs"] == ["/var/run/cdi", "/etc/cdi"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    runtimes = cri["containerd"]["runtimes"]
    assert runtimes["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True


def test_containerd_1_6_loads_the_edited_file_but_drops_enable_cdi(tmp_path: Path):
    """containerd 1.6 has no CDI: the key is valid TOML at the right table, and 1.6 silently ignores it."""
    binary = containerd_binary("1.6.20")
    if binary is None:
        pytest.skip("no containerd 1.6.20 binary (set CONTAINERD_BIN_1_6 or see tests/fixtures/containerd/README.md)")
    path = tmp_path / "config.toml"
    shutil.copyfile(CONTAINERD / "config-default-1.6.20.toml", path)
    result = run_module({"path": str(path), "enable_cdi": True, "systemd_cgroup": True})
    assert result["changed_keys"] == [
        "plugins.io.containerd.grpc.v1.cri.enable_cdi",
        "plugins.io.containerd.grpc.v1.cri.containerd.runtimes.runc.options.SystemdCgroup",
    ]
    cri = config_dump(binary, path)["plugins"]["io.containerd.grpc.v1.cri"]
    assert "enable_cdi" not in cri
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True


def test_a_fifo_as_the_config_is_refused_at_once(tmp_path: Path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    result = run_module({"path": str(fifo), "enable_cdi": True})  # it blocked forever before
    assert result["failed"] is True
    assert result["msg"].startswith(f"{fifo} is a FIFO (named pipe), not a regular file; refusing to read it")


def test_a_config_past_the_documented_size_is_refused_before_it_is_parsed(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text("version = 2\n" + "# padding\n" * 950_000)  # 9.5 MB: took more than 10 s in check mode
    before = sha256(path)
    result = run_module({"path": str(path), "enable_cdi": True}, check_mode=True)
    assert result["failed"] is True
    assert result["msg"] == (
        f"{path} holds {path.stat().st_size} bytes, more than the 1048576 this collection reads; refusing it."
        " Check that the path names the right file."
    )
    assert sha256(path) == before
