#!/usr/bin/env bash
# `make test`: every check, with the simulated cluster brought up in the background meanwhile.
# sim-up (debootstrap, the node and stand-in images, the real vLLM CPU image: about 3.2 GB built and
# pushed to the sim registry) is mostly downloads, disk and one core; the unit and integration tests,
# types and syntax use the other. Molecule starts when the cluster is up (its create then changes
# nothing), with lint, sanity and the collection build still running beside it: on a 2-core machine
# they are mostly one core, and molecule's converge leaves some of the other idle.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"

log=$(mktemp /tmp/lanekit-sim-up.XXXXXX.log)
# profile_tasks: the log ends with the slowest tasks (sim-up is the long pole of the checks' minutes).
ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks \
  .venv/bin/ansible-playbook tests/sim/playbooks/sim_up.yml -e sim_cluster_real_vllm=true >"$log" 2>&1 &
sim_pid=$!
trap 'kill "$sim_pid" 2>/dev/null || true' EXIT
echo "test: sim-up runs in the background (log: $log)"

# The checks in two parts. The first (unit, integration, types, syntax) runs while sim-up does; the
# second (lint, sanity, build: mostly one core) runs beside molecule, which starts as soon as the
# cluster is up instead of after every check. Its output is printed in one block when it ends, and its
# result again at the very end.
checks=0
make unit integration typecheck syntax || checks=$?
echo "test: unit, integration, typecheck and syntax took $SECONDS s"

late_log=$(mktemp /tmp/lanekit-checks.XXXXXX.log)
late_pid=
if ((checks == 0)); then
  (
    late_start=$SECONDS
    late_rc=0
    make lint sanity build >"$late_log" 2>&1 || late_rc=$?
    {
      echo "test: ---- lint, sanity and build (beside sim-up and molecule) ----"
      cat "$late_log"
      echo "test: ---- lint, sanity and build: exit $late_rc after $((SECONDS - late_start)) s ----"
    }
    echo "$late_rc" >"$late_log.rc"
  ) &
  late_pid=$!
fi

start=$SECONDS
if ! wait "$sim_pid"; then
  echo "test: sim-up failed; its failed tasks (whole log: $log):" >&2
  grep -E -A4 '^(fatal|failed):|^ *msg:' "$log" | tail -n 60 >&2 || tail -n 60 "$log" >&2
  if [[ -n $late_pid ]]; then wait "$late_pid" || true; fi
  exit 1
fi
trap - EXIT
echo "test: sim-up finished ($((SECONDS - start)) s after the first checks); its slowest tasks:"
grep -A12 '^=\{20,\}' "$log" | grep -E '[0-9]+\.[0-9]+s$' | head -n 12 || true
if ((checks)); then
  exit "$checks"
fi
# The cluster is up: molecule's create skips its no-op re-run of sim-up.
molecule=0
LANEKIT_SIM_UP_DONE=1 make molecule || molecule=$?
wait "$late_pid" || true
late=$(cat "$late_log.rc" 2>/dev/null || echo 1)
if ((late)); then
  echo "test: lint, sanity or build FAILED (exit $late); the end of their output (whole: $late_log):"
  tail -n 40 "$late_log"
else
  echo "test: lint, sanity and build passed (beside molecule; their output is above, and in $late_log)"
fi
echo "test: finished after $SECONDS s"
if ((molecule)); then
  exit "$molecule"
fi
exit "$late"
