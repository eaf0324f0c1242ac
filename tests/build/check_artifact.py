# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the built collection ships: nothing that only works in a clone of the repository.

    python tests/build/check_artifact.py .tmp/dist/gpu_fabric-mnnvl-<version>.tar.gz

Checks the tarball that `ansible-galaxy collection build` wrote:
* no path of the repository's own tooling is in it (the simulated rack and its inventory, tests,
  benchmarks, Molecule, caches, changelog fragments);
* every relative link and every backticked path of the collection's layout (``roles/...``,
  ``docs/...``, ``playbooks/...``) in a shipped Markdown file names a file that is in the tarball;
* a shipped Markdown file (or the released changelog) names the repository's own tooling
  (``sim/``, ``tests/``, ``bench/``, ``molecule/``, ``make ...``) only under a heading that says
  so ("in a clone"), or as a link to the repository;
* requirements.yml and galaxy.yml's dependencies name exactly the collections that the shipped roles,
  playbooks and plugins use (their tasks, roles, filters, lookups and Python imports by FQCN);
* installed from the tarball alone (``ansible-galaxy collection install`` into a temporary collections
  path, run from an empty directory, no ansible.cfg of the clone), every playbook passes
  ``ansible-playbook --syntax-check gpu_fabric.mnnvl.<name>``.
Prints one line per problem and exits 1 when there is any.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Set

import yaml

# Paths a user's install must not carry (prefixes of the tarball's member names).
FORBIDDEN = (
    "sim/",
    "tests/",
    "bench/",
    "molecule/",
    ".ci/",
    ".hypothesis/",
    ".tmp/",
    ".venv/",
    "inventories/sim/",
    "changelogs/fragments/",
    "docs/sim.md",
    "docs/molecule.md",
    "docs/device-capture.md",
    "requirements-test.txt",
    "Makefile",
)
# The collection's own layout: a path under one of these must be in the tarball.
SHIPPED_ROOTS = ("roles/", "playbooks/", "plugins/", "docs/", "inventories/", "changelogs/")
# The repository's tooling: named only in a section for clones.
CLONE_ONLY = re.compile(r"(?<![\w./-])(?:sim/|tests/|bench/|molecule/|\.ci/|make (?:demo|test|venv|molecule|build))")
CLONE_HEADING = re.compile(r"in a clone", re.IGNORECASE)  # "(in a clone)", "(proven in a clone)"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# A collection named by the shipped code: a task's module, a role, a filter or lookup, a Python import.
FQCN = r"([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*"
USES = (
    re.compile(rf"^\s*(?:-\s+)?{FQCN}:", re.MULTILINE),
    re.compile(rf"\brole:\s*['\"]?{FQCN}"),
    re.compile(rf"\|\s*{FQCN}"),
    re.compile(rf"\blookup\(\s*['\"]{FQCN}"),
    re.compile(r"\bansible_collections\.([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\."),
)
NOT_A_DEPENDENCY = {"ansible.builtin", "ansible.legacy"}
CODE_ROOTS = ("roles/", "playbooks/", "plugins/")


def members(tarball: str) -> Set[str]:
    with tarfile.open(tarball) as archive:
        return {m.name.rstrip("/") + ("/" if m.isdir() else "") for m in archive.getmembers()}


def forbidden(names: Iterable[str]) -> List[str]:
    return sorted(f"{name}: ships a file of the repository's tooling" for name in names if name.startswith(FORBIDDEN))


def exists(path: str, names: Set[str]) -> bool:
    path = path.split("#", 1)[0].rstrip("/")
    return not path or path in names or f"{path}/" in names


def resolve(base: str, target: str) -> str:
    parts = [p for p in base.split("/")[:-1] if p]
    for piece in target.split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece and piece != ".":
            parts.append(piece)
    return "/".join(parts)


def sections(text: str) -> List[tuple]:
    """(heading trail, line number, line) for every line: the headings above it, outermost first."""
    trail: List[str] = []
    out = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        match = HEADING.match(line) if not fenced else None
        if match:
            level = len(match.group(1))
            trail = [*trail[: level - 1], match.group(2)]
        out.append((tuple(trail), number, line))
    return out


def markdown_problems(name: str, text: str, names: Set[str]) -> List[str]:
    problems = []
    for trail, number, line in sections(text):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # a URL (the repository's own pages included) or an anchor
            path = resolve(name, target)
            if not exists(path, names):
                problems.append(f"{name}:{number}: links to {target}, which the collection does not ship")
        for code in CODE.findall(line):
            token = code.split()[0] if code.split() else ""
            if token.startswith(SHIPPED_ROOTS) and not any(ch in token for ch in "<>*{}") and not exists(token, names):
                problems.append(f"{name}:{number}: names {token}, which the collection does not ship")
        if CLONE_ONLY.search(LINK.sub("", line)) and not any(CLONE_HEADING.search(h) for h in trail):
            what = CLONE_ONLY.search(LINK.sub("", line)).group(0)
            problems.append(f"{name}:{number}: names {what.strip()} (only in a clone) outside a section 'in a clone'")
    return problems


