#!/usr/bin/python
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_release_settle
short_description: Wait out or repair a Helm release left pending by an interrupted operation
version_added: 0.2.0
description:
  - Run before C(kubernetes.core.helm) installs or upgrades a release; M(gpu_fabric.mnnvl.chart_release) runs the same
    check itself. Reads C(helm history) of the release.
  - Nothing pending (or no release yet) - nothing to do.
  - The latest revision C(pending-install), C(pending-upgrade) or C(pending-rollback) for less than
    O(stale_after) seconds - another Helm operation is live (another run of the stage); waits until it ends.
  - Pending for longer - the Helm client that started it is gone (a cancelled play, a lost session); rolls back to
    the last C(deployed) or C(superseded) revision, or uninstalls a release that never had one, so that the install
    can run. Without this, every later run fails with Helm's "another operation (install/upgrade/rollback) is in
    progress".
  - What it waited for or repaired is also printed as a warning.
  - Check mode says what it would do and does nothing.
author: gpu_fabric.mnnvl contributors (@gpu-fabric)
options:
  name:
    description: Release name.
    type: str
    required: true
  namespace:
    description: Release namespace.
    type: str
    required: true
  stale_after:
    description:
      - Seconds after which a pending revision is taken as interrupted. Use the install's own wait timeout plus a
        margin; a live Helm client gives up by its timeout.
    type: int
    default: 660
  poll_delay:
    description: Seconds between two reads while another operation runs.
    type: float
    default: 5
  binary_path:
    description: The Helm binary.
    type: path
    default: helm
  kubeconfig:
    description: Kubeconfig file for Helm; default the C(K8S_AUTH_KUBECONFIG) environment variable, then Helm's own.
    type: path
  context:
    description: Kubeconfig context; default the C(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - The API server URL (C(--kube-apiserver)); default the C(K8S_AUTH_HOST) environment variable.
      - With O(api_key), O(validate_certs) and O(ca_cert) as kubernetes.core.helm takes them, so one
        C(module_defaults) group (C(group/gpu_fabric.mnnvl.k8s)) sets the connection of both.
    type: str
  api_key:
    description: Bearer token, handed to Helm in its environment (C(HELM_KUBETOKEN)), never on its command line;
      default the C(K8S_AUTH_API_KEY) environment variable.
    type: str
  validate_certs:
    description: Whether to verify the API server's certificate (C(--kube-insecure-skip-tls-verify) when false).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: CA bundle of the API server (C(--kube-ca-file)); default the C(K8S_AUTH_SSL_CA_CERT) variable.
    type: path
    aliases: [ssl_ca_cert]
"""

EXAMPLES = r"""
- name: Settle a release that an interrupted run left pending
  gpu_fabric.mnnvl.helm_release_settle:
    name: gpu-operator
    namespace: gpu-operator
    stale_after: 660
"""

RETURN = r"""
action:
  description: C(none), C(waited), C(rollback) or C(uninstall).
  returned: always
  type: str
revisions:
  description: The last revisions read (number, status, chart).
  returned: always
  type: list
  elements: dict
msg:
  description: What was found and done, one line.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule, env_fallback
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import helm_release


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            stale_after=dict(type="int", default=660),
            poll_delay=dict(type="float", default=5.0),
            binary_path=dict(type="path", default="helm"),
            kubeconfig=dict(type="path"),
            context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
            host=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_HOST"])),
            api_key=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_API_KEY"])),
            validate_certs=dict(type="bool", aliases=["verify_ssl"]),
            ca_cert=dict(type="path", aliases=["ssl_ca_cert"], fallback=(env_fallback, ["K8S_AUTH_SSL_CA_CERT"])),
        ),
        supports_check_mode=True,
    )
    p = module.params
    flags, env = helm_release.helm_connection(p, os.environ)
    base = [p["binary_path"], *flags]

    def helm(*args: str):
        return module.run_command([*base, *args, "--namespace", p["namespace"]], environ_update=env)

    try:
        done = helm_release.settle(
            helm, p["name"], f"{p['namespace']}/{p['name']}", p["stale_after"], p["poll_delay"], module.check_mode
        )
    except helm_release.SettleError as exc:
        module.fail_json(msg=str(exc))
    for warning in done.warnings:
        module.warn(warning)
    module.exit_json(changed=done.changed, action=done.action, revisions=done.revisions, msg=done.msg)


if __name__ == "__main__":
    main()
