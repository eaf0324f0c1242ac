#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: containerd_config
short_description: Edit containerd's config.toml in place, keeping comments, order and every other key
version_added: 0.1.0
description:
  - Sets CDI, imports, runtime entries and the default runtime in containerd's C(config.toml), editing the
    file in place with C(tomlkit) so that comments, key order, indentation, quoting style and every key it was
    not asked to change stay byte for byte as they were.
  - Finds the right tables for the file's config version. C(version = 2) (containerd 1.6 and 1.7) keeps the
    CRI settings under C([plugins."io.containerd.grpc.v1.cri"]) and the runtimes under its
    C(containerd.runtimes). C(version = 3) (containerd 2.x) keeps O(enable_cdi), O(cdi_spec_dirs) and the
    runtimes under C([plugins."io.containerd.cri.v1.runtime"]).
  - A file without a C(version) key is a version 1 file (removed in containerd 2.0) and is refused.
  - A file that is not valid TOML (a key or table defined twice included) is never written; the module fails
    naming the line and column.
  - A table may be written in any shape TOML allows, as tools write them, and is edited in that shape; its
    pieces may be out of order (k3s's generated file, a runtime appended at the end), C(options) may be an
    inline table or dotted keys (C(options.SystemdCgroup = true)), and a table implied by deeper headers gets
    its own header only when a key is added to it.
  - The new text is computed first and checked to read back with only the requested keys changed; the file is
    replaced atomically (temporary file, flushed, renamed, directory flushed) only when it differs, keeping its
    mode, owner and SELinux context. A read-only file (no write permission bit) is refused and left as it is.
    A symbolic link is kept and the file it points to is edited.
  - On config version 2, containerd 1.x merges imported files over the main file section by section. The
    module warns when an imported file defines the whole CRI plugin section (as the NVIDIA Container Toolkit's
    drop-in does), because the main file's CRI settings are then masked.
  - containerd reads its configuration at start; restart it (for example from a handler) when C(changed=true).
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff is the whole file's text before and after.
options:
  path:
    description: Path of containerd's main configuration file.
    type: path
    default: /etc/containerd/config.toml
  enable_cdi:
    description:
      - Whether the CRI plugin injects CDI devices (C(enable_cdi)). DRA drivers such as NVIDIA's need V(true).
      - The default is V(false) in containerd 1.7 and V(true) in 2.x; containerd 1.6 has no CDI support.
    type: bool
  cdi_spec_dirs:
    description:
      - Directories the CRI plugin reads CDI specifications from (C(cdi_spec_dirs)), in order.
      - containerd's default is C(/etc/cdi) and C(/var/run/cdi); the NVIDIA DRA driver writes its specs to
        C(/var/run/cdi).
    type: list
    elements: str
  imports:
    description:
      - Entries of the top-level C(imports) array (files or glob patterns of drop-in files).
      - See O(imports_state) for how they combine with the entries already in the file.
    type: list
    elements: str
  imports_state:
    description:
      - V(present) adds the entries of O(imports) that are missing, after the existing ones, and keeps the others.
      - V(exact) makes C(imports) hold exactly O(imports), in that order.
    type: str
    choices: [present, exact]
    default: present
  systemd_cgroup:
    description:
      - Whether the C(runc) runtime uses the systemd cgroup driver (C(options.SystemdCgroup)); it must match the
        kubelet's C(cgroupDriver).
      - Also applied to every runtime named in O(runtimes) whose C(runtime_type) is C(io.containerd.runc.v2) or
        C(io.containerd.runc.v1) and whose O(runtimes) entry does not set C(SystemdCgroup) itself.
      - containerd decodes the options of both runc shims as runc options, so the deprecated
        C(io.containerd.runc.v1) honours C(SystemdCgroup) too; the module sets it and warns that containerd 2.0
        removed that shim. A runtime of another shim (for example Kata) is left alone, with a warning.
    type: bool
  runtimes:
    description:
      - Runtime entries under C(containerd.runtimes), keyed by runtime (RuntimeClass handler) name.
      - Each value is a dictionary with any of C(runtime_type) (the shim, for example C(io.containerd.runc.v2)),
        C(binary_name) (sets C(options.BinaryName), for example C(/usr/bin/nvidia-container-runtime)) and
        C(options) (a dictionary of keys for the runtime's C(options) table).
      - A runtime that does not exist yet is created with C(runtime_type=io.containerd.runc.v2) unless given,
        because containerd does not merge a runtime entry with its defaults, and an entry without C(runtime_type) cannot
        start containers.
      - Keys of an existing runtime that are not given are left as they are.
    type: dict
  default_runtime_name:
    description:
      - The runtime containerd uses when a pod names no RuntimeClass (C(containerd.default_runtime_name)).
      - It must be C(runc), a runtime defined in the file, or one given in O(runtimes).
    type: str
  backup:
    description: Keep a timestamped copy of the file before changing it.
    type: bool
    default: false
  create:
    description:
      - When O(path) does not exist, write a minimal valid file (C(version = ...)) with the requested settings
        (containerd supplies every other default). When V(false), a missing file is an error.
    type: bool
    default: false
  create_version:
    description: Config version of the file written by O(create=true); V(2) for containerd 1.7, V(3) for 2.x.
    type: int
    choices: [2, 3]
    default: 2
requirements:
  - tomlkit (Python library on the managed host)
seealso:
  - name: containerd CRI plugin configuration
    description: The keys of the CRI plugin, per config version.
    link: https://github.com/containerd/containerd/blob/main/docs/cri/config.md
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Enable CDI for DRA and keep the NVIDIA toolkit's drop-in directory imported
  gpu_fabric.mnnvl.containerd_config:
    enable_cdi: true
    cdi_spec_dirs: [/etc/cdi, /var/run/cdi]
    imports: [/etc/containerd/conf.d/*.toml]
    systemd_cgroup: true
    backup: true
  notify: Restart containerd

- name: Add the nvidia runtime next to runc
  gpu_fabric.mnnvl.containerd_config:
    runtimes:
      nvidia:
        runtime_type: io.containerd.runc.v2
        binary_name: /usr/bin/nvidia-container-runtime

- name: Write a containerd 2.x config when none exists yet
  gpu_fabric.mnnvl.containerd_config:
    create: true
    create_version: 3
    enable_cdi: true
"""

RETURN = r"""
config_version:
  description: The file's containerd config version.
  returned: success
  type: int
  sample: 2
path:
  description: The file that was checked or edited.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
changed_keys:
  description: Dotted paths of the keys that were (or in check mode would be) set, in the order they were set.
  returned: success
  type: list
  elements: str
  sample:
    - plugins.io.containerd.grpc.v1.cri.enable_cdi
    - imports
backup_file:
  description: The copy of the old file, when O(backup=true) and the file changed.
  returned: changed and backup made
  type: str
  sample: /etc/containerd/config.toml.12345.2025-01-01@10:00:00~
diff:
  description: The file's text before and after, with the path as header.
  returned: success
  type: dict
  sample:
    before: "version = 2\n"
    after: "version = 2\n\n[plugins]\n..."
    before_header: /etc/containerd/config.toml
    after_header: /etc/containerd/config.toml
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_edit import edit_config
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_toml import (
    HAS_TOMLKIT,
    TOMLKIT_IMPORT_ERROR,
    ContainerdConfigError,
    ContainerdRequest,
    minimal_config,
    parse_runtimes,
)
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.files import (
    MAX_CONFIG_BYTES,
    FileChange,
    FileEditError,
    read_text,
    write_change,
)

ARGUMENT_SPEC = dict(
    path=dict(type="path", default="/etc/containerd/config.toml"),
    enable_cdi=dict(type="bool"),
    cdi_spec_dirs=dict(type="list", elements="str"),
    imports=dict(type="list", elements="str"),
    imports_state=dict(type="str", choices=["present", "exact"], default="present"),
    systemd_cgroup=dict(type="bool"),
    runtimes=dict(type="dict"),
    default_runtime_name=dict(type="str"),
    backup=dict(type="bool", default=False),
    create=dict(type="bool", default=False),
    create_version=dict(type="int", choices=[2, 3], default=2),
)


def build_module() -> AnsibleModule:
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def run(module: AnsibleModule) -> dict:
    """Compute the edit, write it when needed, and return the module's result."""
    params = module.params
    path = params["path"]
    request = ContainerdRequest(
        enable_cdi=params["enable_cdi"],
        cdi_spec_dirs=params["cdi_spec_dirs"],
        imports=params["imports"],
        imports_state=params["imports_state"],
        systemd_cgroup=params["systemd_cgroup"],
        runtimes=parse_runtimes(params["runtimes"]),
        default_runtime_name=params["default_runtime_name"],
    )
    before = read_text(path, max_bytes=MAX_CONFIG_BYTES)
    if before is None and not params["create"]:
        raise ContainerdConfigError(
            f"{path} does not exist. Install containerd (its package writes it), or set create=true "
            "to write a minimal file of config version create_version."
        )
    edited = edit_config(minimal_config(params["create_version"]) if before is None else before, path, request)
    change = FileChange(path=path, before=before, after=edited.text)
    for warning in edited.warnings:
        module.warn(warning)
    result = dict(
        changed=change.changed,
        path=path,
        config_version=edited.config_version,
        changed_keys=edited.changed_keys if change.changed else [],
        diff=change.diff(),
    )
    backup_file = write_change(module, change, backup=params["backup"], create_parents=params["create"])
    if backup_file:
        result["backup_file"] = backup_file
    return result


def main() -> None:
    module = build_module()
    if not HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=str(TOMLKIT_IMPORT_ERROR))
    try:
        result = run(module)
    except (ContainerdConfigError, FileEditError) as exc:
        module.fail_json(msg=str(exc), path=module.params["path"])
    except OSError as exc:
        module.fail_json(msg=f"writing {module.params['path']} failed: {exc}", exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
