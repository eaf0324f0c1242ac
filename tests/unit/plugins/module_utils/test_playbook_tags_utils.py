# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbook_tags: the playbooks' tags in one list, a tag that selects nothing named, the host stage by the tags, and
the trays' variable problems each said once. What --list-tags shows: tests/unit/test_playbook_tags.py."""

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import playbook_tags as pt


def test_every_check_of_the_registry_is_a_tag_once():
    tags = pt.playbook_tags()
    assert len(tags) == len(set(tags))
    assert set(checks.names()) <= set(tags)
    assert {"gpu_health", "dcgm_diag"} <= set(pt.check_tags())


def test_a_misspelled_tag_is_one_line_with_the_nearest_tag():
    assert pt.tag_problems(["nvbandwidth", "verify", "all"], ["never"]) == []
    [line] = pt.tag_problems(["nvbandwith"], [])
    assert line.startswith(
        "--tags names 'nvbandwith', which no task of the gpu_fabric.mnnvl playbooks has, so it selects nothing (did "
        "you mean nvbandwidth?); the tags are hosts, preflight, "
    )
    assert line.endswith(", gpu_health, dcgm_diag, schedule, verify_schedule, refresh_state, uninstall")
    [line] = pt.tag_problems([], ["gpu_helth", "gpu_helth"])
    assert line.startswith("--skip-tags names 'gpu_helth', which no task of the gpu_fabric.mnnvl playbooks has, so it ")
    assert "(did you mean gpu_health?)" in line
    [line] = pt.tag_problems(["zzz"], [])
    assert "selects nothing; the tags are" in line


@pytest.mark.parametrize(
    ("run_tags", "skip_tags", "selected"),
    [
        ([], [], True),
        (["all"], [], True),
        (["tagged"], [], True),
        (["hosts"], [], True),
        (["containerd"], [], True),
        (["cluster"], [], False),
        (["nvbandwidth"], [], False),
        (["verify", "gpus"], [], False),
        ([], ["hosts"], False),
        ([], ["preflight", "nvidia_driver", "containerd", "nvidia_imex"], False),
        ([], ["preflight"], True),
        (["containerd"], ["containerd"], False),
        (["cluster", "nvidia_imex"], [], True),
        (["site_gpu_hosts"], [], True),  # a site's own tag on the play that imports hosts.yml selects it whole
        (["site_gpu_hosts"], ["hosts"], False),
        (["untagged", "cluster"], [], False),
    ],
)
def test_the_host_stage_runs_only_for_its_tags(run_tags, skip_tags, selected):
    assert pt.host_stage_selected(run_tags, skip_tags) is selected


def test_a_problem_of_every_tray_is_said_once_and_a_trays_own_names_it():
    found = {"tray1": ["group typo", "tray1 typo"], "tray2": ["group typo"], "tray3": ["group typo"]}
    assert pt.once_per_fleet(found) == ["group typo", "tray1 typo (on tray1)"]
    assert pt.once_per_fleet({"tray1": [], "tray2": []}) == []


def test_molecules_own_skip_tags_are_taken_but_not_as_tags_to_run():
    """Molecule runs every playbook with --skip-tags molecule-notest,notest (and molecule-idempotence-notest)."""
    assert pt.tag_problems([], ["molecule-notest", "notest", "molecule-idempotence-notest"]) == []
    (problem,) = pt.tag_problems(["notest"], [])
    assert problem.startswith("--tags names 'notest', which no task of the gpu_fabric.mnnvl playbooks has")
    assert pt.tag_problems([], ["notest", "nvbandwith"])[0].startswith("--skip-tags names 'nvbandwith'")
