# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fuzz the host-stage file editors (containerd_config, imex_config) with real files, mutated.

Each case starts from a real file of tests/fixtures (containerd config.toml as containerd, Debian,
kubespray, k3s and the NVIDIA container toolkit write it; the config.cfg of the nvidia-imex package),
mutates it deterministically (seeded) into another valid file (comments, CRLF, unicode, tables out of
order, a runtime appended at the end, options as an inline table or dotted keys, drop-in imports,
trailing comments on IMEX values...) or into a bad one (a key or table defined twice, a syntax error,
bytes that are not UTF-8, a read-only or unreadable file, a FIFO in place of the file or of the IMEX nodes
file: refused at once, a read that blocks counts as a crash; a read-only IMEX nodes file: neither file
written), and runs it through the modules' own
``run()`` (the same module_utils entry points, a real AnsibleModule, a real file in a temporary
directory), twice. Printed per editor:

- files tried;
- changed as asked: valid files whose result holds every requested value;
- refused valid: valid files (or requests) refused with a message;
- bad requests accepted: a request that must be refused (a duplicate peer, a zone index) was not;
- bytes lost: a line, comment or key that was not targeted changed or disappeared;
- second-run changes: the second, identical run changed something;
- crashes: an exception other than the module's own error (a traceback);
- bad files touched: a bad file whose bytes or mode changed, or a run that left a stray file behind.

Exits 1 when any of the last five counts is not zero ("refused valid" is reported, not failed: it
names files the editor leaves alone with a message, such as one the tomlkit library cannot read).

    python bench/fuzz_configs.py [--count N] [--seed S]
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import ipaddress
import os
import random
import re
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import tomllib

ROOT = Path(__file__).resolve().parent.parent
_LINK = ROOT / ".tmp" / "collections" / "ansible_collections" / "gpu_fabric" / "mnnvl"
if not _LINK.exists():
    _LINK.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("../../../..", _LINK)
sys.path.insert(0, str(ROOT / ".tmp" / "collections"))

from ansible.module_utils.testing import patch_module_args  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (  # noqa: E402
    ContainerdConfigError,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import FileEditError  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.imex import ImexConfigError  # noqa: E402
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import containerd_config, imex_config  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
CONTAINERD_SEEDS = sorted((FIXTURES / "containerd").rglob("*.toml"))
IMEX_SEEDS = sorted((FIXTURES / "imex").glob("*.cfg"))
CRI = {2: ("plugins", "io.containerd.grpc.v1.cri"), 3: ("plugins", "io.containerd.cri.v1.runtime")}
EXPECTED_ERRORS = (ContainerdConfigError, ImexConfigError, FileEditError)
COLUMNS = (
    "files tried",
    "changed as asked",
    "refused valid",
    "bad requests accepted",
    "bytes lost",
    "second-run changes",
    "crashes",
    "bad files touched",
)
FAILING = COLUMNS[3:]
NOBODY = 65534


@dataclass
class Tally:
    """The counts of one editor, and the first few examples of each failure."""

    editor: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, column: str, example: Optional[str] = None) -> None:
        self.counts[column] += 1
        if example is not None and column in FAILING:
            self.examples.setdefault(column, [])
            if len(self.examples[column]) < 3:
                self.examples[column].append(example)

    @property
    def failed(self) -> bool:
        return any(self.counts[column] for column in FAILING)


@dataclass
class Case:
    """One file and one request; ``bad`` names why the file or request must be refused (None: valid)."""

    name: str
    data: bytes
    args: dict[str, Any]
    targeted: set[str]
    bad: Optional[str] = None
    mode: int = 0o644
    unreadable: bool = False
    fifo: Optional[str] = None  # the file name that is a FIFO instead of a file (nothing ever writes to it)
    read_only_nodes: bool = False  # the IMEX nodes file exists read-only: neither file may change


# -- running a module -----------------------------------------------------------------------


class Blocked(Exception):
    """The module blocked (reading a FIFO that no one writes to) and was interrupted."""


def _blocked(_signum: int, _frame: Any) -> None:
    raise Blocked("the run blocked for 5 s (a read of a FIFO?)")


