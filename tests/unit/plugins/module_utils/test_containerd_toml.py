# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
import tomlkit
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_edit import edit_config
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    ContainerdConfigError,
    ContainerdRequest,
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


# -- shapes real tools write, and files containerd refuses -----------------------------------------

REALWORLD = CONTAINERD / "realworld"
NVIDIA = parse_runtimes({"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}})


def realworld(name: str) -> str:
    return (REALWORLD / name).read_text(encoding="utf-8")


def added_lines(before: str, after: str) -> list[str]:
    """The lines of ``after`` that are not in ``before``, after checking that every old line is kept in order."""
    import difflib

    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    opcodes = difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    assert [op for op in opcodes if op[0] not in ("equal", "insert")] == []
    return [line for tag, _i1, _i2, j1, j2 in opcodes if tag == "insert" for line in new[j1:j2]]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n  enable_cdi = true\n', 4),
        ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  x = 1\n[plugins."io.containerd.grpc.v1.cri"]\n', 4),
        ("version = 2\n[a.b]\n  x = 1\n[c]\n[a.b]\n  y = 2\n", 5),
    ],
)
def test_a_key_or_table_defined_twice_is_refused_naming_its_line(text, line):
    with pytest.raises(ContainerdConfigError) as error:
        edit_config(text, "/etc/containerd/config.toml", ContainerdRequest(enable_cdi=True))
    assert str(error.value).startswith(f"/etc/containerd/config.toml is not valid TOML at line {line}, column ")
    assert "\n" not in str(error.value)


def test_k3s_config_with_runtimes_after_the_registry_gets_a_runtime_and_the_defaults():
    before = realworld("k3s-v2-nvidia-runtimes.toml")
    request = ContainerdRequest(
        enable_cdi=True,
        systemd_cgroup=True,
        runtimes=parse_runtimes({"nvidia-dra": {"binary_name": "/usr/bin/nvidia-container-runtime.cdi"}}),
        default_runtime_name="nvidia",
    )
    result = edit_config(before, "config.toml", request)
    assert added_lines(before, result.text) == [
        "  enable_cdi = true\n",
        '  default_runtime_name = "nvidia"\n',
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-dra]\n',
        '  runtime_type = "io.containerd.runc.v2"\n',
        "\n",
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-dra.options]\n',
        '  BinaryName = "/usr/bin/nvidia-container-runtime.cdi"\n',
        "  SystemdCgroup = true\n",
        "\n",
    ]
    runtimes = table(result.text, (*V2_CRI, "containerd", "runtimes"))
    assert runtimes["runc"]["options"] == {"SystemdCgroup": True}  # already there, untouched
    assert runtimes["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert edit_config(result.text, "config.toml", request).text == result.text


def test_a_runtime_appended_at_the_end_of_the_file_is_edited_where_it_is():
    appended = (
        '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    )
    before = fixture("config-default-1.7.24.toml") + appended
    request = ContainerdRequest(enable_cdi=True, systemd_cgroup=True, runtimes=NVIDIA, default_runtime_name="nvidia")
    result = edit_config(before, "config.toml", request)
    assert result.text.endswith(appended.replace('runtime"\n', 'runtime"\n    SystemdCgroup = true\n'))
    assert table(result.text, (*V2_CRI, "containerd"))["default_runtime_name"] == "nvidia"
    assert edit_config(result.text, "config.toml", request).changed_keys == []


def test_inline_options_are_edited_in_place():
    before = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n  options = { SystemdCgroup = false }  # kubelet: cgroupfs\n'
    )
    result = edit_config(before, "config.toml", ContainerdRequest(systemd_cgroup=True))
    assert only_changed_lines(before, result.text) == [
        (
            "  options = { SystemdCgroup = false }  # kubelet: cgroupfs\n",
            "  options = { SystemdCgroup = true }  # kubelet: cgroupfs\n",
        )
    ]


def test_dotted_options_get_a_dotted_key_and_the_second_run_reads_it_back():
    before = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n  options.BinaryName = "/usr/bin/runc"\n'
    )
    request = ContainerdRequest(systemd_cgroup=True)
    first = edit_config(before, "config.toml", request)
    assert first.text == before + "  options.SystemdCgroup = true\n"
    second = edit_config(first.text, "config.toml", request)
    assert second.text == first.text
    assert second.changed_keys == []


