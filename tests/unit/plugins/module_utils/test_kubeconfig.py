# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubeconfig a run connects with, and what is wrong with it in one line naming its path and the variable."""

from __future__ import annotations

from typing import List, Optional, Tuple

from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.kubeconfig import kubeconfig_problems, load_kubeconfig


def never_loaded(path: str, context: Optional[str]) -> None:
    raise AssertionError(f"{path} was loaded")


def test_a_missing_kubeconfig_names_the_path_and_the_variable(tmp_path):
    path = tmp_path / "admin.kubeconfig"
    assert kubeconfig_problems(str(path), "", {}, never_loaded) == [
        f"the kubeconfig {path} (gpu_fabric_kubeconfig) does not exist: set gpu_fabric_kubeconfig to the kubeconfig "
        "file of the cluster"
    ]
    assert kubeconfig_problems("", "", {"K8S_AUTH_KUBECONFIG": str(path)}, never_loaded) == [
        f"the kubeconfig {path} (K8S_AUTH_KUBECONFIG) does not exist: set K8S_AUTH_KUBECONFIG to the kubeconfig "
        "file of the cluster"
    ]


def test_no_kubeconfig_at_all_says_which_variable_to_set(tmp_path):
    assert kubeconfig_problems("", "", {}, never_loaded, is_file=lambda path: False) == [
        "no kubeconfig: gpu_fabric_kubeconfig and K8S_AUTH_KUBECONFIG are unset and ~/.kube/config does not exist; "
        "set gpu_fabric_kubeconfig to the kubeconfig of the cluster to verify"
    ]
    # inside a pod (the scheduled run) or with a host given, the client needs no kubeconfig
    assert kubeconfig_problems("", "", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, never_loaded) == []


def test_a_kubeconfig_that_does_not_load_names_the_path_the_variable_and_the_loaders_reason(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    assert kubeconfig_problems(str(path), "rack0", {}, load_kubeconfig) == [
        f"the kubeconfig {path} (gpu_fabric_kubeconfig) does not load: Invalid kube-config file. Expected object "
        f"with name rack0 in {path}/contexts list; give gpu_fabric_kubeconfig a kubeconfig of the cluster that has "
        "the context rack0 (gpu_fabric_kube_context)"
    ]


def test_a_kubeconfig_that_loads_passes(tmp_path):
    loaded: List[Tuple[str, Optional[str]]] = []
    path = tmp_path / "kubeconfig"
    path.write_text("")
    assert kubeconfig_problems(str(path), "rack0", {}, lambda *given: loaded.append(given)) == []
    assert loaded == [(str(path), "rack0")]
