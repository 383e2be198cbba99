#!/usr/bin/env bash
# The molecule scenario on the simulated cluster: create (sim-up), check, converge (deploy),
# idempotence, verify (testinfra on every node), destroy (sim-down). LANEKIT_LANE picks the lane.
#
# The whole output also goes to a log; its phases, the slowest tests, and what failed (as words, not
# test paths) are printed again at the very end, after destroy's output: a CI log that keeps
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
echo "molecule: whole output in $log"
# Last, so that a log cut to its tail keeps it: phases, slowest tests, and what failed, in words.
"${PYTHON:-python3}" tests/tools/molecule_summary.py "$log" || true
if ((rc)); then echo "molecule: FAILED (exit $rc)"; fi
exit "$rc"
