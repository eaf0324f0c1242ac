# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml and hosts.yml under each of their tags, on an inventory with GPU trays, and the variable check that
runs before any tray is reached.

The trays are this machine over the local connection, in check mode: a tag that runs a host role must find the
facts gathered, and any other tag must neither gather them nor fail without them (a role's argument
validation templates its defaults under every tag). For the variable check the trays are SSH hosts
whose ssh executable only records that it was called.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import playbook_tags

REPO_ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
HOST_ROLES = ("preflight", "nvidia_driver", "containerd", "nvidia_imex")
# What a task that reads a fact nobody gathered fails with (ansible-core 2.17 to 2.19 wordings).
FACT_FAILURE = re.compile(r"has no attribute|Finalization of task args|'ansible_facts' is undefined")

Run = Tuple[str, Tuple[str, ...]]


def ansible_env() -> Dict[str, str]:
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


def playbook(inventory: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(REPO_ROOT / "playbooks" / name), *args],
        cwd=REPO_ROOT,
        env=ansible_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def listed_tags(inventory: Path, name: str) -> List[str]:
    listing = playbook(inventory, name, "--list-tags")
    assert listing.returncode == 0, listing.stdout + listing.stderr
    found = {tag.strip() for group in re.findall(r"TAGS: \[([^\]]*)\]", listing.stdout) for tag in group.split(",")}
    return sorted(found - {"always", ""})


def write_inventory(path: Path, groups: dict) -> Path:
    path.write_text(yaml.safe_dump({"all": {"children": groups}}))
    return path


