# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import check_catalog, checks


@pytest.mark.parametrize(
    "value, names",
    [
        ("gpu_health", ["gpu_health"]),
        ("gpu_health, dcgm_diag", ["gpu_health", "dcgm_diag"]),
        (["dcgm_diag"], ["dcgm_diag"]),
        ("", []),
        (None, []),
    ],
)
def test_a_string_of_checks_is_one_name_or_a_comma_separated_list(value, names):
    assert check_catalog.check_names(value) == names


SITE = ["nvbandwidth"]  # a check the site enables (the generic role leaves the four with roles of their own)
OWN = ("cliques", "imex_channel", "nvbandwidth", "nccl")


@pytest.mark.parametrize(
    ("run_tags", "skip_tags", "enabled", "own", "wanted"),
    [
        ([], [], [], (), []),  # nothing enabled, no tag: nothing
        (["all"], [], ["nccl", "cliques"], (), ["cliques", "nccl"]),  # the registry's order
        (["verify"], [], ["nccl"], (), ["nccl"]),
        (["nvbandwidth"], [], ["nccl"], (), ["nvbandwidth"]),  # narrowed to another check: not the enabled one
        (["nccl"], [], [], (), ["nccl"]),  # named in --tags: runs without being enabled
        (["all"], ["nccl"], ["nccl"], (), []),  # --skip-tags wins
        (["all"], [], SITE, OWN, []),  # a check with a role of its own is that role's
        (["report"], [], ["nccl"], (), []),
    ],
)
def test_the_checks_a_run_selects(run_tags, skip_tags, enabled, own, wanted):
    assert check_catalog.selected(run_tags, skip_tags, enabled, own) == wanted


def test_an_enabled_name_that_is_no_check_is_named():
    with pytest.raises(ValueError, match=r"^gpu_fabric_verify_checks names dcgm, which is no check; the checks are "):
        check_catalog.selected([], [], ["dcgm"], ())


def test_the_catalog_that_the_record_readers_use_is_a_leaf_naming_the_registrys_checks_in_its_order():
    source = Path(check_catalog.__file__).read_text(encoding="utf-8")
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations", "from typing import Any, List, Sequence, Tuple"]
    assert checks.names() == check_catalog.CHECK_NAMES
    assert sorted(["nccl", "retired_check", "cliques"], key=check_catalog.check_key) == [
        "cliques",
        "nccl",
        "retired_check",
    ]


def test_the_checks_with_roles_of_their_own_are_the_catalogs_and_the_roles_default():
    defaults = yaml.safe_load((Path(checks.__file__).parents[3] / "roles/verify_checks/defaults/main.yml").read_text())
    assert list(check_catalog.OWN_ROLE_CHECKS) == defaults["verify_checks_own_roles"]
    assert set(check_catalog.OWN_ROLE_CHECKS) <= set(check_catalog.CHECK_NAMES)


@pytest.mark.parametrize(
    ("run_tags", "skip_tags", "enabled", "nccl", "expected"),
    [
        ([], [], [], False, ["cliques", "imex_channel", "nvbandwidth"]),
        (["all"], [], "gpu_health", True, ["cliques", "imex_channel", "nvbandwidth", "nccl", "gpu_health"]),
        (["verify"], ["imex_channel"], ["dcgm_diag", "gpu_helth"], False, ["cliques", "nvbandwidth", "dcgm_diag"]),
        (["nvbandwidth"], [], ["gpu_health"], False, ["nvbandwidth"]),
        (["verify_cliques", "dcgm_diag"], [], [], False, ["cliques", "dcgm_diag"]),
        (["nccl"], [], [], False, []),
        (["verify"], ["verify_nvbandwidth", "cliques"], [], False, ["imex_channel"]),
        # the generic role's own tag runs the checks the site enables there, and no other
        (["verify_checks"], [], ["gpu_health", "cliques"], True, ["gpu_health"]),
        ([], ["verify_checks"], ["gpu_health"], False, ["cliques", "imex_channel", "nvbandwidth"]),
        # a tag of another stage verifies nothing: the run has no report to write
        (["cluster"], [], ["gpu_health"], True, []),
        (["verify_checks"], [], [], False, []),
    ],
)
def test_the_checks_a_verify_run_runs(run_tags, skip_tags, enabled, nccl, expected):
    assert check_catalog.run_checks(run_tags, skip_tags, enabled, nccl) == expected
