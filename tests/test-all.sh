#!/usr/bin/env bash
# `make test`: every check, with the simulated cluster brought up in the background meanwhile.
# sim-up (debootstrap, the node and stand-in images, the real vLLM CPU image: about 4 GB built and
# pushed to the sim registry) is mostly downloads, disk and one core; the unit tests, lint, sanity
# and the collection build use the other. Molecule's create then finds the cluster up and changes
# nothing. The checks need no cluster, so the order of their results is unchanged.
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

checks=0
make unit integration typecheck syntax lint sanity build || checks=$?
echo "test: the checks took $SECONDS s"

start=$SECONDS
if ! wait "$sim_pid"; then
  echo "test: sim-up failed; its failed tasks (whole log: $log):" >&2
  grep -E -A4 '^(fatal|failed):|^ *msg:' "$log" | tail -n 60 >&2 || tail -n 60 "$log" >&2
  exit 1
fi
trap - EXIT
echo "test: sim-up finished ($((SECONDS - start)) s after the checks); its slowest tasks:"
grep -A12 '^=\{20,\}' "$log" | grep -E '[0-9]+\.[0-9]+s$' | head -n 12 || true
if ((checks)); then
  exit "$checks"
fi
# The cluster is up: molecule's create skips its no-op re-run of sim-up.
LANEKIT_SIM_UP_DONE=1 make molecule
