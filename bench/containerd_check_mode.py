# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd_config in check mode with --diff on configs of many runtimes, up to the 1 MiB limit.

A tray whose config.toml carries hundreds of runtimes (one per sandbox, per vendor, per test) is
edited as the containerd role asks (CDI on, its spec dirs, SystemdCgroup): each size is the module
process as Ansible runs it on the tray (`python plugins/modules/containerd_config.py ARGS`, check
mode and diff on, Python's start-up and imports included), median and worst of `--processes`. The
config is version 2 (containerd 1.7), each runtime a table of its own with an options table and
SystemdCgroup false (the role's setting applies to runc and to the runtimes it names); 3,600 runtimes
are just under the 1 MiB that the module reads at most (MAX_CONFIG_BYTES).

    python bench/containerd_check_mode.py                 # 100, 500, 1000, 2000, 3600 runtimes
    python bench/containerd_check_mode.py 50 --processes 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from module_process import ensure_layout, time_module

REPO_ROOT = Path(__file__).resolve().parent.parent
MODULE = REPO_ROOT / "plugins" / "modules" / "containerd_config.py"
CRI = 'plugins."io.containerd.grpc.v1.cri".containerd'


def config(runtimes: int) -> str:
    """A version-2 config.toml with ``runtimes`` runc runtimes besides runc itself."""
    lines = ["version = 2", "", f"[{CRI}]", '  default_runtime_name = "runc"']
    for index in range(runtimes):
        name = f"sandbox-{index:05d}"
        lines += [
            f"  [{CRI}.runtimes.{name}]",
            '    runtime_type = "io.containerd.runc.v2"',
            f"    [{CRI}.runtimes.{name}.options]",
            f'      BinaryName = "/opt/runtimes/{name}/bin/runc"',
            "      SystemdCgroup = false",
        ]
    return "\n".join(lines) + "\n"


def module_process(path: Path, processes: int) -> dict:
    """The module's wall time, in check mode with diff, as a process of its own."""
    module_args = {
        "path": str(path),
        "enable_cdi": True,
        "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"],
        "systemd_cgroup": True,
        "_ansible_check_mode": True,
        "_ansible_diff": True,
    }
    times, result = time_module(MODULE, module_args, processes, lambda result: result.get("changed"))
    return {"median_s": round(statistics.median(times), 2), "max_s": round(max(times), 2), "keys": result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 500, 1000, 2000, 3600], help="runtimes")
    parser.add_argument("--processes", type=int, default=3, help="module processes per size (median, worst)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    ensure_layout()
    rows = []
    print("| runtimes | config | check mode + diff, module process | per 100 runtimes | keys changed |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for runtimes in args.sizes:
            path = Path(tmp) / f"{runtimes}" / "config.toml"
            path.parent.mkdir()
            path.write_text(config(runtimes))
            measured = module_process(path, args.processes)
            changed = len(measured.pop("keys").get("changed_keys", []))
            size = path.stat().st_size
            row = dict(runtimes=runtimes, bytes=size, changed_keys=changed, **measured)
            rows.append(row)
            per_100 = measured["median_s"] / max(runtimes, 1) * 100
            print(
                f"| {runtimes:,} | {size / 1024:,.0f} KiB | median {measured['median_s']} s,"
                f" worst {measured['max_s']} s | {per_100:.3f} s | {changed:,} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
