# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verify_schedule_objects filter: the role's settings as Ansible hands them over, errors in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.utils.yaml import from_yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.verify_schedule import (
    FilterModule,
    verify_schedule_objects,
    verify_schedule_problems,
    verify_schedule_site_vars,
)
from jinja2 import Undefined

RBAC_TEXT = (Path(__file__).resolve().parents[4] / "docs" / "rbac" / "verify-stage.yaml").read_text()


class Tagged(str):
    """A string as Ansible's templating hands it over (a str subclass the YAML dumper does not know)."""


def test_values_of_ansible_s_own_string_types_reach_the_inventory_as_plain_values():
    objects = verify_schedule_objects(
        {"image": Tagged("ee:1"), "verify_vars": {Tagged("gpu_fabric_rack_label"): Tagged("gpu-fabric.sim/rack")}},
        RBAC_TEXT,
    )
    inventory = from_yaml(objects["schedule"][0]["data"]["inventory.yml"])  # as Ansible reads it: !unsafe too
    assert inventory["all"]["vars"]["gpu_fabric_rack_label"] == "gpu-fabric.sim/rack"
    assert FilterModule().filters() == {
        "verify_schedule_objects": verify_schedule_objects,
        "verify_schedule_problems": verify_schedule_problems,
        "verify_schedule_site_vars": verify_schedule_site_vars,
    }


def test_a_schedule_without_an_image_fails_in_one_line_naming_the_variable():
    with pytest.raises(AnsibleFilterError, match=r"^verify_schedule_objects: verify_schedule_image is empty"):
        verify_schedule_objects({"image": ""}, RBAC_TEXT)


class HostVars(dict):
    """A host's variables as Ansible hands them over: each value read is templated then; ``read`` lists them."""

    def __init__(self, values):
        super().__init__(values)
        self.read = []

    def __getitem__(self, name):
        self.read.append(name)
        return super().__getitem__(name)


def test_site_vars_reads_only_the_verify_variables_and_gives_plain_values():
    host = HostVars(
        {
            "gpu_fabric_racks": {Tagged("rack-a"): [Tagged("t0")]},
            "verify_nvbandwidth_image": Tagged("registry.example.com/nvbandwidth:v0.7"),
            "gpu_fabric_kubeconfig": "/home/admin/.kube/config",
            "site_secret": Undefined(name="vault_token"),
        }
    )
    values = verify_schedule_site_vars(host)
    assert values == {
        "gpu_fabric_racks": {"rack-a": ["t0"]},
        "verify_nvbandwidth_image": "registry.example.com/nvbandwidth:v0.7",
    }
    assert values["verify_nvbandwidth_image"].__class__ is str  # not a tagged subclass
    assert sorted(host.read) == ["gpu_fabric_racks", "verify_nvbandwidth_image"]


def test_a_verify_variable_that_cannot_be_resolved_fails_in_one_line_naming_it():
    with pytest.raises(AnsibleFilterError) as caught:
        verify_schedule_site_vars(HostVars({"verify_imex_channel_image": Undefined(name="site_registry")}))
    assert str(caught.value) == (
        "verify_schedule_site_vars: the site's verify_imex_channel_image cannot be resolved where the schedule is "
        "applied ('site_registry' is undefined); give it a value there, or set it in verify_schedule_verify_vars"
    )


def test_the_refresh_schedule_as_ansible_hands_it_over_reaches_the_refresh_cronjob_as_plain_text():
    objects = verify_schedule_objects(
        {"image": "ee:1", "node_verdict_rbac": True, "refresh_schedule": Tagged("*/30 * * * *")}, RBAC_TEXT
    )
    (refresh,) = objects["refresh"]
    assert refresh["spec"]["schedule"] == "*/30 * * * *" and refresh["spec"]["schedule"].__class__ is str
    assert objects["removed"] == []


def test_a_refresh_schedule_that_is_no_cron_text_fails_in_one_line_naming_the_variable():
    with pytest.raises(AnsibleFilterError) as caught:
        verify_schedule_objects({"image": "ee:1", "refresh_schedule": True}, RBAC_TEXT)
    assert str(caught.value) == (
        "verify_schedule_objects: verify_schedule_refresh_schedule is True: give a cron schedule such as "
        "'0 * * * *', or '' (or false) for no refresh job"
    )


def test_the_problems_are_the_objects_line_without_the_filter_s_name_and_empty_when_they_can_be_made():
    assert verify_schedule_problems({"image": "ee:1"}, RBAC_TEXT) == ""
    assert verify_schedule_problems({"image": "ee:1", "extra_args": [""]}, RBAC_TEXT) == (
        "verify_schedule_extra_args holds an empty argument"
    )
    with pytest.raises(AnsibleFilterError, match=r"^verify_schedule_objects: verify_schedule_extra_args holds"):
        verify_schedule_objects({"image": "ee:1", "extra_args": [""]}, RBAC_TEXT)
