#!/usr/bin/env bash
# The molecule scenario on the simulated cluster: create (sim-up), check, converge (deploy),
# idempotence, verify (testinfra on every node), destroy (sim-down). LANEKIT_LANE picks the lane.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
molecule test -s default "$@"
