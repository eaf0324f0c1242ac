# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property tests of the host-stage file editors: nothing that was not asked for changes, ever.

The files are generated from the real ones (containerd's defaults, Debian's, kubespray's, k3s's and
the NVIDIA container toolkit's config.toml; the nvidia-imex package's config.cfg) by adding what
people and tools add: comments (unicode too), CRLF line endings, blank lines of spaces, tables out of
order, a runtime table appended at the end, options as an inline table or dotted keys, drop-in
imports, trailing comments after IMEX values. Fixed seed (derandomize), bounded examples.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
import tomllib
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import files
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_edit import edit_config
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    ContainerdConfigError,
    ContainerdRequest,
    parse_runtimes,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.imex import edit_settings, validate_settings
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import containerd_config, imex_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tests.unit.plugins.modules.runner import run_module

PROPERTY = settings(
    derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CONTAINERD_FILES = {
    path.name: path.read_text(encoding="utf-8") for path in sorted((FIXTURES / "containerd").rglob("*.toml"))
}
IMEX_FILE = (FIXTURES / "imex" / "config-580.178.04.cfg").read_text(encoding="utf-8")
CRI = {2: ("plugins", "io.containerd.grpc.v1.cri"), 3: ("plugins", "io.containerd.cri.v1.runtime")}
HEADER = re.compile(r"^[ \t]*\[[^\[]")
KEY_LINE = re.compile(r"^[ \t]*(?:[A-Za-z0-9_\-\"'.]+\.)?[\"']?([A-Za-z0-9_\-]+)[\"']?[ \t]*=")
NOTE = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=20)


# -- generated containerd files --------------------------------------------------------------------


def _blocks(text: str) -> tuple[list[str], list[list[str]]]:
    top: list[str] = []
    blocks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if HEADER.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            top.append(line)
    return top, blocks


def _cri(text: str) -> str:
    return CRI[3 if re.search(r"(?m)^version\s*=\s*3", text) else 2][1]


@st.composite
def containerd_files(draw: Callable) -> str:
    name = draw(st.sampled_from(sorted(n for n, t in CONTAINERD_FILES.items() if re.search(r"(?m)^version", t))))
    top, blocks = _blocks(CONTAINERD_FILES[name])
    cri = _cri(CONTAINERD_FILES[name])
    for step in range(draw(st.integers(0, 4))):
        operation = draw(st.sampled_from(["comment", "move", "runtime", "options", "quoted", "blank"]))
        if not blocks:
            break
        index = draw(st.integers(0, len(blocks) - 1))
        block = blocks[index]
        if operation == "comment":
            block.insert(draw(st.integers(1, len(block))), f"  # {draw(NOTE)}\n")
        elif operation == "move":  # a table written after the tables that follow it
            blocks.append([line if line.endswith("\n") else line + "\n" for line in blocks.pop(index)])
        elif operation == "runtime":  # a runtime appended at the end, as guides tell people to do
            runtime = draw(st.sampled_from(["nvidia-legacy", "gpu", "nvidia-exp"]))
            if not any(f".runtimes.{runtime}]" in b[0] for b in blocks):
                blocks.append(
                    [
                        f'\n[plugins."{cri}".containerd.runtimes.{runtime}]\n',
                        '  runtime_type = "io.containerd.runc.v2"\n',
                        f"  options = {{ BinaryName = '/usr/bin/{runtime}' }}\n"
                        if draw(st.booleans())
                        else f'  options.BinaryName = "/usr/bin/{runtime}"\n',
                    ]
                )
        elif operation == "quoted":  # a key of its own, quoted, with unicode
            block.insert(1, f'  "x-{step}-ü" = "{draw(NOTE).replace(chr(92), "").replace(chr(34), "")}"\n')
        elif operation == "blank":
            block.append(draw(st.sampled_from(["\n", "  \n", "\t\n"])))
    if draw(st.booleans()) and not any(line.startswith("imports") for line in top):
        top.append('imports = ["/etc/containerd/conf.d/*.toml"]  # drop-ins\n')
    text = "".join(top) + "".join(line for block in blocks for line in block)
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text


