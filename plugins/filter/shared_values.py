# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters ``k8s_auth_environment`` and ``driver_root``: what the values every role shares (the ``gpu_fabric``
role's defaults) resolve to, computed where the facts behind them live (documentation: the YAML files beside this
one). Only the standard library behind them: they run for every task of a cluster role."""

from __future__ import annotations

from typing import Any, Dict

from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import driver_owner as _driver_owner
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.k8s_auth import auth_environment


def k8s_auth_environment(kubeconfig: Any, context: Any = "") -> Dict[str, str]:
    """A kubeconfig and a context (either may be empty) -> the ``K8S_AUTH_*`` environment of those set."""
    return auth_environment(kubeconfig, context)


def driver_root(owner: Any) -> str:
    """The driver owner (operator, host) -> the root its driver lives under."""
    try:
        return _driver_owner.driver_root(str(owner))
    except ValueError as exc:
        raise AnsibleFilterError(f"driver_root: {exc}") from None


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {
            "k8s_auth_environment": k8s_auth_environment,
            "driver_root": driver_root,
        }
