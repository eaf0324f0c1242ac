# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Edit containerd's ``config.toml`` in place with tomlkit, keeping comments, order and style.

Only the keys that are asked for are touched; a key whose value is already right is left as it
is, so a second run produces byte-identical text. The file is read and validated by
:mod:`containerd_toml`; the edited text is read back the same way before it is handed out.

A TOML table can be written in several pieces ("fragments"): a ``[table]`` header, the implicit
parent of deeper headers (``[a.b.c]`` defines ``a`` and ``a.b``), dotted keys (``options.X = 1``)
and an inline table (``options = { X = 1 }``); the pieces of one table may also be far apart in the
file (k3s writes its runtimes after the registry tables, many guides append a runtime at the end).
The editor finds every fragment of the table it edits and changes a key where it is, or adds it
to the fragment of the same kind the file already uses, so a file is never refused for its shape
and the next run reads back what this one wrote.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    CRI_RUNTIME_TABLE,
    DEFAULT_RUNTIME,
    RUNC_SHIMS,
    RUNC_V1,
    RUNC_V2,
    ContainerdConfigError,
    ContainerdRequest,
    RuntimeSpec,
    config_version,
    masking_imports,
    parse_config,
)

try:
    import tomlkit
    from tomlkit.items import AoT, Array, Comment, InlineTable, Table, Whitespace
except ImportError:  # pragma: no cover - containerd_toml.HAS_TOMLKIT tells the module to ask for tomlkit first
    tomlkit = None


@dataclass
class EditResult:
    """The new text and what changed in it (dotted key paths, in the order they were set)."""

    text: str
    config_version: int
    changed_keys: list[str]
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Fragment:
    """One piece of a table as the file writes it.

    ``kind`` is ``root`` (the document), ``header`` (a ``[table]``), ``super`` (the implicit parent of
    deeper headers), ``dotted`` (the keys of one ``a.b = ...`` line) or ``inline`` (``a = { ... }``).
    """

    item: Any
    kind: str
    parent: Optional[_Fragment] = None
    name: str = ""


# Where a key that is missing goes, best first: the table's own header, then the shape the file uses.
_SET_ORDER = ("header", "inline", "dotted", "super", "root")
# Where a missing table goes, best first.
_CREATE_ORDER = ("header", "root", "super", "dotted", "inline")


def _body(item: Any) -> list:
    return item.body if isinstance(item, tomlkit.TOMLDocument) else item.value.body


def _describe(item: Any) -> str:
    return {
        "Bool": "boolean",
        "Integer": "integer",
        "Float": "float",
        "String": "string",
        "Array": "array",
        "AoT": "array of tables",
    }.get(type(item).__name__, type(item).__name__)


