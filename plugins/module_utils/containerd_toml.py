# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Edit containerd's ``config.toml`` in place with tomlkit, keeping comments, order and style.

containerd config ``version = 2`` (containerd 1.6/1.7) keeps the CRI settings under
``[plugins."io.containerd.grpc.v1.cri"]``; ``version = 3`` (containerd 2.x) keeps ``enable_cdi``,
``cdi_spec_dirs`` and the runtimes under ``[plugins."io.containerd.cri.v1.runtime"]``. A file
without ``version`` is a version 1 file, deprecated in 1.x and removed in 2.0: it is refused.

Only the keys that are asked for are touched; a key whose value is already right is left as it
is, so a second run produces byte-identical text.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

try:
    import tomlkit
    from tomlkit.exceptions import ParseError
    from tomlkit.items import AoT, Array, Table, Whitespace

    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as exc:  # pragma: no cover - exercised on hosts without tomlkit
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = exc

SUPPORTED_VERSIONS = (2, 3)
RUNC_V2 = "io.containerd.runc.v2"
DEFAULT_RUNTIME = "runc"

# Where the CRI settings this module edits live, per config version.
CRI_RUNTIME_TABLE = {
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
}

# Runtime-entry options a user may give, and the containerd key each one sets.
RUNTIME_FIELDS = {"runtime_type": "runtime_type", "binary_name": "BinaryName", "options": None}


class ContainerdConfigError(Exception):
    """The file or the request cannot be handled; the message says what to do."""


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


@dataclass
class EditResult:
    """The new text and what changed in it (dotted key paths, in the order they were set)."""

    text: str
    config_version: int
    changed_keys: list[str]
    warnings: list[str] = field(default_factory=list)


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


def parse_config(text: str, path: str) -> tomlkit.TOMLDocument:
    """Parse ``text``; on a syntax error name the file, line and column."""
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = re.sub(r" at line \d+ col \d+$", "", str(exc))
        raise ContainerdConfigError(
            f"{path} is not valid TOML at line {exc.line}, column {exc.col}: {reason}. The file was left unchanged; "
            "containerd cannot load it either. Fix that line, or move the file away and run with create=true."
        ) from exc


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


