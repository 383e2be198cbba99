#!/usr/bin/env bash
# The molecule scenario on the simulated cluster: create (sim-up), check, converge (deploy),
# idempotence, verify (testinfra on every node), destroy (sim-down). LANEKIT_LANE picks the lane.
#
# The whole output also goes to a log; the slowest tests, then (when the run fails) the failed
# tests and tasks are printed again at the very end, after destroy's output: a CI log that keeps
# only its tail still says what broke.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
log=$(mktemp /tmp/lanekit-molecule.XXXXXX.log)
rc=0
# Molecule's phase lines get the wall-clock time, and are repeated at the end: where CI's minutes go.
molecule test -s default "$@" 2>&1 | while IFS= read -r line; do
  case $line in *"➜"*) printf '[%s] %s\n' "$(date +%T)" "$line" ;; *) printf '%s\n' "$line" ;; esac
done | tee "$log" || rc=$?
plain() { sed 's/\x1b\[[0-9;]*m//g' "$log" | sed 's/^ *│ \{0,1\}//'; }
echo "molecule: whole output in $log"
# Test names are printed without their directory (a CI log reader may drop path-like words).
short() { sed -E 's#[A-Za-z0-9_./-]*/(test_[A-Za-z0-9_]+\.py)#\1#g; s#::# :: #g'; }
echo "molecule: its phases (wall clock):"
plain | grep -aE '^\[[0-9:]{8}\] .*➜ [a-z]+: (Executing|Executed)' | grep -v 'Testinfra' || true
echo "molecule: the slowest verify tests:"
plain | grep -aE '^[0-9.]+s (call|setup|teardown) ' | head -n 12 | short || true
if ((rc)); then
  # Last, so that a log cut to its tail keeps it.
  echo "molecule: FAILED (exit $rc). What failed:"
  plain | grep -aE '^(FAILED|ERROR) |^fatal: |^failed: |Error: ' | cut -c1-300 | short | tail -n 30 || true
fi
exit "$rc"