def run_module(module_file: Any, args: dict[str, Any], as_nobody: bool = False) -> tuple[Optional[dict], Any]:
    """(result, None), or (None, the exception) when ``run`` raised or blocked for 5 s."""
    with patch_module_args(dict(args, _ansible_check_mode=False, _ansible_diff=True)):
        module = module_file.build_module()
    previous = signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(5)
    with _effective_user(NOBODY if as_nobody else None):
        try:
            return module_file.run(module), None
        except Exception as exc:
            return None, exc
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _effective_user(uid: Optional[int]):
    if uid is None or os.geteuid() != 0:
        yield
        return
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    found = {}
    for path in sorted(directory.iterdir()):
        status = path.lstat()
        if not stat.S_ISREG(status.st_mode):
            found[path.name] = (b"", stat.S_IFMT(status.st_mode))  # a FIFO is never read: it would block
            continue
        os.chmod(path, status.st_mode | stat.S_IRUSR) if not status.st_mode & stat.S_IRUSR else None
        found[path.name] = (path.read_bytes(), stat.S_IMODE(status.st_mode))
        os.chmod(path, stat.S_IMODE(status.st_mode))
    return found


# -- checks shared by both editors -------------------------------------------------------------


def _lost_lines(before: str, after: str, may_change: Callable[[str], bool]) -> list[str]:
    """Lines of ``before`` that are gone from ``after`` although ``may_change`` does not allow it.

    A changed line that was allowed to change must keep its trailing comment.
    """
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    if old and not old[-1].endswith(("\n", "\r")) and not after.endswith(old[-1]):
        # a last line without a line ending gets one when a key is added after it
        old[-1] = next((line for line in reversed(new) if line.rstrip("\r\n") == old[-1]), old[-1])
    lost = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            for line in old[i1:i2]:
                comment = re.search(r"[ \t]#[^\"']*$", line.rstrip("\r\n"))
                if not may_change(line) or (comment and comment.group(0).strip() not in after):
                    lost.append(line)
    return lost


# -- containerd ------------------------------------------------------------------------------

HEADER = re.compile(r"^[ \t]*\[[^\[]")
KEY_LINE = re.compile(r"^([ \t]*)([A-Za-z0-9_\-\"'.]+)[ \t]*=[ \t]*(.*?)[ \t]*$")
SIMPLE_VALUE = re.compile(r"^(\"[^\"\\#]*\"|'[^'#]*'|true|false|-?[0-9]+)$")
RUNTIME_OPTIONS = re.compile(r"^[ \t]*\[(.*\.runtimes\.[^.\]]+)\.options\][ \t]*$")


