# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""A role's Kubernetes connection as kubernetes.core's ``K8S_AUTH_*`` environment.

The cluster roles give their kubeconfig and context to every task through the environment rather than as module
options, and only the ones that are set: an option would override a play's ``module_defaults``
(``group/gpu_fabric.mnnvl.k8s``), an environment variable is only kubernetes.core's fallback. The roles build it
with the ``k8s_auth_environment`` filter, so the variable names and this rule live here once. Only the standard
library: the filter runs for every task of a cluster role.

>>> auth_environment("/etc/kube/admin.conf", "")
{'K8S_AUTH_KUBECONFIG': '/etc/kube/admin.conf'}
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

# kubernetes.core's environment fallbacks of its connection options kubeconfig and context.
AUTH_VARIABLES: Tuple[Tuple[str, str], ...] = (("kubeconfig", "K8S_AUTH_KUBECONFIG"), ("context", "K8S_AUTH_CONTEXT"))


def auth_environment(kubeconfig: Any = "", context: Any = "") -> Dict[str, str]:
    """The ``K8S_AUTH_*`` variables of the connection settings that are set (empty or None: left to kubernetes.core)."""
    given = {"kubeconfig": kubeconfig, "context": context}
    return {variable: str(given[option]) for option, variable in AUTH_VARIABLES if given[option]}
