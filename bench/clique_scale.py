# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Clique grouping at fleet scale: the collection against the hand method, paired.

For each size a simulated fleet of its own (racks of 18 trays, own state directory and ports) is
brought up (`sim/rack up` time and resident memory are recorded), then every method below runs
`--repeats` times, in a rotating order so that each round measures all of them under the same load:

- `kubectl + jq`: the hand method's pipeline (`kubectl get nodes -o json | jq ... | column -t`);
- `clique_info`: a playbook of one task, the collection's module;
- `k8s_info + Jinja`: `kubernetes.core.k8s_info` and the grouping written in Jinja, as a playbook
  author would without the collection;
- `verify_cliques role`: `playbooks/verify.yml` with the cliques check alone (variable checks,
  the grouping against the inventory's racks, its record and the report);
- `module code, dicts` and `module code, model objects`: the list and the grouping of clique_info
  inside one Python process (no Ansible start-up), reading the JSON straight into dicts (the
  module's way) and through the client's model objects (its way before; shown for the ratio).

Per method: the median wall time, the API server's count of node LIST requests (its own
`apiserver_request_total` metric, so pages are counted), and the peak resident memory of the
largest process (`wait4`). The ratio column is the median of the per-round ratios to
`kubectl + jq`, so load that changes between rounds cancels out.

    python bench/clique_scale.py                    # 18 144 1152 trays (with .venv/bin on PATH)
    python bench/clique_scale.py 18 144 1152 9216 --repeats 5 --json .tmp/bench-cliques.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RACK = REPO_ROOT / "sim" / "rack"
BIN = REPO_ROOT / ".venv" / "bin"
TRAYS_PER_RACK = 18
# Ports apart from a rack on the defaults (6443, ...) and from the other benchmarks'.
BENCH_PORTS = {
    "GPU_FABRIC_SIM_APISERVER_PORT": "46443",
    "GPU_FABRIC_SIM_ETCD_PORT": "46379",
    "GPU_FABRIC_SIM_ETCD_PEER_PORT": "46380",
    "GPU_FABRIC_SIM_KWOK_PORT": "46247",
    "GPU_FABRIC_SIM_KCM_PORT": "46257",
    "GPU_FABRIC_SIM_SCHEDULER_PORT": "46259",
}
HAND_METHOD = (
    "(echo -e 'NODE\\tLABEL\\tCLIQUE'; kubectl get nodes -o json | jq -r '.items[] | [.metadata.name, "
    '"nvidia.com/gpu.clique", .metadata.labels["nvidia.com/gpu.clique"]] | @tsv\') | column -t'
)
IN_PROCESS = """
import json, sys
sys.path.insert(0, {collections!r})
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.gpu_fabric.mnnvl.plugins.module_utils import k8s
from ansible_collections.gpu_fabric.mnnvl.plugins.modules.clique_info import evaluate
client = get_api_client(kubeconfig={kubeconfig!r})
if {models!r}:
    resource = client.resource("Node", "v1")
    nodes = list(k8s.iter_pages(lambda **kw: k8s.to_dict(client.get(resource, **kw))))
else:
    nodes = k8s.list_all(client, "v1", "Node")
result = evaluate(nodes, {{}})
assert result["gpu_nodes"] == {trays}, result["gpu_nodes"]
"""
NODE_LISTS = re.compile(r'^apiserver_request_total\{[^}]*resource="nodes"[^}]*verb="LIST"[^}]*\} (\S+)$', re.M)


def playbooks(workdir: Path) -> dict[str, Path]:
    """The one-task playbooks of the clique_info and the k8s_info + Jinja methods."""
    clique_info = workdir / "clique_info.yml"
    clique_info.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - gpu_fabric.mnnvl.clique_info:\n        fail_on_violation: false\n      register: cliques\n"
        "    - ansible.builtin.debug:\n        msg: '{{ cliques.cliques | length }} cliques, {{ cliques.gpu_nodes }}"
        " GPU nodes'\n"
    )
    jinja = workdir / "k8s_info_jinja.yml"
    jinja.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - kubernetes.core.k8s_info:\n        kind: Node\n      register: nodes\n"
        "    - ansible.builtin.set_fact:\n        cliques: >-\n"
        "          {% set groups = {} %}{% for node in nodes.resources %}"
        "{% set clique = node.metadata.labels.get('nvidia.com/gpu.clique') %}"
        "{% if clique %}{% set _x = groups.setdefault(clique, []).append(node.metadata.name) %}{% endif %}"
        "{% endfor %}{{ groups }}\n"
        "    - ansible.builtin.debug:\n        msg: '{{ cliques | length }} cliques'\n"
    )
    return {"clique_info": clique_info, "k8s_info + Jinja": jinja}


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Seconds and peak resident memory (MiB, largest process of the tree) of one command; exits on failure."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
    output = proc.stdout.read() if proc.stdout else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)[:200]} failed (exit {proc.returncode}):\n{output.decode()[-3000:]}")
    return elapsed, usage.ru_maxrss // 1024


