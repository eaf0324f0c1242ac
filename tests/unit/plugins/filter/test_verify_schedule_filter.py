# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The verify_schedule_objects filter: the role's settings as Ansible hands them over, errors in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible.parsing.utils.yaml import from_yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.verify_schedule import FilterModule, verify_schedule_objects

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
    assert FilterModule().filters() == {"verify_schedule_objects": verify_schedule_objects}


def test_a_schedule_without_an_image_fails_in_one_line_naming_the_variable():
    with pytest.raises(AnsibleFilterError, match=r"^verify_schedule_objects: verify_schedule_image is empty"):
        verify_schedule_objects({"image": ""}, RBAC_TEXT)
