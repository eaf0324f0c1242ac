# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report role's tasks as its task file holds them: the verdict reaches the trays before the metrics go out,
and the metrics task passes only options the module has, every variable it reads declared."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List

import yaml
from ansible_collections.gpu_fabric.mnnvl.plugins.modules.verification_metrics import ARGUMENT_SPEC

from tests.conftest import REPO_ROOT

ROLE = REPO_ROOT / "roles" / "report"
NODE_VERDICT = "gpu_fabric.mnnvl.node_verdict"
METRICS = "gpu_fabric.mnnvl.verification_metrics"


def tasks_in_order(path: Path) -> List[Dict[str, Any]]:
    """Every task of the file, blocks opened (block, rescue, always), in the order they run."""

    def walk(tasks: List[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
        for task in tasks or []:
            if "block" in task:
                for part in ("block", "rescue", "always"):
                    yield from walk(task.get(part) or [])
            else:
                yield task

    return list(walk(yaml.safe_load(path.read_text())))


def position(tasks: List[Dict[str, Any]], module: str) -> int:
    found = [index for index, task in enumerate(tasks) if module in task]
    assert len(found) == 1, f"{module}: {found}"
    return found[0]


def test_the_verdict_is_on_the_trays_before_the_metrics_are_pushed():
    tasks = tasks_in_order(ROLE / "tasks" / "main.yml")
    assert position(tasks, NODE_VERDICT) < position(tasks, METRICS)
    # a failed push can stop the play only after it: no rescue or block condition ties the two together
    metrics = tasks[position(tasks, METRICS)]
    assert metrics[METRICS]["push_failure"] == "{{ report_pushgateway_failure }}"
    assert "ignore_errors" not in tasks[position(tasks, NODE_VERDICT)]


def test_the_metrics_task_passes_the_declared_racks_and_only_options_the_module_has():
    task = tasks_in_order(ROLE / "tasks" / "main.yml")
    options = task[position(task, METRICS)][METRICS]
    assert set(options) <= set(ARGUMENT_SPEC)
    assert options["racks"] == "{{ report_racks }}"
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["report_racks"] == "{{ gpu_fabric_racks | list }}"
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert specs["report_racks"]["type"] == "list" and specs["report_racks"]["elements"] == "str"
    assert "gpu_fabric_racks" in specs


def test_the_pushgateway_credentials_reach_the_modules_no_log_options_from_declared_secret_variables():
    task = tasks_in_order(ROLE / "tasks" / "main.yml")
    options = task[position(task, METRICS)][METRICS]
    assert options["username"] == "{{ report_pushgateway_username or omit }}"
    assert options["password"] == "{{ report_pushgateway_password or omit }}"
    assert options["bearer_token"] == "{{ report_pushgateway_bearer_token or omit }}"
    assert ARGUMENT_SPEC["password"]["no_log"] is True and ARGUMENT_SPEC["bearer_token"]["no_log"] is True
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    for name in ("report_pushgateway_username", "report_pushgateway_password", "report_pushgateway_bearer_token"):
        assert defaults[name] == "" and specs[name]["type"] == "str" and specs[name]["default"] == ""
    assert specs["report_pushgateway_password"]["no_log"] is True
    assert specs["report_pushgateway_bearer_token"]["no_log"] is True


def test_the_textfile_reaches_the_module_as_given_a_symlink_at_it_unresolved(tmp_path, monkeypatch):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    task = tasks_in_order(ROLE / "tasks" / "main.yml")
    expression = task[position(task, METRICS)][METRICS]["textfile"]
    (tmp_path / "textfile_collector").mkdir()
    (tmp_path / "textfile_collector" / "gpu_fabric.prom").symlink_to(tmp_path / "elsewhere.conf")
    monkeypatch.chdir(tmp_path)  # a relative path is resolved from the directory ansible-playbook runs in

    def rendered(textfile: str) -> str:
        templar = Templar(loader=DataLoader(), variables={"report_metrics_textfile": textfile})
        return templar.template(trust_as_template(expression))

    assert rendered("textfile_collector/gpu_fabric.prom") == str(tmp_path / "textfile_collector" / "gpu_fabric.prom")
    assert rendered("") == ""
