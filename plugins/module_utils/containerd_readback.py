# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a containerd configuration says, read back after the fact with the collection's TOML reader.

Two readers run on the controller over text the hosts handed back:

- the top-level ``imports`` of each GPU host's ``config.toml``, held against the entries that must be
  there (the 25.10.0 GPU Operator's toolkit 1.18.0 drops the existing ``imports`` when it adds its own
  drop-in; fixed in 1.18.1);
- the CRI settings ``containerd config dump`` prints (``enable_cdi``, ``cdi_spec_dirs``, runc's
  ``SystemdCgroup``), which are what containerd really runs with after merging its imports.

A file is read as TOML, not searched line by line: a commented-out ``imports``, one inside a table, a
list over several lines and single-quoted strings read as containerd reads them, and a file that is not
TOML is reported by host, file and line.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    CRI_RUNTIME_TABLE,
    DEFAULT_RUNTIME,
    HAS_TOMLKIT,
    ContainerdConfigError,
    parse_config,
)

try:  # the controller may lack tomlkit (a GPU host's requirement): the standard library reads as strictly
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10 controllers
    tomllib = None  # type: ignore[assignment]

DUMP_NAME = "containerd config dump"


class ContainerdReadError(Exception):
    """The text cannot be read as a containerd configuration; the message is one line naming the file."""


def load_config(text: str, path: str) -> dict[str, Any]:
    """``text`` as plain data, read as containerd reads it; a file that is not TOML raises, naming its line."""
    if HAS_TOMLKIT:
        try:
            return parse_config(text, path).unwrap()
        except ContainerdConfigError as exc:
            raise ContainerdReadError(exc.finding) from None
    if tomllib is None:  # pragma: no cover - Python 3.10 controller without tomlkit
        raise ContainerdReadError(f"cannot read {path}: install the tomlkit Python library on the controller")
    try:  # pragma: no cover - exercised where tomlkit is missing
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover
        raise ContainerdReadError(f"{path} is not valid TOML: {exc}") from None


def read_imports(text: str, path: str) -> list[str]:
    """The top-level ``imports`` of a containerd config (none: an empty list)."""
    imports = load_config(text, path).get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(entry, str) for entry in imports):
        raise ContainerdReadError(
            f"{path} has imports = {json.dumps(imports, default=str)}, not a list of file names; "
            "containerd cannot load it"
        )
    return imports


def missing_imports_line(host: str, found: list[str], expected: list[str]) -> Optional[str]:
    """One line naming the host, what its ``imports`` hold and which expected entries they lack; None when none."""
    missing = [entry for entry in expected if entry not in found]
    if not missing:
        return None
    return f"{host}: imports = {json.dumps(found)} lacks {', '.join(missing)}"


@dataclass
class ImportsReport:
    """The hosts whose config lost an expected import (or is no TOML) and those whose config was not read."""

    lost: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return {"lost": list(self.lost), "unread": list(self.unread)}


def _decoded(result: Mapping[str, Any]) -> str:
    if result.get("encoding", "base64") != "base64":
        return str(result["content"])
    try:
        return base64.b64decode(str(result["content"]), validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        raise ContainerdReadError(f"its content is not base64 text ({exc})") from None


def imports_report(results: Any, expected: list[str], path: str) -> ImportsReport:
    """Hold each host's ``config.toml`` (the results of a looped ``slurp``, one per host) against ``expected``.

    A result without content (unreachable host, missing file) is unread, naming the host and why; a file
    that is not TOML or whose ``imports`` are not a list is lost, naming the host, the file and its line.
    """
    report = ImportsReport()
    for result in results or []:
        host = str(result.get("item", "?"))
        if result.get("content") is None:
            report.unread.append(f"{host} ({result.get('msg') or 'unreachable'})")
            continue
        try:
            found = read_imports(_decoded(result), path)
        except ContainerdReadError as exc:
            report.lost.append(f"{host}: {exc}")
            continue
        line = missing_imports_line(host, found, list(expected))
        if line:
            report.lost.append(line)
    return report


def effective_cri_settings(dump: str) -> dict[str, Any]:
    """The CRI settings that ``containerd config dump`` prints: ``enable_cdi``, ``cdi_spec_dirs``, ``systemd_cgroup``.

    containerd 1.x prints config version 2 (the settings under ``io.containerd.grpc.v1.cri``), 2.x version 3
    (under ``io.containerd.cri.v1.runtime``); a setting it leaves out is containerd's default (off, none).
    """
    config = load_config(dump, DUMP_NAME)
    version = config.get("version")
    tables = [CRI_RUNTIME_TABLE[version]] if version in CRI_RUNTIME_TABLE else list(CRI_RUNTIME_TABLE.values())
    plugins = config.get("plugins") or {}
    cri: dict[str, Any] = {}
    for _plugins, name in tables:
        if isinstance(plugins.get(name), dict):
            cri = plugins[name]
            break
    runc = ((cri.get("containerd") or {}).get("runtimes") or {}).get(DEFAULT_RUNTIME) or {}
    return {
        "enable_cdi": cri.get("enable_cdi") is True,
        "cdi_spec_dirs": [str(entry) for entry in cri.get("cdi_spec_dirs") or []],
        "systemd_cgroup": (runc.get("options") or {}).get("SystemdCgroup") is True,
    }
