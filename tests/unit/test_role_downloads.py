# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every download of the roles follows the site's file mirror (gpu_fabric_download_mirror): an air-gapped site
that sets it reaches no public host."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, List, Tuple

import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
DOWNLOADS = ("ansible.builtin.get_url", "ansible.builtin.uri", "get_url", "uri")
# Downloads that a mirror of files cannot move, each with its reason.
NOT_MIRRORED = {
    # a dnf .repo file names the packages' own servers: a site mirrors the repository and sets this URL to its copy
    ("nvidia_driver", "nvidia_driver_dnf_repo_url"),
}


def tasks_of(items: Any) -> Iterator[dict]:
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from tasks_of(task.get(key))


def downloads() -> List[Tuple[str, str, str, str]]:
    """(role, task file, task name, url expression) of every download task."""
    found = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in tasks_of(yaml.safe_load(path.read_text())):
            for module in DOWNLOADS:
                if isinstance(task.get(module), dict):
                    found.append((path.parts[-3], path.name, task.get("name", ""), str(task[module].get("url", ""))))
    return found


def test_every_download_of_the_roles_reads_its_url_from_the_mirror_settings():
    found = downloads()
    assert any(entry[0] == "containerd" for entry in found)  # the walk finds the downloads it is about
    problems = [
        f"roles/{role}/tasks/{file}: {name!r} downloads {url}, not a mirror_settings result (.urls.<name>)"
        for role, file, name, url in found
        if ".urls." not in url and not any(role == r and variable in url for r, variable in NOT_MIRRORED)
    ]
    assert problems == []


def test_the_checksums_of_the_downloads_follow_the_mirror_too():
    problems = []
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        for task in tasks_of(yaml.safe_load(path.read_text())):
            checksum = str((task.get("ansible.builtin.get_url") or {}).get("checksum", ""))
            if "_url" in checksum and ".urls." not in checksum:
                problems.append(f"roles/{path.parts[-3]}/tasks/{path.name}: {task.get('name')!r} checksum {checksum}")
    assert problems == []