@st.composite
def containerd_requests(draw: Callable) -> tuple[dict[str, Any], set[str]]:
    args: dict[str, Any] = {}
    targeted: set[str] = set()
    if draw(st.booleans()):
        args["enable_cdi"] = draw(st.booleans())
        targeted.add("enable_cdi")
    if draw(st.booleans()):
        args["cdi_spec_dirs"] = draw(st.sampled_from([["/etc/cdi", "/var/run/cdi"], ["/var/run/cdi"]]))
        targeted.add("cdi_spec_dirs")
    if draw(st.booleans()):
        args["imports"] = ["/etc/containerd/conf.d/*.toml", "/etc/containerd/gpu.d/*.toml"]
        targeted.add("imports")
    if draw(st.booleans()):
        args["systemd_cgroup"] = draw(st.booleans())
        targeted |= {"SystemdCgroup", "runtime_type"}
    if draw(st.booleans()):
        name = draw(st.sampled_from(["nvidia", "nvidia-cdi", "runc"]))
        args["runtimes"] = {name: {"binary_name": f"/usr/bin/{name}-runtime"}}
        targeted |= {"BinaryName", "runtime_type", "SystemdCgroup"}
        if draw(st.booleans()):
            args["default_runtime_name"] = name
            targeted.add("default_runtime_name")
    return args, targeted


def _request(args: dict[str, Any]) -> ContainerdRequest:
    return ContainerdRequest(**dict(args, runtimes=parse_runtimes(args.get("runtimes"))))


