#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: imex_config
short_description: Set the host IMEX daemon's config.cfg keys and its nodes file
version_added: 0.1.0
description:
  - Edits the host C(nvidia-imex) daemon's C(config.cfg) (C(KEY=value) lines) and writes its nodes file (the
    IP addresses of the nodes of the IMEX domain, one per line).
  - In C(config.cfg) only the lines of the given keys change; comments, blank lines, order and line endings stay
    byte for byte. A key with no active C(KEY=value) line is inserted right after a commented-out C(#KEY=...)
    line when the file has one (keeping it next to its description; the commented line stays), otherwise
    appended at the end of the file. A key with several active lines has all of them set, with a warning.
  - A trailing comment after a value (a C(#) that follows a blank, as in C(SERVER_PORT=50000) then a comment) is
    kept; only the value changes, and a value that is already right leaves the line as it is.
  - The nodes file is written whole from O(nodes). Every address is checked before anything is written;
    invalid addresses, zone indexes and duplicates (also an IPv4 address and its IPv4-mapped IPv6 form
    C(::ffff:a.b.c.d)) are refused, naming the entry. Zone indexes are refused in C(BIND_INTERFACE_IP) and
    C(IMEX_CMD_BIND_INTERFACE_IP) too.
  - Files are replaced atomically, keeping their mode and owner; a read-only file is refused and left as it is.
  - IMEX reads these files only at start; restart C(nvidia-imex) when C(changed=true). With Kubernetes
    ComputeDomains the DRA driver runs its own IMEX daemons and the host service must stay masked; this module
    is for the host-managed mode.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is a list with one before/after entry per file considered (C(config.cfg), the nodes file).
options:
  config_path:
    description: Path of the IMEX daemon's main configuration file.
    type: path
    default: /etc/nvidia-imex/config.cfg
  settings:
    description:
      - C(config.cfg) keys and their values, for example C(SERVER_PORT), C(BIND_INTERFACE_IP), C(IMEX_CMD_PORT).
      - Booleans are written as C(1)/C(0) and null as an empty value. Values of the keys the C(nvidia-imex-580)
        package documents are checked (ports, IP addresses, 0/1 flags, choices, absolute paths); other keys
        are written as given, with a warning.
    type: dict
  nodes:
    description:
      - The IPv4/IPv6 addresses of every node of the IMEX domain, this one included, in the order to write them.
      - Written in canonical form (for example C(fd00::1) for C(fd00:0:0::1), C(10.0.0.1) for C(::ffff:10.0.0.1)).
        Host names are not accepted.
    type: list
    elements: str
  nodes_path:
    description:
      - The nodes file to write. Defaults to the value of C(IMEX_NODE_CONFIG_FILE) in C(config.cfg) (after
        O(settings) are applied), or C(/etc/nvidia-imex/nodes_config.cfg) when that is empty.
      - Required when O(config_path) does not exist.
    type: path
  backup:
    description: Keep a timestamped copy of each file before changing it.
    type: bool
    default: false
requirements: []
seealso:
  - name: IMEX configuration
    description: The keys of config.cfg and the nodes file.
    link: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/config.html
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Point the IMEX daemon at the rack's nodes and pin its port
  gpu_fabric.mnnvl.imex_config:
    settings:
      SERVER_PORT: 50000
      IMEX_CMD_ENABLED: true
      IMEX_CMD_PORT: 50005
    nodes: "{{ groups['rack1'] | map('extract', hostvars, 'ansible_default_ipv4') | map(attribute='address') }}"
    backup: true
  notify: Restart nvidia-imex

- name: Read the current settings and the nodes file path without changing anything
  gpu_fabric.mnnvl.imex_config:
  register: imex
"""

RETURN = r"""
settings:
  description: Every active C(KEY=value) of C(config.cfg) as it is after the run (or would be, in check mode).
  returned: when config_path exists
  type: dict
  sample:
    SERVER_PORT: "50000"
    IMEX_NODE_CONFIG_FILE: /etc/nvidia-imex/nodes_config.cfg
changed_keys:
  description: The C(config.cfg) keys whose lines were set or added.
  returned: success
  type: list
  elements: str
  sample: [SERVER_PORT]
nodes_path:
  description: The nodes file this module reads and writes.
  returned: success
  type: str
  sample: /etc/nvidia-imex/nodes_config.cfg
nodes:
  description: The addresses as written to the nodes file, in canonical form.
  returned: when O(nodes) is given
  type: list
  elements: str
  sample: [10.0.0.1, 10.0.0.2]
backup_files:
  description: The backups made, keyed by the path of the file that was backed up.
  returned: success
  type: dict
  sample:
    /etc/nvidia-imex/config.cfg: /etc/nvidia-imex/config.cfg.12345.2025-01-01@10:00:00~
diff:
  description: One entry per file considered, each with C(before), C(after), C(before_header), C(after_header).
  returned: success
  type: list
  elements: dict
  sample:
    - before: "SERVER_PORT=50000\n"
      after: "SERVER_PORT=50010\n"
      before_header: /etc/nvidia-imex/config.cfg
      after_header: /etc/nvidia-imex/config.cfg
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    MAX_CONFIG_BYTES,
    FileChange,
    FileEditError,
    read_text,
    write_changes,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.imex import (
    ImexConfigError,
    duplicate_active_keys,
    edit_settings,
    parse_settings,
    render_nodes,
    resolve_nodes_path,
    validate_nodes,
    validate_settings,
)

ARGUMENT_SPEC = dict(
    config_path=dict(type="path", default="/etc/nvidia-imex/config.cfg"),
    settings=dict(type="dict"),
    nodes=dict(type="list", elements="str"),
    nodes_path=dict(type="path"),
    backup=dict(type="bool", default=False),
)


def build_module() -> AnsibleModule:
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def run(module: AnsibleModule) -> dict:
    """Validate everything, compute both files' new text, then write what differs."""
    params = module.params
    config_path = params["config_path"]
    # Refuse bad input before any file is read or written.
    settings, warnings = validate_settings(params["settings"])
    nodes = validate_nodes(params["nodes"]) if params["nodes"] is not None else None

    config_text = read_text(config_path, max_bytes=MAX_CONFIG_BYTES)
    if config_text is None and (settings or not params["nodes_path"]):
        raise ImexConfigError(
            f"{config_path} does not exist; install the nvidia-imex-<driver branch> package (it ships the file) "
            "or point config_path at it. To write only a nodes file, give nodes_path."
        )

    changes: list[FileChange] = []
    result: dict = dict(changed_keys=[])
    current_settings: dict[str, str] = {}
    if config_text is not None:
        for key in duplicate_active_keys(config_text, set(settings)):
            warnings.append(f"{config_path} sets {key} on several lines; all of them are set to {settings[key]!r}.")
        edit = edit_settings(config_text, settings, config_path)
        current_settings = parse_settings(edit.text)
        result["settings"] = current_settings
        result["changed_keys"] = edit.changed_keys
        if settings:
            changes.append(FileChange(path=config_path, before=config_text, after=edit.text))

    nodes_path = resolve_nodes_path(params["nodes_path"], settings, current_settings)
    result["nodes_path"] = nodes_path
    if nodes is not None:
        result["nodes"] = nodes
        changes.append(
            FileChange(
                path=nodes_path, before=read_text(nodes_path, max_bytes=MAX_CONFIG_BYTES), after=render_nodes(nodes)
            )
        )

    for warning in warnings:
        module.warn(warning)
    # Both files or neither: IMEX must not restart on a settings file whose nodes file was not written.
    backups = write_changes(module, changes, backup=params["backup"])
    result.update(
        changed=any(change.changed for change in changes),
        diff=[change.diff() for change in changes],
        backup_files=backups,
    )
    return result


def main() -> None:
    module = build_module()
    try:
        result = run(module)
    except (ImexConfigError, FileEditError) as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"writing the IMEX files failed: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
