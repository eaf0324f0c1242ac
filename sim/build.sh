#!/usr/bin/env bash
# Build the simulated rack's real components from the Go module proxy into a
# version-keyed cache outside the repository. Re-running is cheap: a binary that
# is already present is not rebuilt.
set -euo pipefail

# GPU_FABRIC_SIM_K8S_VERSION picks the Kubernetes release (a full version, e.g. 1.37.2); each
# version has its own cache directory, so several can be kept side by side.
if [ -n "${GPU_FABRIC_SIM_K8S_VERSION:-}" ]; then K8S_VERSION="$GPU_FABRIC_SIM_K8S_VERSION"; fi
K8S_VERSION="${K8S_VERSION:-1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-0.7.0}"
HELM_VERSION="${HELM_VERSION:-3.19.5}"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--mod=mod}"
staging_version="0.${K8S_VERSION#1.}"
k8s_minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
cache_root="${GPU_FABRIC_SIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-fabric-sim}"
cache="$cache_root/k8s${K8S_VERSION}-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}-helm${HELM_VERSION}"
bin="$cache/bin"
mkdir -p "$bin"

step() { printf '[sim build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# One build at a time per cache: a second invocation waits, then finds the binaries and skips.
exec 9>"$cache/.build.lock"
if ! flock -n 9; then
  step "another build holds $cache/.build.lock; waiting for it"
  flock 9
fi

timed() {  # timed NAME FUNCTION: run a build step and say how long it took
  local t0=$SECONDS
  "$2"
  step "$1 ready ($(( SECONDS - t0 ))s)"
}

have_all() { for b in "$@"; do [ -x "$bin/$b" ] || return 1; done; }

# etcd, Helm and KWOK do not depend on the Kubernetes release: a cache of another release built with the same
# version of one holds that binary already. It is copied (to a temporary name, then renamed) only while no build
# holds that cache's lock, so a binary being written is never taken.
reuse() {  # reuse BINARY NAME_PART: the binary from another cache whose directory name holds NAME_PART
  local other
  for other in "$cache_root"/*"$2"*; do
    [ "$other" != "$cache" ] && [ -x "$other/bin/$1" ] && [ -f "$other/.build.lock" ] || continue
    if flock -n "$other/.build.lock" cp "$other/bin/$1" "$bin/.$1.copy"; then
      mv "$bin/.$1.copy" "$bin/$1"
      step "$1: copied from $other (the same version, built for another Kubernetes release)"
      return 0
    fi
  done
  return 1
}

build_kubernetes() {
  have_all kube-apiserver kube-controller-manager kube-scheduler kubectl && return 0
  local mod="$cache/src/kubernetes"
  mkdir -p "$mod" && cd "$mod"
  [ -f go.mod ] || go mod init gpu-fabric-sim.invalid/kubernetes >/dev/null 2>&1
  # The staging modules (k8s.io/api, k8s.io/client-go, ...) differ between minors (1.37 adds
  # k8s.io/streaming and k8s.io/cri-streaming): read them, and the GODEBUG default, from the
  # go.mod of k8s.io/kubernetes at this version, which replaces each with ./staging/src/k8s.io/NAME.
  step "reading the go.mod of k8s.io/kubernetes v$K8S_VERSION"
  local gomod
  gomod="$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  [ -f "$gomod" ] || { echo "sim build: no go.mod for k8s.io/kubernetes v$K8S_VERSION" >&2; return 1; }
  local staging
  staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/.*#\1#p' "$gomod")"
  [ -n "$staging" ] || { echo "sim build: no staging modules in $gomod" >&2; return 1; }
  for m in $staging; do go mod edit -replace="$m=$m@v$staging_version"; done
  local godebug
  godebug="$(sed -n 's/^godebug[[:space:]]*\(default=go[0-9.]*\)$/\1/p' "$gomod")"
  go mod edit -godebug="${godebug:-default=go1.24}"
  step "resolving k8s.io/kubernetes v$K8S_VERSION modules (first run downloads ~1 GB)"
  go get "k8s.io/kubernetes@v$K8S_VERSION"
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  step "compiling kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (cold: 20-40 min on 2 cores)"
  go build -trimpath -ldflags "$ldflags" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  have_all etcd && return 0
  reuse etcd "-etcd${ETCD_VERSION}-" && return 0
  local mod="$cache/src/etcd"
  mkdir -p "$mod" && cd "$mod"
  [ -f go.mod ] || go mod init gpu-fabric-sim.invalid/etcd >/dev/null 2>&1
  step "building etcd v$ETCD_VERSION"
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
}

build_helm() {
  have_all helm && return 0
  reuse helm "-helm${HELM_VERSION}" && return 0
  step "building helm v$HELM_VERSION"
  GOBIN="$bin" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
}

build_kwok() {
  have_all kwok && return 0
  reuse kwok "-kwok${KWOK_VERSION}-" && return 0
  step "building kwok v$KWOK_VERSION"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
}

start=$(date +%s)
timed etcd build_etcd
timed helm build_helm
timed kwok build_kwok
timed kubernetes build_kubernetes
step "all components in $bin ($(( $(date +%s) - start ))s)"
echo "$bin"
