# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install the pinned Helm release for the image's architecture (a build step of execution-environment.yml).

    python3 install_helm.py [--arch amd64|arm64] [--dest /usr/local/bin/helm] [--url-base URL]

kubernetes.core.helm runs the ``helm`` binary; no Python or system package carries it. The tarball is
checked against the release's published SHA-256 before anything is unpacked; an architecture without a
pinned checksum is refused. ``--url-base`` (or HELM_URL_BASE) points at a mirror of the release files.
Standard library only: it runs in the image before anything else is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import sys
import tarfile
import urllib.request

HELM_VERSION = "v3.19.5"
# The SHA-256 of helm-<version>-linux-<arch>.tar.gz, as the Helm release publishes them.
HELM_SHA256 = {
    "amd64": "a0a5e8c592ed3f376ac110715eff214730c7422f9a44d96cf98117d2b8b0e6c0",
    "arm64": "ce02147ffee6d993bf8ae97a44a22e9e1daf0b69d2d5b69a0c8cf6706445ccf5",
}
URL_BASE = "https://get.helm.sh"
# uname -m names -> Go's (and the container builder's TARGETARCH) names
MACHINE_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def helm_arch(target_arch: str, machine: str) -> str:
    """The release architecture: TARGETARCH when the builder sets it, else the machine the step runs on."""
    arch = target_arch.strip() or MACHINE_ARCH.get(machine.lower(), machine.lower())
    if arch not in HELM_SHA256:
        raise ValueError(
            f"no pinned Helm {HELM_VERSION} checksum for architecture {arch!r}; "
            f"supported: {', '.join(sorted(HELM_SHA256))}"
        )
    return arch


def tarball_name(arch: str) -> str:
    return f"helm-{HELM_VERSION}-linux-{arch}.tar.gz"


def helm_binary(data: bytes, arch: str) -> bytes:
    """The helm binary out of a release tarball, after its checksum matched the pinned one."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != HELM_SHA256[arch]:
        raise ValueError(f"{tarball_name(arch)}: SHA-256 {digest}, expected {HELM_SHA256[arch]}; not installed")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        try:
            member = archive.extractfile(f"linux-{arch}/helm")
        except KeyError:
            member = None
        if member is None:
            raise ValueError(f"{tarball_name(arch)}: no linux-{arch}/helm in the tarball")
        return member.read()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default=os.environ.get("TARGETARCH", ""))
    parser.add_argument("--dest", default="/usr/local/bin/helm")
    parser.add_argument("--url-base", default=os.environ.get("HELM_URL_BASE") or URL_BASE)
    args = parser.parse_args(argv)
    try:
        arch = helm_arch(args.arch, platform.machine())
        url = f"{args.url_base.rstrip('/')}/{tarball_name(arch)}"
        with urllib.request.urlopen(url, timeout=120) as response:
            binary = helm_binary(response.read(), arch)
    except (ValueError, OSError, tarfile.TarError) as error:
        print(f"install_helm: {error}", file=sys.stderr)
        return 1
    with open(args.dest, "wb") as handle:
        handle.write(binary)
    os.chmod(args.dest, 0o755)
    print(f"install_helm: Helm {HELM_VERSION} ({arch}) installed as {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