def test_systemd_cgroup_reaches_a_runc_v1_runtime_with_a_warning():
    # containerd 1.x decodes the options of io.containerd.runc.v1 and .v2 as the same runc options,
    # and the v1 shim passes SystemdCgroup to runc: leaving it out would run it on cgroupfs.
    before = realworld("nvidia-ctk-testdata-config_v2.toml")
    result = edit_config(before, "config.toml", ContainerdRequest(systemd_cgroup=True))
    runc = table(result.text, (*V2_CRI, "containerd", "runtimes", "runc"))
    assert runc["runtime_type"] == "io.containerd.runc.v1"
    assert runc["options"] == {"SystemdCgroup": True}
    assert result.warnings == [
        "runtime 'runc' uses the io.containerd.runc.v1 shim, deprecated since containerd 1.4 (containerd 2.0 "
        "removed it); set its runtime_type to io.containerd.runc.v2."
    ]


def test_systemd_cgroup_on_a_runtime_of_another_shim_is_not_set_and_says_so():
    before = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.kata.v2"\n'
    )
    result = edit_config(before, "config.toml", ContainerdRequest(systemd_cgroup=True))
    assert result.text == before
    assert result.warnings[0].startswith("systemd_cgroup was not applied to runtime 'runc': its runtime_type is ")


def test_a_table_implied_by_deeper_headers_gets_its_own_header():
    before = (
        'version = 2\n\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
    )
    result = edit_config(before, "config.toml", ContainerdRequest(enable_cdi=True))
    assert result.text == before.replace(
        "\n\n", '\n\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n\n', 1
    )
    assert table(result.text, V2_CRI)["enable_cdi"] is True


def test_crlf_file_stays_crlf():
    before = fixture("config-default-1.7.24.toml").replace("\n", "\r\n")
    result = edit_config(before, "config.toml", ContainerdRequest(enable_cdi=True, runtimes=NVIDIA))
    assert "\n" not in result.text.replace("\r\n", "")
    assert result.text.count("\r\n") == before.count("\r\n") + 6


def test_a_value_where_a_table_belongs_is_refused():
    before = (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = "io.containerd.runc.v2"\n  options = "x"\n'
    )
    with pytest.raises(ContainerdConfigError, match=r"runtimes.runc.options is a string in the file, but containerd"):
        edit_config(before, "config.toml", ContainerdRequest(systemd_cgroup=True))


# valid TOML (tomllib and containerd read it): an indented options header before its runtime's header.
# tomlkit up to 0.15.2 cannot read it (ParseError "'OutOfOrderTableProxy' object has no attribute 'trivia'
# at line 5 col 0"); 0.15.3 can. requirements-host.txt allows any tomlkit from 0.12.0.
OPTIONS_BEFORE_RUNTIME = (
    "version = 3\n"
    '  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]\n'
    '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
    '  runtime_type = "io.containerd.runc.v2"\n'
)


def test_a_valid_file_tomlkit_cannot_read_is_refused_as_such_not_as_invalid(monkeypatch):
    def as_tomlkit_0_15_2_reads_it(text):
        raise tomlkit.exceptions.ParseError(5, 0, "'OutOfOrderTableProxy' object has no attribute 'trivia'")

    monkeypatch.setattr(tomlkit, "parse", as_tomlkit_0_15_2_reads_it)
    with pytest.raises(ContainerdConfigError) as error:
        edit_config(OPTIONS_BEFORE_RUNTIME, "/etc/containerd/config.toml", ContainerdRequest(enable_cdi=True))
    assert str(error.value).startswith(
        "/etc/containerd/config.toml is valid TOML, but the tomlkit library ("
        f"{tomlkit.__version__}) cannot read it ('OutOfOrderTableProxy' object has no attribute 'trivia' at line 5); "
        "the file was left unchanged."
    )


def test_with_the_installed_tomlkit_that_file_is_edited_right_or_refused_as_such():
    try:
        result = edit_config(OPTIONS_BEFORE_RUNTIME, "/etc/containerd/config.toml", ContainerdRequest(enable_cdi=True))
    except ContainerdConfigError as error:  # tomlkit before 0.15.3
        assert str(error).startswith("/etc/containerd/config.toml is valid TOML, but the tomlkit library (")
        return
    assert table(result.text, V3_RUNTIME)["containerd"]["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"},
    }
    assert table(result.text, V3_RUNTIME)["enable_cdi"] is True