class _Editor:
    """Apply a request to one parsed document, matching the file's indentation and quote style."""

    def __init__(self, doc: tomlkit.TOMLDocument, text: str, version: int) -> None:
        self.doc = doc
        self.version = version
        self.indented = re.search(r"(?m)^[ \t]+\[", text) is not None
        # how far a table's keys sit right of its header (k3s: headers at 0, keys at 2)
        pair = re.search(r"(?m)^([ \t]*)\[[^\[\r\n]*\][ \t]*(?:#[^\r\n]*)?\r?\n([ \t]*)[A-Za-z0-9_\"']", text)
        if pair and pair.group(2).startswith(pair.group(1)):
            self.key_offset = pair.group(2)[len(pair.group(1)) :]
        else:
            self.key_offset = "  " if self.indented else ""
        # containerd 2.x writes 'single quoted' literal strings, 1.x "double quoted" ones.
        self.literal = len(re.findall(r"= '", text)) > len(re.findall(r'= "', text))
        self.changed_keys: list[str] = []
        self.changed_paths: list[tuple[str, ...]] = []
        self.warnings: list[str] = []
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

    # -- finding the pieces of a table ----------------------------------------------------
    def fragments(self, path: tuple[str, ...]) -> list[list[_Fragment]]:
        """The fragments of each prefix of ``path``: ``[root], [path[:1] pieces], ...`` (stops at the first missing)."""
        levels = [[_Fragment(self.doc, "root")]]
        for depth, name in enumerate(path, start=1):
            found = []
            for fragment in levels[-1]:
                for key, item in _body(fragment.item):
                    if key is None or key.key != name:
                        continue
                    if isinstance(item, InlineTable):
                        kind = "inline"
                    elif isinstance(item, Table):
                        kind = "dotted" if key.is_dotted() else "super" if item.is_super_table() else "header"
                    else:
                        raise ContainerdConfigError(
                            f"{'.'.join(path[:depth])} is a {_describe(item)} in the file, but containerd expects "
                            "a table there; fix the file (see 'containerd config default' for the layout)."
                        )
                    found.append(_Fragment(item, kind, fragment, name))
            if not found:
                break
            levels.append(found)
        return levels

    @staticmethod
    def _pick(fragments: list[_Fragment], order: tuple[str, ...], last: bool = False) -> _Fragment:
        for kind in order:
            of_kind = [f for f in fragments if f.kind == kind]
            if of_kind:
                return of_kind[-1] if last else of_kind[0]
        raise AssertionError(f"no fragment among {[f.kind for f in fragments]}")  # pragma: no cover

    def _dotted_owner(self, fragment: _Fragment) -> tuple[_Fragment, list[str]]:
        """The fragment that holds the dotted line of ``fragment``, and the key names on that line."""
        names = []
        while fragment.kind == "dotted":
            names.insert(0, fragment.name)
            fragment = fragment.parent
        return fragment, names

    def _key_indent(self, container: Any, depth: int) -> str:
        for _key, item in _body(container):
            if item is not None and not isinstance(item, (Whitespace, Comment, Table, AoT)):
                return item.trivia.indent.lstrip("\n")
        for _key, item in _body(container):
            if isinstance(item, Table) and not item.is_super_table():
                return item.trivia.indent.lstrip("\n") + ("  " if self.indented else "")
        return ("  " * (depth - 1) if self.indented else "") + self.key_offset

    def _append_key(self, fragment: _Fragment, key: Any, value: Any, depth: int) -> None:
        """Add ``key = value`` to a header, super or root fragment, before its sub-tables."""
        item = tomlkit.item(self._value(value))
        item.trivia.indent = self._key_indent(fragment.item, depth)
        if fragment.kind == "root":
            fragment.item.append(key, item)
        else:
            fragment.item.raw_append(key, item)

    # -- tables ---------------------------------------------------------------------------
    def _create(self, path: tuple[str, ...], levels: list[list[_Fragment]]) -> _Fragment:
        """Create the missing tables of ``path`` below the deepest existing one, in the file's style."""
        depth = len(levels) - 1
        parent = self._pick(levels[-1], _CREATE_ORDER, last=True)
        rest = path[depth:]
        if parent.kind == "inline":
            parent.item[rest[0]] = tomlkit.inline_table()
            return _Fragment(parent.item[rest[0]], "inline", parent, rest[0])
        if parent.kind == "dotted":
            # a dotted parent gets dotted keys: the caller adds "<names>.<rest>.key = value" lines
            return _Fragment(None, "pending-dotted", parent, ".".join(rest))
        current = parent
        for level, key in enumerate(rest, start=depth + 1):
            new = tomlkit.table()
            indent = "  " * (level - 1) if self.indented else ""
            body = _body(current.item)
            if body and not isinstance(body[-1][1], (Whitespace, Table, AoT)):
                indent = "\n" + indent  # a blank line between the parent's keys and this header
            new.trivia.indent = indent
            if current.kind == "root":
                current.item.append(key, new)
            else:
                current.item.raw_append(key, new)  # append() would add the parent's indentation again
            self.created.append(new)
            current = _Fragment(new, "header", current, key)
        return current

    def finish(self) -> None:
        """End each new table that holds keys with a blank line, as containerd writes them."""
        for table in self.created:
            body = table.value.body
            if body and not isinstance(body[-1][1], (Whitespace, Table, AoT)):
                table.add(tomlkit.nl())

    def get(self, path: tuple[str, ...]) -> Any:
        """The plain value at ``path`` (merged over every fragment), or None."""
        current: Any = self.doc.unwrap()
        for key in path:
            if not isinstance(current, dict) or key not in current:
                return None
            current = current[key]
        return current

    def set(self, path: tuple[str, ...], key: str, value: Any) -> None:
        """Set ``key`` in the table at ``path`` unless it already holds ``value``."""
        levels = self.fragments(path)
        if len(levels) == len(path) + 1:
            for fragment in levels[-1]:
                for existing_key, item in _body(fragment.item):
                    if existing_key is None or existing_key.key != key:
                        continue
                    if isinstance(item, (Table, InlineTable, AoT)):
                        raise ContainerdConfigError(
                            f"{'.'.join((*path, key))} is a table in the file, but containerd expects a "
                            f"{_describe(tomlkit.item(self._value(value)))}; fix the file."
                        )
                    if _plain(item) == _plain(value):
                        return
                    fragment.item[key] = tomlkit.item(self._value(value))  # keeps the line's comment
                    self._changed(path, key)
                    return
            target = self._pick(levels[-1], _SET_ORDER)
        else:
            target = self._create(path, levels)
        if target.kind == "super":
            # a table so far implied by its sub-tables' headers gets its own header, in place
            target.item._is_super_table = False
            target.item.trivia.indent = _header_indent(target.item, self.indented, len(path))
            target.kind = "header"
            self.created.append(target.item)
        if target.kind in ("header", "root"):
            self._append_key(target, key, value, len(path))
        elif target.kind == "inline":
            target.item[key] = tomlkit.item(self._value(value))
        else:  # dotted, or a table to create under a dotted key
            owner, names = self._dotted_owner(target if target.kind == "dotted" else target.parent)
            extra = target.name.split(".") if target.kind == "pending-dotted" else []
            self._append_key(owner, tomlkit.key([*names, *extra, key]), value, len(path))
        self._changed(path, key)

    def _changed(self, path: tuple[str, ...], key: str) -> None:
        self.changed_keys.append(".".join((*path, key)))
        self.changed_paths.append((*path, key))

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
        if request.systemd_cgroup is not None and DEFAULT_RUNTIME not in {spec.name for spec in request.runtimes}:
            self._runtime(runtimes, RuntimeSpec(name=DEFAULT_RUNTIME), request.systemd_cgroup)
        if request.default_runtime_name is not None:
            self._check_runtime_exists(runtimes, request.default_runtime_name)
            self.set((*cri, "containerd"), "default_runtime_name", request.default_runtime_name)

    def _imports(self, wanted: list[str], state: str) -> None:
        current = self.doc.get("imports")
        if current is not None and not isinstance(current, Array):
            raise ContainerdConfigError(
                f"imports is a {_describe(current)}; containerd expects an array of file paths."
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
        self._changed((), "imports")

    def _runtime(self, runtimes: tuple[str, ...], spec: RuntimeSpec, systemd_cgroup: Optional[bool]) -> None:
        path = (*runtimes, spec.name)
        existing = self.get(path)
        runtime_type = spec.runtime_type
        if existing is None and runtime_type is None:
            # containerd does not merge a runtime entry with its defaults: an entry without
            # runtime_type has an empty shim type and fails to start containers.
            runtime_type = RUNC_V2
        if runtime_type is not None:
            self.set(path, "runtime_type", runtime_type)
        options = dict(spec.options)
        effective_type = runtime_type or (existing or {}).get("runtime_type")
        if systemd_cgroup is not None and "SystemdCgroup" not in options:
            if effective_type in RUNC_SHIMS:
                options["SystemdCgroup"] = systemd_cgroup
            else:
                self.warnings.append(
                    f"systemd_cgroup was not applied to runtime {spec.name!r}: its runtime_type is "
                    f"{effective_type or 'not set'}, and SystemdCgroup is an option of the runc shims "
                    f"({', '.join(RUNC_SHIMS)}) only. Set that runtime's cgroup driver in its own configuration."
                )
        if effective_type == RUNC_V1:
            # the v1 shim takes the same runc options (containerd 1.x decodes both shims' options
            # as runc options), so SystemdCgroup is honoured; but the shim itself is on its way out
            removed = "containerd 2.x cannot start it" if self.version == 3 else "containerd 2.0 removed it"
            self.warnings.append(
                f"runtime {spec.name!r} uses the {RUNC_V1} shim, deprecated since containerd 1.4 ({removed}); "
                f"set its runtime_type to {RUNC_V2}."
            )
        for key, value in options.items():
            self.set((*path, "options"), key, value)

    def _check_runtime_exists(self, runtimes: tuple[str, ...], name: str) -> None:
        defined = set(self.get(runtimes) or {}) | {DEFAULT_RUNTIME}
        if name not in defined:
            raise ContainerdConfigError(
                f"default_runtime_name={name!r} names no runtime: the file defines {', '.join(sorted(defined))}. "
                "Add it under runtimes in the same task, or pick one of those; containerd refuses to start otherwise."
            )


def _header_indent(table: Any, indented: bool, depth: int) -> str:
    """The indentation of a new header line for ``table``: that of the first header below it."""
    for _key, item in table.value.body:
        if isinstance(item, Table) and not item.is_super_table():
            return item.trivia.indent
        if isinstance(item, Table):
            return _header_indent(item, indented, depth)
    return "\n" + ("  " * (depth - 1) if indented else "")


def _plain(value: Any) -> Any:
    """A comparable Python value from a tomlkit item or a plain value."""
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if isinstance(value, tuple):
        return list(value)
    return value


def _leaves(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every non-table value of a plain document, keyed by its path."""
    if isinstance(value, dict):
        found: dict[tuple[str, ...], Any] = {}
        for key, child in value.items():
            found.update(_leaves(child, (*prefix, key)))
        if not value:
            found[prefix] = {}
        return found
    return {prefix: value}


def _comment_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.lstrip().startswith("#")]


def _is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    remaining = iter(haystack)
    return all(any(needle == candidate for candidate in remaining) for needle in needles)


def _kept_everything(old: dict[str, Any], new: dict[str, Any], changed: list[tuple[str, ...]]) -> bool:
    """True when ``new`` differs from ``old`` only at the ``changed`` paths (and in new empty parents)."""
    before, after = _leaves(old), _leaves(new)
    targeted = set(changed)
    for path, value in before.items():
        if path in targeted:
            continue
        if path in after:
            if after[path] != value:
                return False
        elif value != {} or not any(p[: len(path)] == path for p in after):
            return False
    return all(path in targeted or path in before for path in after if after[path] != {})


def _lines(text: str) -> list[str]:
    return [line for line in re.split(r"(?<=\n)", text) if line]


def _keep_original_lines(text: str, baseline: str, edited: str) -> Optional[str]:
    """``edited`` with every line that tomlkit re-rendered but did not edit taken back from ``text``.

    ``baseline`` is tomlkit's rendering of the unedited document. It equals ``text`` except where
    tomlkit does not reproduce a line (it re-indents a table appended after its parent's sub-tables),
    and the edit is the difference from ``baseline`` to ``edited``. None when the lines do not align.
    """
    original, base, new = _lines(text), _lines(baseline), _lines(edited)
    source: dict[int, str] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=original, b=base, autojunk=False).get_opcodes():
        if tag != "equal" and i2 - i1 != j2 - j1:
            return None
        for offset in range(j2 - j1):
            source[j1 + offset] = original[i1 + offset]
    merged = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=base, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            merged.extend(source[index] for index in range(i1, i2))
        else:
            merged.extend(new[j1:j2])
    return "".join(merged)


def _same_line_endings(old: str, new: str) -> str:
    """``new`` with the lines this editor added ending like the file's (CRLF files stay CRLF)."""
    if "\r\n" in old and "\n" not in old.replace("\r\n", ""):
        return re.sub(r"(?<!\r)\n", "\r\n", new)
    return new


def edit_config(text: str, path: str, request: ContainerdRequest) -> EditResult:
    """Apply ``request`` to the text of a config.toml and return the new text."""
    doc = parse_config(text, path)
    original = doc.unwrap()
    baseline = tomlkit.dumps(doc)
    version = config_version(doc, path)
    editor = _Editor(doc, text, version)
    editor.apply(request)
    editor.finish()
    new_text = text
    if editor.changed_keys:
        new_text = _same_line_endings(text, tomlkit.dumps(doc))
        if baseline != text:
            kept = _keep_original_lines(text, baseline, new_text)
            if kept is None:
                raise ContainerdConfigError(
                    f"{path} is laid out in a way the tomlkit library ({getattr(tomlkit, '__version__', '?')}) "
                    "does not reproduce, so editing it would change lines that were not asked for; the file was "
                    "left unchanged. Please report this with the file attached."
                )
            new_text = kept
        newline = "\r\n" if new_text.endswith("\r\n") else "\n"
        if new_text.endswith(newline * 2) and not text.endswith(newline * 2):
            new_text = new_text.rstrip("\r\n") + newline  # a table added at the end brings its own blank line
    if new_text != text:
        # never hand back text that containerd could not load, or that lost anything not asked for
        reparsed = parse_config(new_text, f"{path} (as edited)").unwrap()
        if (
            reparsed != doc.unwrap()
            or not _kept_everything(original, reparsed, editor.changed_paths)
            or not _is_subsequence(_comment_lines(text), _comment_lines(new_text))
        ):
            raise ContainerdConfigError(
                f"editing {path} produced text that reads back differently; the file was left unchanged. "
                "Please report this with the file attached."
            )
    warnings = list(editor.warnings)
    touched_cri = any(key.startswith(".".join(CRI_RUNTIME_TABLE[version])) for key in editor.changed_keys)
    if request.enable_cdi is not None or request.cdi_spec_dirs is not None or touched_cri:
        for masking in masking_imports(doc, version, os.path.dirname(path)):
            warnings.append(
                f'{masking} (imported by {path}) defines [plugins."{CRI_RUNTIME_TABLE[2][1]}"]; containerd 1.x '
                "replaces the whole section with it, so the CRI settings of the main file do not take effect. "
                "Check the effective values with 'containerd config dump'."
            )
    return EditResult(text=new_text, config_version=version, changed_keys=editor.changed_keys, warnings=warnings)
