# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The imports of ``plugins/module_utils`` go one way: the parsers, judges, records, the report and the metrics
stand on no Kubernetes client, and no module imports itself back through another, not even inside a function.

The graph is read from the source (every ``import`` and ``from ... import`` of the collection's modules and of
``kubernetes``, at the top of a module or inside a function; a ``TYPE_CHECKING`` import is for annotations only
and left out), so a new import that crosses a layer fails here before it costs a task or a module an import.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
PREFIX = "ansible_collections.gpu_fabric.mnnvl.plugins."
CLIENT = "kubernetes"
# The modules that talk to the API server, and those built on them (the lifecycle, the checks, the fleet runner,
# the roles' waits). Every other module of module_utils must not reach the client: a module added here says
# that it is part of the API layer.
API_LAYER = {
    "k8s",
    "kube_watch",
    "kube_api",
    "compute_domain",
    "rack_run",
    "checks",
    "fleet",
    "cluster_policy",
    "helm_release",
    "chart_release",
    "chart_release_runner",
    "rollout_runner",
    "node_verdict",
    "uninstall",
    "verify_preflight",
    "kubeconfig",
    "verify_refusal",
    "verify_schedule",
}
# The longest chain of module-level imports from a module of module_utils, the client counted. 12 when this test
# was written (verify_refusal, fleet, checks, a check, mpijob, base, rack_run, kube_api, compute_domain,
# kube_watch, k8s, kubernetes); 9 since the checks' base and the rights stand on no API module, kube_api names no
# ComputeDomain error, verify_refusal reads the error records from ``record``, and the report's chain lost the
# history's reach into the bandwidth rule and the preflight's into the metrics writer (fleet, checks, a check,
# mpijob, base, record, verification, tray_state, outcomes); 8 since the rack plan's type and the skip reasons a
# run chooses live in the leaf ``rack_plan`` and ``by_name`` in ``text``, so that the record and the checks' base
# stand on no planner (fleet, checks, a check, tray_pods, verification_objects, verification, tray_state,
# outcomes); 7 since a check's objects take their names from the leaf ``object_names`` and the toleration of the
# failed trays' taint from ``node_taint`` (not from the planner), and the nvbandwidth judge is the check's own, so
# that ``judges`` stands on no nvbandwidth parser (fleet, checks, a check, tray_pods, base, record, outcomes). It
# may shrink, never grow.
LONGEST_CHAIN = 7


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PLUGINS).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(tree: ast.Module, known: Set[str]) -> Tuple[Set[str], Set[str]]:
    """(module-level imports, imports inside functions) of the collection's modules and of the client."""
    top: Set[str] = set()
    inner: Set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        if is_type_checking(node):
            return
        targets: List[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PREFIX):
                base = node.module[len(PREFIX) :]
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            elif node.module.split(".")[0] == CLIENT:
                targets = [CLIENT]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    targets.append(alias.name[len(PREFIX) :])
                elif alias.name.split(".")[0] == CLIENT:
                    targets.append(CLIENT)
        (inner if in_function else top).update(targets)
        function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function or function)

    visit(tree, False)
    return top, inner


def graph() -> Tuple[Dict[str, Set[str]], Dict[str, Set[str]]]:
    paths = {module_name(path): path for path in PLUGINS.rglob("*.py")}
    top: Dict[str, Set[str]] = {CLIENT: set()}
    every: Dict[str, Set[str]] = {CLIENT: set()}
    for name, path in paths.items():
        module_level, inner = imports_of(ast.parse(path.read_text(encoding="utf-8")), set(paths))
        top[name] = module_level - {name}
        every[name] = (module_level | inner) - {name}
    return top, every


TOP, EVERY = graph()
MODULE_UTILS = sorted(name for name in TOP if name.startswith("module_utils."))


def reaches(start: str, target: str, edges: Dict[str, Set[str]]) -> List[str]:
    """A path of imports from ``start`` to ``target`` (empty when there is none)."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        current = todo.pop()
        for following in sorted(edges.get(current, ())):
            if following not in paths:
                paths[following] = paths[current] + [following]
                if following == target:
                    return paths[following]
                todo.append(following)
    return []


def longest_chain(start: str, edges: Dict[str, Set[str]], seen: Tuple[str, ...] = ()) -> List[str]:
    best = [start]
    for following in edges.get(start, ()):
        if following not in seen:
            chain = [start, *longest_chain(following, edges, (*seen, start))]
            best = chain if len(chain) > len(best) else best
    return best


def test_the_graph_is_read():
    assert "module_utils.record" in TOP and "module_utils.k8s" in TOP
    assert CLIENT in TOP["module_utils.k8s"]
    assert reaches("module_utils.rack_run", CLIENT, TOP)


@pytest.mark.parametrize("name", [n for n in MODULE_UTILS if n.split(".")[1] not in API_LAYER], ids=str)
def test_a_module_outside_the_api_layer_reaches_no_client(name):
    path = reaches(name, CLIENT, EVERY)
    assert not path, " -> ".join(path)


@pytest.mark.parametrize("name", MODULE_UTILS, ids=str)
def test_no_module_imports_itself_back(name):
    for following in sorted(EVERY[name]):
        back = reaches(following, name, EVERY)
        assert not back, " -> ".join([name, *back])


def test_the_longest_chain_of_imports_does_not_grow():
    chains = [longest_chain(name, TOP) for name in MODULE_UTILS]
    longest = max(chains, key=len)
    assert len(longest) <= LONGEST_CHAIN, " -> ".join(longest)
