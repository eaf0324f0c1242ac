# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""containerd's ``config.toml`` as read and validated before an edit, and the request to apply to it.

containerd config ``version = 2`` (containerd 1.6/1.7) keeps the CRI settings under
``[plugins."io.containerd.grpc.v1.cri"]``; ``version = 3`` (containerd 2.x) keeps ``enable_cdi``,
``cdi_spec_dirs`` and the runtimes under ``[plugins."io.containerd.cri.v1.runtime"]``. A file
without ``version`` is a version 1 file, deprecated in 1.x and removed in 2.0: it is refused.

A file is read with tomlkit (which keeps comments, order and style for the edit) and checked with a
strict reader as well, so that a file containerd would refuse is refused here, naming its line.
:mod:`containerd_edit` applies a request to the document read here.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import MAX_CONFIG_BYTES, FileEditError, read_text

try:
    import tomlkit
    from tomlkit.exceptions import ParseError, TOMLKitError

    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as exc:  # pragma: no cover - exercised on hosts without tomlkit
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = exc

try:  # Python 3.11+: a strict TOML reader, as strict as containerd's, that names the line of an error
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10 hosts
    tomllib = None  # type: ignore[assignment]

SUPPORTED_VERSIONS = (2, 3)
RUNC_V2 = "io.containerd.runc.v2"
RUNC_V1 = "io.containerd.runc.v1"
# The shims whose options containerd's CRI plugin decodes as runc options (SystemdCgroup, BinaryName, ...).
RUNC_SHIMS = (RUNC_V2, RUNC_V1)
DEFAULT_RUNTIME = "runc"

# Where the CRI settings this module edits live, per config version.
CRI_RUNTIME_TABLE = {
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
}

# Runtime-entry options a user may give, and the containerd key each one sets.
RUNTIME_FIELDS = {"runtime_type": "runtime_type", "binary_name": "BinaryName", "options": None}


class ContainerdConfigError(Exception):
    """The file or the request cannot be handled; the message says what to do.

    ``finding`` is what was found, without the advice for an edit (a reader that only looks at the
    file, such as :mod:`containerd_readback`, gives its own advice).
    """

    def __init__(self, message: str, finding: Optional[str] = None) -> None:
        super().__init__(message)
        self.finding = finding or message


@dataclass
class RuntimeSpec:
    """One entry of ``containerd.runtimes``: what the caller asked for."""

    name: str
    runtime_type: Optional[str] = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ContainerdRequest:
    """The settings to enforce; None means "leave as it is"."""

    enable_cdi: Optional[bool] = None
    cdi_spec_dirs: Optional[list[str]] = None
    imports: Optional[list[str]] = None
    imports_state: str = "present"
    systemd_cgroup: Optional[bool] = None
    runtimes: list[RuntimeSpec] = field(default_factory=list)
    default_runtime_name: Optional[str] = None


def parse_runtimes(runtimes: Optional[dict[str, Any]]) -> list[RuntimeSpec]:
    """Validate the ``runtimes`` option: name -> {runtime_type, binary_name, options}."""
    specs = []
    for name, entry in (runtimes or {}).items():
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", str(name)):
            raise ContainerdConfigError(
                f"runtime name {name!r} is not a valid RuntimeClass handler; use letters, digits, '-', '_' and '.'."
            )
        entry = entry or {}
        if not isinstance(entry, dict):
            raise ContainerdConfigError(
                f"runtimes.{name} is a {type(entry).__name__}; expected a dictionary with "
                "runtime_type, binary_name and/or options."
            )
        unknown = sorted(set(entry) - set(RUNTIME_FIELDS))
        if unknown:
            raise ContainerdConfigError(
                f"runtimes.{name} has unknown key(s) {', '.join(unknown)}; expected only {', '.join(RUNTIME_FIELDS)}."
            )
        options = dict(entry.get("options") or {})
        if not isinstance(entry.get("options") or {}, dict):
            raise ContainerdConfigError(f"runtimes.{name}.options must be a dictionary of runc/shim options.")
        if entry.get("binary_name") is not None:
            if "BinaryName" in options and options["BinaryName"] != entry["binary_name"]:
                raise ContainerdConfigError(
                    f"runtimes.{name} sets binary_name={entry['binary_name']!r} and "
                    f"options.BinaryName={options['BinaryName']!r}; give only one of them."
                )
            options["BinaryName"] = entry["binary_name"]
        specs.append(RuntimeSpec(name=str(name), runtime_type=entry.get("runtime_type"), options=options))
    return specs


def _invalid(path: str, where: str, reason: str) -> ContainerdConfigError:
    finding = f"{path} is not valid TOML{f' {where}' if where else ''}: {reason.rstrip('.')}"
    return ContainerdConfigError(
        f"{path} is not valid TOML {where}: {reason.rstrip('.')}. The file was left unchanged; "
        "containerd cannot load it either. Fix that line, or move the file away and run with create=true.",
        finding=finding,
    )


