# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The misspelled-variable rule and the early type check, on the collection's real roles and inventories."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import MagicMock

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.action.variable_check import collection_variables, validate
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import inventory_variables as iv

REPO = Path(__file__).resolve().parents[4]
FOUND = collection_variables(REPO)


def unknown(*names: str):
    return iv.unknown_variables(FOUND["known"], FOUND["prefixes"], names)


def test_the_known_names_come_from_the_specs_the_tasks_and_the_shared_variables():
    known = FOUND["known"]
    assert {"containerd_version", "dra_driver_wait_timeout", "verify_nvbandwidth_timeout", "report_formats"} <= known
    assert {"cluster_preflight_info", "gpu_operator_release", "verify_common_result"} <= known  # register/set_fact
    assert {"gpu_fabric_kubeconfig", "gpu_fabric_verify_run_id", "gpu_fabric_drain"} <= known  # shared
    assert "preflight" in FOUND["prefixes"] and "verify_nccl" in FOUND["prefixes"] and "gpu_fabric" in FOUND["prefixes"]


@pytest.mark.parametrize(
    "name,suggestion",
    [
        ("containerd_verison", "containerd_version"),  # host stage
        ("nvidia_imex_mod", "nvidia_imex_mode"),
        ("dra_driver_wait_timout", "dra_driver_wait_timeout"),  # cluster stage
        ("gpu_operator_value", "gpu_operator_values"),
        ("verify_nccl_min_busbw", "verify_nccl_min_busbw_gbps"),  # verify stage
        ("verify_nvbandwith_timeout", "verify_nvbandwidth_timeout"),  # the prefix itself misspelled
        ("gpu_fabric_kubconfig", "gpu_fabric_kubeconfig"),  # shared
    ],
)
def test_a_misspelled_variable_of_each_stage_is_reported_with_the_closest_name(name, suggestion):
    assert unknown(name) == [iv.UnknownVariable(name, suggestion)]


def test_names_that_are_not_ours_are_left_alone():
    assert (
        unknown(
            "containerd_version",  # known
            "preflight__commands",  # a role's private name
            "ansible_host",
            "inventory_hostname",
            "site_name",
            "ntp_servers",
            "verify_ssl",
        )
        == []
    )


def test_a_name_with_our_prefix_and_nothing_close_is_reported_without_a_guess():
    assert unknown("report_xyzzy_qwerty_plugh") == [iv.UnknownVariable("report_xyzzy_qwerty_plugh", None)]


def test_narrower_prefixes_still_report_the_near_misses():
    names = ["containerd_verison", "report_xyzzy_qwerty_plugh", "verify_nccl_min_busbw"]
    narrowed = iv.unknown_variables(FOUND["known"], ["containerd"], names)
    # a name far from every known one counts only with its prefix; a near miss counts anyway
    assert [u.name for u in narrowed] == ["containerd_verison", "verify_nccl_min_busbw"]


def test_the_message_names_each_variable_once_with_its_suggestion():
    message = iv.unknown_message(unknown("dra_driver_wait_timout", "containerd_verison"))
    assert message == (
        "containerd_verison (did you mean containerd_version?), dra_driver_wait_timout (did you mean "
        "dra_driver_wait_timeout?) are not variables of the gpu_fabric.mnnvl roles (misspelled in the inventory or "
        "the extra vars?); the roles' variables are listed in roles/<role>/meta/argument_specs.yml"
    )
    assert iv.unknown_message([]) == ""


@pytest.mark.parametrize("inventory", sorted((REPO / "inventories").glob("*/group_vars/*.yml")), ids=str)
def test_every_variable_of_the_shipped_inventories_is_known(inventory):
    names = list((yaml.safe_load(inventory.read_text()) or {}).keys())
    assert unknown(*names) == []


@pytest.mark.parametrize("inventory", sorted((REPO / "inventories").glob("*/group_vars/*.yml")), ids=str)
def test_every_value_of_the_shipped_inventories_has_its_type(inventory):
    given = yaml.safe_load(inventory.read_text()) or {}
    values = {name: value for name, value in given.items() if "{{" not in str(value)}  # a template: its role checks it
    assert values
    assert iv.type_problems(FOUND["options"], values, validate) == []


def test_register_and_set_fact_names_are_found_in_blocks():
    tasks = [
        {"name": "a", "ansible.builtin.command": "x", "register": "one"},
        {"block": [{"ansible.builtin.set_fact": {"two": 2, "cacheable": True}}], "rescue": [{"register": "three"}]},
    ]
    assert iv.task_names(tasks) == {"one", "two", "three"}


