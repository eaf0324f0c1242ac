# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/run.py --jobs: the longest start first, each benchmark with Helm settings of its own, every exit code kept;
and no two benchmarks that bring a rack up share its ports."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))  # as when the script runs: its helpers beside it


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


run = load("run")


def script(text: str) -> list[str]:
    return [sys.executable, "-c", text]


def test_two_at_a_time_start_the_longest_first_each_with_its_own_helm_settings(tmp_path, capsys):
    started = tmp_path / "started"
    # each records its start, and none ends before two have started (so a slow start of the second one cannot
    # let the third take a slot that the second one's end freed)
    record = (
        "import json, os, sys, time\n"
        f"open({str(started)!r}, 'a').write(sys.argv[1] + '\\n')\n"
        "deadline = time.monotonic() + 30\n"
        f"while len(open({str(started)!r}).read().split()) < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print(json.dumps([os.environ['HELM_REPOSITORY_CONFIG'], os.environ['HELM_REPOSITORY_CACHE']]))\n"
        "sys.exit(int(sys.argv[2]))"
    )
    commands = {
        name: [*script(record), name, "3" if name == "rerun" else "0"] for name in ("parser", "rerun", "api_load")
    }
    results = run.run_all(commands, {"PATH": "/usr/bin:/bin"}, 2)
    assert {name: rc for name, (rc, _seconds) in results.items()} == {"parser": 0, "rerun": 3, "api_load": 0}
    # api_load (74 s in the smoke run) and rerun (67 s) start first; parser waits for a free slot
    assert started.read_text().splitlines()[2] == "parser"
    printed = capsys.readouterr().out
    settings = [json.loads(line) for line in printed.splitlines() if line.startswith("[")]
    assert {Path(config).parent.name for config, _cache in settings} == {"parser", "rerun", "api_load"}
    assert {Path(cache).parent.name for _config, cache in settings} == {"parser", "rerun", "api_load"}
    assert "=== rerun: " in printed and ", 2 at a time)" in printed


def test_the_benchmarks_that_bring_a_rack_up_each_have_ports_of_their_own():
    ports = {
        name: tuple(sorted(load(name).BENCH_PORTS.values()))
        for name in ("sim_up", "clique_scale", "rerun", "fleet_verify", "api_load")
    }
    every = [port for values in ports.values() for port in values]
    assert len(every) == len(set(every)), ports
