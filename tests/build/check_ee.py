# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build context that `ansible-builder create` wrote from execution-environment.yml.

    python tests/build/check_ee.py .tmp/ee [REPOSITORY]

Checks, without building the image, that the Containerfile and its _build/ would give an
execution environment that runs the playbooks:
* the base stage installs ansible-core and ansible-runner;
* _build/requirements.txt carries every requirement of the repository's requirements.txt, and
  _build/bindep.txt every package line of bindep.txt;
* the galaxy stage installs this collection from a tarball that is in the context (a collection
  tarball of galaxy.yml's name and version) and every collection of requirements.yml;
* the final stage installs Helm with meta/ee/install_helm.py for the target architecture, after the
  script was copied in, and runs ``helm version``; the script pins the Helm that the simulated rack
  builds (sim/build.sh), checksums for amd64 and arm64.
Prints one line per problem and exits 1 when there is any.
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
from pathlib import Path
from typing import Dict, List, Sequence

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "meta" / "ee"))

import install_helm

FROM = re.compile(r"^FROM\s+\S+(?:\s+AS\s+(\S+))?", re.IGNORECASE)


def stages(containerfile: str) -> Dict[str, List[str]]:
    """Instruction lines per stage name ('' before the first FROM)."""
    out: Dict[str, List[str]] = {"": []}
    current = ""
    for line in containerfile.splitlines():
        match = FROM.match(line.strip())
        if match:
            current = match.group(1) or f"stage{len(out)}"
            out[current] = []
        elif line.strip() and not line.lstrip().startswith("#"):
            out[current].append(line.strip())
    return out


def requirement_lines(text: str) -> List[str]:
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def galaxy_name(tarball: Path) -> tuple:
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("MANIFEST.json")
        info = json.load(member)["collection_info"] if member else {}
    return info.get("namespace"), info.get("name"), info.get("version")


def containerfile_problems(steps: Dict[str, List[str]]) -> List[str]:
    problems = []
    refs = next((line for line in steps[""] if line.startswith("ARG ANSIBLE_INSTALL_REFS=")), "")
    for package in ("ansible-core", "ansible-runner"):
        if package not in refs:
            problems.append(f"Containerfile: the base stage installs no {package} (ANSIBLE_INSTALL_REFS: {refs!r})")
    galaxy = " ".join(steps.get("galaxy", []))
    if "ansible-galaxy collection install" not in galaxy or "-r requirements.yml" not in galaxy:
        problems.append("Containerfile: the galaxy stage installs no collections from requirements.yml")
    final = steps.get("final", [])
    helm = [index for index, line in enumerate(final) if "install_helm.py" in line and line.startswith("RUN")]
    if not helm:
        problems.append("Containerfile: the final stage does not install Helm (install_helm.py)")
    else:
        run = final[helm[0]]
        if '--arch "$TARGETARCH"' not in run or "ARG TARGETARCH" not in final[: helm[0]]:
            problems.append("Containerfile: Helm is not fetched for the target architecture (ARG TARGETARCH)")
        if "helm version" not in run:
            problems.append("Containerfile: the Helm step does not run `helm version`")
        removed = [index for index, line in enumerate(final) if line.startswith("RUN rm -rf /output")]
        if removed and removed[0] < helm[0]:
            problems.append("Containerfile: /output/scripts is removed before the Helm step runs")
    return problems


def build_dir_problems(build: Path, repository: Path) -> List[str]:
    problems = []
    for name in ("requirements.txt", "bindep.txt"):
        wanted = requirement_lines((repository / name).read_text())
        path = build / name
        found = requirement_lines(path.read_text()) if path.is_file() else []
        missing = [line for line in wanted if line not in found]
        if missing:
            problems.append(f"_build/{name}: lacks {', '.join(missing)} of {name}")
    requirements = build / "requirements.yml"
    entries = (yaml.safe_load(requirements.read_text()) or {}).get("collections", []) if requirements.is_file() else []
    names = {entry["name"] if isinstance(entry, dict) else entry for entry in entries}
    used = (yaml.safe_load((repository / "requirements.yml").read_text()) or {}).get("collections", [])
    for entry in used:
        if entry["name"] not in names:
            problems.append(f"_build/requirements.yml: lacks {entry['name']} of requirements.yml")
    galaxy = yaml.safe_load((repository / "galaxy.yml").read_text())
    own = [entry for entry in entries if isinstance(entry, dict) and entry.get("type") == "file"]
    if not own:
        problems.append("_build/requirements.yml: does not install this collection from a tarball")
    for entry in own:
        tarball = build / entry["name"]
        if not tarball.is_file():
            problems.append(f"_build/requirements.yml: installs {entry['name']}, which is not in the build context")
            continue
        found = galaxy_name(tarball)
        expected = (galaxy["namespace"], galaxy["name"], str(galaxy["version"]))
        if found != expected:
            problems.append(f"_build/{entry['name']}: is collection {found}, expected {expected} of galaxy.yml")
    if not (build / "scripts" / "install_helm.py").is_file():
        problems.append("_build/scripts/install_helm.py: missing (additional_build_files)")
    return problems


def helm_pin_problems(repository: Path) -> List[str]:
    problems = []
    match = re.search(r'HELM_VERSION="\$\{HELM_VERSION:-([^}]+)\}"', (repository / "sim" / "build.sh").read_text())
    tested = f"v{match.group(1)}" if match else None
    if tested != install_helm.HELM_VERSION:
        problems.append(f"install_helm.py: pins Helm {install_helm.HELM_VERSION}, the simulated rack runs {tested}")
    for arch in ("amd64", "arm64"):
        if not re.fullmatch(r"[0-9a-f]{64}", install_helm.HELM_SHA256.get(arch, "")):
            problems.append(f"install_helm.py: no SHA-256 pinned for {arch}")
    return problems


def check(context: Path, repository: Path) -> List[str]:
    containerfile = context / "Containerfile"
    if not containerfile.is_file():
        return [f"{containerfile}: missing (did ansible-builder create run?)"]
    problems = containerfile_problems(stages(containerfile.read_text()))
    problems.extend(build_dir_problems(context / "_build", repository))
    problems.extend(helm_pin_problems(repository))
    return problems


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    context = Path(argv[0])
    problems = check(context, Path(argv[1] if len(argv) == 2 else "."))
    for problem in problems:
        print(problem)
    print(f"{context}: execution environment build context, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