@pytest.mark.parametrize(
    "values,problem",
    [
        (
            {"containerd_install_method": "snap"},
            "role containerd: value of containerd_install_method must be one of: tarball, package, none, got: snap",
        ),
        (
            {"nvidia_imex_mode": "hosted"},
            "role nvidia_imex: value of nvidia_imex_mode must be one of: dra, host, got: hosted",
        ),
        (
            {"gpu_operator_values": "driver disabled"},
            "role gpu_operator: argument 'gpu_operator_values' is of type str and we were unable to convert to dict: "
            "dictionary requested, could not parse JSON or key=value",
        ),
        (
            {"verify_nccl_timeout": "soon"},
            "role verify_nccl: verify_nccl_timeout is 'soon': give a whole number",
        ),
        (
            {"report_formats": ["json", "pdf"]},
            "role report: value of report_formats must be one or more of: json, markdown, junit, html. "
            "Got no match for: pdf",
        ),
    ],
)
def test_a_wrong_type_for_any_role_is_found_before_the_role_runs(values, problem):
    assert iv.type_problems(FOUND["options"], values, validate) == [problem]


def test_a_shared_variable_that_several_roles_declare_is_reported_once():
    # declared by the gpu_fabric role, the one home of the shared values, and passed on by the roles' own variables
    # (preflight_driver_owner takes any string: host_preflight names a wrong one among its problems)
    assert iv.type_problems(FOUND["options"], {"gpu_fabric_driver_owner": "hostt"}, validate) == [
        "roles dra_driver, gpu_fabric, gpu_operator, nvidia_driver, nvidia_imex: value of gpu_fabric_driver_owner "
        "must be one of: operator, host, got: hostt"
    ]


def test_right_values_and_variables_of_no_role_pass_the_type_check():
    values = {"containerd_install_method": "package", "verify_nccl_timeout": "600", "site_name": 3}
    assert iv.type_problems(FOUND["options"], values, validate) == []


# The shared gpu_fabric_* names that are not inputs: what cluster_preflight records for the later roles (set_fact),
# what report hands to the automation (set_stats), the file name of nvidia_driver's local facts.
NOT_INPUTS = {
    "gpu_fabric_dra_api_version",
    "gpu_fabric_schedulable_control_plane",
    "gpu_fabric_verdict",
    "gpu_fabric_summary",
    "gpu_fabric_report",
    "gpu_fabric_run_id",
    "gpu_fabric_driver",
}


def test_every_shared_variable_that_the_roles_and_playbooks_read_has_a_type():
    read = {name for name in FOUND["known"] if name.startswith("gpu_fabric_")}
    assert read - set(FOUND["shared"]) == NOT_INPUTS


def test_a_shared_variable_that_no_role_declares_takes_the_type_of_the_option_its_default_feeds():
    shared = FOUND["shared"]
    assert shared["gpu_fabric_verify_parallel_racks"] == {"verify_common": {"type": "int"}}
    assert shared["gpu_fabric_trays_per_clique"] == {"verify_common": {"type": "int"}}
    # declared by the gpu_fabric role, and fed by the roles' options whose default is the shared value alone
    assert shared["gpu_fabric_gpu_tolerations"] == {
        role: {"type": "list", "elements": "dict"}
        for role in ("dra_driver", "gpu_fabric", "gpu_operator", "verify_common")
    }
    assert shared["gpu_fabric_registry"] == {
        role: {"type": "str"} for role in ("dra_driver", "gpu_fabric", "gpu_operator", "mpi_operator", "verify_common")
    }
    assert shared["gpu_fabric_verify_nccl"] == {iv.PLAYBOOKS: {"type": "bool"}}


@pytest.mark.parametrize("name", sorted(FOUND["shared"]))
def test_the_owners_of_a_shared_variable_agree_on_its_type(name):
    owners = FOUND["shared"][name]
    assert len({(spec.get("type", "str"), spec.get("elements")) for spec in owners.values()}) == 1, owners
    assert len({tuple(spec["choices"]) for spec in owners.values() if "choices" in spec}) <= 1, owners


def test_a_role_default_that_passes_a_shared_variable_on_is_found():
    defaults = {
        "verify_common_parallel_racks": "{{ gpu_fabric_verify_parallel_racks | default(8) }}",
        "dra_driver_helm_binary": "{{ cluster_preflight_helm_binary | default(gpu_fabric_helm_binary) }}",
        "verify_common_timeout": 600,
    }
    assert iv.passed_on(defaults) == {"verify_common_parallel_racks": "gpu_fabric_verify_parallel_racks"}
    assert iv.passed_on({"dra_driver_registry": "{{ gpu_fabric_registry }}"}) == {
        "dra_driver_registry": "gpu_fabric_registry"
    }
    assert iv.passed_on({"x_release": "{{ gpu_fabric_release.dra_driver_image }}"}) == {}


@pytest.mark.parametrize(
    "values,problem",
    [
        (
            {"gpu_fabric_verify_parallel_racks": "eight"},
            "role verify_common: gpu_fabric_verify_parallel_racks is 'eight': give a whole number of racks",
        ),
        (
            {"gpu_fabric_verify_cliques": {"rack-a": 1}},
            "role verify_common: argument 'gpu_fabric_verify_cliques' is of type dict and we were unable to convert "
            "to list: <class 'dict'> cannot be converted to a list",
        ),
        (
            {"gpu_fabric_gpu_tolerations": "all"},
            "roles dra_driver, gpu_fabric, gpu_operator, verify_common: Elements value for option "
            "'gpu_fabric_gpu_tolerations' is of type str and we were unable to convert to dict: dictionary requested, "
            "could not parse JSON or key=value",
        ),
    ],
)
def test_a_wrong_type_in_a_shared_variable_is_named_as_the_user_wrote_it(values, problem):
    assert iv.type_problems(FOUND["options"], values, validate) == [problem]


