#!/usr/bin/env bash
# Copyright: lanekit developers
# Apache-2.0
#
# Helpers to run the real vLLM CPU TP2 lane as two containers on the host docker (a test
# instrument, used to capture tests/fixtures/real_vllm). Source it, then:
#   lk_net_up; lk_start 0 [extra args...]; lk_start 1 [extra args...]; lk_wait_ready 600; ...
# Containers: lkreal-rank0 (172.31.222.10), lkreal-rank1 (172.31.222.11) on network lkreal-net.
# Only these containers' addresses are contacted.
LK_IMAGE=${LK_IMAGE:-lkreal/vllm-cpu-thin:test}
LK_MODEL=${LK_MODEL:-/work/cache/tiny-llama}
LK_NET=lkreal-net
LK_SUBNET=172.31.222.0/24
LK_IP0=172.31.222.10
LK_IP1=172.31.222.11
LK_KEY=${LK_KEY:-lkreal-test-key}
LK_KVSPACE=${LK_KVSPACE:-1}

lk_net_up() { docker network inspect "$LK_NET" >/dev/null 2>&1 || docker network create --subnet "$LK_SUBNET" "$LK_NET" >/dev/null; }
lk_net_down() { docker network rm "$LK_NET" >/dev/null 2>&1 || true; }

# lk_start RANK [extra vllm args...]
lk_start() {
    local rank=$1; shift
    local ip=$LK_IP0; [ "$rank" = 1 ] && ip=$LK_IP1
    local extra=(); [ "$rank" = 1 ] && extra=(--headless)
    docker rm -f "lkreal-rank$rank" >/dev/null 2>&1 || true
    docker run -d --name "lkreal-rank$rank" --network "$LK_NET" --ip "$ip" --shm-size 1g \
        -v "$LK_MODEL:/model:ro" \
        -e HF_HUB_OFFLINE=1 -e VLLM_CPU_KVCACHE_SPACE="$LK_KVSPACE" -e VLLM_CPU_OMP_THREADS_BIND="$rank" \
        -e VLLM_HOST_IP="$ip" \
        "$LK_IMAGE" /model --served-model-name tiny --host 0.0.0.0 --port 8000 --api-key "$LK_KEY" \
        --max-model-len "${LK_MAX_MODEL_LEN:-512}" --dtype float32 --enforce-eager --tensor-parallel-size 2 \
        --nnodes 2 --node-rank "$rank" --master-addr "$LK_IP0" --master-port 29501 \
        --distributed-timeout-seconds 600 "${extra[@]}" "$@" >/dev/null
}

lk_running() { [ "$(docker inspect -f '{{.State.Running}}' "lkreal-rank$1" 2>/dev/null)" = true ]; }
lk_exitcode() { docker inspect -f '{{.State.ExitCode}}' "lkreal-rank$1" 2>/dev/null; }

# lk_wait_log RANK PATTERN TIMEOUT_S: seconds waited, or return 1 (timeout or the container exited)
lk_wait_log() {
    local rank=$1 pattern=$2 timeout=$3 t0 now
    t0=$(date +%s.%N)
    while :; do
        if docker logs "lkreal-rank$rank" 2>&1 | grep -qF -- "$pattern"; then
            now=$(date +%s.%N); echo "$now - $t0" | bc; return 0
        fi
        lk_running "$rank" || return 1
        now=$(date +%s.%N)
        [ "$(echo "$now - $t0 > $timeout" | bc)" = 1 ] && return 1
        sleep 0.5
    done
}

# lk_wait_exit RANK TIMEOUT_S: seconds until the container stopped, or return 1
lk_wait_exit() {
    local rank=$1 timeout=$2 t0 now
    t0=$(date +%s.%N)
    while lk_running "$rank"; do
        now=$(date +%s.%N)
        [ "$(echo "$now - $t0 > $timeout" | bc)" = 1 ] && return 1
        sleep 0.5
    done
    now=$(date +%s.%N); echo "$now - $t0" | bc
}

# lk_save_logs DIR: rank0.log, rank1.log (ANSI colour codes stripped, lines otherwise verbatim)
lk_save_logs() {
    local dir=$1 rank
    mkdir -p "$dir"
    for rank in 0 1; do
        docker logs "lkreal-rank$rank" 2>&1 | sed -E 's/\x1b\[[0-9;]*[A-Za-z]//g' > "$dir/rank$rank.log" || true
    done
}

# lk_rss RANK: "docker stats memory | sum of process RSS (MiB) | processes"
lk_rss() {
    local rank=$1 stats sum
    stats=$(docker stats --no-stream --format '{{.MemUsage}}' "lkreal-rank$rank")
    sum=$(docker exec "lkreal-rank$rank" ps -eo rss=,args= 2>/dev/null | awk '{s+=$1} END {printf "%.0f", s/1024}')
    echo "$stats | RSS sum ${sum} MiB"
    docker exec "lkreal-rank$rank" ps -eo pid=,rss=,args= 2>/dev/null | awk '{printf "    pid %s rss %.0f MiB %s\n", $1, $2/1024, substr($0, index($0,$3), 60)}'
}

lk_clean() { docker rm -f lkreal-rank0 lkreal-rank1 >/dev/null 2>&1 || true; }
