# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check of the built collection: what it refuses in a shipped document, and what it lets through."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build"))

import check_artifact

NAMES = {"README.md", "docs/", "docs/verification.md", "roles/", "roles/report/", "playbooks/verify.yml"}


def test_links_and_paths_must_name_shipped_files():
    text = (
        "See [the checks](docs/verification.md#the-checks) and `roles/report`, not [sim](docs/sim.md) or `roles/x`.\n"
    )
    assert check_artifact.markdown_problems("README.md", text, NAMES) == [
        "README.md:1: links to docs/sim.md, which the collection does not ship",
        "README.md:1: names roles/x, which the collection does not ship",
    ]


def test_relative_links_resolve_from_the_document():
    assert check_artifact.markdown_problems("docs/verification.md", "[up](../README.md)\n", NAMES) == []
    assert check_artifact.markdown_problems("docs/verification.md", "[x](PERFORMANCE.md)\n", NAMES) == [
        "docs/verification.md:1: links to PERFORMANCE.md, which the collection does not ship"
    ]


def test_the_tooling_is_named_only_in_a_section_for_clones_or_as_a_link():
    text = (
        "# Title\nRun `make demo`.\n"
        "## The simulated rack (in a clone)\n`sim/rack up` and `make test`\n"
        "### Deeper\n`tests/integration` still in the clone section\n"
        "## Using it\nproven by [tests/x.py](https://github.com/o/r/blob/main/tests/x.py)\n"
        "```bash\n# not a heading\nsim/rack down\n```\n"
    )
    assert check_artifact.markdown_problems("README.md", text, NAMES) == [
        "README.md:2: names make demo (only in a clone) outside a section 'in a clone'",
        "README.md:11: names sim/ (only in a clone) outside a section 'in a clone'",
    ]


def test_a_tarball_with_the_sim_inventory_and_fragments_is_refused(tmp_path):
    tarball = tmp_path / "c.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        for name, text in (
            ("README.md", "fine\n"),
            ("inventories/sim/hosts.yml", "all: {}\n"),
            ("changelogs/fragments/x.yml", "---\n"),
            ("changelogs/changelog.yaml", "releases:\n  0.2.0: {changes: {bugfixes: ['sim/rack up heals']}}\n"),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    assert check_artifact.check(str(tarball)) == [
        "changelogs/fragments/x.yml: ships a file of the repository's tooling",
        "inventories/sim/hosts.yml: ships a file of the repository's tooling",
        "changelogs/changelog.yaml:2: names sim/ (only in a clone)",
    ]


def test_requirements_and_dependencies_name_the_collections_the_code_uses(tmp_path):
    tarball = tmp_path / "c.tar.gz"
    info = {"namespace": "gpu_fabric", "name": "mnnvl", "dependencies": {"kubernetes.core": "*"}}
    manifest = {"collection_info": info}
    files = (
        ("MANIFEST.json", json.dumps(manifest)),
        ("requirements.yml", "collections:\n  - name: kubernetes.core\n  - name: ansible.posix\n"),
        (
            "roles/x/tasks/main.yml",
            "- name: Read\n  kubernetes.core.k8s_info:\n    kind: Node\n"
            "- community.general.modprobe:\n    name: nvidia\n"
            "- ansible.builtin.debug:\n"
            '    msg: "{{ x | gpu_fabric.mnnvl.clique_groups }} report.json nvidia.com/gpu"\n',
        ),
        ("plugins/modules/m.py", "from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client\n"),
        ("docs/x.md", "`community.docker.docker_container:` in a document is no dependency\n"),
    )
    with tarfile.open(tarball, "w:gz") as archive:
        for name, text in files:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    assert check_artifact.check(str(tarball)) == [
        "requirements.yml: lacks community.general, which the roles, playbooks or plugins use",
        "requirements.yml: lists ansible.posix, which no role, playbook or plugin uses",
        "galaxy.yml dependencies: lacks community.general, which the roles, playbooks or plugins use",
    ]
