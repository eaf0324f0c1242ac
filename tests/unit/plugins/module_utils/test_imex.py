# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils.imex import (
    DEFAULT_NODES_PATH,
    KNOWN_KEYS,
    ImexConfigError,
    SettingsEdit,
    duplicate_active_keys,
    edit_settings,
    imex_driver_mismatch,
    loaded_driver_version,
    parse_settings,
    render_nodes,
    resolve_nodes_path,
    upstream_version,
    validate_nodes,
    validate_settings,
)

from tests.conftest import FIXTURES

REAL_CONFIG = (FIXTURES / "imex" / "config-580.178.04.cfg").read_text(encoding="utf-8")


def test_real_config_settings_are_read():
    settings = parse_settings(REAL_CONFIG)
    assert len(settings) == 37
    assert set(settings) == KNOWN_KEYS
    assert settings["SERVER_PORT"] == "50000"
    assert settings["IMEX_NODE_CONFIG_FILE"] == "/etc/nvidia-imex/nodes_config.cfg"
    assert settings["IMEX_CMD_PORT"] == "50005"
    assert settings["BIND_INTERFACE_IP"] == ""
    assert settings["IMEX_GSS_TIMEOUT_SEC"] == "-1"
    # "IMEX_SPIFFE_AUTHORIZED_PRINCIPALS=spiffe://..." inside a comment is not a setting
    assert settings["IMEX_SPIFFE_AUTHORIZED_PRINCIPALS"] == ""


def test_changing_one_key_changes_only_its_line():
    edit = edit_settings(REAL_CONFIG, {"SERVER_PORT": "50010"})
    assert edit.changed_keys == ["SERVER_PORT"]
    assert edit.text == REAL_CONFIG.replace("\nSERVER_PORT=50000\n", "\nSERVER_PORT=50010\n")
    # the real file's whitespace-only lines (" ", "  ", ...) are still there
    assert "\n     \n" in edit.text
    assert len(edit.text.splitlines()) == len(REAL_CONFIG.splitlines())


def test_values_already_set_change_nothing():
    edit = edit_settings(REAL_CONFIG, {"SERVER_PORT": "50000", "BIND_INTERFACE_IP": ""})
    assert edit.text == REAL_CONFIG
    assert edit.changed_keys == []


def test_absent_key_is_appended_at_the_end():
    before = REAL_CONFIG.replace("NETWORK_INTERFACE=\n", "", 1)
    assert "\nNETWORK_INTERFACE=" not in before
    edit = edit_settings(before, {"NETWORK_INTERFACE": "enP5p9s0"})
    assert edit.text == before + "NETWORK_INTERFACE=enP5p9s0\n"
    assert edit.changed_keys == ["NETWORK_INTERFACE"]


def test_absent_key_with_a_commented_default_goes_right_after_it():
    # invented: an administrator commented the key out to "use the default"
    before = REAL_CONFIG.replace("\nDAEMONIZE=1\n", "\n#DAEMONIZE=1\n")
    edit = edit_settings(before, {"DAEMONIZE": "0"})
    assert edit.text == before.replace("\n#DAEMONIZE=1\n", "\n#DAEMONIZE=1\nDAEMONIZE=0\n")
    assert parse_settings(edit.text)["DAEMONIZE"] == "0"


def test_key_on_several_lines_sets_all_of_them():
    before = "SERVER_PORT=1\n# note\nSERVER_PORT = 2\n"
    assert duplicate_active_keys(before, {"SERVER_PORT"}) == ["SERVER_PORT"]
    edit = edit_settings(before, {"SERVER_PORT": "50000"})
    assert edit.text == "SERVER_PORT=50000\n# note\nSERVER_PORT = 50000\n"


def test_line_endings_and_a_missing_final_newline_are_respected():
    edit = edit_settings("LOG_LEVEL=4\r\nSERVER_PORT=50000", {"SERVER_PORT": "50001", "DAEMONIZE": "0"})
    assert edit.text == "LOG_LEVEL=4\r\nSERVER_PORT=50001\r\nDAEMONIZE=0\r\n"


def test_settings_are_rendered_and_checked():
    rendered, warnings = validate_settings(
        {"SERVER_PORT": 50001, "IMEX_CMD_ENABLED": False, "BIND_INTERFACE_IP": "fd00::5", "NETWORK_INTERFACE": None}
    )
    assert rendered == {
        "SERVER_PORT": "50001",
        "IMEX_CMD_ENABLED": "0",
        "BIND_INTERFACE_IP": "fd00::5",
        "NETWORK_INTERFACE": "",
    }
    assert warnings == []