@pytest.fixture(scope="module")
def local_trays(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GPU tray that is this machine (no controller: the cluster and verify plays match no host)."""
    tray_vars = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,
        # no download: configure the containerd that is there (none is a failure of the role, not of facts)
        "containerd_install_method": "none",
    }
    groups = {"gpu_nodes": {"vars": tray_vars, "hosts": {"tray1": None}}}
    return write_inventory(tmp_path_factory.mktemp("tags") / "inventory.yml", groups)


@pytest.fixture(scope="module")
def tag_runs(local_trays: Path) -> Dict[Run, subprocess.CompletedProcess]:
    """Every tag of site.yml and hosts.yml in check mode, run side by side.

    The tags of the controller's stages (cluster, verify and their roles) select no task of the trays' plays, and
    neither does their union: one run with all of them on the trays is each of them on the trays.
    """
    with ThreadPoolExecutor(max_workers=2) as pool:
        site_tags, hosts_tags = pool.map(lambda name: listed_tags(local_trays, name), ["site.yml", "hosts.yml"])
    assert set(HOST_ROLES) | {"hosts"} <= set(hosts_tags) <= set(site_tags), (hosts_tags, site_tags)
    controller_tags = sorted(set(site_tags) - set(hosts_tags) - {"gpus"})
    documented = {"cluster", "verify", "nvbandwidth", "cliques", "imex_channel", "dra_driver", "gpu_operator"}
    assert documented <= set(controller_tags), controller_tags
    runs: List[Run] = [("site.yml", ("--tags", ",".join(controller_tags))), ("site.yml", ("--tags", "gpus"))]
    runs += [("site.yml", ("--tags", "hosts"))] + [("hosts.yml", ("--tags", role)) for role in HOST_ROLES]
    runs += [("site.yml", ("--skip-tags", "hosts")), ("hosts.yml", ("--skip-tags", "preflight"))]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = pool.map(lambda run: playbook(local_trays, run[0], "--check", *run[1]), runs)
        return dict(zip(runs, results))


def roles_selected(run: Run) -> List[str]:
    _name, (option, tags) = run
    if option == "--skip-tags":
        return [role for role in HOST_ROLES if tags not in (role, "hosts")]
    return list(HOST_ROLES) if tags == "hosts" else [role for role in HOST_ROLES if role == tags]


def test_no_tag_fails_on_facts_and_only_host_role_tags_gather_them(tag_runs):
    for run, result in tag_runs.items():
        output = result.stdout + result.stderr
        where = f"{run}: exit {result.returncode}\n{output[-4000:]}"
        assert not FACT_FAILURE.search(output), where
        assert "unreachable=0" in output, where
        roles = roles_selected(run)
        if not roles:
            # another stage's tag reaches no tray for the host roles: no facts gathered, no host role's argument
            # validation (Ansible runs it under every tag); gpus.yml includes nvidia_driver's check.yml, whose entry
            # point has a spec of its own, and the shared values' (gpu_fabric, 'main')
            assert "Gather the facts" not in output, where
            gpus = "gpus" in run[1] or "--skip-tags" in run[1]
            assert output.count("Validating arguments against arg spec 'main'") == (1 if gpus else 0), where
            assert "PLAY [Prepare the GPU hosts]" in output and "skipping: no hosts matched" in output, where
            if gpus:
                # gpus.yml's GPU check (its wait for the operator's driver is skipped in check mode) finds no driver
                assert result.returncode == 2 and "nvidia-smi was not found at /run/nvidia/driver" in output, where
            else:
                assert result.returncode == 0, where
            continue
        # the first role that runs gathered the facts, and its own tasks ran past the validation
        gathered = output.split(f"TASK [Gather the facts that the host roles read ({roles[0]})]", 1)
        assert len(gathered) == 2, where
        assert re.match(r"\s*\*+\s*ok: \[tray1\]", gathered[1]), where
        assert re.search(rf"TASK \[gpu_fabric\.mnnvl\.{roles[0]} : (?!Validating)", output), where


FAKE_SSH = """#!/bin/sh
echo "$@" >> {marker}
exit 255
"""


@pytest.fixture
def ssh_trays(tmp_path: Path) -> Tuple[Path, Path]:
    """A local controller and two trays whose ssh executable records each call and fails."""
    marker = tmp_path / "ssh-called"
    ssh = tmp_path / "ssh"
    ssh.write_text(FAKE_SSH.format(marker=marker))
    ssh.chmod(0o755)
    controller = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    tray_vars = {"ansible_ssh_executable": str(ssh), "ansible_host": "192.0.2.1"}
    groups = {
        "k8s_controller": {"hosts": {"localhost": controller}},
        "gpu_nodes": {"vars": tray_vars, "hosts": {"tray1": {"gpu_fabric_drian": True}, "tray2": None}},
    }
    return write_inventory(tmp_path / "inventory.yml", groups), marker


@pytest.mark.parametrize(
    ("name", "extra", "misspelled", "suggestion"),
    [
        ("site.yml", ("-e", "gpu_fabric_driver_ownr=host"), "gpu_fabric_driver_ownr", "gpu_fabric_driver_owner"),
        # a host variable of tray1 alone: the controller's check passes, the trays' fails, and tray2 is not reached
        ("site.yml", (), "gpu_fabric_drian", "gpu_fabric_drain"),
        ("hosts.yml", (), "gpu_fabric_drian", "gpu_fabric_drain"),
    ],
)
def test_a_misspelled_variable_fails_before_any_tray_is_reached(ssh_trays, name, extra, misspelled, suggestion):
    inventory, marker = ssh_trays
    result = playbook(inventory, name, "--check", *extra)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-4000:]
    assert f"{misspelled} (did you mean {suggestion}?) is not a variable of the gpu_fabric.mnnvl roles" in output
    assert "unreachable=0" in output, output[-4000:]
    assert not marker.exists(), marker.read_text()


def test_the_trays_are_reached_once_the_variables_pass(ssh_trays):
    inventory, marker = ssh_trays
    text = inventory.read_text().replace("gpu_fabric_drian", "gpu_fabric_drain")
    inventory.write_text(text)
    result = playbook(inventory, "hosts.yml", "--check")
    assert result.returncode != 0 and "unreachable=1" in result.stdout, result.stdout[-4000:]
    assert "192.0.2.1" in marker.read_text()


def test_list_tags_shows_every_tag_of_the_playbooks_and_each_check(local_trays):
    """--list-tags of the playbooks is the list the tag check holds the run to, every check's tag included."""
    names = ["site.yml", "verify.yml", "schedule.yml", "refresh_state.yml", "uninstall.yml"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        listed = dict(zip(names, pool.map(lambda name: listed_tags(local_trays, name), names)))
    assert sorted(set().union(*listed.values())) == sorted(playbook_tags.playbook_tags())
    checks = {"verify_checks", "gpu_health", "dcgm_diag"} | set(playbook_tags.check_tags())
    assert checks <= set(listed["site.yml"]) and checks <= set(listed["verify.yml"])


@pytest.mark.parametrize("name", ["site.yml", "hosts.yml"])
def test_a_tag_that_selects_nothing_is_named_in_one_line_before_any_tray_is_reached(ssh_trays, name):
    inventory, marker = ssh_trays
    result = playbook(inventory, name, "--check", "--tags", "nvbandwith,hosts")
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-4000:]
    [line] = [line for line in output.splitlines() if line.startswith("[ERROR]")]
    assert line.startswith(
        "[ERROR]: Task failed: Action failed: --tags names 'nvbandwith', which no task of the gpu_fabric.mnnvl "
        "playbooks has, so it selects nothing (did you mean nvbandwidth?); the tags are hosts, "
    )
    assert not marker.exists()


def test_a_site_that_imports_the_playbook_under_its_own_tag_turns_the_refusal_off(ssh_trays, tmp_path):
    inventory, marker = ssh_trays
    inventory.write_text(inventory.read_text().replace("gpu_fabric_drian", "gpu_fabric_drain"))
    wrapper = tmp_path / "site-gpu.yml"
    wrapper.write_text("- ansible.builtin.import_playbook: gpu_fabric.mnnvl.hosts\n  tags: [site_gpu_hosts]\n")
    refused = playbook(inventory, str(wrapper), "--check", "--tags", "site_gpu_hosts")
    assert refused.returncode == 2 and "--tags names 'site_gpu_hosts', which no task" in refused.stdout, refused.stdout
    assert not marker.exists()

    taken = playbook(
        inventory, str(wrapper), "--check", "--tags", "site_gpu_hosts", "-e", "gpu_fabric_check_tags=false"
    )
    assert "unreachable=1" in taken.stdout, taken.stdout[-4000:]
    assert "192.0.2.1" in marker.read_text()


def test_a_variable_mistake_of_every_tray_is_said_once(ssh_trays):
    inventory, marker = ssh_trays
    groups = yaml.safe_load(inventory.read_text())["all"]["children"]
    groups["gpu_nodes"]["hosts"]["tray1"] = None
    groups["gpu_nodes"]["vars"]["gpu_fabric_drian"] = True
    write_inventory(inventory, groups)
    result = playbook(inventory, "hosts.yml", "--check")
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-4000:]
    assert [line for line in output.splitlines() if line.startswith("[ERROR]")] == [
        "[ERROR]: Task failed: Action failed: gpu_fabric_drian (did you mean gpu_fabric_drain?) is not a variable of "
        "the gpu_fabric.mnnvl roles (misspelled in the inventory or the extra vars?); the roles' variables are listed "
        "in roles/<role>/meta/argument_specs.yml"
    ]
    assert not marker.exists()