def node_lists(env: dict[str, str]) -> float:
    """The API server's count of node LIST requests so far."""
    metrics = subprocess.run(
        ["kubectl", "get", "--raw", "/metrics"], capture_output=True, text=True, env=env, check=True
    ).stdout
    return sum(float(value) for value in NODE_LISTS.findall(metrics))


def methods(env: dict[str, str], workdir: Path, trays: int) -> dict[str, list[str]]:
    books = playbooks(workdir)
    collections = str(REPO_ROOT / ".tmp" / "collections")
    python = str(BIN / "python")
    verify_extra = json.dumps({"gpu_fabric_report_dir": str(workdir / "report")})
    kubeconfig = env["KUBECONFIG"]
    return {
        "kubectl + jq": ["bash", "-c", HAND_METHOD],
        "clique_info": [str(BIN / "ansible-playbook"), str(books["clique_info"])],
        "k8s_info + Jinja": [str(BIN / "ansible-playbook"), str(books["k8s_info + Jinja"])],
        "verify_cliques role": [
            str(BIN / "ansible-playbook"),
            "-i",
            "inventories/sim",
            "playbooks/verify.yml",
            "--tags",
            "cliques",
            "-e",
            verify_extra,
        ],
        "module code, dicts": [
            python,
            "-c",
            IN_PROCESS.format(collections=collections, kubeconfig=kubeconfig, models=False, trays=trays),
        ],
        "module code, model objects": [
            python,
            "-c",
            IN_PROCESS.format(collections=collections, kubeconfig=kubeconfig, models=True, trays=trays),
        ],
    }


def rack_memory(env: dict[str, str]) -> int:
    """Resident memory (MiB) of every process of the simulated fleet, from `sim/rack status --json`."""
    result = subprocess.run([str(RACK), "status", "--json"], capture_output=True, text=True, env=env, check=False)
    try:
        status = json.loads(result.stdout)
    except ValueError:
        return 0
    return round(status.get("rss_mib_total") or 0)


def measure(trays: int, repeats: int, only: list[str]) -> dict:
    racks = max(1, trays // TRAYS_PER_RACK)
    state = Path(tempfile.mkdtemp(prefix=f"clique-bench-{trays}-", dir=REPO_ROOT / ".tmp"))
    env = dict(
        os.environ, GPU_FABRIC_SIM_STATE=str(state), ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"), **BENCH_PORTS
    )
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    print(f"--- {trays} trays ({racks} x {TRAYS_PER_RACK}), state {state}", flush=True)
    try:
        up_s, _rss = run_measured(
            [str(RACK), "up", "--racks", str(racks), "--trays-per-rack", str(TRAYS_PER_RACK)], env
        )
        for line in subprocess.run(
            [str(RACK), "env"], capture_output=True, text=True, env=env, check=True
        ).stdout.splitlines():
            key, value = line.removeprefix("export ").split("=", 1)
            env[key] = value.replace("$PATH", env["PATH"]) if key == "PATH" else value
        commands = {
            name: cmd for name, cmd in methods(env, state, racks * TRAYS_PER_RACK).items() if not only or name in only
        }
        names = list(commands)
        samples: dict[str, list[tuple[float, int, float]]] = {name: [] for name in names}
        for round_no in range(repeats):
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            for name in order:
                before = node_lists(env)
                seconds, rss = run_measured(commands[name], env)
                samples[name].append((seconds, rss, node_lists(env) - before))
        result = {"trays": racks * TRAYS_PER_RACK, "up_s": round(up_s, 1), "rack_mib": rack_memory(env), "methods": {}}
        base = samples.get("kubectl + jq")
        for name in names:
            walls = [s[0] for s in samples[name]]
            result["methods"][name] = {
                "median_s": round(statistics.median(walls), 2),
                "ratio": round(statistics.median(w / b[0] for w, b in zip(walls, base)), 2) if base else None,
                "node_lists": round(statistics.median(s[2] for s in samples[name])),
                "peak_mib": max(s[1] for s in samples[name]),
            }
    finally:
        subprocess.run([str(RACK), "down"], env=env, capture_output=True, check=False)
    print(json.dumps(result), flush=True)
    return result


def table(results: list[dict]) -> str:
    lines = [
        "| trays | `sim/rack up` (s) | fleet RSS (MiB) | method | median (s) | x kubectl + jq"
        " | node LIST requests | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for name, m in r["methods"].items():
            ratio = "-" if m["ratio"] is None else f"{m['ratio']:.2f}"
            lines.append(
                f"| {r['trays']} | {r['up_s']} | {r['rack_mib']} | {name} | {m['median_s']} | {ratio} |"
                f" {m['node_lists']} | {m['peak_mib']} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[18, 144, 1152], help="trays (racks of 18)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds per size (default 5)")
    parser.add_argument("--only", action="append", default=[], help="run only this method (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    (REPO_ROOT / ".tmp").mkdir(exist_ok=True)
    results = [measure(size, args.repeats, args.only) for size in args.sizes]
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
