#!/usr/bin/env bash
# Copyright (c) gpu_fabric.mnnvl contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Run Molecule scenarios STREAMS at a time, in the order given (longest first, so that the last to end
# is a short one): tests/molecule/run-scenarios.sh STREAMS SCENARIO...
#
# Each scenario runs whole (destroy, create, prepare, converge, idempotence, verify, destroy) on trays of
# its own (its platforms' names are its own, each tray has its own network namespace), its output in
# .tmp/molecule/<scenario>.log, printed whole when it ends; a summary line each (wall time and Molecule's
# idempotence verdict) goes to .tmp/molecule/summary. Exit status: 1 when any scenario failed.
set -euo pipefail
streams=$1
shift
mkdir -p .tmp/molecule
: >.tmp/molecule/summary
[ "$#" -gt 0 ] || exit 0

run_one() {
  local s=$1 start rc=0 idem
  start=$(date +%s)
  molecule test -s "$s" >".tmp/molecule/$s.log" 2>&1 || rc=$?
  idem=$(sed -n 's/\x1b\[[0-9;]*m//g; s/.*\(idempotence: [A-Za-z]*: [A-Za-z]*\).*/\1/p' ".tmp/molecule/$s.log" | tail -n 1)
  {
    flock 9
    printf '=== molecule %s (%s s, %s at a time)\n' "$s" $(($(date +%s) - start)) "$STREAMS"
    cat ".tmp/molecule/$s.log"
    printf 'molecule %-14s %-6s %4ss  %s\n' "$s" "$([ "$rc" -eq 0 ] && echo passed || echo FAILED)" \
      $(($(date +%s) - start)) "${idem:-idempotence: not reached}" >>.tmp/molecule/summary
  } 9>.tmp/molecule/.lock
}
export -f run_one
export STREAMS=$streams

printf '%s\n' "$@" | xargs -P "$streams" -I{} bash -c 'run_one "$1"' _ {} || true
# every scenario said, and none failed
[ "$(wc -l <.tmp/molecule/summary)" -eq "$#" ] && ! grep -q ' FAILED ' .tmp/molecule/summary