def test_unknown_key_is_written_with_a_warning():
    rendered, warnings = validate_settings({"SERVER_PROT": "50000"})
    assert rendered == {"SERVER_PROT": "50000"}
    assert warnings == [
        "settings.SERVER_PROT is not a key of the config.cfg of nvidia-imex 580; it is written as given. "
        "Check the spelling against /etc/nvidia-imex/config.cfg."
    ]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"SERVER_PORT": 70000}, "settings.SERVER_PORT='70000' is not a TCP port; expected a number from 0 to 65535."),
        ({"BIND_INTERFACE_IP": "10.0.0"}, "settings.BIND_INTERFACE_IP='10.0.0' is not an IPv4 or IPv6 address"),
        ({"LOG_LEVEL": 7}, "settings.LOG_LEVEL='7' is not one of '0', '1', '2', '3', '4'."),
        ({"DAEMONIZE": "yes"}, "settings.DAEMONIZE='yes' must be 0 or 1 (or a boolean)."),
        ({"IMEX_NODE_CONFIG_FILE": "nodes.cfg"}, "must be an absolute path of at most 256 characters"),
        ({"SERVER PORT": 1}, "settings key 'SERVER PORT' is not a config.cfg key"),
        ({"LOG_FILE_NAME": "/var/log/a\nLOG_LEVEL=0"}, "settings.LOG_FILE_NAME contains a line break"),
        ({"SERVER_PORT": [1]}, "settings.SERVER_PORT is a list; expected a string, number or boolean"),
        # the same rule as the nodes: a zone index is refused, NETWORK_INTERFACE picks the interface
        ({"BIND_INTERFACE_IP": "fe80::1%eth0"}, "settings.BIND_INTERFACE_IP = 'fe80::1%eth0' has a zone index"),
        ({"IMEX_CMD_BIND_INTERFACE_IP": "fe80::1%2"}, "settings.IMEX_CMD_BIND_INTERFACE_IP = 'fe80::1%2' has a zone"),
        ({"LOG_FILE_NAME": "/var/log/imex.log # new"}, "holds a '#' after a blank"),
    ],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ImexConfigError) as error:
        validate_settings(settings)
    assert message in str(error.value)


def test_nodes_keep_order_and_take_canonical_form():
    nodes = validate_nodes(["10.0.0.2", " 10.0.0.1 ", "FD00:0:0::1", "2001:db8::10"])
    assert nodes == ["10.0.0.2", "10.0.0.1", "fd00::1", "2001:db8::10"]
    assert render_nodes(nodes) == "10.0.0.2\n10.0.0.1\nfd00::1\n2001:db8::10\n"


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (["10.0.0.1", "10.0.0.256"], "nodes[1] = '10.0.0.256' is not an IPv4 or IPv6 address"),
        (["node-1.rack1"], "nodes[0] = 'node-1.rack1' is not an IPv4 or IPv6 address"),
        (["10.0.0.1/24"], "nodes[0] = '10.0.0.1/24' is not an IPv4 or IPv6 address"),
        (["10.0.0.1", "10.0.0.2", "10.0.0.1"], "nodes[2] = '10.0.0.1' repeats nodes[0] (10.0.0.1)"),
        (["fd00::1", "fd00:0::1"], "nodes[1] = 'fd00:0::1' repeats nodes[0] (fd00::1)"),
        (["fe80::1%eth0"], "nodes[0] = 'fe80::1%eth0' has a zone index"),
        (["10.0.0.1", "::ffff:10.0.0.1"], "nodes[1] = '::ffff:10.0.0.1' repeats nodes[0] (10.0.0.1)"),
        (["::FFFF:10.0.0.1", "10.0.0.1"], "nodes[1] = '10.0.0.1' repeats nodes[0] (10.0.0.1)"),
        ([], "nodes is empty"),
    ],
)
def test_bad_nodes_are_refused_naming_the_entry(nodes, message):
    with pytest.raises(ImexConfigError) as error:
        validate_nodes(nodes)
    assert message in str(error.value)


def test_nodes_path_comes_from_the_option_then_the_config():
    current = parse_settings(REAL_CONFIG)
    assert resolve_nodes_path(None, {}, current) == "/etc/nvidia-imex/nodes_config.cfg"
    assert resolve_nodes_path(None, {"IMEX_NODE_CONFIG_FILE": "/etc/imex/peers"}, current) == "/etc/imex/peers"
    assert resolve_nodes_path("/srv/peers", {"IMEX_NODE_CONFIG_FILE": "/etc/imex/peers"}, current) == "/srv/peers"
    assert resolve_nodes_path(None, {}, {"IMEX_NODE_CONFIG_FILE": ""}) == DEFAULT_NODES_PATH
    with pytest.raises(ImexConfigError, match=r"IMEX_NODE_CONFIG_FILE='peers' in config.cfg is not an absolute path"):
        resolve_nodes_path(None, {}, {"IMEX_NODE_CONFIG_FILE": "peers"})


def test_an_ipv4_mapped_node_is_written_as_its_ipv4_address():
    assert validate_nodes(["::ffff:10.0.0.7", "fd00::1"]) == ["10.0.0.7", "fd00::1"]


