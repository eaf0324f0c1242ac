"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test creates its sanity virtual environments without pip and fetches a get-pip script
from ci-files.testing.ansible.com to bootstrap them. That host is not reachable from every build
machine, so the Makefile places this file where ansible-test caches the script. It does the same
job with the standard library: ``ensurepip`` into the running interpreter, then ``pip install`` of
the packages ansible-test asks for (it pins pip itself).
"""

from __future__ import annotations

import subprocess
import sys

# get-pip understands these; pip install does not.
_GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main() -> None:
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    args = [arg for arg in sys.argv[1:] if arg not in _GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *args])


if __name__ == "__main__":
    main()