def changelog_problems(name: str, text: str) -> List[str]:
    """The released changelog: a user reads it where no clone is, so it names none of the tooling."""
    return [
        f"{name}:{number}: names {match.group(0).strip()} (only in a clone)"
        for number, line in enumerate(text.splitlines(), 1)
        for match in [CLONE_ONLY.search(line)]
        if match
    ]


def collections_used(text: str) -> Set[str]:
    return {f"{namespace}.{name}" for pattern in USES for namespace, name in pattern.findall(text)}


def collection_problems(used: Set[str], requirements: Dict[str, str], where: str) -> List[str]:
    """The collections that `where` (requirements.yml, galaxy.yml) declares against the ones the code uses."""
    problems = [
        f"{where}: lacks {name}, which the roles, playbooks or plugins use" for name in sorted(used - set(requirements))
    ]
    problems.extend(
        f"{where}: lists {name}, which no role, playbook or plugin uses" for name in sorted(set(requirements) - used)
    )
    return problems


def dependency_problems(archive: tarfile.TarFile, own: str) -> List[str]:
    used: Set[str] = set()
    texts: Dict[str, str] = {}
    for member in archive.getmembers():
        if not member.isfile():
            continue
        if member.name.startswith(CODE_ROOTS) or member.name in ("requirements.yml", "MANIFEST.json"):
            handle = archive.extractfile(member)
            text = handle.read().decode("utf-8", "replace") if handle else ""
            if member.name.startswith(CODE_ROOTS):
                used |= collections_used(text)
            else:
                texts[member.name] = text
    used -= NOT_A_DEPENDENCY | {own}
    problems = []
    if "requirements.yml" in texts:
        entries = (yaml.safe_load(texts["requirements.yml"]) or {}).get("collections", [])
        listed = {entry["name"] if isinstance(entry, dict) else entry: "" for entry in entries}
        problems.extend(collection_problems(used, listed, "requirements.yml"))
    if "MANIFEST.json" in texts:
        dependencies = json.loads(texts["MANIFEST.json"])["collection_info"].get("dependencies") or {}
        problems.extend(collection_problems(used, dependencies, "galaxy.yml dependencies"))
    return problems


def check(tarball: str) -> List[str]:
    names = members(tarball)
    problems = forbidden(names)
    with tarfile.open(tarball) as archive:
        manifest = archive.extractfile("MANIFEST.json") if "MANIFEST.json" in names else None
        info = json.load(manifest)["collection_info"] if manifest else {}
        problems.extend(dependency_problems(archive, f"{info.get('namespace')}.{info.get('name')}"))
        for member in archive.getmembers():
            if not member.isfile() or not (member.name.endswith(".md") or member.name == "changelogs/changelog.yaml"):
                continue
            handle = archive.extractfile(member)
            text = handle.read().decode("utf-8") if handle else ""
            if member.name.endswith(".md"):
                problems.extend(markdown_problems(member.name, text, names))
            else:
                problems.extend(changelog_problems(member.name, text))
    return problems


def installed_playbooks_problems(tarball: str) -> List[str]:
    """``ansible-playbook --syntax-check gpu_fabric.mnnvl.<name>`` of every playbook, from an install of the tarball."""
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))["collection_info"]
        playbooks = sorted(
            Path(m.name).stem for m in archive.getmembers() if re.fullmatch(r"playbooks/[^/]+\.ya?ml", m.name)
        )
    fqcn = f"{manifest['namespace']}.{manifest['name']}"
    tarball = str(Path(tarball).resolve())
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="installed-") as work:
        (Path(work) / "ansible.cfg").write_text("[defaults]\n")
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(Path(work) / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": str(Path(work) / "collections"),
        }
        steps = {
            "ansible-galaxy collection install": [
                *(str(bin_dir / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", "collections", tarball)
            ],
            "ansible-playbook --syntax-check": [
                *(str(bin_dir / "ansible-playbook"), "-i", "localhost,", "--syntax-check"),
                *(f"{fqcn}.{name}" for name in playbooks),
            ],
        }
        for what, command in steps.items():
            result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                lines = (result.stdout + result.stderr).strip().splitlines()
                errors = [line for line in lines if "ERROR" in line] or lines[-6:]
                return [f"{what}: exit {result.returncode}: {line}" for line in errors]
    return []


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    problems = check(argv[0]) + installed_playbooks_problems(argv[0])
    for problem in problems:
        print(problem)
    print(f"{argv[0]}: {len(members(argv[0]))} entries, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