class _Editor:
    """Apply a request to one parsed document, matching the file's indentation and quote style."""

    def __init__(self, doc: tomlkit.TOMLDocument, text: str, version: int) -> None:
        self.doc = doc
        self.version = version
        self.indented = re.search(r"(?m)^[ \t]+\[", text) is not None
        # containerd 2.x writes 'single quoted' literal strings, 1.x "double quoted" ones.
        self.literal = len(re.findall(r"= '", text)) > len(re.findall(r'= "', text))
        self.changed_keys: list[str] = []
        self.created: list[Table] = []

    # -- values ---------------------------------------------------------------------------
    def _string(self, value: str) -> Any:
        if self.literal and "'" not in value and "\n" not in value:
            return tomlkit.string(value, literal=True)
        return tomlkit.string(value)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, (list, tuple)):
            array = tomlkit.array()
            for element in value:
                array.append(self._value(element))
            return array
        return value

    # -- tables ---------------------------------------------------------------------------
    def table(self, path: tuple[str, ...]) -> Table:
        """The table at ``path``, created (with matching indentation) where it is missing."""
        current: Any = self.doc
        for depth, key in enumerate(path, start=1):
            if key not in current:
                new = tomlkit.table()
                indent = "  " * (depth - 1) if self.indented else ""
                body = current.value.body if isinstance(current, Table) else current.body
                if body and not isinstance(body[-1][1], (Whitespace, Table, AoT)):
                    indent = "\n" + indent  # a blank line between the parent's keys and this header
                new.trivia.indent = indent
                if isinstance(current, Table):
                    current.raw_append(key, new)  # append() would add the parent's indentation again
                else:
                    current.append(key, new)
                self.created.append(new)
            current = current[key]
            if not isinstance(current, Table):
                raise ContainerdConfigError(
                    f"{'.'.join(path[:depth])} is a {type(current).__name__}, not a table; "
                    "this module edits tables only. Rewrite it as a [table] section."
                )
        return current

    def finish(self) -> None:
        """End each new table that holds keys with a blank line, as containerd writes them."""
        for table in self.created:
            body = table.value.body
            if body and not isinstance(body[-1][1], (Whitespace, Table, AoT)):
                table.add(tomlkit.nl())

    def _key_indent(self, table: Table, depth: int) -> str:
        for _key, item in table.value.body:
            if item is not None and not isinstance(item, (Whitespace, Table, AoT)):
                return item.trivia.indent.lstrip("\n")
        return "  " * depth if self.indented else ""

    def set(self, path: tuple[str, ...], key: str, value: Any) -> None:
        """Set ``key`` in the table at ``path`` unless it already holds ``value``."""
        table = self.table(path)
        current = table.get(key)
        if current is not None and _plain(current) == _plain(value):
            return
        item = tomlkit.item(self._value(value))
        if current is None:
            item.trivia.indent = self._key_indent(table, len(path))
            table.raw_append(key, item)
        else:
            table[key] = item
        self.changed_keys.append(".".join((*path, key)))

    # -- the request ----------------------------------------------------------------------
    def apply(self, request: ContainerdRequest) -> None:
        cri = CRI_RUNTIME_TABLE[self.version]
        if request.imports is not None:
            self._imports(request.imports, request.imports_state)
        if request.enable_cdi is not None:
            self.set(cri, "enable_cdi", request.enable_cdi)
        if request.cdi_spec_dirs is not None:
            self.set(cri, "cdi_spec_dirs", list(request.cdi_spec_dirs))
        runtimes = (*cri, "containerd", "runtimes")
        for spec in request.runtimes:
            self._runtime(runtimes, spec, request.systemd_cgroup)
        if request.systemd_cgroup is not None:
            self._runtime(runtimes, RuntimeSpec(name=DEFAULT_RUNTIME), request.systemd_cgroup)
        if request.default_runtime_name is not None:
            self._check_runtime_exists(runtimes, request.default_runtime_name)
            self.set((*cri, "containerd"), "default_runtime_name", request.default_runtime_name)

    def _imports(self, wanted: list[str], state: str) -> None:
        current = self.doc.get("imports")
        if current is not None and not isinstance(current, Array):
            raise ContainerdConfigError(
                f"imports is a {type(current).__name__}; containerd expects an array of file paths."
            )
        have = [str(x) for x in current] if current is not None else []
        target = list(wanted) if state == "exact" else have + [x for x in wanted if x not in have]
        if target == have and current is not None:
            return
        if current is not None and target[: len(have)] == have:
            for entry in target[len(have) :]:
                current.append(self._string(entry))
        else:
            self.doc["imports"] = self._value(target)
        self.changed_keys.append("imports")

    def _runtime(self, runtimes: tuple[str, ...], spec: RuntimeSpec, systemd_cgroup: Optional[bool]) -> None:
        path = (*runtimes, spec.name)
        existing = self._get(path)
        runtime_type = spec.runtime_type
        if existing is None and runtime_type is None:
            # containerd does not merge a runtime entry with its defaults: an entry without
            # runtime_type has an empty shim type and fails to start containers.
            runtime_type = RUNC_V2
        if runtime_type is not None:
            self.set(path, "runtime_type", runtime_type)
        options = dict(spec.options)
        effective_type = runtime_type or (existing or {}).get("runtime_type")
        if systemd_cgroup is not None and "SystemdCgroup" not in options and effective_type == RUNC_V2:
            options["SystemdCgroup"] = systemd_cgroup
        for key, value in options.items():
            self.set((*path, "options"), key, value)

    def _check_runtime_exists(self, runtimes: tuple[str, ...], name: str) -> None:
        defined = set(self._get(runtimes) or {}) | {DEFAULT_RUNTIME}
        if name not in defined:
            raise ContainerdConfigError(
                f"default_runtime_name={name!r} names no runtime: the file defines {', '.join(sorted(defined))}. "
                "Add it under runtimes in the same task, or pick one of those; containerd refuses to start otherwise."
            )

    def _get(self, path: tuple[str, ...]) -> Any:
        current: Any = self.doc
        for key in path:
            if not isinstance(current, (dict, Table)) or key not in current:
                return None
            current = current[key]
        return current


def _plain(value: Any) -> Any:
    """A comparable Python value from a tomlkit item or a plain value."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if isinstance(value, tuple):
        return list(value)
    return value


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
                with open(path, encoding="utf-8") as handle:
                    imported = tomlkit.parse(handle.read())
            except (OSError, UnicodeDecodeError, ParseError):
                continue
            if cri_name in (imported.get("plugins") or {}):
                found.append(path)
    return found


def edit_config(text: str, path: str, request: ContainerdRequest) -> EditResult:
    """Apply ``request`` to the text of a config.toml and return the new text."""
    doc = parse_config(text, path)
    version = config_version(doc, path)
    editor = _Editor(doc, text, version)
    editor.apply(request)
    editor.finish()
    new_text = tomlkit.dumps(doc) if editor.changed_keys else text
    if new_text.endswith("\n\n") and not text.endswith("\n\n"):
        new_text = new_text.rstrip("\n") + "\n"  # a table added at the end brings its own blank line
    if new_text != text:
        # never hand back text that containerd could not load
        reparsed = parse_config(new_text, f"{path} (as edited)")
        if reparsed.unwrap() != doc.unwrap():
            raise ContainerdConfigError(
                f"editing {path} produced text that reads back differently; the file was left unchanged. "
                "Please report this with the file attached."
            )
    warnings = []
    touched_cri = any(key.startswith(".".join(CRI_RUNTIME_TABLE[version])) for key in editor.changed_keys)
    if request.enable_cdi is not None or request.cdi_spec_dirs is not None or touched_cri:
        for masking in masking_imports(doc, version, os.path.dirname(path)):
            warnings.append(
                f'{masking} (imported by {path}) defines [plugins."{CRI_RUNTIME_TABLE[2][1]}"]; containerd 1.x '
                "replaces the whole section with it, so the CRI settings of the main file do not take effect. "
                "Check the effective values with 'containerd config dump'."
            )
    return EditResult(text=new_text, config_version=version, changed_keys=editor.changed_keys, warnings=warnings)