def _blocks(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    top: list[str] = []
    blocks: list[list[str]] = []
    for line in lines:
        if HEADER.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
        else:
            top.append(line)
    return top, blocks


def _join(top: list[str], blocks: list[list[str]]) -> str:
    return "".join(top) + "".join(line for block in blocks for line in block)


def _terminated(block: list[str]) -> list[str]:
    return [line if line.endswith("\n") else line + "\n" for line in block]


def mutate_containerd(text: str, rng: random.Random) -> str:
    """A valid variant of ``text``: the same settings in shapes real files have."""
    lines = text.splitlines(keepends=True)
    for _edit in range(rng.randint(1, 5)):
        top, blocks = _blocks(lines)
        choice = rng.choice(("comment", "trailing", "unicode", "move", "append_runtime", "options", "imports", "blank"))
        if choice == "comment" and blocks:
            block = rng.choice(blocks)
            block.insert(
                rng.randint(0, len(block)), f"{rng.choice(['', '  ', chr(9)])}# fuzz note {rng.random():.6f}\n"
            )
        elif choice == "trailing":
            candidates = [b for b in blocks for i, line in enumerate(b) if _simple(line)]
            if candidates:
                block = rng.choice(candidates)
                index = rng.choice([i for i, line in enumerate(block) if _simple(line)])
                block[index] = block[index].rstrip("\r\n") + f"  # was {rng.randint(0, 99)}\n"
        elif choice == "unicode" and blocks:
            block = rng.choice(blocks)
            block.insert(1, f'  "fuzz_ключ_{rng.randint(0, 9999)}" = "värde ✓ {rng.randint(0, 9)}"  # ünïcode\n')
            block.insert(1, "# Grüße aus der Konfiguration — 設定\n")
        elif choice == "move" and len(blocks) > 1:
            blocks.append(_terminated(blocks.pop(rng.randrange(len(blocks)))))
        elif choice == "append_runtime":
            cri = _cri_name(text)
            name = f"fuzz{rng.randint(0, 9999)}"
            blocks.append(
                [
                    "\n",
                    f'[plugins."{cri}".containerd.runtimes.{name}]\n',
                    '  runtime_type = "io.containerd.runc.v2"\n',
                    f'  [plugins."{cri}".containerd.runtimes.{name}.options]\n',
                    f'    BinaryName = "/usr/bin/{name}"\n',
                ]
            )
        elif choice == "options":
            lines = _reshape_options(top, blocks, rng)
            continue
        elif choice == "imports" and not any(line.startswith("imports") for line in top):
            index = next((i for i, line in enumerate(top) if line.startswith("version")), 0)
            top.insert(index + 1, f'imports = ["/etc/containerd/conf.d/*.toml"]  # drop-ins {rng.randint(0, 9)}\n')
        elif choice == "blank" and blocks:
            rng.choice(blocks).append(rng.choice(["  \n", "\t\n", "\n", "    \n"]))
        lines = _join(top, blocks).splitlines(keepends=True)
    text = "".join(lines)
    if rng.random() < 0.3:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    if rng.random() < 0.15:
        text = text.rstrip("\r\n")
    return text


def _simple(line: str) -> bool:
    match = KEY_LINE.match(line.rstrip("\r\n"))
    return bool(match and SIMPLE_VALUE.match(match.group(3)))


def _cri_name(text: str) -> str:
    return CRI[3][1] if re.search(r"(?m)^version\s*=\s*3", text) else CRI[2][1]


def _reshape_options(top: list[str], blocks: list[list[str]], rng: random.Random) -> list[str]:
    """Rewrite one ``[...runtimes.X.options]`` table as an inline table or dotted keys of ``[...runtimes.X]``."""
    found = [i for i, block in enumerate(blocks) if RUNTIME_OPTIONS.match(block[0].rstrip("\r\n"))]
    for index in rng.sample(found, len(found)):
        parent_header = RUNTIME_OPTIONS.match(blocks[index][0].rstrip("\r\n")).group(1)
        parents = [i for i, block in enumerate(blocks) if block[0].strip() == f"[{parent_header}]"]
        pairs = [KEY_LINE.match(line.rstrip("\r\n")) for line in blocks[index][1:]]
        body = [line for line in blocks[index][1:] if line.strip() and not line.lstrip().startswith("#")]
        if not parents or any(match is None for match, line in zip(pairs, blocks[index][1:]) if line.strip()):
            continue
        if len(body) != len([m for m in pairs if m]) or any(not SIMPLE_VALUE.match(m.group(3)) for m in pairs if m):
            continue
        items = [(m.group(2), m.group(3)) for m in pairs if m]
        parent = blocks[parents[0]]
        indent = (
            KEY_LINE.match(parent[1].rstrip("\r\n")).group(1)
            if len(parent) > 1 and KEY_LINE.match(parent[1].rstrip("\r\n"))
            else "  "
        )
        if rng.random() < 0.5:
            new = [f"{indent}options = {{ {', '.join(f'{k} = {v}' for k, v in items)} }}\n"] if items else []
        else:
            new = [f"{indent}options.{k} = {v}\n" for k, v in items]
        if not new:
            continue
        parent[1:1] = new
        del blocks[index]
        break
    return _join(top, blocks).splitlines(keepends=True)


def break_containerd(text: str, rng: random.Random) -> tuple[bytes, str]:
    """A file containerd refuses to load, made from ``text``, and why."""
    lines = text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if _simple(line)]
    kind = rng.choice(("duplicate key", "duplicate table", "syntax", "not utf-8"))
    if kind == "duplicate key" and keyed:
        index = rng.choice(keyed)
        lines.insert(index + 1, lines[index])
    elif kind == "duplicate table":
        _top, blocks = _blocks(lines)
        header = rng.choice([b for b in blocks if len(b) > 1] or blocks)[0]
        lines.append("\n" + header.lstrip() + "  fuzz_dup = 1\n")
    elif kind == "syntax" and keyed:
        index = rng.choice(keyed)
        lines[index] = lines[index].split("=")[0] + "= \n"
    else:
        kind = "not utf-8"
        return ("".join(lines) + "# \udcff\n").encode("utf-8", "surrogateescape"), kind
    return "".join(lines).encode("utf-8"), kind


