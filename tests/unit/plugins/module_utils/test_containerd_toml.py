# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
import tomlkit
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    ContainerdConfigError,
    ContainerdRequest,
    edit_config,
    minimal_config,
    parse_runtimes,
)

from tests.conftest import FIXTURES

CONTAINERD = FIXTURES / "containerd"
V2_CRI = ("plugins", "io.containerd.grpc.v1.cri")
V3_RUNTIME = ("plugins", "io.containerd.cri.v1.runtime")


def fixture(name: str) -> str:
    return (CONTAINERD / name).read_text(encoding="utf-8")


def table(text: str, path: tuple[str, ...]) -> dict:
    current = tomlkit.parse(text).unwrap()
    for key in path:
        current = current[key]
    return current


def only_changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """Pairs of (old line, new line) for files of the same line count."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new)
    return [(a, b) for a, b in zip(old, new) if a != b]


def test_v2_containerd_1_7_enable_cdi_changes_exactly_one_line():
    before = fixture("config-default-1.7.24.toml")
    result = edit_config(before, "config.toml", ContainerdRequest(enable_cdi=True))
    assert result.config_version == 2
    assert result.changed_keys == ["plugins.io.containerd.grpc.v1.cri.enable_cdi"]
    assert only_changed_lines(before, result.text) == [("    enable_cdi = false\n", "    enable_cdi = true\n")]
    assert table(result.text, V2_CRI)["enable_cdi"] is True


def test_v2_containerd_1_6_gets_enable_cdi_in_the_cri_table_after_its_last_key():
    before = fixture("config-default-1.6.20.toml")
    assert "enable_cdi" not in before
    result = edit_config(before, "config.toml", ContainerdRequest(enable_cdi=True))
    anchor = '    unset_seccomp_profile = ""\n'
    assert before.count(anchor) == 1
    assert result.text == before.replace(anchor, anchor + "    enable_cdi = true\n")
    assert table(result.text, V2_CRI)["enable_cdi"] is True


def test_v3_containerd_2_1_settings_land_in_the_cri_runtime_table():
    before = fixture("config-default-2.1.9.toml")
    result = edit_config(
        before, "config.toml", ContainerdRequest(enable_cdi=False, cdi_spec_dirs=["/var/run/cdi", "/etc/cdi"])
    )
    assert result.config_version == 3
    assert only_changed_lines(before, result.text) == [
        ("    enable_cdi = true\n", "    enable_cdi = false\n"),
        ("    cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']\n", "    cdi_spec_dirs = ['/var/run/cdi', '/etc/cdi']\n"),
    ]
    runtime = table(result.text, V3_RUNTIME)
    assert runtime["enable_cdi"] is False
    assert "enable_cdi" not in table(result.text, V2_CRI)


def test_v3_default_already_has_cdi_on_so_nothing_changes():
    before = fixture("config-default-2.1.9.toml")
    result = edit_config(
        before, "config.toml", ContainerdRequest(enable_cdi=True, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"])
    )
    assert result.text == before
    assert result.changed_keys == []


def test_comments_and_trailing_comments_survive_byte_for_byte():
    base = fixture("config-default-1.7.24.toml")
    # invented: a hand-maintained file with comments around the key that changes
    before = base.replace(
        "    enable_cdi = false\n",
        "    # CDI is needed by the NVIDIA DRA driver\n    enable_cdi = false  # site default\n",
    ).replace("version = 2\n", "version = 2  # containerd 1.7\n# end of top-level keys\n")
    result = edit_config(before, "config.toml", ContainerdRequest(enable_cdi=True))
    assert only_changed_lines(before, result.text) == [
        ("    enable_cdi = false  # site default\n", "    enable_cdi = true  # site default\n")
    ]


def test_second_edit_is_byte_identical():
    request = ContainerdRequest(
        enable_cdi=True,
        cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"],
        imports=["/etc/containerd/conf.d/*.toml"],
        systemd_cgroup=True,
        runtimes=parse_runtimes({"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}}),
        default_runtime_name="nvidia",
    )
    for name in ("config-default-1.6.20.toml", "config-default-1.7.24.toml", "config-default-2.1.9.toml"):
        first = edit_config(fixture(name), "config.toml", request)
        assert first.changed_keys, name
        second = edit_config(first.text, "config.toml", request)
        assert second.text == first.text, name
        assert second.changed_keys == [], name


def test_imports_present_keeps_existing_entries_and_appends_missing_ones():
    before = fixture("config-default-1.7.24.toml").replace(
        "imports = []\n", 'imports = ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml"]\n'
    )
    request = ContainerdRequest(imports=["/etc/containerd/conf.d/*.toml", "/etc/containerd/gpu.d/*.toml"])
    result = edit_config(before, "config.toml", request)
    assert only_changed_lines(before, result.text) == [
        (
            'imports = ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml"]\n',
            'imports = ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml", '
            '"/etc/containerd/gpu.d/*.toml"]\n',
        )
    ]


def test_imports_exact_replaces_the_list():
    before = fixture("config-default-1.7.24.toml").replace(
        "imports = []\n", 'imports = ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml"]\n'
    )
    request = ContainerdRequest(imports=["/etc/containerd/conf.d/*.toml"], imports_state="exact")
    result = edit_config(before, "config.toml", request)
    assert only_changed_lines(before, result.text) == [
        (
            'imports = ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml"]\n',
            'imports = ["/etc/containerd/conf.d/*.toml"]\n',
        )
    ]
    assert edit_config(result.text, "config.toml", request).changed_keys == []


def test_imports_added_to_a_file_without_them_go_to_the_top_level_and_keep_v3_quotes():
    before = fixture("config-default-2.1.9.toml")
    result = edit_config(before, "config.toml", ContainerdRequest(imports=["/etc/containerd/conf.d/*.toml"]))
    assert only_changed_lines(before, result.text) == [
        ("imports = []\n", "imports = ['/etc/containerd/conf.d/*.toml']\n")
    ]
    debian = fixture("debian-package-config.toml")
    added = edit_config(debian, "config.toml", ContainerdRequest(imports=["/etc/containerd/conf.d/*.toml"]))
    assert added.text == debian.replace("version = 2\n", 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n')


def test_new_runtime_is_written_in_the_file_style_with_the_runc_shim():
    before = fixture("config-default-1.7.24.toml")
    request = ContainerdRequest(
        runtimes=parse_runtimes({"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}})
    )
    result = edit_config(before, "config.toml", request)
    block = (
        "\n"
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          runtime_type = "io.containerd.runc.v2"\n'
        "\n"
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    )
    anchor = "            SystemdCgroup = false\n"
    assert before.count(anchor) == 1
    assert result.text == before.replace(anchor, anchor + block)
    nvidia = table(result.text, (*V2_CRI, "containerd", "runtimes", "nvidia"))
    assert nvidia == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"},
    }


def test_systemd_cgroup_on_a_file_without_runc_creates_a_complete_runc_entry():
    before = fixture("debian-package-config.toml")
    result = edit_config(before, "config.toml", ContainerdRequest(systemd_cgroup=True))
    runc = table(result.text, (*V2_CRI, "containerd", "runtimes", "runc"))
    assert runc == {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    # everything that was there is still there, unchanged and in order
    assert result.text.startswith(before.split('    [plugins."io.containerd.grpc.v1.cri".cni]')[0])
    assert '[plugins."io.containerd.internal.v1.opt"]\n    path = "/var/lib/containerd/opt"\n' in result.text


def test_systemd_cgroup_also_reaches_runc_shim_runtimes_given_in_the_same_task():
    before = fixture("config-default-2.1.9.toml")
    request = ContainerdRequest(
        systemd_cgroup=True,
        runtimes=parse_runtimes(
            {
                "nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"},
                "kata": {"runtime_type": "io.containerd.kata.v2"},
            }
        ),
    )
    result = edit_config(before, "config.toml", request)
    runtimes = table(result.text, (*V3_RUNTIME, "containerd", "runtimes"))
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    assert runtimes["kata"] == {"runtime_type": "io.containerd.kata.v2"}
    assert "        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]\n" in result.text


def test_default_runtime_name_must_name_a_runtime():
    before = fixture("config-default-1.7.24.toml")
    with pytest.raises(
        ContainerdConfigError, match=r"default_runtime_name='nvidia' names no runtime: the file defines runc"
    ):
        edit_config(before, "config.toml", ContainerdRequest(default_runtime_name="nvidia"))
    request = ContainerdRequest(
        default_runtime_name="nvidia",
        runtimes=parse_runtimes({"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}}),
    )
    result = edit_config(before, "config.toml", request)
    assert table(result.text, (*V2_CRI, "containerd"))["default_runtime_name"] == "nvidia"


def test_file_without_version_is_refused_as_version_1():
    before = fixture("config-default-1.7.24.toml").replace("version = 2\n", "")
    with pytest.raises(ContainerdConfigError, match=r"/etc/containerd/config.toml has no 'version' key.*version 1"):
        edit_config(before, "/etc/containerd/config.toml", ContainerdRequest(enable_cdi=True))


def test_unknown_version_is_refused():
    with pytest.raises(ContainerdConfigError, match=r"has version = 4; this module edits config versions 2"):
        edit_config("version = 4\n", "config.toml", ContainerdRequest(enable_cdi=True))


def test_parse_error_names_the_line_and_column():
    lines = fixture("config-default-1.7.24.toml").splitlines(keepends=True)
    assert lines[53] == "    enable_cdi = false\n"
    lines[53] = "    enable_cdi = \n"  # invented breakage: a value lost in a hand edit
    with pytest.raises(ContainerdConfigError) as error:
        edit_config("".join(lines), "/etc/containerd/config.toml", ContainerdRequest(enable_cdi=True))
    message = str(error.value)
    assert message.startswith(
        "/etc/containerd/config.toml is not valid TOML at line 54, column 17: Unexpected character: '\\n'. "
        "The file was left unchanged"
    )
    assert "left unchanged" in message


def test_runtime_options_are_validated():
    with pytest.raises(ContainerdConfigError, match=r"runtimes.nvidia has unknown key\(s\) binary; expected only"):
        parse_runtimes({"nvidia": {"binary": "/usr/bin/nvidia-container-runtime"}})
    with pytest.raises(ContainerdConfigError, match=r"give only one of them"):
        parse_runtimes({"nvidia": {"binary_name": "/a", "options": {"BinaryName": "/b"}}})
    with pytest.raises(ContainerdConfigError, match=r"runtimes.nvidia is a str"):
        parse_runtimes({"nvidia": "/usr/bin/nvidia-container-runtime"})
    with pytest.raises(ContainerdConfigError, match=r"not a valid RuntimeClass handler"):
        parse_runtimes({"nvidia runtime": {}})


def test_minimal_config_per_version():
    assert minimal_config(2) == "version = 2\n"
    assert minimal_config(3) == "version = 3\n"
    result = edit_config(minimal_config(3), "config.toml", ContainerdRequest(enable_cdi=True))
    assert result.text == 'version = 3\n\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = true\n'


def test_drop_in_with_the_whole_cri_section_is_reported_on_v2(tmp_path):
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    # the shape of the NVIDIA Container Toolkit's drop-in: a full copy of the CRI section
    (conf_d / "99-nvidia.toml").write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n', encoding="utf-8"
    )
    (conf_d / "10-mirrors.toml").write_text('version = 2\n[plugins."io.containerd.internal.v1.opt"]\n  path = "/x"\n')
    before = fixture("config-default-1.7.24.toml").replace("imports = []\n", 'imports = ["conf.d/*.toml"]\n')
    result = edit_config(before, str(tmp_path / "config.toml"), ContainerdRequest(enable_cdi=True))
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(f"{conf_d / '99-nvidia.toml'} (imported by {tmp_path / 'config.toml'})")
    unrelated = edit_config(before, str(tmp_path / "config.toml"), ContainerdRequest(imports=["/etc/x.toml"]))
    assert unrelated.warnings == []
