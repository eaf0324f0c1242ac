# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters ``containerd_imports_report`` and ``containerd_effective``: a containerd configuration read back on
the controller with the collection's TOML reader (documentation: the YAML files beside this one)."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.containerd_readback import (
    ContainerdReadError,
    effective_cri_settings,
    imports_report,
)


def containerd_imports_report(results: Any, expected: Any, path: Any) -> Dict[str, List[str]]:
    """A looped slurp's results (one per host) -> {lost: [...], unread: [...]}, one line per host."""
    if not isinstance(results, list):
        raise AnsibleFilterError(
            f"containerd_imports_report expects the results of a looped slurp, got {type(results).__name__}"
        )
    return imports_report(results, [str(entry) for entry in expected or []], str(path)).to_dict()


def containerd_effective(dump: Any) -> Dict[str, Any]:
    """The output of ``containerd config dump`` -> {enable_cdi, cdi_spec_dirs, systemd_cgroup}."""
    try:
        return effective_cri_settings(str(dump))
    except ContainerdReadError as exc:
        raise AnsibleFilterError(f"containerd_effective: {exc}") from None


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {
            "containerd_imports_report": containerd_imports_report,
            "containerd_effective": containerd_effective,
        }