def containerd_request(text: str, rng: random.Random) -> tuple[dict[str, Any], set[str]]:
    args: dict[str, Any] = {}
    targeted: set[str] = set()
    while not args:
        if rng.random() < 0.6:
            args["enable_cdi"] = rng.random() < 0.7
            targeted.add("enable_cdi")
        if rng.random() < 0.3:
            args["cdi_spec_dirs"] = rng.choice([["/etc/cdi", "/var/run/cdi"], ["/var/run/cdi"]])
            targeted.add("cdi_spec_dirs")
        if rng.random() < 0.3:
            args["imports"] = ["/etc/containerd/conf.d/*.toml"]
            targeted.add("imports")
        if rng.random() < 0.5:
            args["systemd_cgroup"] = rng.random() < 0.8
            targeted |= {"SystemdCgroup", "runtime_type"}
        if rng.random() < 0.4:
            name = rng.choice(["nvidia", "nvidia-cdi", "runc"])
            args["runtimes"] = {name: {"binary_name": f"/usr/bin/{name}-container-runtime"}}
            targeted |= {"BinaryName", "runtime_type", "SystemdCgroup"}
            if rng.random() < 0.5:
                args["default_runtime_name"] = name
                targeted.add("default_runtime_name")
    return args, targeted


def containerd_as_asked(after: dict[str, Any], args: dict[str, Any]) -> bool:
    cri = after
    for key in CRI[after.get("version", 2)]:
        cri = cri.get(key, {})
    runtimes = cri.get("containerd", {}).get("runtimes", {})
    checks = []
    if "enable_cdi" in args:
        checks.append(cri.get("enable_cdi") == args["enable_cdi"])
    if "cdi_spec_dirs" in args:
        checks.append(cri.get("cdi_spec_dirs") == args["cdi_spec_dirs"])
    if "imports" in args:
        checks.append(set(args["imports"]) <= set(after.get("imports", [])))
    for name, entry in (args.get("runtimes") or {}).items():
        runtime = runtimes.get(name, {})
        checks.append(runtime.get("options", {}).get("BinaryName") == entry["binary_name"])
        checks.append(bool(runtime.get("runtime_type")))
    if "systemd_cgroup" in args:
        for name in {"runc", *(args.get("runtimes") or {})}:
            runtime = runtimes.get(name, {})
            if runtime.get("runtime_type") in ("io.containerd.runc.v1", "io.containerd.runc.v2"):
                checks.append(runtime.get("options", {}).get("SystemdCgroup") == args["systemd_cgroup"])
    if "default_runtime_name" in args:
        checks.append(cri.get("containerd", {}).get("default_runtime_name") == args["default_runtime_name"])
    return all(checks)


