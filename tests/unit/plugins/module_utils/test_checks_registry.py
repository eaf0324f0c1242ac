# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry of checks is what the module, its documentation and the report know of the checks."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import checks, report_model
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.checks import base
from ansible_collections.gpu_fabric.mnnvl.plugins.modules import fabric_verify

DOC = yaml.safe_load(fabric_verify.DOCUMENTATION)["options"]


def test_the_registry_lists_every_check_file_of_the_folder_in_the_reports_order():
    files = sorted(
        m.name
        for m in pkgutil.iter_modules(checks.__path__)
        if hasattr(importlib.import_module(f"{checks.__name__}.{m.name}"), "CHECK")
    )
    assert sorted(checks.names()) == files
    assert checks.names()[:4] == ("cliques", "imex_channel", "nvbandwidth", "nccl")
    assert checks.names() == report_model.CHECK_ORDER


@pytest.mark.parametrize("name", checks.names())
def test_each_check_declares_what_it_is(name):
    check = checks.get(name)
    assert issubclass(check, base.Check) and check.name == name
    assert check.from_params.__func__ is not base.Check.from_params.__func__, "made from the module's parameters"
    assert (check.read_racks is not base.Check.read_racks) == check.reads_only
    if not check.reads_only:
        assert check.measure is not base.Check.measure


def test_an_unknown_check_is_named_with_the_known_ones():
    with pytest.raises(
        ValueError, match=r"^no check is called 'dcgm': the checks are cliques, imex_channel, nvbandwidth, nccl, "
    ):
        checks.get("dcgm")


def test_the_modules_choices_and_check_options_are_the_registrys_and_its_documentation_agrees():
    assert "choices" not in fabric_verify.ARGUMENT_SPEC["check"] and "choices" not in DOC["check"]
    described = " ".join(DOC["check"]["description"])
    assert all(f"V({name})" in described for name in checks.names()), "the documentation names every check"
    for group, spec in checks.option_specs().items():
        if group not in fabric_verify.NAMED_GROUPS:
            assert group not in DOC, f"{group} is given in settings only"
            continue
        assert fabric_verify.ARGUMENT_SPEC[group] is spec
        documented = DOC[group]["suboptions"]
        assert sorted(documented) == sorted(spec["options"]), group
        for option, declared in spec["options"].items():
            assert documented[option].get("default") == declared.get("default"), f"{group}.{option}"
            assert documented[option]["type"] == declared["type"], f"{group}.{option}"


def test_a_group_two_checks_read_is_declared_once(monkeypatch):
    class Other(base.Check):
        name = "other"
        options = {"mpi": dict(type="dict", default={}, options={})}

    monkeypatch.setitem(checks.REGISTRY, "other", Other)
    with pytest.raises(ValueError, match="the option group mpi of check other differs from another check's"):
        checks.option_specs()


def test_the_images_of_every_check_that_names_one_go_to_the_mirror():
    assert checks.image_groups()[:3] == ("imex_channel", "nvbandwidth", "nccl")
    assert "gpu_health" in checks.image_groups()


def test_settings_give_a_group_by_name_and_a_group_neither_gives_is_the_checks_defaults():
    merged = checks.with_settings({"settings": {"imex_channel": {"image": "busybox:1"}}, "nvbandwidth": None})
    assert merged["imex_channel"] == {"image": "busybox:1", "run_as_user": 65534}
    assert merged["nvbandwidth"]["min_fraction_of_peak"] == 0.85 and merged["mpi"]["run_as_user"] == 1000


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"dcgm": {}},
            r"^settings: no check has an option group called dcgm; the groups are dcgm_diag, gpu_health, imex_channel",
        ),
        ({"imex_channel": {"imgae": "x"}}, r"^settings.imex_channel: .*imgae"),
        ({"mpi": {"run_as_user": "root"}}, r"^settings.mpi: .*run_as_user"),
    ],
)
def test_a_group_or_option_no_check_declares_is_named(settings, message):
    with pytest.raises(ValueError, match=message):
        checks.with_settings({"settings": settings})
