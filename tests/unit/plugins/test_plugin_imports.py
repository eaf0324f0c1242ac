# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The filter and action plugins stand on no API client.

Ansible imports a filter or an action plugin in the process of each task that uses it (a fork of the controller,
thrown away after the task), so whatever such a file imports is paid again by every one of those tasks. The
Kubernetes client and the collection's API layer cost about half a second an import: a filter that reached them
made a converged ``cluster.yml`` spend most of its time importing. Each plugin file is imported here in a fresh
interpreter, and the modules it loaded are compared with the ones it must not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = REPO_ROOT / ".tmp" / "collections"  # the layout tests/conftest.py makes

PLUGIN_FILES = sorted(
    path.relative_to(REPO_ROOT).with_suffix("")
    for folder in ("plugins/filter", "plugins/action")
    for path in (REPO_ROOT / folder).glob("*.py")
    if path.name != "__init__.py"
)
PREFIX = "ansible_collections.gpu_fabric.mnnvl"
# the client, and the collection's modules that reach it
API_LAYER = (
    "kubernetes",
    f"{PREFIX}.plugins.module_utils.k8s",
    f"{PREFIX}.plugins.module_utils.kube_watch",
    f"{PREFIX}.plugins.module_utils.kube_api",
    f"{PREFIX}.plugins.module_utils.checks",
)
LOADED = """
import json, sys
import ansible.errors, ansible.plugins.action  # what Ansible has loaded before it loads a plugin
before = set(sys.modules)
__import__(sys.argv[1])
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def loaded_by(module: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", LOADED, module],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(COLLECTIONS), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_there_are_plugin_files_to_judge():
    names = {path.name for path in PLUGIN_FILES}
    assert {"mnnvl", "playbook_tags", "variable_check"} <= names


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=str)
def test_a_plugin_file_loads_no_api_client(path: Path):
    module = f"{PREFIX}." + ".".join(path.parts)
    loaded = loaded_by(module)
    assert module in loaded
    reached = [name for name in loaded if any(name == api or name.startswith(f"{api}.") for api in API_LAYER)]
    assert reached == [], f"{path}.py loads {', '.join(reached[:6])}"
