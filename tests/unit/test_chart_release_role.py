# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster roles' chart installs are one task file: chart_release's entry point role_release.

Each role that includes it passes its name and only what no other role has; role_release reads every other
setting from the role's variable of the same meaning, so each of those names must exist in each including role.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.inventory_variables import spec_options, task_names

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
ROLE_RELEASE = ROLES / "chart_release" / "tasks" / "role_release.yml"
SPECS = yaml.safe_load((ROLES / "chart_release" / "meta" / "argument_specs.yml").read_text())["argument_specs"]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def role_release_includes() -> List[Dict[str, Any]]:
    """Every task of a role that includes chart_release's role_release entry point: (role, the include's vars)."""
    found = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in load(path) or []:
            include = task.get("ansible.builtin.include_role") or {}
            if (
                include.get("name") == "gpu_fabric.mnnvl.chart_release"
                and include.get("tasks_from") == "role_release.yml"
            ):
                found.append({"role": path.parts[-3], "vars": task.get("vars") or {}})
    return found


def role_variables(role: str) -> Set[str]:
    """The variables a role declares (argument specs), keeps in its defaults, or sets (register, set_fact)."""
    names = set(spec_options(load(ROLES / role / "meta" / "argument_specs.yml")))
    names |= set(load(ROLES / role / "defaults" / "main.yml") or {})
    for path in (ROLES / role / "tasks").glob("*.yml"):
        names |= task_names(load(path))
    return names


def read_suffixes() -> Set[str]:
    return set(re.findall(r"chart_release_role ~ '(_[a-z_]+)'", ROLE_RELEASE.read_text(encoding="utf-8")))


def test_both_cluster_charts_install_through_role_release():
    assert sorted(include["role"] for include in role_release_includes()) == ["dra_driver", "gpu_operator"]


def test_role_release_reads_the_settings_every_role_names_alike():
    assert read_suffixes() == {
        "_release_name",
        "_namespace",
        "_namespace_labels",
        "_helm_binary",
        "_mirror",
        "_chart_name",
        "_chart_version",
        "_chart_repo_url",
        "_chart_repo_username",
        "_chart_repo_password",
        "_proxy_env",
        "_upgrade_crds",
        "_effective_values",
        "_secret_values",
        "_wait_timeout",
    }


@pytest.mark.parametrize("include", role_release_includes(), ids=lambda include: include["role"])
def test_each_including_role_has_every_setting_role_release_reads(include):
    role = include["vars"]["chart_release_role"]
    assert role == include["role"]
    missing = sorted(role + suffix for suffix in read_suffixes() if role + suffix not in role_variables(role))
    assert missing == [], f"role_release reads {missing}, which the role {role} neither declares nor sets"


@pytest.mark.parametrize("include", role_release_includes(), ids=lambda include: include["role"])
def test_each_including_role_passes_only_what_the_entry_point_declares(include):
    # everything else comes from the role's own variables: a role that restated a setting would duplicate it
    assert set(include["vars"]) <= set(SPECS["role_release"]["options"])
    assert "chart_release_role" in include["vars"]