def _containerd_leaves(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(value, dict) and value:
        found: dict[tuple[str, ...], Any] = {}
        for key, child in value.items():
            found.update(_containerd_leaves(child, (*prefix, key)))
        return found
    return {prefix: value}


def containerd_keys_lost(before: dict[str, Any], after: dict[str, Any], targeted: set[str]) -> list[str]:
    old, new = _containerd_leaves(before), _containerd_leaves(after)
    return [
        ".".join(path)
        for path, value in old.items()
        if path[-1:] and path[-1] not in targeted and new.get(path, object()) != value
    ]


def containerd_cases(count: int, rng: random.Random) -> list[Case]:
    seeds = [(path.name, path.read_text(encoding="utf-8")) for path in CONTAINERD_SEEDS]
    seeds = [(name, text) for name, text in seeds if re.search(r"(?m)^version\s*=", text)]
    cases = []
    for number in range(count):
        name, text = seeds[number % len(seeds)]
        variant = mutate_containerd(text, rng) if number >= len(seeds) else text
        args, targeted = containerd_request(variant, rng)
        roll = rng.random()
        if roll < 0.12:
            data, why = break_containerd(variant, rng)
            cases.append(Case(f"{name}#{number} ({why})", data, args, targeted, bad=why))
        elif roll < 0.16:
            cases.append(Case(f"{name}#{number} (read-only)", variant.encode(), args, targeted, "read-only", 0o444))
        elif roll < 0.19:
            cases.append(
                Case(f"{name}#{number} (unreadable)", variant.encode(), args, targeted, "unreadable", 0o600, True)
            )
        else:
            cases.append(Case(f"{name}#{number}", variant.encode("utf-8"), args, targeted))
        if number % 25 == 13:  # without a draw of rng, so the other cases stay those of earlier seeds
            cases[-1] = Case(f"{name}#{number} (FIFO)", b"", args, targeted, "fifo", fifo="config.toml")
    return cases


def check_containerd(case: Case, tally: Tally, directory: Path) -> None:
    path = directory / "config.toml"
    args = dict(case.args, path=str(path))

    def may_change(line: str) -> bool:
        match = re.match(r"^[ \t]*(?:[A-Za-z0-9_\-\"'.]+\.)?[\"']?([A-Za-z0-9_-]+)[\"']?[ \t]*=", line)
        return bool(match and (match.group(1) in case.targeted or match.group(1) == "options"))

    _check_file_case(case, tally, directory, path, containerd_config, args, may_change, _containerd_semantics)


def _containerd_semantics(case: Case, before: str, after: str) -> tuple[bool, list[str]]:
    old, new = tomllib.loads(before), tomllib.loads(after)
    return containerd_as_asked(new, case.args), containerd_keys_lost(old, new, case.targeted)


# -- IMEX ------------------------------------------------------------------------------------

IMEX_ACTIVE = re.compile(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=([^\r\n]*)")


def imex_value(rest: str) -> str:
    return re.split(r"(?:^|[ \t])#", rest, maxsplit=1)[0].strip()


def mutate_imex(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    active = [i for i, line in enumerate(lines) if IMEX_ACTIVE.match(line)]
    for _edit in range(rng.randint(1, 5)):
        choice = rng.choice(("trailing", "spacing", "comment", "commented", "blank", "unknown", "unicode"))
        index = rng.choice(active) if active else 0
        if choice == "trailing" and active:
            lines[index] = lines[index].rstrip("\r\n") + rng.choice([" # default", "\t# site value", "  "]) + "\n"
        elif choice == "spacing" and active:
            key, rest = lines[index].rstrip("\r\n").split("=", 1)
            lines[index] = f"{key.strip()} = {rest.strip()}\n"
        elif choice == "comment":
            lines.insert(index, f"# fuzz note {rng.randint(0, 999)}\n")
        elif choice == "commented" and active:
            key = IMEX_ACTIVE.match(lines[index]).group(1)
            lines.insert(index, f"#{key}=\n")
        elif choice == "blank":
            lines.insert(index, rng.choice(["   \n", "\t\n", "\n"]))
        elif choice == "unknown":
            lines.append(f"IMEX_FUZZ_{rng.randint(0, 99)}=x\n")
        elif choice == "unicode":
            lines.insert(index, "# Schlüssel — 設定 ✓\n")
        active = [i for i, line in enumerate(lines) if IMEX_ACTIVE.match(line)]
    text = "".join(lines)
    if rng.random() < 0.3:
        text = text.replace("\n", "\r\n")
    if rng.random() < 0.15:
        text = text.rstrip("\r\n")
    return text


def imex_request(text: str, rng: random.Random) -> tuple[dict[str, Any], set[str], Optional[str]]:
    current = {m.group(1): imex_value(m.group(2)) for m in map(IMEX_ACTIVE.match, text.splitlines()) if m}
    settings: dict[str, Any] = {}
    bad = None
    if rng.random() < 0.5:
        settings["SERVER_PORT"] = int(current.get("SERVER_PORT") or 50000) if rng.random() < 0.5 else 50010
    if rng.random() < 0.3:
        settings["IMEX_CMD_PORT"] = rng.choice([50005, 50015])
    if rng.random() < 0.3:
        settings["LOG_LEVEL"] = rng.choice(["2", "4"])
    if rng.random() < 0.3:
        settings["IMEX_CMD_ENABLED"] = rng.random() < 0.5
    if rng.random() < 0.2:
        settings["BIND_INTERFACE_IP"] = rng.choice(["", "10.114.0.11", "fd00::11"])
    nodes = [f"10.114.0.{i}" for i in rng.sample(range(1, 60), rng.randint(1, 4))]
    if rng.random() < 0.3:
        nodes.append(rng.choice(["fd00::12", "fd00:0:0::13", "::ffff:10.114.1.7"]))
    roll = rng.random()
    if roll < 0.06:
        nodes.append(f"::ffff:{nodes[0]}")
        bad = "IPv4 node repeated in its IPv4-mapped form"
    elif roll < 0.09:
        settings["BIND_INTERFACE_IP"] = "fe80::1%eth0"
        bad = "zone index in BIND_INTERFACE_IP"
    elif roll < 0.12:
        nodes.append("fe80::1%eth0")
        bad = "zone index in nodes"
    args: dict[str, Any] = {"nodes": nodes}
    if settings or rng.random() < 0.8:
        args["settings"] = settings
    return args, set(settings), bad


def imex_cases(count: int, rng: random.Random) -> list[Case]:
    seeds = [(path.name, path.read_text(encoding="utf-8")) for path in IMEX_SEEDS]
    cases = []
    for number in range(count):
        name, text = seeds[number % len(seeds)]
        variant = mutate_imex(text, rng) if number >= len(seeds) else text
        args, targeted, bad = imex_request(variant, rng)
        roll = rng.random()
        if bad:
            cases.append(Case(f"{name}#{number} ({bad})", variant.encode(), args, targeted, bad=f"request: {bad}"))
        elif roll < 0.05:
            data = variant.encode() + b"# \xff\xfe\n"
            cases.append(Case(f"{name}#{number} (not utf-8)", data, args, targeted, bad="not utf-8"))
        elif roll < 0.09 and targeted:
            cases.append(Case(f"{name}#{number} (read-only)", variant.encode(), args, targeted, "read-only", 0o444))
        elif roll < 0.12:
            cases.append(
                Case(f"{name}#{number} (unreadable)", variant.encode(), args, targeted, "unreadable", 0o600, True)
            )
        else:
            cases.append(Case(f"{name}#{number}", variant.encode("utf-8"), args, targeted))
        if number % 25 == 13 and "nodes" in args:
            which = ("config.cfg", "nodes_config.cfg")[number // 25 % 2]
            data = b"" if which == "config.cfg" else variant.encode()
            cases[-1] = Case(f"{name}#{number} (FIFO {which})", data, args, targeted, "fifo", fifo=which)
        if number % 25 == 20 and targeted:
            cases[-1] = Case(
                f"{name}#{number} (read-only nodes file)", variant.encode(), args, targeted, "nodes read-only"
            )
            cases[-1].read_only_nodes = True
    return cases


def check_imex(case: Case, tally: Tally, directory: Path) -> None:
    path = directory / "config.cfg"
    args = dict(case.args, config_path=str(path), nodes_path=str(directory / "nodes_config.cfg"))

    def may_change(line: str) -> bool:
        match = IMEX_ACTIVE.match(line)
        return bool(match and match.group(1) in case.targeted)

    def semantics(case: Case, before: str, after: str) -> tuple[bool, list[str]]:
        values = {m.group(1): imex_value(m.group(2)) for m in map(IMEX_ACTIVE.match, after.splitlines()) if m}
        old = {m.group(1): imex_value(m.group(2)) for m in map(IMEX_ACTIVE.match, before.splitlines()) if m}
        wanted = {key: _imex_render(value) for key, value in (case.args.get("settings") or {}).items()}
        nodes_file = directory / "nodes_config.cfg"
        expected_nodes = "".join(f"{_canonical(node)}\n" for node in case.args["nodes"])
        asked = all(values.get(k) == v for k, v in wanted.items())
        asked = asked and nodes_file.exists() and nodes_file.read_text() == expected_nodes
        lost = [k for k, v in old.items() if k not in wanted and values.get(k) != v]
        return asked, lost

    _check_file_case(case, tally, directory, path, imex_config, args, may_change, semantics)


def _imex_render(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _canonical(node: str) -> str:
    address = ipaddress.ip_address(node)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


# -- one case ------------------------------------------------------------------------------------


def _check_file_case(
    case: Case,
    tally: Tally,
    directory: Path,
    path: Path,
    module_file: Any,
    args: dict[str, Any],
    may_change: Callable[[str], bool],
    semantics: Callable[[Case, str, str], tuple[bool, list[str]]],
) -> None:
    tally.add("files tried")
    if case.fifo != path.name:
        path.write_bytes(case.data)
        os.chmod(path, case.mode)
    if case.fifo is not None:
        os.mkfifo(directory / case.fifo)
    if case.read_only_nodes:
        (directory / "nodes_config.cfg").write_text("10.9.9.9\n")
        os.chmod(directory / "nodes_config.cfg", 0o444)
    before_files = _snapshot(directory)
    _result, error = run_module(module_file, args, as_nobody=case.unreadable)
    if isinstance(error, Blocked):
        tally.add("crashes", f"{case.name}: {error}")
        return
    if error is not None and not isinstance(error, EXPECTED_ERRORS):
        tally.add("crashes", f"{case.name}: {type(error).__name__}: {error}")
        return
    if case.bad:
        after_files = _snapshot(directory)
        if case.bad == "read-only" and after_files.get(path.name) == before_files.get(path.name):
            return  # nothing to change, or refused: either way the file is as it was
        if error is None and not case.bad.startswith("request"):
            tally.add("bad files touched", f"{case.name}: accepted")
        elif error is None:
            tally.add("bad requests accepted", f"{case.name}: accepted")
        elif after_files != before_files:
            tally.add("bad files touched", f"{case.name}: {sorted(set(after_files) ^ set(before_files)) or 'bytes'}")
        elif "\n" in str(error):
            tally.add("crashes", f"{case.name}: a message of several lines")
        return
    if error is not None:
        tally.add("refused valid", f"{case.name}: {error}")
        return
    before, after = case.data.decode("utf-8"), path.read_bytes().decode("utf-8")
    stray = sorted(set(p.name for p in directory.iterdir()) - set(before_files) - {"nodes_config.cfg"})
    if stray:
        tally.add("bad files touched", f"{case.name}: left {stray}")
    asked, lost_keys = semantics(case, before, after)
    lost_lines = _lost_lines(before, after, may_change)
    if asked:
        tally.add("changed as asked")
    if lost_keys or lost_lines:
        tally.add("bytes lost", f"{case.name}: keys {lost_keys[:3]} lines {list(lost_lines[:2])}")
    digest = path.read_bytes()
    again, error = run_module(module_file, args)
    if error is not None:
        label = "crashes" if not isinstance(error, EXPECTED_ERRORS) else "second-run changes"
        tally.add(label, f"{case.name}: second run: {type(error).__name__}: {error}")
    elif again["changed"] or path.read_bytes() != digest:
        tally.add("second-run changes", f"{case.name}: {again.get('changed_keys')}")


def fuzz(count: int, seed: int) -> list[Tally]:
    """Run ``count`` cases per editor with ``seed``; the same arguments give the same counts."""
    tallies = []
    for editor, make, check in (
        ("containerd_config", containerd_cases, check_containerd),
        ("imex_config", imex_cases, check_imex),
    ):
        tally = Tally(editor)
        for case in make(count, random.Random(f"{seed}:{editor}")):
            with tempfile.TemporaryDirectory(prefix="fuzz-configs-") as directory:
                os.chmod(directory, 0o755)
                check(case, tally, Path(directory))
        tallies.append(tally)
    return tallies


def render(tallies: list[Tally]) -> str:
    lines = ["| editor | " + " | ".join(COLUMNS) + " |", "| --- |" + " ---: |" * len(COLUMNS)]
    for tally in tallies:
        lines.append(f"| {tally.editor} | " + " | ".join(str(tally.counts[c]) for c in COLUMNS) + " |")
    for tally in tallies:
        for column, examples in tally.examples.items():
            for example in examples:
                lines.append(f"  {tally.editor} {column}: {example[:300]}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=400, help="cases per editor (default 400)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    options = parser.parse_args(argv)
    tallies = fuzz(options.count, options.seed)
    print(f"fuzz_configs: seed {options.seed}, {options.count} cases per editor")
    print(render(tallies))
    return 1 if any(tally.failed for tally in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
