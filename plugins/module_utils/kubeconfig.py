# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The kubeconfig a run connects with, found as kubernetes.core finds it, and what is wrong with it in one line
naming its path and the variable that sets it (the verify preflight's, and any module whose client could not be
made: the client's own "Invalid kube-config file. No configuration found." names neither)."""

from __future__ import annotations

import os
from typing import Any, Callable, List, Mapping, Optional

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.text import one_line

KUBECONFIG_VARIABLE = "gpu_fabric_kubeconfig"
KUBECONFIG_ENVIRONMENT = "K8S_AUTH_KUBECONFIG"
# Where kubernetes.core finds a cluster without a kubeconfig: its host option's environment, or inside a pod.
NO_KUBECONFIG_NEEDED = ("K8S_AUTH_HOST", "KUBERNETES_SERVICE_HOST")
DEFAULT_KUBECONFIG = "~/.kube/config"


def kubeconfig_problems(
    kubeconfig: str,
    context: str,
    environ: Mapping[str, str],
    load: Callable[[str, Optional[str]], Any],
    is_file: Callable[[str], bool] = os.path.isfile,
) -> List[str]:
    """The kubeconfig the checks will connect with: ``kubeconfig`` (gpu_fabric_kubeconfig), else the environment's
    K8S_AUTH_KUBECONFIG, else kubernetes.core's defaults (KUBECONFIG, ~/.kube/config; none needed inside a pod or
    with K8S_AUTH_HOST). It must exist and ``load(path, context)`` (the Kubernetes client's loader) must take it."""
    if kubeconfig:
        path, variable = kubeconfig, KUBECONFIG_VARIABLE
    elif environ.get(KUBECONFIG_ENVIRONMENT):
        path, variable = environ[KUBECONFIG_ENVIRONMENT], KUBECONFIG_ENVIRONMENT
    elif any(environ.get(name) for name in NO_KUBECONFIG_NEEDED):
        return []
    else:
        path = (environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or DEFAULT_KUBECONFIG
        variable = "KUBECONFIG" if environ.get("KUBECONFIG") else ""
        if not is_file(os.path.expanduser(path)):
            return [
                f"no kubeconfig: {KUBECONFIG_VARIABLE} and {KUBECONFIG_ENVIRONMENT} are unset and {path} does not "
                f"exist; set {KUBECONFIG_VARIABLE} to the kubeconfig of the cluster to verify"
            ]
    named = f"the kubeconfig {path}" + (f" ({variable})" if variable else "")
    if not is_file(os.path.expanduser(path)):
        return [f"{named} does not exist: set {variable or KUBECONFIG_VARIABLE} to the kubeconfig file of the cluster"]
    try:
        load(os.path.expanduser(path), context or None)
    except Exception as exc:  # the client's loader raises its ConfigException, YAML and OS errors alike
        return [
            f"{named} does not load: {one_line(exc, 300)}; give {variable or KUBECONFIG_VARIABLE} a kubeconfig of "
            "the cluster" + (f" that has the context {context} (gpu_fabric_kube_context)" if context else "")
        ]
    return []


def kubeconfig_path(kubeconfig: str, environ: Mapping[str, str]) -> str:
    """The kubeconfig the checks connect with (as :func:`kubeconfig_problems` finds it); '' without one."""
    if kubeconfig:
        return kubeconfig
    if environ.get(KUBECONFIG_ENVIRONMENT):
        return environ[KUBECONFIG_ENVIRONMENT]
    if any(environ.get(name) for name in NO_KUBECONFIG_NEEDED):
        return ""
    return (environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or DEFAULT_KUBECONFIG


def load_kubeconfig(path: str, context: Optional[str]) -> None:
    """Load ``path`` (and ``context``) as the Kubernetes client does, into a configuration of its own."""
    from kubernetes.client import Configuration
    from kubernetes.config import load_kube_config

    load_kube_config(config_file=path, context=context, client_configuration=Configuration())
