#!/usr/bin/env bash
# Fetch the real containerd binaries of Debian's packages (1.6.20 bookworm, 1.7.24 trixie, 2.1.9 sid)
# into .tmp/containerd/<version>/containerd, verified by sha256, so the unit tests can run
# `containerd --config <edited file> config dump` against the files containerd_config writes.
# Prints the environment (CONTAINERD_BIN_*) the tests read. Cached: a present binary is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
mirror=${GPU_FABRIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
dest=.tmp/containerd
# version  package file  sha256 (the same packages as tests/fixtures/containerd/README.md)
packages=(
  "1.6.20 containerd_1.6.20~ds1-1+deb12u3_amd64.deb 8669d264eeb0fcdb4a0b1ba436ab88ec5dafde4a66e1278ec279d830db4c2216 CONTAINERD_BIN_1_6"
  "1.7.24 containerd_1.7.24~ds1-6+deb13u1_amd64.deb ed708deb96fe476a3bce4efa5c0538dfbcf717ab9a7c7944ba7260342c25899c CONTAINERD_BIN_1_7"
  "2.1.9 containerd_2.1.9+ds1-5_amd64.deb 2dda86ce7033fd612fc50e136679d8174ccad680eb29cd4611e0d2a1b84cf591 CONTAINERD_BIN_2"
)
[ "$(dpkg --print-architecture 2>/dev/null || echo amd64)" = amd64 ] || { echo "# containerd fixtures: amd64 only" >&2; exit 0; }
for entry in "${packages[@]}"; do
  read -r version file sum var <<<"$entry"
  bin="$dest/$version/containerd"
  if [ ! -x "$bin" ]; then
    mkdir -p "$dest/$version"
    curl -fsSL --retry 3 -o "$dest/$file" "$mirror/pool/main/c/containerd/$file"
    echo "$sum  $dest/$file" | sha256sum -c --quiet -
    dpkg-deb --fsys-tarfile "$dest/$file" | tar -xOf - ./usr/bin/containerd >"$bin"
    chmod 0755 "$bin"
    rm -f "$dest/$file"
  fi
  echo "export $var=$PWD/$bin"
done