def test_a_trailing_comment_is_not_part_of_the_value_and_is_kept():
    # invented: a hand-edited line of the real file with a comment after the value
    before = REAL_CONFIG.replace("SERVER_PORT=50000\n", "SERVER_PORT=50000 # default\n")
    assert parse_settings(before)["SERVER_PORT"] == "50000"
    assert edit_settings(before, {"SERVER_PORT": "50000"}) == SettingsEdit(text=before, changed_keys=[])
    changed = edit_settings(before, {"SERVER_PORT": "50010"})
    assert changed.text == before.replace("SERVER_PORT=50000 # default\n", "SERVER_PORT=50010 # default\n")
    spaced = "SERVER_PORT = 50000\t# default\r\nIMEX_CMD_PORT=# unset\r\n"
    assert edit_settings(spaced, {"SERVER_PORT": "50000", "IMEX_CMD_PORT": ""}).text == spaced
    assert edit_settings(spaced, {"IMEX_CMD_PORT": "50005"}).text == (
        "SERVER_PORT = 50000\t# default\r\nIMEX_CMD_PORT=50005 # unset\r\n"
    )


def test_a_value_with_a_hash_but_no_blank_before_it_is_a_value():
    assert parse_settings("IMEX_SERVER_KEY=/etc/imex/key#1\n") == {"IMEX_SERVER_KEY": "/etc/imex/key#1"}


def test_only_line_feeds_end_lines():
    # a form feed or a unicode line separator inside a comment does not start a new KEY= line
    before = "# note\x0cSERVER_PORT=1\n# \u2028LOG_LEVEL=0\nSERVER_PORT=50000\n"
    assert parse_settings(before) == {"SERVER_PORT": "50000"}
    assert edit_settings(before, {"SERVER_PORT": "50000"}).text == before


# The version of the real package in tests/fixtures/imex (Ubuntu noble's nvidia-imex-580) and the
# kernel module of the real H200 machine in tests/fixtures/proc.
NOBLE_IMEX_VERSION = "580.178.04-0ubuntu0.24.04.1"


def nvrm_text() -> str:
    return (FIXTURES / "proc" / "h200x2-driver-nvidia-version.txt").read_text()


def test_upstream_version_of_deb_and_rpm_versions():
    assert upstream_version(NOBLE_IMEX_VERSION) == "580.178.04"
    assert upstream_version("1:580.95.05-1.el9") == "580.95.05"
    assert upstream_version("580.159.04") == "580.159.04"


def test_loaded_driver_version_from_the_real_proc_file():
    assert loaded_driver_version(nvrm_text()) == "580.159.04"
    assert loaded_driver_version("GCC version: gcc 12\n") is None


def test_imex_package_of_another_version_than_the_driver_is_refused():
    message = imex_driver_mismatch("nvidia-imex-580", NOBLE_IMEX_VERSION, nvrm_text())
    assert message == (
        "nvidia-imex-580 580.178.04-0ubuntu0.24.04.1 is IMEX 580.178.04 but the loaded NVIDIA driver is 580.159.04:"
        " nvidia-imex checks the loaded driver stack when it starts and aborts on a mismatch. Install the IMEX package"
        " of the driver's version (nvidia-imex-580 580.159.04), or reboot if the driver was upgraded to 580.178.04 and"
        " its old modules are still loaded"
    )


def test_imex_package_of_the_driver_version_passes():
    assert imex_driver_mismatch("nvidia-imex-580", "580.159.04-0ubuntu0.24.04.1", nvrm_text()) == ""


def test_imex_version_cannot_be_compared_without_a_loaded_module():
    assert imex_driver_mismatch("nvidia-imex-580", NOBLE_IMEX_VERSION, "").startswith(
        "cannot compare nvidia-imex-580 580.178.04-0ubuntu0.24.04.1 with the loaded driver"
    )


def test_a_byte_order_mark_is_dropped_and_the_first_key_set_once():
    text = "\ufeffSERVER_PORT=50000\nIMEX_WAIT_FOR_QUORUM=FULL\n"
    edit = edit_settings(text, {"SERVER_PORT": "50001"})
    assert edit.text == "SERVER_PORT=50001\nIMEX_WAIT_FOR_QUORUM=FULL\n"
    assert edit.changed_keys == ["SERVER_PORT"]
    again = edit_settings(edit.text, {"SERVER_PORT": "50001"})
    assert (again.text, again.changed_keys) == (edit.text, [])


def test_cr_only_line_ends_are_refused_in_one_line():
    with pytest.raises(ImexConfigError) as raised:
        edit_settings("SERVER_PORT=50000\rIMEX_WAIT_FOR_QUORUM=FULL\r", {"SERVER_PORT": "50001"}, "/etc/x.cfg")
    assert str(raised.value).startswith("/etc/x.cfg ends its lines with a carriage return alone (CR, old Mac style)")
    assert "\n" not in str(raised.value)
    assert edit_settings("SERVER_PORT=1\r\n", {"SERVER_PORT": "2"}).text == "SERVER_PORT=2\r\n"