def test_a_word_given_to_a_number_is_said_in_words_naming_the_unit():
    assert iv.type_problems(FOUND["options"], {"gpu_fabric_verify_valid_hours": "week"}, validate) == [
        "role report: gpu_fabric_verify_valid_hours is 'week': give a number of hours"
    ]
    assert iv.type_problems(FOUND["options"], {"gpu_fabric_verify_parallel_racks": "eight"}, validate) == [
        "role verify_common: gpu_fabric_verify_parallel_racks is 'eight': give a whole number of racks"
    ]
    # a number written as a string is one
    assert iv.type_problems(FOUND["options"], {"gpu_fabric_verify_valid_hours": "72.5"}, validate) == []


def test_a_playbook_variable_of_the_wrong_type_names_the_playbooks():
    [problem] = iv.type_problems(FOUND["options"], {"gpu_fabric_verify_nccl": "maybe"}, validate)
    assert problem.startswith(
        "the playbooks: argument 'gpu_fabric_verify_nccl' is of type str and we were unable to convert to bool: "
        "The value 'maybe' is not a valid boolean."
    )


def test_only_the_values_that_are_not_a_role_default_count_as_set():
    defaults = {"dra_driver_driver_owner": "{{ gpu_fabric_driver_owner | default('operator') }}"}
    raw = {"dra_driver_driver_owner": "{{ gpu_fabric_driver_owner | default('operator') }}", "gpu_fabric_x": 1}
    assert iv.set_by_user(raw, defaults) == ["gpu_fabric_x"]
    assert iv.set_by_user({"dra_driver_driver_owner": "host"}, defaults) == ["dra_driver_driver_owner"]


def run_check(**user_vars):
    """The action plugin as a play runs it: every role's defaults among the variables (as the play's roles put
    them there), then the user's, templated by Ansible's own Templar."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible_collections.gpu_fabric.mnnvl.plugins.action.variable_check import ActionModule

    try:  # ansible-core 2.19 templates only what is trusted, as the role defaults are
        from ansible.template import trust_as_template
    except ImportError:  # older ones template every string
        trust_as_template = str

    task_vars = {
        name: trust_as_template(value) if isinstance(value, str) else value for name, value in FOUND["defaults"].items()
    }
    task_vars.update(user_vars, inventory_hostname="localhost", hostvars={})
    task = MagicMock(args={"fail_on_problems": True}, async_val=0)
    loader = DataLoader()
    action = ActionModule(task, MagicMock(), MagicMock(), loader, Templar(loader=loader, variables=task_vars), None)
    return action.run(task_vars=task_vars)


def test_one_bad_value_of_a_shared_variable_is_one_message_for_the_variable_set():
    result = run_check(gpu_fabric_driver_owner="bogus")
    assert result["failed"] is True
    assert result["problems"] == [
        "roles dra_driver, gpu_fabric, gpu_operator, nvidia_driver, nvidia_imex: value of gpu_fabric_driver_owner "
        "must be one of: operator, host, got: bogus"
    ]
    assert result["msg"] == result["problems"][0]


def test_a_wrong_type_in_a_shared_variable_fails_the_check_in_one_line():
    result = run_check(gpu_fabric_verify_parallel_racks="eight")
    assert result["failed"] is True
    assert result["msg"] == (
        "role verify_common: gpu_fabric_verify_parallel_racks is 'eight': give a whole number of racks"
    )


def test_a_role_variable_the_user_set_is_still_checked_under_its_own_name():
    result = run_check(gpu_fabric_driver_owner="host", dra_driver_driver_owner="hostt")
    assert result["problems"] == [
        "role dra_driver: value of dra_driver_driver_owner must be one of: operator, host, got: hostt"
    ]


def test_the_roles_defaults_alone_pass_the_check():
    result = run_check()
    assert "failed" not in result and result["problems"] == []


def test_a_choice_given_as_the_number_yaml_made_of_it_says_to_quote_it():
    option = {"type": "str", "choices": ["26.7", "25.10"]}
    assert iv.choice_problem("gpu_fabric_release_set", option, 25.1) == (
        "value of gpu_fabric_release_set must be one of: 26.7, 25.10, got: 25.1; YAML reads an unquoted 25.10 as the "
        "number 25.1: quote it ('25.10')"
    )
    assert iv.choice_problem("gpu_fabric_release_set", option, "26.3") == ""  # Ansible's own message says it
    assert iv.choice_problem("gpu_fabric_release_set", option, "25.10") == ""
