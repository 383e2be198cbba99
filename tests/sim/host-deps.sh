#!/usr/bin/env bash
# Host dependencies of the simulated cluster (Debian 12, run as root): the Docker engine,
# debootstrap (base images without a registry) and Debian's docker-registry.
# Idempotent: installs only what is missing and starts dockerd only if it is not answering.
# There is no systemd on our machines, so dockerd is started in the background by hand.
set -euo pipefail

PACKAGES=(docker.io debootstrap docker-registry openssh-client)
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
DOCKERD_WAIT_S=${DOCKERD_WAIT_S:-60}

if [[ $(id -u) -ne 0 ]]; then
    echo "host-deps: must run as root (it installs packages and starts dockerd)" >&2
    exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [[ $status != installed ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]})); then
    echo "host-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The docker-registry package would start its own service through invoke-rc.d; without an
    # init system that fails harmlessly, but keep it quiet and never start anything here.
    policy=/usr/sbin/policy-rc.d
    created_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 0755 "$policy"
        created_policy=1
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
    if ((created_policy)); then
        rm -f "$policy"
    fi
else
    echo "host-deps: ${PACKAGES[*]} already installed"
fi

if docker info >/dev/null 2>&1; then
    echo "host-deps: dockerd is running"
    exit 0
fi

# A dockerd that is still starting up owns /var/run/docker.pid: wait for it instead.
pid=$(cat /var/run/docker.pid 2>/dev/null || true)
if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
    echo "host-deps: starting dockerd (log: $DOCKERD_LOG)"
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
fi

for ((i = 0; i < DOCKERD_WAIT_S; i++)); do
    if docker info >/dev/null 2>&1; then
        echo "host-deps: dockerd is running"
        exit 0
    fi
    sleep 1
done
echo "host-deps: dockerd did not answer within ${DOCKERD_WAIT_S}s; see $DOCKERD_LOG" >&2
tail -n 20 "$DOCKERD_LOG" >&2 || true
exit 1
