# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import imex_config

from tests.conftest import FIXTURES
from tests.unit.plugins.modules.runner import run_module as run

REAL_CONFIG = FIXTURES / "imex" / "config-580.178.04.cfg"


def run_module(args: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    return run((imex_config.main), args, check_mode=check_mode)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def imex_dir(tmp_path: Path) -> Path:
    """An /etc/nvidia-imex as the package leaves it, its nodes file pointing into the same directory."""
    text = REAL_CONFIG.read_text().replace(
        "IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg",
        f"IMEX_NODE_CONFIG_FILE={tmp_path}/nodes_config.cfg",
    )
    (tmp_path / "config.cfg").write_text(text)
    return tmp_path


def test_build_module_reads_the_documented_defaults():
    with patch_module_args({}):
        module = imex_config.build_module()
    assert module.params["config_path"] == "/etc/nvidia-imex/config.cfg"
    assert module.params["nodes_path"] is None
    assert module.params["backup"] is False


def test_settings_and_nodes_are_written_with_one_diff_per_file(imex_dir: Path):
    config = imex_dir / "config.cfg"
    before = config.read_text()
    result = run_module(
        {
            "config_path": str(config),
            "settings": {"SERVER_PORT": 50010, "IMEX_CMD_ENABLED": False},
            "nodes": ["10.114.0.11", "10.114.0.12"],
        }
    )
    after = before.replace("\nSERVER_PORT=50000\n", "\nSERVER_PORT=50010\n").replace(
        "\nIMEX_CMD_ENABLED=1\n", "\nIMEX_CMD_ENABLED=0\n"
    )
    nodes_path = str(imex_dir / "nodes_config.cfg")
    assert result["failed"] is False
    assert result["changed"] is True
    assert result["changed_keys"] == ["SERVER_PORT", "IMEX_CMD_ENABLED"]
    assert result["nodes_path"] == nodes_path
    assert result["nodes"] == ["10.114.0.11", "10.114.0.12"]
    assert result["backup_files"] == {}
    assert result["settings"]["SERVER_PORT"] == "50010"
    assert result["diff"] == [
        {"before": before, "after": after, "before_header": str(config), "after_header": str(config)},
        {
            "before": "",
            "after": "10.114.0.11\n10.114.0.12\n",
            "before_header": f"{nodes_path} (absent)",
            "after_header": nodes_path,
        },
    ]
    assert config.read_text() == after
    assert Path(nodes_path).read_text() == "10.114.0.11\n10.114.0.12\n"
    assert sorted(p.name for p in imex_dir.iterdir()) == ["config.cfg", "nodes_config.cfg"]


def test_second_run_reports_no_change(imex_dir: Path):
    args = {"config_path": str(imex_dir / "config.cfg"), "settings": {"SERVER_PORT": 50010}, "nodes": ["10.0.0.1"]}
    assert run_module(args)["changed"] is True
    digests = {p.name: sha256(p) for p in imex_dir.iterdir()}
    again = run_module(args)
    assert again["changed"] is False
    assert again["changed_keys"] == []
    assert {p.name: sha256(p) for p in imex_dir.iterdir()} == digests


def test_nodes_follow_a_new_imex_node_config_file(imex_dir: Path):
    peers = imex_dir / "peers.cfg"
    result = run_module(
        {
            "config_path": str(imex_dir / "config.cfg"),
            "settings": {"IMEX_NODE_CONFIG_FILE": str(peers)},
            "nodes": ["fd00::11", "fd00::12"],
        }
    )
    assert result["nodes_path"] == str(peers)
    assert peers.read_text() == "fd00::11\nfd00::12\n"
    assert not (imex_dir / "nodes_config.cfg").exists()


def test_invalid_node_is_refused_before_anything_is_written(imex_dir: Path):
    config = imex_dir / "config.cfg"
    nodes = imex_dir / "nodes_config.cfg"
    nodes.write_text("10.0.0.1\n")
    digests = (sha256(config), sha256(nodes))
    result = run_module(
        {"config_path": str(config), "settings": {"SERVER_PORT": 50010}, "nodes": ["10.0.0.1", "10.0.0.2", "10.0.0.2"]}
    )
    assert result["failed"] is True
    assert result["msg"] == "nodes[2] = '10.0.0.2' repeats nodes[1] (10.0.0.2); list every node once."
    assert (sha256(config), sha256(nodes)) == digests


def test_check_mode_writes_nothing(imex_dir: Path):
    config = imex_dir / "config.cfg"
    digest = sha256(config)
    result = run_module(
        {"config_path": str(config), "settings": {"SERVER_PORT": 50010}, "nodes": ["10.0.0.1"], "backup": True},
        check_mode=True,
    )
    assert result["changed"] is True
    assert [d["after_header"] for d in result["diff"]] == [str(config), str(imex_dir / "nodes_config.cfg")]
    assert result["settings"]["SERVER_PORT"] == "50010"
    assert result["backup_files"] == {}
    assert sha256(config) == digest
    assert sorted(p.name for p in imex_dir.iterdir()) == ["config.cfg"]


def test_backup_keeps_the_old_content_of_each_changed_file(imex_dir: Path):
    config = imex_dir / "config.cfg"
    nodes = imex_dir / "nodes_config.cfg"
    nodes.write_text("10.0.0.9\n")
    old_config = config.read_bytes()
    result = run_module(
        {"config_path": str(config), "settings": {"SERVER_PORT": 50010}, "nodes": ["10.0.0.1"], "backup": True}
    )
    assert set(result["backup_files"]) == {str(config), str(nodes)}
    assert Path(result["backup_files"][str(config)]).read_bytes() == old_config
    assert Path(result["backup_files"][str(nodes)]).read_text() == "10.0.0.9\n"
    assert nodes.read_text() == "10.0.0.1\n"


def test_unknown_key_warns_and_is_appended(imex_dir: Path, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    config = imex_dir / "config.cfg"
    before = config.read_text()
    result = run_module({"config_path": str(config), "settings": {"IMEX_FUTURE_KNOB": "on"}})
    assert result["changed"] is True
    assert config.read_text() == before + "IMEX_FUTURE_KNOB=on\n"
    assert warnings == [
        "settings.IMEX_FUTURE_KNOB is not a key of the config.cfg of nvidia-imex 580; it is written as given. "
        "Check the spelling against /etc/nvidia-imex/config.cfg."
    ]


def test_read_only_call_returns_the_settings_and_nodes_path(imex_dir: Path):
    result = run_module({"config_path": str(imex_dir / "config.cfg")})
    assert result["changed"] is False
    assert result["diff"] == []
    assert result["nodes_path"] == str(imex_dir / "nodes_config.cfg")
    assert result["settings"]["IMEX_CMD_PORT"] == "50005"


def test_missing_config_fails_unless_only_a_nodes_file_is_asked_for(tmp_path: Path):
    config = tmp_path / "config.cfg"
    result = run_module({"config_path": str(config), "settings": {"SERVER_PORT": 50000}})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{config} does not exist; install the nvidia-imex-<driver branch> package")
    nodes = tmp_path / "nodes.cfg"
    only_nodes = run_module({"config_path": str(config), "nodes": ["10.0.0.1"], "nodes_path": str(nodes)})
    assert only_nodes["changed"] is True
    assert "settings" not in only_nodes
    assert nodes.read_text() == "10.0.0.1\n"
    assert not config.exists()


def test_real_config_copied_as_is_gets_its_nodes_file_in_the_package_directory(tmp_path: Path):
    config = tmp_path / "config.cfg"
    shutil.copyfile(REAL_CONFIG, config)
    result = run_module({"config_path": str(config), "nodes": ["10.0.0.1"]}, check_mode=True)
    assert result["nodes_path"] == "/etc/nvidia-imex/nodes_config.cfg"
    assert result["diff"][0]["after_header"] == "/etc/nvidia-imex/nodes_config.cfg"


@pytest.mark.parametrize("which", ["config.cfg", "nodes_config.cfg"])
def test_a_fifo_as_an_imex_file_is_refused_before_anything_is_written(imex_dir: Path, which):
    config = imex_dir / "config.cfg"
    before = config.read_bytes()
    if which == "config.cfg":
        config.unlink()
    os.mkfifo(imex_dir / which)
    result = run_module({"config_path": str(config), "settings": {"SERVER_PORT": 50001}, "nodes": ["10.0.0.1"]})
    assert result["failed"] is True  # it blocked forever before
    assert result["msg"].startswith(f"{imex_dir / which} is a FIFO (named pipe), not a regular file")
    if which != "config.cfg":
        assert config.read_bytes() == before


def test_a_nodes_file_that_cannot_be_written_leaves_the_settings_file_as_it_was(imex_dir: Path, tmp_path: Path):
    config = imex_dir / "config.cfg"
    before = config.read_bytes()
    missing = tmp_path / "absent-dir" / "nodes.cfg"
    result = run_module(
        {
            "config_path": str(config),
            "settings": {"SERVER_PORT": 50001},
            "nodes": ["10.0.0.1"],
            "nodes_path": str(missing),
        }
    )
    assert result["failed"] is True
    assert result["msg"].startswith(f"directory {missing.parent} does not exist, so {missing} cannot be written")
    assert config.read_bytes() == before  # it was written before, and the restart never came
    nodes = imex_dir / "nodes_config.cfg"
    nodes.write_text("10.0.0.9\n")
    nodes.chmod(0o444)
    result = run_module({"config_path": str(config), "settings": {"SERVER_PORT": 50001}, "nodes": ["10.0.0.1"]})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{nodes} is read-only (mode 0444)")
    assert config.read_bytes() == before
    assert nodes.read_text() == "10.0.0.9\n"


def test_a_write_that_fails_midway_puts_the_first_file_back(imex_dir: Path, monkeypatch):
    from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import files

    config = imex_dir / "config.cfg"
    before = config.read_bytes()
    real = files.replace_file
    calls = []

    def second_fails(path, data, module=None):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(path, data, module)

    monkeypatch.setattr(files, "replace_file", second_fails)
    result = run_module({"config_path": str(config), "settings": {"SERVER_PORT": 50001}, "nodes": ["10.0.0.1"]})
    assert result["failed"] is True
    assert result["msg"].endswith(f"({config} put back as it was)")
    assert config.read_bytes() == before
    assert not (imex_dir / "nodes_config.cfg").exists()
