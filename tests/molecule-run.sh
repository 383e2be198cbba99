#!/usr/bin/env bash
# One molecule scenario on the simulated cluster (`make scenario S=<scenario>`, molecule/<scenario>):
# its create brings up only the nodes it uses, then the rest of its sequence (converge and verify, as
# molecule/<scenario>/molecule.yml lists them), and its destroy removes what its create made. Extra arguments go
# to `molecule test`.
#
# The whole output also goes to a log; its phases, the slowest tests, and what failed (as words, not
# test paths) are printed again at the very end, after destroy's output: a CI log that keeps
# only its tail still says what broke.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:?usage: tests/molecule-run.sh <scenario> [molecule test options]}
shift
if [[ ! -f molecule/$scenario/molecule.yml ]]; then
  echo "molecule: no scenario '$scenario'; the scenarios are: $(cd molecule && ls -d */molecule.yml | sed 's#/molecule.yml##' | xargs)" >&2
  exit 2
fi
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
export PATH="$PWD/.venv/bin:$PATH"
# Molecule's console wraps at the terminal's width (80 in CI): wide enough that a test's id and its
# duration stay on one line, for the reader and for the summary below.
export COLUMNS=${COLUMNS:-220}
log=$(mktemp "/tmp/lanekit-molecule-$scenario.XXXXXX.log")
rc=0
start=$SECONDS
# Molecule's phase lines get the wall-clock time, and are repeated at the end: where CI's minutes go.
# Molecule looks for a scenario named default (for its shared state) and, finding none, prints a
# CRITICAL "glob failed. Exiting." line and goes on: dropped, it is not what happened.
molecule test -s "$scenario" "$@" 2>&1 | while IFS= read -r line; do
  case $line in
    *"/default/molecule.yml' glob failed"*) ;;
    *"➜"*) printf '[%s] %s\n' "$(date +%T)" "$line" ;;
    *) printf '%s\n' "$line" ;;
  esac
done | tee "$log" || rc=$?
echo "molecule $scenario: whole output in $log"
# Last, so that a log cut to its tail keeps it: phases, slowest tests, and what failed, in words.
"${PYTHON:-python3}" tests/tools/molecule_summary.py "$log" || true
if ((rc)); then echo "molecule $scenario: FAILED (exit $rc) after $((SECONDS - start)) s"; exit "$rc"; fi
echo "molecule $scenario: passed in $((SECONDS - start)) s"
