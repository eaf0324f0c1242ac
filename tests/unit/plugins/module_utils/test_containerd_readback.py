# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A containerd config read back as TOML: the imports a host kept, the CRI settings containerd config dump prints."""

from __future__ import annotations

import base64

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_readback import (
    ContainerdReadError,
    effective_cri_settings,
    imports_report,
    missing_imports_line,
    read_imports,
)

from tests.conftest import FIXTURES

CONTAINERD = FIXTURES / "containerd"
PATH = "/etc/containerd/config.toml"
DROP_INS = "/etc/containerd/conf.d/*.toml"
NVIDIA_DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"


def fixture(name: str) -> str:
    return (CONTAINERD / name).read_text(encoding="utf-8")


def slurped(host: str, text: str) -> dict:
    """One result of ``slurp`` looped over the hosts, as Ansible registers it."""
    return {
        "item": host,
        "content": base64.b64encode(text.encode("utf-8")).decode("ascii"),
        "encoding": "base64",
        "source": PATH,
        "changed": False,
    }


# -- read_imports: real files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "imports"),
    [
        ("realworld/nvidia-ctk-v2-complex-after-toplevel.toml", [DROP_INS]),
        ("realworld/nvidia-ctk-v3-minimal-after-toplevel.toml", [DROP_INS]),
        ("config-default-1.7.24.toml", []),
        ("config-default-2.1.9.toml", []),
        ("realworld/kubespray-v2-containerd-1.7.toml", []),  # no imports key at all
    ],
)
def test_the_imports_of_real_configs(name, imports):
    assert read_imports(fixture(name), PATH) == imports


def test_a_multi_line_array_with_single_quotes_and_a_comment_inside():
    text = fixture("config-default-2.1.9.toml").replace(
        "imports = []",
        f"imports = [\n  # '{DROP_INS}',\n  '{NVIDIA_DROP_IN}',  # written by the toolkit\n]",
    )
    # The commented-out entry is not an import: the regex this replaced counted it.
    assert read_imports(text, PATH) == [NVIDIA_DROP_IN]


def test_a_commented_out_imports_line_is_no_import():
    text = f'# imports = ["{DROP_INS}"]\n' + fixture("config-default-1.7.24.toml")
    assert read_imports(text, PATH) == []


def test_imports_inside_a_table_are_not_the_top_level_imports():
    text = fixture("realworld/kubespray-v2-containerd-1.7.toml") + f'\n[plugins."x"]\n  imports = ["{DROP_INS}"]\n'
    assert read_imports(text, PATH) == []


def test_a_file_that_is_not_toml_names_the_file_and_the_line():
    text = fixture("realworld/nvidia-ctk-v2-complex-after-toplevel.toml").replace("version = 2", "version = = 2")
    with pytest.raises(ContainerdReadError) as raised:
        read_imports(text, PATH)
    message = str(raised.value)
    assert message.startswith(f"{PATH} is not valid TOML at line 4, column ")
    assert "\n" not in message
    assert "left unchanged" not in message  # an edit's advice does not belong to a read


def test_imports_that_are_not_a_list_of_names():
    with pytest.raises(ContainerdReadError) as raised:
        read_imports(f'version = 2\nimports = "{DROP_INS}"\n', PATH)
    assert str(raised.value) == (
        f'{PATH} has imports = "{DROP_INS}", not a list of file names; containerd cannot load it'
    )


# -- missing_imports_line ----------------------------------------------------------------------------------------------


def test_the_line_names_the_host_what_was_found_and_what_is_missing():
    assert missing_imports_line("tray-0", [NVIDIA_DROP_IN], [DROP_INS, NVIDIA_DROP_IN]) == (
        f'tray-0: imports = ["{NVIDIA_DROP_IN}"] lacks {DROP_INS}'
    )
    assert missing_imports_line("tray-0", [], ["/a.toml", "/b.toml"]) == "tray-0: imports = [] lacks /a.toml, /b.toml"
    assert missing_imports_line("tray-0", [NVIDIA_DROP_IN, DROP_INS], [DROP_INS]) is None


# -- imports_report: the looped slurp of every GPU host --------------------------------------------------------------


def test_the_report_over_hosts_sorts_them_into_kept_lost_and_unread():
    toolkit_rewrote = fixture("realworld/nvidia-ctk-v2-complex-after-toplevel.toml").replace(
        f'imports = ["{DROP_INS}"]', f'imports = ["{NVIDIA_DROP_IN}"]'
    )
    results = [
        slurped("tray-0", fixture("realworld/nvidia-ctk-v2-complex-after-toplevel.toml")),
        slurped("tray-1", toolkit_rewrote),
        slurped("tray-2", "version = 2\nimports = = []\n"),
        {"item": "tray-3", "failed": True, "msg": f"file not found: {PATH}"},
        {"item": "tray-4", "unreachable": True, "msg": "Failed to connect to the host via ssh"},
        {"item": "tray-5", "unreachable": True},
    ]
    report = imports_report(results, [DROP_INS], PATH)
    assert report.lost[0] == f'tray-1: imports = ["{NVIDIA_DROP_IN}"] lacks {DROP_INS}'
    assert report.lost[1].startswith(f"tray-2: {PATH} is not valid TOML at line 2, column ")
    assert len(report.lost) == 2
    assert report.unread == [
        f"tray-3 (file not found: {PATH})",
        "tray-4 (Failed to connect to the host via ssh)",
        "tray-5 (unreachable)",
    ]
    assert report.to_dict() == {"lost": report.lost, "unread": report.unread}


def test_content_that_is_not_base64_is_reported_not_raised():
    report = imports_report([{"item": "tray-0", "content": "not base64!", "encoding": "base64"}], [DROP_INS], PATH)
    assert report.unread == []
    assert report.lost[0].startswith("tray-0: its content is not base64 text")


def test_no_hosts_no_findings():
    assert imports_report([], [DROP_INS], PATH).to_dict() == {"lost": [], "unread": []}


# -- effective_cri_settings: containerd config dump -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("config-default-1.6.20.toml", {"enable_cdi": False, "cdi_spec_dirs": [], "systemd_cgroup": False}),
        (
            "config-default-1.7.24.toml",
            {"enable_cdi": False, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "systemd_cgroup": False},
        ),
        (
            "config-default-2.1.9.toml",
            {"enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "systemd_cgroup": False},
        ),
        (
            "realworld/kubespray-v2-containerd-1.7-nvidia-cdi.toml",
            {"enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"], "systemd_cgroup": True},
        ),
    ],
)
def test_the_effective_settings_of_real_dumps(name, settings):
    assert effective_cri_settings(fixture(name)) == settings


def test_a_commented_setting_is_containerds_default():
    text = fixture("config-default-2.1.9.toml").replace("    enable_cdi = true", "    # enable_cdi = true")
    assert effective_cri_settings(text)["enable_cdi"] is False


def test_a_dump_that_is_not_toml_is_one_line():
    with pytest.raises(ContainerdReadError) as raised:
        effective_cri_settings("version = 2\n[plugins\n")
    assert str(raised.value).startswith("containerd config dump is not valid TOML at line 2")
