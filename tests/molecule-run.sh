#!/usr/bin/env bash
# The molecule scenario on the simulated cluster: create (sim-up), check, converge (deploy),
# idempotence, verify (testinfra on every node), destroy (sim-down). LANEKIT_LANE picks the lane.
#
# The whole output also goes to a log; when the run fails, its failed tests, the slowest ones and
# the failed tasks are printed again at the very end, after destroy's output: a CI log that keeps
# only its tail still says what broke.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
log=$(mktemp /tmp/lanekit-molecule.XXXXXX.log)
rc=0
molecule test -s default "$@" 2>&1 | tee "$log" || rc=$?
plain() { sed 's/\x1b\[[0-9;]*m//g' "$log" | sed 's/^ *│ \{0,1\}//'; }
echo "molecule: whole output in $log"
if ((rc)); then
  echo "molecule: FAILED (exit $rc). What failed:"
  plain | grep -aE '^(FAILED|ERROR) tests/|^fatal: |^failed: |Error: ' | cut -c1-400 | tail -n 40 || true
fi
echo "molecule: the slowest verify tests:"
plain | grep -aE '^[0-9.]+s (call|setup|teardown) ' | head -n 25 || true
exit "$rc"
