#!/usr/bin/env bash
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# make compat: the cluster and verify stages (tests/integration/test_compat.py) on a simulated rack of
# each Kubernetes release in COMPAT_VERSIONS, default the newest patch of every minor from 1.33 that the
# Go module proxy serves. Each release is built into a cache of its own (sim/build.sh; cold: 20-40 min on
# 2 cores) and runs in a state directory of its own; the sim's ports come from the environment
# (GPU_FABRIC_SIM_*_PORT). The table of outcomes and times is written to .tmp/compat/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/.tmp/compat"
mkdir -p "$out"

newest_patches() {  # the newest patch of each minor >= 1.33 that the proxy serves k8s.io/kubernetes at
  # (what sim/build.sh reads the go.mod of; the staging modules such as k8s.io/api list patches it may not serve)
  go list -m -versions k8s.io/kubernetes | tr ' ' '\n' | grep -E '^v1\.[0-9]+\.[0-9]+$' \
    | awk -F. '$2 >= 33 { if (!($2 in best) || $3 + 0 > best[$2]) best[$2] = $3 + 0 }
               END { for (m in best) printf "1.%d.%d\n", m, best[m] }' | sort -t. -k2,2n
}

if [ "${1:-}" = --newest ]; then newest_patches | tail -n 1; exit 0; fi
versions="${COMPAT_VERSIONS:-$(newest_patches | tr '\n' ' ')}"
summary="$out/summary.md"
printf '| Kubernetes | DRA API | cluster + verify | build (s) | rack up (s) | test (s) |\n|---|---|---|---|---|---|\n' >"$summary"
failed=0
for v in $versions; do
  echo "== Kubernetes $v"
  export GPU_FABRIC_SIM_K8S_VERSION="$v" GPU_FABRIC_SIM_STATE="$PWD/.tmp/sim-compat-$v"
  export GPU_FABRIC_SIM_RACKS="${COMPAT_RACKS:-2}" GPU_FABRIC_SIM_TRAYS="${COMPAT_TRAYS:-2}"
  t0=$SECONDS
  if ! sim/build.sh >"$out/build-$v.log" 2>&1; then
    echo "build of $v failed: $out/build-$v.log"; tail -n 20 "$out/build-$v.log"
    printf '| %s | | build failed | %s | | |\n' "$v" "$(( SECONDS - t0 ))" >>"$summary"; failed=1; continue
  fi
  t1=$SECONDS
  outcome=failed
  if sim/rack up >"$out/up-$v.log" 2>&1; then
    t2=$SECONDS
    dra="$(source <(sim/rack env) && kubectl get --raw /apis/resource.k8s.io | python3 -c 'import json,sys; print(json.load(sys.stdin)["preferredVersion"]["version"])' || true)"
    if pytest -p no:cacheprovider tests/integration/test_compat.py >"$out/test-$v.log" 2>&1; then outcome=passed; fi
  else
    t2=$SECONDS; dra=""; echo "sim/rack up failed: $out/up-$v.log"; tail -n 20 "$out/up-$v.log"
  fi
  t3=$SECONDS
  sim/rack down >>"$out/up-$v.log" 2>&1 || true
  [ "$outcome" = passed ] || { failed=1; tail -n 30 "$out/test-$v.log" 2>/dev/null || true; }
  printf '| %s | %s | %s | %s | %s | %s |\n' "$v" "$dra" "$outcome" "$(( t1 - t0 ))" "$(( t2 - t1 ))" "$(( t3 - t2 ))" >>"$summary"
  echo "== Kubernetes $v: $outcome"
done
cat "$summary"
exit "$failed"
