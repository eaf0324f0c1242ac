# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

"""bench/fleet_verify.py: CPU seconds per process group, read from /proc, and the table of them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench" / "fleet_verify.py"
sys.path.insert(0, str(BENCH.parent))  # as when the script runs: its helpers beside it
_SPEC = importlib.util.spec_from_file_location("fleet_verify", BENCH)
fleet_verify = sys.modules.setdefault("fleet_verify", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(fleet_verify)


def test_a_busy_process_is_counted_by_its_pid_file_and_a_gone_one_is_zero(tmp_path):
    # 0.4 s of CPU by the process's clock: /proc counts it in ticks of 10 ms, each truncated, so 0.3 s can read 0.29
    spin = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\ninput()"
    busy = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE)
    try:
        (tmp_path / "pids").mkdir()
        (tmp_path / "pids" / "kube-apiserver.pid").write_text(f"{busy.pid}\n")
        (tmp_path / "pids" / "etcd.pid").write_text("999999999\n")
        seconds, deadline = 0.0, time.monotonic() + 60  # the spin takes 0.4 s of CPU, longer on a busy machine
        while seconds < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
            seconds = fleet_verify.cpu_seconds(tmp_path)["kube-apiserver"]
        assert seconds >= 0.3
        assert fleet_verify.cpu_seconds(tmp_path)["etcd"] == 0.0
        assert fleet_verify.cpu_seconds(tmp_path)["collection"] >= 0.0
    finally:
        busy.kill()
        busy.wait()


def test_the_cpu_table_puts_the_collection_per_tray_last():
    result = {
        "size": "1x18",
        "trays": 18,
        "parallel": {
            "wall_s": 20.0,
            "cpu_s": {"collection": 9.0, "kube-apiserver": 4.0, "etcd": 1.0, "stand-ins": 2.0},
        },
    }

    lines = fleet_verify.cpu_table([result]).splitlines()

    assert lines[0].startswith("| size | trays | wall (s) | collection CPU (s) | kube-apiserver CPU (s)")
    assert lines[2] == "| 1x18 | 18 | 20.0 | 9.0 | 4.0 | 1.0 | 0.0 | 0.0 | 0.0 | 2.0 | 16.0 | 0.80 | 0.500 |"