def _leaves(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(value, dict) and value:
        found: dict[tuple[str, ...], Any] = {}
        for key, child in value.items():
            found.update(_leaves(child, (*prefix, key)))
        return found
    return {prefix: value}


def assert_only_targeted_lines_changed(before: str, after: str, may_change: Callable[[str], bool]) -> None:
    """Every line of ``before`` is in ``after``, byte for byte and in order, unless it holds a targeted key."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            for line in old[i1:i2]:
                assert may_change(line), f"line lost or changed: {line!r}"
                comment = re.search(r"[ \t]#[^\"']*$", line.rstrip("\r\n"))
                assert comment is None or comment.group(0).strip() in after, f"comment lost: {line!r}"


@PROPERTY
@given(containerd_files(), containerd_requests())
def test_containerd_keeps_every_key_and_line_not_asked_for_and_a_second_run_is_a_no_op(text, request):
    args, targeted = request
    try:
        result = edit_config(text, "/etc/containerd/config.toml", _request(args))
    except ContainerdConfigError as error:
        # tomlkit cannot read a table header written after its own sub-tables' headers (valid TOML):
        # the only refusal of a valid file, and a clean one
        assert re.fullmatch(r"\S+ is valid TOML, but the tomlkit library .* cannot read it [^\n]*", str(error))
        return
    before, after = tomllib.loads(text), tomllib.loads(result.text)
    old, new = _leaves(before), _leaves(after)
    assert {p: v for p, v in old.items() if p[-1] not in targeted} == {
        p: v for p, v in new.items() if p in old and p[-1] not in targeted
    }
    assert set(new) - set(old) <= {p for p in new if p[-1] in targeted or p[-1] == "options"}

    def may_change(line: str) -> bool:
        match = KEY_LINE.match(line)
        return bool(match and (match.group(1) in targeted or match.group(1) == "options"))

    assert_only_targeted_lines_changed(text, result.text, may_change)
    if "\r\n" in text:
        assert "\n" not in result.text.replace("\r\n", "")
    cri = after
    for key in CRI[after["version"]]:
        cri = cri.get(key, {})
    if "enable_cdi" in args:
        assert cri["enable_cdi"] is args["enable_cdi"]
    for name, entry in (args.get("runtimes") or {}).items():
        assert cri["containerd"]["runtimes"][name]["options"]["BinaryName"] == entry["binary_name"]
    again = edit_config(result.text, "/etc/containerd/config.toml", _request(args))
    assert again.text == result.text
    assert again.changed_keys == []


# -- generated IMEX files --------------------------------------------------------------------------

IMEX_ACTIVE = re.compile(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=")


@st.composite
def imex_files(draw: Callable) -> str:
    lines = IMEX_FILE.splitlines(keepends=True)
    active = [i for i, line in enumerate(lines) if IMEX_ACTIVE.match(line)]
    for _edit in range(draw(st.integers(0, 5))):
        index = draw(st.sampled_from(active))
        operation = draw(st.sampled_from(["trailing", "spacing", "comment", "commented", "blank", "unknown"]))
        if operation == "trailing":
            lines[index] = lines[index].rstrip("\n") + draw(st.sampled_from([" # default", "\t# site", "   "])) + "\n"
        elif operation == "spacing":
            key, _sep, rest = lines[index].partition("=")
            lines[index] = f"{key.strip()} = {rest.lstrip()}"
        elif operation == "comment":
            lines.insert(index, f"# {draw(NOTE)}\n")
        elif operation == "commented":
            lines.insert(index, f"#{IMEX_ACTIVE.match(lines[index]).group(1)}=\n")
        elif operation == "blank":
            lines.insert(index, draw(st.sampled_from(["  \n", "\t\n", "\n"])))
        else:
            lines.append(f"IMEX_SITE_{draw(st.integers(0, 9))}=x\n")
        active = [i for i, line in enumerate(lines) if IMEX_ACTIVE.match(line)]
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    return text


IMEX_SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "SERVER_PORT": st.sampled_from([50000, 50010]),
        "IMEX_CMD_PORT": st.sampled_from([50005, 50015, ""]),
        "LOG_LEVEL": st.sampled_from(["2", "4"]),
        "IMEX_CMD_ENABLED": st.booleans(),
        "BIND_INTERFACE_IP": st.sampled_from(["", "10.114.0.11", "fd00::11"]),
        "IMEX_SITE_1": st.sampled_from(["x", "y"]),
    },
)


@PROPERTY
@given(imex_files(), IMEX_SETTINGS)
def test_imex_keeps_every_line_not_asked_for_and_a_second_run_is_a_no_op(text, wanted):
    rendered, _warnings = validate_settings(wanted)
    result = edit_settings(text, rendered)

    def may_change(line: str) -> bool:
        match = IMEX_ACTIVE.match(line)
        return bool(match and match.group(1) in rendered) or not line.endswith(("\n", "\r"))

    assert_only_targeted_lines_changed(text, result.text, may_change)
    values = {}
    for line in result.text.split("\n"):
        match = re.match(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*(.*?)(?:[ \t]+#.*|[ \t]*#.*)?\r?$", line)
        if match:
            values[match.group(1)] = match.group(2).strip()
    assert {key: values.get(key) for key in rendered} == rendered
    again = edit_settings(result.text, rendered)
    assert again.text == result.text
    assert again.changed_keys == []


# -- bad files and interrupted writes, through the modules ------------------------------------------


@st.composite
def bad_containerd_files(draw: Callable) -> tuple[bytes, str]:
    text = draw(containerd_files())
    lines = text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if KEY_LINE.match(line) and "[" not in line and "{" not in line]
    kind = draw(st.sampled_from(["duplicate key", "duplicate table", "syntax", "not utf-8"]))
    if not keyed and kind in ("duplicate key", "syntax"):
        kind = "not utf-8"
    if kind == "duplicate key":
        index = draw(st.sampled_from(keyed))
        lines.insert(index + 1, lines[index])
    elif kind == "duplicate table":
        headers = [line for line in lines if HEADER.match(line)] or ["[plugins.site]\n"]
        lines.append(headers[0].lstrip()) if headers == ["[plugins.site]\n"] else None
        lines.append("\n" + draw(st.sampled_from(headers)).lstrip())
        lines.append("  again = 1\n")
    elif kind == "syntax":
        index = draw(st.sampled_from(keyed))
        lines[index] = lines[index].split("=")[0] + "= \n"
    else:
        return "".join(lines).encode() + b"# \xff\n", kind
    return "".join(lines).encode(), kind


def _listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


@PROPERTY
@given(bad_containerd_files(), containerd_requests())
def test_a_file_containerd_cannot_load_is_left_byte_for_byte_with_one_line(tmp_path, bad, request):
    data, _kind = bad
    args, _targeted = request
    directory = Path(tempfile.mkdtemp(dir=os.path.realpath(tmp_path)))
    path = directory / "config.toml"
    path.write_bytes(data)
    result = run_module(containerd_config.main, dict(args, path=str(path), backup=True))
    assert result["failed"] is True
    assert "\n" not in result["msg"]
    assert result["msg"].startswith(f"{path} ")
    assert "Traceback" not in result["msg"]
    assert _listing(directory) == {"config.toml": data}


@pytest.mark.parametrize("editor", ["containerd_config", "imex_config"])
@pytest.mark.parametrize("bad", ["read-only", "unreadable"])
def test_read_only_and_unreadable_files_are_left_as_they_are(tmp_path: Path, editor, bad):
    path = tmp_path / "config"
    data = (
        (FIXTURES / "containerd" / "config-default-1.7.24.toml").read_bytes()
        if editor == "containerd_config"
        else IMEX_FILE.encode()
    )
    path.write_bytes(data)
    os.chmod(tmp_path, 0o755)
    os.chmod(path, 0o444 if bad == "read-only" else 0o600)
    if editor == "containerd_config":
        main, args = containerd_config.main, {"path": str(path), "enable_cdi": True}
    else:
        main, args = imex_config.main, {"config_path": str(path), "settings": {"SERVER_PORT": 50010}}
    if bad == "unreadable" and os.geteuid() == 0:
        os.seteuid(65534)
    try:
        result = run_module(main, args)
    finally:
        if os.getuid() == 0:
            os.seteuid(0)
    assert result["failed"] is True
    assert "\n" not in result["msg"]
    expected = f"{path} is read-only (mode 0444)" if bad == "read-only" else f"cannot read {path}: Permission denied"
    assert result["msg"].startswith(expected)
    assert _listing(tmp_path) == {"config": data}
    assert oct(path.stat().st_mode & 0o777) == ("0o444" if bad == "read-only" else "0o600")


@PROPERTY
@given(
    st.sampled_from(["containerd_config", "imex_config"]),
    st.sampled_from(["os.replace", "os.fsync", "os.fchmod", "directory fsync"]),
)
def test_a_write_interrupted_anywhere_leaves_the_old_or_the_new_file_and_no_temporary_file(tmp_path, editor, where):
    directory = Path(tempfile.mkdtemp(dir=os.path.realpath(tmp_path)))
    path = directory / "config"
    if editor == "containerd_config":
        old = (FIXTURES / "containerd" / "config-default-1.7.24.toml").read_bytes()
        main, args = containerd_config.main, {"path": str(path), "enable_cdi": True}
    else:
        old = IMEX_FILE.encode()
        main, args = imex_config.main, {"config_path": str(path), "settings": {"SERVER_PORT": 50010}}
    path.write_bytes(old)
    real = {"os.replace": os.replace, "os.fsync": os.fsync, "os.fchmod": os.fchmod}
    calls = {"fsync": 0}

    def interrupted(*args):
        raise OSError(5, "Input/output error")

    def fsync(fd):
        calls["fsync"] += 1
        if calls["fsync"] == 2:  # the directory, after the rename
            raise OSError(5, "Input/output error")
        return real["os.fsync"](fd)

    with pytest.MonkeyPatch.context() as patch:
        if where == "directory fsync":
            patch.setattr(files.os, "fsync", fsync)
        else:
            patch.setattr(files.os, where.split(".")[1], interrupted)
        result = run_module(main, args)
    now = path.read_bytes()
    if where == "directory fsync":  # the rename happened; flushing the directory is best effort
        assert result["failed"] is False
        assert now != old
    else:
        assert result["failed"] is True
        assert result["msg"] == f"cannot write {path}: Input/output error; it was left unchanged."
        assert now == old
    assert sorted(p.name for p in directory.iterdir()) == ["config"]
