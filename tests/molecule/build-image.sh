#!/usr/bin/env bash
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Build the systemd "GB200 compute tray" image the Molecule scenarios run on:
#   Debian bookworm (debootstrap minbase) + systemd + python3 (+ tomlkit, apt bindings),
#   stand-ins for what cannot exist in a container (nvidia-smi, the nvidia-imex-580 package),
#   and a containerd 1.7.24 release tarball (built from Debian's trixie package, same layout as
#   the upstream release) served on 127.0.0.1 inside the container, plus a local apt repository
#   carrying the same containerd for the package install method.
#
# The image is tagged localhost/gpu-fabric-tray:<hash of the build inputs> and :latest.
# Re-running is cheap: nothing is built when the tagged image exists; the debootstrap root file
# system and the downloaded containerd package are cached under .cache/molecule.
# Runs as root on a fresh Debian/Ubuntu machine with podman and debootstrap installed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image=${GPU_FABRIC_TRAY_IMAGE:-localhost/gpu-fabric-tray}
mirror=${GPU_FABRIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
containerd_suite=trixie
containerd_version=1.7.24
cache=${GPU_FABRIC_CACHE_DIR:-$repo/.cache/molecule}
packages=systemd,systemd-sysv,systemd-timesyncd,dbus,python3,python3-apt,python3-tomlkit,iproute2,procps,kmod,ca-certificates

log() { printf '[build-image] %s\n' "$*" >&2; }

[ "$(id -u)" -eq 0 ] || { log "run as root (rootful podman and debootstrap)"; exit 1; }
for tool in podman debootstrap sha256sum tar; do
  command -v "$tool" >/dev/null || { log "missing $tool: apt-get install podman debootstrap"; exit 1; }
done

# The OCI runtime for the scenarios' containers (molecule.yml points CONTAINERS_CONF here): crun
# refuses systemd containers on hosts with hybrid cgroups (v1 + unified), runc runs them.
mkdir -p "$cache"
if command -v runc >/dev/null; then
  printf '[engine]\nruntime = "runc"\n' >"$cache/containers.conf"
else
  : >"$cache/containers.conf"
  grep -qs cgroup2 /proc/filesystems && [ ! -d /sys/fs/cgroup/unified ] ||
    log "warning: no runc; crun cannot run systemd containers with hybrid cgroups (apt-get install runc)"
fi

inputs_hash=$(
  { printf '%s\n' "$packages" "$suite" "$containerd_suite" "$containerd_version"
    cd "$here" && find build-image.sh files -type f -print0 | sort -z | xargs -0 sha256sum; } |
    sha256sum | cut -c1-12
)
tag="$image:$inputs_hash"
if podman image exists "$tag"; then
  podman tag "$tag" "$image:latest"
  log "image $tag exists; nothing to build"
  exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d "${TMPDIR:-/var/tmp}/gpu-fabric-tray.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs

# 1. The base root file system (cached: only the package list decides it).
base_hash=$(printf '%s %s %s\n' "$packages" "$suite" "$mirror" | sha256sum | cut -c1-12)
base_tar=$cache/base-$suite-$base_hash.tar
if [ ! -s "$base_tar" ]; then
  log "debootstrap $suite ($packages) from $mirror"
  debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf "$base_tar.part" . && mv "$base_tar.part" "$base_tar"
else
  log "reusing $base_tar"
  mkdir -p "$rootfs"
  tar -C "$rootfs" -xf "$base_tar"
fi
arch=$(chroot "$rootfs" dpkg --print-architecture)

# 2. containerd from Debian trixie, downloaded (not installed) through a temporary sources list.
deb=$(find "$cache" -maxdepth 1 -name "containerd_${containerd_version}*_${arch}.deb" | head -n 1)
if [ -z "$deb" ]; then
  log "apt-get download containerd from $containerd_suite"
  apt_tmp=$rootfs/tmp/apt-$containerd_suite
  mkdir -p "$apt_tmp/lists/partial" "$apt_tmp/archives/partial"
  echo "deb $mirror $containerd_suite main" >"$apt_tmp/sources.list"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  apt_opts=(-o "Dir::Etc::SourceList=/tmp/apt-$containerd_suite/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=/tmp/apt-$containerd_suite/lists" -o "Dir::Cache::Archives=/tmp/apt-$containerd_suite/archives"
            -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -qq)
  chroot "$rootfs" apt-get "${apt_opts[@]}" update
  chroot "$rootfs" sh -c "cd /tmp/apt-$containerd_suite && apt-get $(printf '%q ' "${apt_opts[@]}") download 'containerd=${containerd_version}*'"
  cp "$apt_tmp"/containerd_*.deb "$cache/"
  rm -rf "$apt_tmp"
  deb=$(find "$cache" -maxdepth 1 -name "containerd_${containerd_version}*_${arch}.deb" | head -n 1)
fi
[ -n "$deb" ] || { log "containerd $containerd_version .deb not found"; exit 1; }

# 2b. runc, which the containerd release tarball does not bring: the tray suite's package, downloaded
#     the same way, served like https://github.com/opencontainers/runc/releases/download/v<version>/.
runc_deb=$(find "$cache" -maxdepth 1 -name "runc_*_${arch}.deb" | head -n 1)
if [ -z "$runc_deb" ]; then
  log "apt-get download runc from $suite"
  apt_tmp=$rootfs/tmp/apt-$suite
  mkdir -p "$apt_tmp/lists/partial" "$apt_tmp/archives/partial"
  echo "deb $mirror $suite main" >"$apt_tmp/sources.list"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  apt_opts=(-o "Dir::Etc::SourceList=/tmp/apt-$suite/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=/tmp/apt-$suite/lists" -o "Dir::Cache::Archives=/tmp/apt-$suite/archives"
            -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -qq)
  chroot "$rootfs" apt-get "${apt_opts[@]}" update
  chroot "$rootfs" sh -c "cd /tmp/apt-$suite && apt-get $(printf '%q ' "${apt_opts[@]}") download runc"
  cp "$apt_tmp"/runc_*.deb "$cache/"
  rm -rf "$apt_tmp"
  runc_deb=$(find "$cache" -maxdepth 1 -name "runc_*_${arch}.deb" | head -n 1)
fi
[ -n "$runc_deb" ] || { log "runc .deb not found"; exit 1; }

# 3. A release-style tarball (bin/containerd, bin/ctr, ...) and its .sha256sum, laid out like
#    https://github.com/containerd/containerd/releases/download/v<version>/.
log "release tarball from $(basename "$deb")"
dpkg-deb -x "$deb" "$work/deb"
mkdir -p "$work/release/bin"
for b in containerd containerd-shim containerd-shim-runc-v1 containerd-shim-runc-v2 containerd-stress ctr; do
  [ -x "$work/deb/usr/bin/$b" ] && install -m 0755 "$work/deb/usr/bin/$b" "$work/release/bin/$b"
done
release_dir=$rootfs/srv/gpu-fabric-sim/containerd/containerd/releases/download/v$containerd_version
mkdir -p "$release_dir"
tarball=containerd-$containerd_version-linux-$arch.tar.gz
tar -C "$work/release" --owner=0 --group=0 -czf "$release_dir/$tarball" bin
(cd "$release_dir" && sha256sum "$tarball" >"$tarball.sha256sum")
runc_version=$(basename "$runc_deb" | sed -E 's/^runc_([0-9.]+).*/\1/')
dpkg-deb -x "$runc_deb" "$work/runc"
runc_dir=$rootfs/srv/gpu-fabric-sim/opencontainers/runc/releases/download/v$runc_version
mkdir -p "$runc_dir"
install -m 0755 "$work/runc/usr/sbin/runc" "$runc_dir/runc.$arch"
# The upstream file lists every architecture; the other one's line is a stand-in.
(cd "$runc_dir" && sha256sum "runc.$arch" >runc.sha256sum &&
  printf '%064d  runc.%s\n' 0 "$([ "$arch" = amd64 ] && echo arm64 || echo amd64)" >>runc.sha256sum)

# 4. A local apt repository with the same package (containerd_install_method: package) and a
#    stand-in driver package whose nvidia-smi is the stand-in (nvidia_driver_install: true).
apt_repo=$rootfs/srv/gpu-fabric-sim/apt
mkdir -p "$apt_repo"
cp "$deb" "$apt_repo/"
drv=$work/nvidia-driver
install -d "$drv/DEBIAN" "$drv/usr/bin"
ln -s /usr/lib/gpu-fabric-sim/nvidia-smi/nvidia-smi "$drv/usr/bin/nvidia-smi"
sed "s/@ARCH@/$arch/" "$here/files/nvidia-driver-control" >"$drv/DEBIAN/control"
dpkg-deb --root-owner-group --build "$drv" "$apt_repo/nvidia-driver-580-server-open_580.159.04-0gpufabric1_$arch.deb" >/dev/null
(
  cd "$apt_repo"
  for f in *.deb; do
    dpkg-deb -f "$f"
    printf 'Filename: ./%s\nSize: %s\nSHA256: %s\n\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
  done >Packages
)

# 5. Stand-ins and the simulator's services.
install -d "$rootfs/usr/lib/gpu-fabric-sim" "$rootfs/etc/gpu-fabric-sim"
cp -r "$here/files/nvidia-smi" "$rootfs/usr/lib/gpu-fabric-sim/nvidia-smi"
# The sources say "env python" (the collection's shebang rule); bookworm has only python3.
pin_python() { sed -i '1s|^#!/usr/bin/env python$|#!/usr/bin/python3|' "$@"; }
install -m 0755 "$here/files/nvidia-smi.py" "$rootfs/usr/lib/gpu-fabric-sim/nvidia-smi/nvidia-smi"
pin_python "$rootfs/usr/lib/gpu-fabric-sim/nvidia-smi/nvidia-smi"
install -m 0644 "$here/files/gpu-fabric-release-server.service" "$rootfs/etc/systemd/system/"
ln -sf /etc/systemd/system/gpu-fabric-release-server.service \
  "$rootfs/etc/systemd/system/multi-user.target.wants/gpu-fabric-release-server.service"

# The nvidia-imex stand-in is a real Debian package, so that package checks see it as they would.
pkg=$work/nvidia-imex
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/etc/nvidia-imex"
install -m 0755 "$here/files/nvidia-imex/nvidia-imex" "$here/files/nvidia-imex/nvidia-imex-ctl" "$pkg/usr/bin/"
pin_python "$pkg/usr/bin/nvidia-imex" "$pkg/usr/bin/nvidia-imex-ctl"
install -m 0644 "$here/files/nvidia-imex/nvidia-imex.service" "$pkg/lib/systemd/system/"
install -m 0644 "$here/files/nvidia-imex/config.cfg" "$here/files/nvidia-imex/nodes_config.cfg" "$pkg/etc/nvidia-imex/"
sed "s/@ARCH@/$arch/" "$here/files/nvidia-imex/control" >"$pkg/DEBIAN/control"
printf '/etc/nvidia-imex/config.cfg\n/etc/nvidia-imex/nodes_config.cfg\n' >"$pkg/DEBIAN/conffiles"
dpkg-deb --root-owner-group --build "$pkg" "$rootfs/tmp/nvidia-imex.deb" >/dev/null
chroot "$rootfs" dpkg -i /tmp/nvidia-imex.deb >/dev/null
rm -f "$rootfs/tmp/nvidia-imex.deb"
# Installed packages leave their service enabled, as NVIDIA's does on a fresh host.
ln -sf /lib/systemd/system/nvidia-imex.service "$rootfs/etc/systemd/system/multi-user.target.wants/nvidia-imex.service"

# systemd-timesyncd refuses to start in containers; the hosts it stands for are not containers.
install -d "$rootfs/etc/systemd/system/systemd-timesyncd.service.d"
printf '[Unit]\nConditionVirtualization=\n' >"$rootfs/etc/systemd/system/systemd-timesyncd.service.d/container.conf"
# No getty on a console that does not exist.
rm -f "$rootfs/etc/systemd/system/getty.target.wants/"*
echo gpu-fabric-tray >"$rootfs/etc/hostname"
rm -f "$rootfs/etc/resolv.conf"

log "podman import $tag"
tar -C "$rootfs" -c . | podman import --quiet --change 'CMD=/sbin/init' --change 'STOPSIGNAL=SIGRTMIN+3' - "$tag" >/dev/null
podman tag "$tag" "$image:latest"
log "built $tag"
