# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The roles of the checks that have roles of their own (verify_cliques, verify_nvbandwidth, ...) restate their
check's defaults: a site's run takes the role's value, the module's tests the check's. Each value the role
restates is held here to the check's, and the role's argument spec to its defaults, so that changing one of them
alone fails a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import bandwidth_thresholds, check_catalog, checks

REPO_ROOT = Path(__file__).resolve().parents[2]
# the check options whose spec default is None because the module_utils compute it; the value they stand for
COMPUTED = {
    ("nvbandwidth", "min_fraction_of_median"): bandwidth_thresholds.DEFAULT_MIN_FRACTION_OF_MEDIAN,
}


def role_file(check: str, path: str) -> Dict[str, Any]:
    return yaml.safe_load((REPO_ROOT / "roles" / f"verify_{check}" / path).read_text(encoding="utf-8")) or {}


def restated() -> List[Tuple[str, str, Any]]:
    """(check, option, the check's default) for every option of a check's own group that its role restates."""
    found = []
    for check in check_catalog.OWN_ROLE_CHECKS:
        spec = checks.get(check).options.get(check, {}).get("options") or {}
        defaults = role_file(check, "defaults/main.yml")
        for option, option_spec in spec.items():
            if f"verify_{check}_{option}" in defaults:
                found.append((check, option, COMPUTED.get((check, option), option_spec.get("default"))))
    return found


def test_the_roles_restate_options_of_their_checks():
    options = {(check, option) for check, option, _default in restated()}
    assert {("nvbandwidth", "min_fraction_of_peak"), ("nvbandwidth", "min_fraction_of_median")} <= options
    assert ("imex_channel", "image") in options and ("nccl", "min_fraction_of_peak") in options


@pytest.mark.parametrize(("check", "option", "default"), restated(), ids=str)
def test_a_roles_default_is_its_checks_default(check, option, default):
    assert role_file(check, "defaults/main.yml")[f"verify_{check}_{option}"] == default


@pytest.mark.parametrize("check", check_catalog.OWN_ROLE_CHECKS)
def test_a_roles_argument_spec_says_the_defaults_it_has(check):
    defaults = role_file(check, "defaults/main.yml")
    spec = role_file(check, "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    said = {name: option["default"] for name, option in spec.items() if "default" in option}
    assert said == {name: defaults[name] for name in said}