def _strict_error(text: str) -> Optional[tuple[str, str]]:
    """Where and why a strict TOML reader refuses ``text`` ((where, reason)), or None when it reads it."""
    if tomllib is None:  # pragma: no cover - Python 3.10 hosts
        return None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
        if match:
            return f"at line {match.group(1)}, column {match.group(2)}", message[: match.start()]
        return "", message
    return None


def _duplicate_line(text: str, key: str) -> Optional[int]:
    """The line of the second ``key = ...`` or ``[... key]`` in ``text`` (for readers without a line number)."""
    quoted = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    pattern = re.compile(rf"^[ \t]*(?:\[\[?[^\]]*?)?{quoted}(?:\]\]?|[ \t]*=)")
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            seen += 1
            if seen == 2:
                return number
    return None


def parse_config(text: str, path: str) -> tomlkit.TOMLDocument:
    """Parse ``text``; on a syntax error (a repeated key or table too) name the file, line and column."""
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:
        strict = _strict_error(text)
        line = getattr(exc, "line", None)
        reason = re.sub(r" at line \d+ col \d+$", "", str(exc))
        if strict is None and tomllib is not None:
            raise ContainerdConfigError(
                f"{path} is valid TOML, but the tomlkit library ({getattr(tomlkit, '__version__', '?')}) cannot "
                f"read it ({reason}{f' at line {line}' if line else ''}); the file was left unchanged. Move the "
                "table headers that come after their own sub-tables before them, or upgrade tomlkit on the host."
            ) from exc
        if strict is not None and (line is None or "already exists" in str(exc)):
            # tomlkit gives no position for a key defined twice, and points past a repeated table
            raise _invalid(path, strict[0], strict[1]) from exc
        if isinstance(exc, ParseError):
            raise _invalid(path, f"at line {exc.line}, column {exc.col}", reason) from exc
        if not isinstance(exc, TOMLKitError):
            raise
        key = re.search(r'Key "(.*)" already exists', str(exc))
        duplicate = _duplicate_line(text, key.group(1)) if key else None
        raise _invalid(path, f"at line {duplicate}" if duplicate else "", str(exc)) from exc
    strict = _strict_error(text)
    if strict is not None:
        raise _invalid(path, strict[0], strict[1])
    return doc


def config_version(doc: tomlkit.TOMLDocument, path: str) -> int:
    """The config ``version`` (2 or 3); version 1 and unknown versions are refused."""
    version = doc.get("version")
    if version is None:
        raise ContainerdConfigError(
            f"{path} has no 'version' key, so containerd reads it as config version 1, which containerd 2.0 "
            "no longer loads and this module does not edit. Convert it to version 2 (containerd 1.7: the "
            "'cri' plugin becomes 'io.containerd.grpc.v1.cri'), e.g. start from 'containerd config default', "
            "and run again."
        )
    if isinstance(version, bool) or not isinstance(version, int) or int(version) not in SUPPORTED_VERSIONS:
        raise ContainerdConfigError(
            f"{path} has version = {version!r}; this module edits config versions 2 (containerd 1.6/1.7) "
            "and 3 (containerd 2.x). Check the file or the containerd release it was written for."
        )
    return int(version)


def minimal_config(version: int) -> str:
    """The smallest valid file of that version: containerd fills in every default."""
    if version not in SUPPORTED_VERSIONS:
        raise ContainerdConfigError(f"cannot create a config of version {version}; choose 2 or 3.")
    return f"version = {version}\n"


def masking_imports(doc: tomlkit.TOMLDocument, version: int, base_dir: str) -> list[str]:
    """Imported files that define the whole CRI plugin section, which masks the main file on config v2.

    containerd 1.x merges an imported file's plugin sections over the main file's section by section,
    not key by key, so ``enable_cdi`` set here has no effect while such a drop-in exists.
    """
    if version != 2:
        return []
    cri_name = CRI_RUNTIME_TABLE[2][1]
    found = []
    for pattern in [str(x) for x in doc.get("imports") or []]:
        if not os.path.isabs(pattern):
            pattern = os.path.join(base_dir, pattern)
        for path in sorted(glob.glob(pattern)):
            try:
                text = read_text(
                    path, "import", MAX_CONFIG_BYTES
                )  # a FIFO matched by the glob must not block the check
                imported = tomlkit.parse(text or "").unwrap()
            except (FileEditError, OSError, UnicodeDecodeError, TOMLKitError):
                continue  # containerd reports a drop-in it cannot read itself; this is only a hint
            if cri_name in (imported.get("plugins") or {}):
                found.append(path)
    return found
