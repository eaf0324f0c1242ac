# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run one stand-in controller: ``python -m simrack.controllers <name> --state DIR --kubeconfig FILE``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from simrack.controllers.computedomain import ComputeDomainController
from simrack.controllers.gpuoperator import GPUOperatorController
from simrack.controllers.kube import Kube
from simrack.controllers.kubeletplugin import KubeletPluginController
from simrack.controllers.mpioperator import MPIOperatorController
from simrack.controllers.podlogs import PodLogsController

CONTROLLERS = {
    c.name: c
    for c in (
        ComputeDomainController,
        GPUOperatorController,
        KubeletPluginController,
        MPIOperatorController,
        PodLogsController,
    )
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m simrack.controllers")
    parser.add_argument("name", choices=sorted(CONTROLLERS))
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format=f"%(asctime)s {args.name} %(levelname)s %(message)s",
    )
    controller = CONTROLLERS[args.name](Kube(args.kubeconfig), args.state)
    signal.signal(signal.SIGTERM, lambda *_: controller.stop())
    logging.getLogger("simrack").info("started (state %s)", args.state)
    controller.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
