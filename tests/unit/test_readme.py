# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The README and the shipped documents against the collection: lists that cannot drift, installed-user commands."""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path
from typing import List

import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.containerd import FilterModule as ContainerdFilters
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.mnnvl import FilterModule as MnnvlFilters
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.nccl_tests_parse import FilterModule as NcclFilters
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.playbook_tags import FilterModule as PlaybookTagFilters
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.shared_values import FilterModule as SharedValueFilters
from ansible_collections.gpu_fabric.mnnvl.plugins.filter.verify_schedule import FilterModule as ScheduleFilters

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "build"))

import check_artifact  # noqa: E402

README = (REPO / "README.md").read_text()
ROW_NAME = re.compile(r"^\| `([a-z0-9_]+)` \|")


def table_names(text: str, header: str) -> List[str]:
    """The backticked first cells of the Markdown table whose header row starts with ``| <header> |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    names = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        match = ROW_NAME.match(line)
        assert match, f"README.md: a row of the {header} table without a `name` first: {line}"
        names.append(match.group(1))
    return names


def section(text: str, heading: str) -> str:
    """The text of a ``## heading`` section, up to the next ``## ``."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_module_table_lists_every_module_once():
    listed = table_names(README, "module")
    shipped = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py") if path.stem != "__init__")
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({n for n in listed if listed.count(n) > 1})}"
    assert sorted(set(shipped) - set(listed)) == [], "README.md's module table lacks these modules: add a row each"
    assert sorted(set(listed) - set(shipped)) == [], "README.md's module table lists modules that do not exist"


def test_the_filter_table_lists_every_filter_once():
    listed = table_names(README, "filter")
    plugins = sorted(
        {
            *ContainerdFilters().filters(),
            *MnnvlFilters().filters(),
            *NcclFilters().filters(),
            *PlaybookTagFilters().filters(),
            *SharedValueFilters().filters(),
            *ScheduleFilters().filters(),
        }
    )
    documented = sorted(path.stem for path in (REPO / "plugins" / "filter").glob("*.yml"))
    assert len(listed) == len(set(listed))
    assert plugins == documented, "every filter has its plugins/filter/<name>.yml documentation"
    assert sorted(set(plugins) - set(listed)) == [], "README.md's filter table lacks these filters: add a row each"
    assert sorted(set(listed) - set(plugins)) == [], "README.md's filter table lists filters that do not exist"


def test_using_it_runs_the_installed_playbooks_by_their_names_outside_a_clone():
    text = section(README, "Using it")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    playbooks = {path.stem for path in (REPO / "playbooks").glob("*.yml")}
    runs = [command.split() for command in commands if command.startswith("ansible-playbook ")]
    assert runs, "no ansible-playbook command in the README's Using it"
    for words in runs:
        named = [word for word in words if word.startswith("gpu_fabric.mnnvl.")]
        assert len(named) == 1 and named[0].split(".")[-1] in playbooks, " ".join(words)
    assert "playbooks/" not in block
    copy = next(i for i, command in enumerate(commands) if " cp " in f" {command} ")
    assert "mkdir -p inventories" in commands[copy], commands[copy]
    install = next(command for command in commands if command.startswith("ansible-galaxy collection install "))
    assert re.search(r"gpu_fabric-mnnvl-[0-9][^ ]*\.tar\.gz", install)


def shipped_markdown() -> List[Path]:
    ignored = yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"]
    found = []
    for path in sorted(REPO.glob("*.md")) + sorted(REPO.glob("docs/**/*.md")) + sorted(REPO.glob("roles/*/README.md")):
        name = path.relative_to(REPO).as_posix()
        if not any(fnmatch.fnmatch(name, pattern) or name.startswith(f"{pattern}/") for pattern in ignored):
            found.append(path)
    return found


def test_shipped_documents_run_playbooks_by_their_names_except_in_a_clone():
    assert REPO / "docs" / "upgrade.md" in shipped_markdown()
    assert REPO / "docs" / "sim.md" not in shipped_markdown()
    problems = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in shipped_markdown()
        for trail, number, line in check_artifact.sections(path.read_text())
        if re.search(r"\bansible-(playbook|navigator run)\b.*\bplaybooks/", line)
        and not any(check_artifact.CLONE_HEADING.search(heading) for heading in trail)
    ]
    assert problems == []


def test_the_version_is_a_development_version_after_the_last_release():
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    last = max(releases, key=lambda v: tuple(int(part) for part in v.split(".")))
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+-dev[0-9]+", version), version
    assert tuple(int(part) for part in version.split("-")[0].split(".")) > tuple(int(p) for p in last.split("."))


def test_the_released_changelog_indents_its_lists_as_ansible_lint_wants():
    config = yaml.safe_load((REPO / "changelogs" / "config.yaml").read_text())
    assert config["changelog_nice_yaml"] is True
    lines = (REPO / "changelogs" / "changelog.yaml").read_text().splitlines()
    flush = [
        number
        for number, (line, after) in enumerate(zip(lines, lines[1:]), 2)
        if line.rstrip().endswith(":")
        and after.lstrip().startswith("- ")
        and len(after) - len(after.lstrip()) <= len(line) - len(line.lstrip())
    ]
    assert flush == [], f"changelogs/changelog.yaml: list items not indented below their key at lines {flush}"


def test_the_documents_that_the_build_files_name_exist():
    for name in ("execution-environment.yml", "bindep.txt"):
        named = re.findall(r"docs/[\w./-]+\.md", (REPO / name).read_text())
        assert [path for path in named if not (REPO / path).is_file()] == [], name
    assert re.findall(r"docs/[\w./-]+\.md", (REPO / "execution-environment.yml").read_text()) == [
        "docs/execution-environment.md"
    ]
    links = yaml.safe_load((REPO / "docs" / "docsite" / "links.yml").read_text())
    assert links["edit_on_github"]["repository"] == "gpu-fabric/mnnvl"


EE_IMAGE = "registry.example.com/gpu-fabric/mnnvl-ee"


def test_the_documents_name_one_tarball_and_one_image_at_the_version_being_made():
    """A user copies these commands: the tarball and the execution environment's image carry one name, at the
    version this branch becomes (galaxy.yml's, without its development suffix)."""
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"].split("-")[0]
    documents = [
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
        *sorted((REPO / "roles").glob("*/README.md")),
    ]
    problems = []
    for path in documents:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{number}"
            for found in re.findall(r"gpu_fabric-mnnvl-([0-9][0-9A-Za-z.-]*?)\.tar\.gz", line):
                if found != version:
                    problems.append(f"{where}: tarball version {found}, not {version}")
            for image, tag in re.findall(r"([\w.-]+(?:/[\w.-]+)*-ee):([\w.-]+)", line):
                if image != EE_IMAGE or tag != version:
                    problems.append(f"{where}: image {image}:{tag}, not {EE_IMAGE}:{version}")
    assert problems == []
