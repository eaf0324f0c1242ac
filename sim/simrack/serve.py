# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static HTTP server on 127.0.0.1 for the Helm repository and the MPI operator manifest.

``python -m simrack.serve --root <state>/www --port N``: ``/charts/index.yaml`` and the packaged
charts, ``/mpi-operator/<version>/mpi-operator.yaml``. Port 0 picks a free port; the chosen port is
written to ``--port-file`` once the socket is bound.
"""

from __future__ import annotations

import argparse
import functools
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class QuietHandler(SimpleHTTPRequestHandler):
    extensions_map = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".yaml": "application/yaml",
        ".tgz": "application/gzip",
    }

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m simrack.serve")
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    args = parser.parse_args(argv)
    handler = functools.partial(QuietHandler, directory=str(args.root))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(f"{server.server_address[1]}\n")
        tmp.replace(args.port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
