#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: container_runtime_info
short_description: Tell whether a GPU host runs CRI-O (OpenShift) or containerd
version_added: 0.2.0
description:
  - Looks for CRI-O (C(/etc/crio/crio.conf), C(crio.service)) and containerd (its binary, C(containerd.service)).
  - A host with CRI-O and no containerd, or with O(openshift=true), is not one the containerd role manages -
    CRI-O's CDI support is on by default since CRI-O 1.23.
extends_documentation_fragment:
  - gpu_fabric.mnnvl.attributes
  - gpu_fabric.mnnvl.attributes.INFO_MODULE
options:
  openshift:
    description: The node is an OpenShift node (CRI-O). Unset - decided from the files found.
    type: bool
  install_method:
    description: >-
      The containerd role's install method; with V(tarball), RV(existing) says whether a package is in the
      way.
    type: str
    default: ""
  install_prefix:
    description: Where the tarball is unpacked.
    type: str
    default: /usr/local
  on_existing:
    description:
      - What to do when the tarball would be installed next to the distribution's containerd package
        (C(/usr/bin/containerd)).
      - V(fail) - say so, change nothing; V(adopt) - configure the package's containerd instead (method V(none));
        V(skip) - leave containerd alone on this host.
    type: str
    choices: [fail, adopt, skip]
    default: fail
author:
  - gpu_fabric.mnnvl contributors (@gpu-fabric)
"""

EXAMPLES = r"""
- name: Find out which runtime the node runs
  gpu_fabric.mnnvl.container_runtime_info:
    openshift: "{{ gpu_fabric_openshift | default(omit) }}"
  register: runtime
"""

RETURN = r"""
runtime:
  description: V(crio), V(containerd) or V(unknown).
  returned: always
  type: str
manage_containerd:
  description: Whether the containerd role configures this node.
  returned: always
  type: bool
crio_found:
  description: CRI-O files found.
  returned: always
  type: list
  elements: str
containerd_found:
  description: containerd files found.
  returned: always
  type: list
  elements: str
message:
  description: One line saying what was found and what the containerd role does.
  returned: always
  type: str
existing:
  description: >-
    C(action) (V(install), V(adopt), V(skip), V(fail)), C(install_method) to use from here (V(none) when adopted,
    empty when skipped), C(found) (the package's files) and C(message) (one line).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.container_runtime import decide, existing_containerd


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec=dict(
            openshift=dict(type="bool"),
            install_method=dict(type="str", default=""),
            install_prefix=dict(type="str", default="/usr/local"),
            on_existing=dict(type="str", choices=["fail", "adopt", "skip"], default="fail"),
        ),
        supports_check_mode=True,
    )


def main() -> None:
    module = build_module()
    params = module.params
    existing = existing_containerd(params["install_method"], params["install_prefix"], params["on_existing"])
    module.exit_json(changed=False, existing=existing.to_dict(), **decide(params["openshift"]).to_dict())


if __name__ == "__main__":
    main()
