# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The host IMEX daemon's files: ``config.cfg`` (KEY=value lines) and the nodes file (one address per line).

``config.cfg`` is edited line by line: a key's active ``KEY=value`` line gets the new value and every
other byte stays as it was (comments, blank lines with trailing spaces, order, line endings). A key
that has no active line is inserted right after a commented-out ``#KEY=...`` line when the file has
one (so it stays next to its description), otherwise appended at the end. The commented line itself
is kept. A value ends where a ``#`` preceded by a blank starts a trailing comment
(``SERVER_PORT=50000 # default``); a new value replaces only the value, the comment and the spacing
around it stay. The nodes file is owned whole: it holds exactly the given addresses, in the given order.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, Optional

DEFAULT_CONFIG_PATH = "/etc/nvidia-imex/config.cfg"
DEFAULT_NODES_PATH = "/etc/nvidia-imex/nodes_config.cfg"
NODES_KEY = "IMEX_NODE_CONFIG_FILE"

_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
_ACTIVE = re.compile(rf"^(?P<lead>[ \t]*)(?P<key>{_KEY})(?P<sep>[ \t]*=)(?P<rest>[^\r\n]*)(?P<eol>\r?\n|\r)?$")
# What follows "=": blanks, the value, then blanks and a trailing "# comment" (a "#" after a blank).
_REST = re.compile(r"^(?P<pre>[ \t]*)(?P<value>.*?)(?P<tail>[ \t]*(?:(?<![^ \t])#.*)?)$")
_COMMENTED = re.compile(rf"^[ \t]*#[ \t]?(?P<key>{_KEY})[ \t]*=")

_PORT_KEYS = {"SERVER_PORT", "IMEX_CMD_PORT"}
_IP_KEYS = {"BIND_INTERFACE_IP", "IMEX_CMD_BIND_INTERFACE_IP"}
_BOOL_KEYS = {
    "DAEMONIZE",
    "LOG_APPEND_TO_LOG",
    "LOG_USE_SYSLOG",
    "IMEX_ENABLE_AUTH_ENCRYPTION",
    "IMEX_CMD_ENABLED",
    "IMEX_GSS_SHUTDOWN_ON_FAILURE",
}
_CHOICE_KEYS = {
    "LOG_LEVEL": ("0", "1", "2", "3", "4"),
    "IMEX_WAIT_FOR_QUORUM": ("NONE", "RECOVERY"),
    "IMEX_AUTH_ENCRYPTION_MODE": ("SSL_TLS", "GSS_AUTH_ENCRYPT", "GSS_AUTH_ONLY"),
    "IMEX_AUTH_SOURCE": ("", "FILE", "ENV_PATH", "ENV_VAL"),
}
_INT_KEYS = {
    "LOG_FILE_MAX_SIZE",
    "LOG_MAX_ROTATE_COUNT",
    "IMEX_UNAUTHORIZED_RECONNECT_INTERVAL_SEC",
    "IMEX_GSS_TIMEOUT_SEC",
    "IMEX_GSS_RETRY_INTERVAL_SEC",
    "IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC",
    "IMEX_NODE_DISCONNECTED_GRACE_TIME",
    "IMEX_GRPC_DSCP_OVERRIDE",
}
_PATH_KEYS = {"LOG_FILE_NAME", "STATS_FILE_NAME", NODES_KEY}
# Keys of config.cfg as shipped by nvidia-imex-580 (580.178.04); others are written with a warning.
KNOWN_KEYS = (
    _PORT_KEYS
    | _IP_KEYS
    | _BOOL_KEYS
    | set(_CHOICE_KEYS)
    | _INT_KEYS
    | _PATH_KEYS
    | {
        "NETWORK_INTERFACE",
        "OUTGOING_NETWORK_INTERFACE",
        "IMEX_SERVER_KEY",
        "IMEX_SERVER_CERT",
        "IMEX_SERVER_CERT_AUTH",
        "IMEX_CLIENT_KEY",
        "IMEX_CLIENT_CERT",
        "IMEX_CLIENT_CERT_AUTH",
        "IMEX_SECURITY_TARGET_OVERRIDE",
        "IMEX_SPIFFE_AUTHORIZED_PRINCIPALS",
        "IMEX_GSS_SERVICE_NAME",
        "IMEX_CMD_UNIX_DOMAIN_PATH",
    }
)


class ImexConfigError(Exception):
    """A setting, an address or a file is not acceptable; the message says which and what to do."""


@dataclass
class SettingsEdit:
    """The new config.cfg text and the keys whose lines were set or added."""

    text: str
    changed_keys: list[str] = field(default_factory=list)


def render_value(key: str, value: Any) -> str:
    """The text after ``KEY=``: booleans as 1/0 (what IMEX reads), None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        if "\n" in value or "\r" in value:
            raise ImexConfigError(f"settings.{key} contains a line break; a config.cfg value is one line.")
        value = value.strip()
        if re.search(r"[ \t]#", value) or value.startswith("#"):
            raise ImexConfigError(
                f"settings.{key}={value!r} holds a '#' after a blank, which config.cfg reads as the start "
                "of a comment; give the value without it."
            )
        return value
    raise ImexConfigError(
        f"settings.{key} is a {type(value).__name__}; expected a string, number or boolean (written as KEY=value)."
    )


def _check_value(key: str, value: str) -> None:
    if key in _PORT_KEYS:
        if not (value.isdigit() and 0 <= int(value) <= 65535) and not (key == "IMEX_CMD_PORT" and value == ""):
            raise ImexConfigError(f"settings.{key}={value!r} is not a TCP port; expected a number from 0 to 65535.")
    elif key in _IP_KEYS:
        if "%" in value:
            raise ImexConfigError(_zone_index_message(f"settings.{key}", value))
        if value:
            try:
                ipaddress.ip_address(value)
            except ValueError as exc:
                raise ImexConfigError(
                    f"settings.{key}={value!r} is not an IPv4 or IPv6 address; give an address or an empty "
                    "value (IMEX then takes the address of this node from the nodes file)."
                ) from exc
    elif key in _BOOL_KEYS:
        if value not in ("0", "1"):
            raise ImexConfigError(f"settings.{key}={value!r} must be 0 or 1 (or a boolean).")
    elif key in _CHOICE_KEYS:
        if value not in _CHOICE_KEYS[key]:
            raise ImexConfigError(
                f"settings.{key}={value!r} is not one of {', '.join(repr(c) for c in _CHOICE_KEYS[key])}."
            )
    elif key in _INT_KEYS:
        if not re.fullmatch(r"-?[0-9]+", value):
            raise ImexConfigError(f"settings.{key}={value!r} must be an integer.")
    elif key in _PATH_KEYS and value and (not value.startswith("/") or len(value) > 256):
        raise ImexConfigError(
            f"settings.{key}={value!r} must be an absolute path of at most 256 characters, as IMEX requires."
        )


def _zone_index_message(name: str, text: str) -> str:
    return (
        f"{name} = {text!r} has a zone index; write the address without '%...' and set "
        "NETWORK_INTERFACE in settings to pick the interface of a link-local address."
    )


def _lines(text: str) -> list[str]:
    """The lines of ``text`` with their endings, split at line feeds only (as IMEX reads the file)."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def _split_rest(rest: str) -> tuple[str, str, str]:
    """(blanks before the value, the value, blanks and trailing comment after it)."""
    match = _REST.match(rest)
    return match.group("pre"), match.group("value"), match.group("tail")


def validate_settings(settings: Optional[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """Render and check every setting; return them with warnings for keys IMEX 580 does not know."""
    rendered: dict[str, str] = {}
    warnings = []
    for key, value in (settings or {}).items():
        if not re.fullmatch(_KEY, str(key)):
            raise ImexConfigError(
                f"settings key {key!r} is not a config.cfg key; keys are letters, digits and '_' (e.g. SERVER_PORT)."
            )
        text = render_value(key, value)
        _check_value(key, text)
        if key not in KNOWN_KEYS:
            warnings.append(
                f"settings.{key} is not a key of the config.cfg of nvidia-imex 580; it is written as given. "
                "Check the spelling against /etc/nvidia-imex/config.cfg."
            )
        rendered[key] = text
    return rendered, warnings


def parse_settings(text: str) -> dict[str, str]:
    """The active KEY=value lines of a config.cfg (the last one wins when a key repeats)."""
    found = {}
    for line in _lines(text):
        match = _ACTIVE.match(line)
        if match:
            found[match.group("key")] = _split_rest(match.group("rest"))[1]
    return found


def check_line_ends(text: str, path: str = "config.cfg") -> None:
    """Refuse a file whose lines end in a lone carriage return: IMEX splits at line feeds, so it reads the whole
    file as one line, and no edit could say what IMEX will see."""
    if "\r" in text and "\n" not in text.rstrip("\r"):
        raise ImexConfigError(
            f"{path} ends its lines with a carriage return alone (CR, old Mac style); nvidia-imex reads lines up to a"
            " line feed, so it sees one line. Convert the file to LF line ends (e.g. tr '\\r' '\\n'), then rerun."
        )


def edit_settings(text: str, settings: dict[str, str], path: str = "config.cfg") -> SettingsEdit:
    """Set each key's active line(s) to the value; insert missing keys (see the module docstring).

    A UTF-8 byte order mark before the first key is dropped: IMEX would read it as part of that key's name, so
    the key would be set for this editor and unknown to IMEX (and a second run would append it again).
    """
    check_line_ends(text, path)
    text = text[1:] if text.startswith("\ufeff") else text
    lines = _lines(text)
    changed: list[str] = []
    seen: set[str] = set()
    for index, line in enumerate(lines):
        match = _ACTIVE.match(line)
        if not match or match.group("key") not in settings:
            continue
        key = match.group("key")
        seen.add(key)
        pre, value, tail = _split_rest(match.group("rest"))
        if value == settings[key]:
            continue
        if tail.startswith("#") and settings[key]:
            tail = f" {tail}"  # "KEY=1# note" would read as the value "1# note"
        new_rest = f"{pre}{settings[key]}{tail}"
        lines[index] = f"{match.group('lead')}{key}{match.group('sep')}{new_rest}{match.group('eol') or ''}"
        if key not in changed:
            changed.append(key)
    newline = _newline_of(text)
    for key, value in settings.items():
        if key in seen:
            continue
        new_line = f"{key}={value}{newline}"
        anchor = _last_commented(lines, key)
        if anchor is None:
            if lines and not lines[-1].endswith(("\n", "\r")):
                lines[-1] += newline
            lines.append(new_line)
        else:
            if not lines[anchor].endswith(("\n", "\r")):
                lines[anchor] += newline
            lines.insert(anchor + 1, new_line)
        changed.append(key)
    return SettingsEdit(text="".join(lines), changed_keys=changed)


def _newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _last_commented(lines: list[str], key: str) -> Optional[int]:
    index = None
    for number, line in enumerate(lines):
        match = _COMMENTED.match(line)
        if match and match.group("key") == key:
            index = number
    return index


def duplicate_active_keys(text: str, keys: set[str]) -> list[str]:
    """Keys among ``keys`` that have more than one active line (all of them are set)."""
    counts: dict[str, int] = {}
    for line in _lines(text):
        match = _ACTIVE.match(line)
        if match and match.group("key") in keys:
            counts[match.group("key")] = counts.get(match.group("key"), 0) + 1
    return sorted(key for key, count in counts.items() if count > 1)


def validate_nodes(nodes: list[Any]) -> list[str]:
    """Check the peer list; return the addresses in their canonical form, order kept.

    Everything is checked before anything is written: an invalid address, a zone index or a
    duplicate (also written differently, e.g. ``fd00::1`` and ``fd00:0::1``, or ``10.0.0.1`` and
    its IPv4-mapped form ``::ffff:10.0.0.1``) is refused naming it. An IPv4-mapped IPv6 address is
    an IPv4 node and is written as its IPv4 address.
    """
    if not nodes:
        raise ImexConfigError(
            "nodes is empty; the IMEX nodes file must list the address of every node of the IMEX domain, "
            "this one included."
        )
    canonical: list[str] = []
    first_seen: dict[Any, int] = {}
    for index, entry in enumerate(nodes):
        text = str(entry).strip() if entry is not None else ""
        if "%" in text:
            raise ImexConfigError(_zone_index_message(f"nodes[{index}]", text))
        try:
            address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise ImexConfigError(
                f"nodes[{index}] = {text!r} is not an IPv4 or IPv6 address; the IMEX nodes file holds one IP "
                "address per line (no host names, no ports, no CIDR suffix)."
            ) from exc
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address in first_seen:
            raise ImexConfigError(
                f"nodes[{index}] = {text!r} repeats nodes[{first_seen[address]}] ({address}); list every node once."
            )
        first_seen[address] = index
        canonical.append(str(address))
    return canonical


def render_nodes(nodes: list[str]) -> str:
    return "".join(f"{node}\n" for node in nodes)


def resolve_nodes_path(explicit: Optional[str], requested: dict[str, str], current: dict[str, str]) -> str:
    """Where the nodes file lives: the option, else IMEX_NODE_CONFIG_FILE (as it will be), else the default."""
    if explicit:
        return explicit
    value = requested.get(NODES_KEY, current.get(NODES_KEY, ""))
    if not value:
        return DEFAULT_NODES_PATH
    if not value.startswith("/"):
        raise ImexConfigError(
            f"{NODES_KEY}={value!r} in config.cfg is not an absolute path; set it to an absolute path "
            "or give nodes_path."
        )
    return value


# --------------------------------------------------------------------------- the daemon and the driver

_NVRM_VERSION = re.compile(r"^NVRM version:.*?\s(\d+\.\d+(?:\.\d+)*)\s", re.M)


def upstream_version(package_version: str) -> str:
    """``1:580.159.04-0ubuntu1`` (deb) or ``580.159.04-1.el9`` (rpm) -> ``580.159.04``."""
    version = package_version.strip()
    if ":" in version:
        version = version.split(":", 1)[1]
    return version.split("-", 1)[0]


def loaded_driver_version(nvrm_text: str) -> Optional[str]:
    """The loaded kernel module's version from ``/proc/driver/nvidia/version``; None without an NVRM line."""
    match = _NVRM_VERSION.search(nvrm_text + " ")
    return match.group(1) if match else None


def imex_driver_mismatch(package: str, package_version: str, nvrm_text: str) -> str:
    """Why ``nvidia-imex`` would abort next to the loaded driver; empty when the versions agree.

    At start the daemon checks the loaded kernel driver stack and aborts when it is not its own
    version (NVIDIA IMEX guide, Getting started), so the package must carry the driver's version.
    """
    loaded = loaded_driver_version(nvrm_text)
    if loaded is None:
        return (
            f"cannot compare {package} {package_version} with the loaded driver: /proc/driver/nvidia/version has no"
            " 'NVRM version:' line (is the nvidia kernel module loaded?)"
        )
    imex = upstream_version(package_version)
    if imex == loaded:
        return ""
    return (
        f"{package} {package_version} is IMEX {imex} but the loaded NVIDIA driver is {loaded}: nvidia-imex checks the"
        " loaded driver stack when it starts and aborts on a mismatch. Install the IMEX package of the driver's"
        f" version ({package} {loaded}), or reboot if the driver was upgraded to {imex} and its old modules are"
        " still loaded"
    )
