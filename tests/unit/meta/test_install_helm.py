# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Helm step of the execution environment: which release it takes, and what it refuses."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "meta" / "ee"))

import install_helm


def release_tarball(arch: str, binary: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(f"linux-{arch}/helm")
        info.size = len(binary)
        archive.addfile(info, io.BytesIO(binary))
    return buffer.getvalue()


def test_the_architecture_is_the_builders_target_else_the_machine():
    assert install_helm.helm_arch("arm64", "x86_64") == "arm64"
    assert install_helm.helm_arch("", "aarch64") == "arm64"
    assert install_helm.helm_arch("", "x86_64") == "amd64"
    assert install_helm.tarball_name("arm64") == "helm-v3.19.5-linux-arm64.tar.gz"


def test_an_architecture_without_a_pinned_checksum_is_refused():
    refused = r"no pinned Helm v3.19.5 checksum for architecture 'ppc64le'; supported: amd64, arm64"
    with pytest.raises(ValueError, match=refused):
        install_helm.helm_arch("", "ppc64le")


def test_a_tarball_that_is_not_the_pinned_release_is_refused():
    data = release_tarball("amd64", b"not helm")
    with pytest.raises(ValueError, match=r"helm-v3.19.5-linux-amd64.tar.gz: SHA-256 [0-9a-f]{64}, expected a0a5e8c5"):
        install_helm.helm_binary(data, "amd64")


def test_the_binary_comes_out_of_a_tarball_whose_checksum_matches(monkeypatch):
    data = release_tarball("arm64", b"\x7fELF helm")
    monkeypatch.setitem(install_helm.HELM_SHA256, "arm64", hashlib.sha256(data).hexdigest())
    assert install_helm.helm_binary(data, "arm64") == b"\x7fELF helm"
    wrong_layout = release_tarball("amd64", b"\x7fELF helm")
    monkeypatch.setitem(install_helm.HELM_SHA256, "arm64", hashlib.sha256(wrong_layout).hexdigest())
    with pytest.raises(ValueError, match=r"helm-v3.19.5-linux-arm64.tar.gz: no linux-arm64/helm in the tarball"):
        install_helm.helm_binary(wrong_layout, "arm64")
