#!/usr/bin/env bash
# Copyright: lanekit developers
# Apache-2.0
#
# capture.sh CASE OUTDIR: run one real-vLLM TP2 case (two containers, see lane.sh) from a fresh
# start and save rank0.log, rank1.log, notes.txt (timings) and, for "ok", http.json.
# Cases: ok, bogus_flag, rank1_killed_boot, rank1_killed_ready, rank1_killed_idle, rank0_killed_ready,
# kv_too_small, rank1_late.
# Every loop is bounded; the only addresses contacted are the two containers'.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lane.sh
. "$here/lane.sh"
case_name=$1; out=$2
mkdir -p "$out"
notes="$out/notes.txt"
: > "$notes"
note() { echo "$*" | tee -a "$notes"; }
BASE=http://$LK_IP0:8000

# req NAME METHOD PATH KEY [JSON]: one exchange into $out/http/NAME.{headers,body,meta}
req() {
    local name=$1 method=$2 path=$3 key=$4 data=${5:-} args=()
    mkdir -p "$out/http"
    [ -n "$key" ] && args+=(-H "Authorization: Bearer $key")
    [ -n "$data" ] && args+=(-H "Content-Type: application/json" --data "$data")
    curl -sS --max-time 300 -X "$method" "${args[@]}" -D "$out/http/$name.headers" -o "$out/http/$name.body" \
        -w '%{http_code} %{time_total}\n' "$BASE$path" > "$out/http/$name.meta" 2>&1
    printf '%s\t%s %s (key: %s)\t%s\n' "$name" "$method" "$path" "${key:-none}" "$(cat "$out/http/$name.meta")" | tee -a "$notes"
}

boot() {
    lk_clean; lk_net_up
    note "image: $LK_IMAGE ($(docker image inspect -f '{{.Id}}' "$LK_IMAGE" | cut -c1-19)); date: $(date -u +%Y-%m-%dT%H:%M:%SZ); loadavg: $(cut -d' ' -f1-3 /proc/loadavg)"
    T0=$(date +%s.%N)
    lk_start 0 "$@"; lk_start 1 "$@"
}
since() { echo "$(date +%s.%N) - $T0" | bc; }

case "$case_name" in
ok)
    boot
    if t=$(lk_wait_log 0 "Application startup complete." 600); then
        note "ready: rank0 printed 'Application startup complete.' $(since) s after both containers were started"
    else
        note "NOT READY within 600 s"; lk_save_logs "$out"; exit 1
    fi
    sleep 2
    note "memory rank0: $(lk_rss 0)"; note "memory rank1: $(lk_rss 1)"
    req health GET /health ""
    req models_nokey GET /v1/models ""
    req models_badkey GET /v1/models "wrong-key"
    req models_key GET /v1/models "$LK_KEY"
    req completion_first POST /v1/completions "$LK_KEY" '{"model":"tiny","prompt":"hello world","max_tokens":16,"temperature":0}'
    req completion_second POST /v1/completions "$LK_KEY" '{"model":"tiny","prompt":"hello world","max_tokens":16,"temperature":0}'
    req chat POST /v1/chat/completions "$LK_KEY" '{"model":"tiny","messages":[{"role":"user","content":"hello world"}],"max_tokens":16,"temperature":0}'
    req chat_stream POST /v1/chat/completions "$LK_KEY" '{"model":"tiny","messages":[{"role":"user","content":"hello world"}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
    req chat_badkey POST /v1/chat/completions "wrong-key" '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
    req chat_unknown_model POST /v1/chat/completions "$LK_KEY" '{"model":"nope","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
    req version GET /version ""
    req metrics GET /metrics ""
    note "memory after requests rank0: $(lk_rss 0)"; note "memory after requests rank1: $(lk_rss 1)"
    # SIGTERM: rank0 first (the API server and the engine), then the headless rank1.
    t=$(date +%s.%N); docker stop -t 30 lkreal-rank0 >/dev/null
    note "docker stop -t 30 lkreal-rank0: $(echo "$(date +%s.%N) - $t" | bc) s, exit code $(lk_exitcode 0)"
    sleep 3; note "rank1 running 3 s after rank0 stopped: $(lk_running 1 && echo yes || echo no)"
    t=$(date +%s.%N); docker stop -t 30 lkreal-rank1 >/dev/null
    note "docker stop -t 30 lkreal-rank1: $(echo "$(date +%s.%N) - $t" | bc) s, exit code $(lk_exitcode 1)"
    ;;
bogus_flag)
    boot --lanekit-bogus 1
    for r in 0 1; do
        if t=$(lk_wait_exit "$r" 120); then note "rank$r exited after ${t} s with code $(lk_exitcode "$r")"; else note "rank$r still running after 120 s"; fi
    done
    ;;
rank1_killed_boot)
    boot
    # Kill rank 1 once it has joined and is loading (rank 0's worker has started to load).
    if t=$(lk_wait_log 1 "${LK_KILL_AT:-Starting to load model}" 600); then
        docker kill lkreal-rank1 >/dev/null; note "docker kill lkreal-rank1 at $(since) s (rank1 had printed '${LK_KILL_AT:-Starting to load model}')"
    else note "rank1 never printed the kill point"; fi
    if grep -qF "Application startup complete." <(docker logs lkreal-rank0 2>&1); then note "NOTE: rank0 was already ready at the kill"; fi
    if t=$(lk_wait_exit 0 "${LK_OBSERVE_S:-240}"); then note "rank0 exited ${t} s after the kill, code $(lk_exitcode 0)"
    else note "rank0 still running ${LK_OBSERVE_S:-240} s after the kill; stopping it"; fi
    ;;
rank1_killed_ready)
    boot
    lk_wait_log 0 "Application startup complete." 600 >/dev/null && note "ready at $(since) s" || { note "not ready"; lk_save_logs "$out"; exit 1; }
    req chat_before POST /v1/chat/completions "$LK_KEY" '{"model":"tiny","messages":[{"role":"user","content":"hello world"}],"max_tokens":4,"temperature":0}'
    docker kill lkreal-rank1 >/dev/null; note "docker kill lkreal-rank1 at $(since) s"
    sleep 5
    req health_after_kill GET /health ""
    req chat_after_kill POST /v1/chat/completions "$LK_KEY" '{"model":"tiny","messages":[{"role":"user","content":"hello world"}],"max_tokens":4,"temperature":0}'
    if t=$(lk_wait_exit 0 "${LK_OBSERVE_S:-180}"); then note "rank0 exited ${t} s after the requests, code $(lk_exitcode 0)"
    else note "rank0 still running ${LK_OBSERVE_S:-180} s after the requests"; req health_late GET /health ""; fi
    ;;
rank1_late)
    # Rank 0 alone for LK_OBSERVE_S (what does a head print while a rank is missing?), then rank 1.
    lk_clean; lk_net_up
    note "image: $LK_IMAGE ($(docker image inspect -f '{{.Id}}' "$LK_IMAGE" | cut -c1-19)); date: $(date -u +%Y-%m-%dT%H:%M:%SZ); loadavg: $(cut -d' ' -f1-3 /proc/loadavg)"
    T0=$(date +%s.%N)
    lk_start 0
    sleep "${LK_OBSERVE_S:-90}"
    note "rank0 alone for ${LK_OBSERVE_S:-90} s: running $(lk_running 0 && echo yes || echo no), $(docker logs lkreal-rank0 2>&1 | wc -l) log lines; last: $(docker logs lkreal-rank0 2>&1 | tail -1 | cut -c1-200)"
    lk_start 1; note "rank1 started at $(since) s"
    if lk_wait_log 0 "Application startup complete." 600 >/dev/null; then note "ready at $(since) s"
        req chat POST /v1/chat/completions "$LK_KEY" '{"model":"tiny","messages":[{"role":"user","content":"hello world"}],"max_tokens":4,"temperature":0}'
    else note "rank0 not ready (running: $(lk_running 0 && echo yes || echo no), code $(lk_exitcode 0))"; fi
    docker stop -t 30 lkreal-rank0 lkreal-rank1 >/dev/null
    ;;
rank1_killed_idle)
    # As rank1_killed_ready, but no inference request for LK_OBSERVE_S: does an idle head notice?
    boot
    lk_wait_log 0 "Application startup complete." 600 >/dev/null && note "ready at $(since) s" || { note "not ready"; lk_save_logs "$out"; exit 1; }
    docker kill lkreal-rank1 >/dev/null; note "docker kill lkreal-rank1 at $(since) s; polling /health every 10 s"
    for i in $(seq 1 $(( ${LK_OBSERVE_S:-60} / 10 ))); do
        sleep 10
        if ! lk_running 0; then note "rank0 exited by $(since) s, code $(lk_exitcode 0)"; break; fi
        req "health_idle_$i" GET /health ""
    done
    if lk_running 0; then
        req chat_after_idle POST /v1/chat/completions "$LK_KEY" '{"model":"tiny","messages":[{"role":"user","content":"hello world"}],"max_tokens":4,"temperature":0}'
        if t=$(lk_wait_exit 0 60); then note "rank0 exited ${t} s after the request, code $(lk_exitcode 0)"; else note "rank0 still running 60 s after the request"; fi
    fi
    ;;
rank0_killed_ready)
    boot
    lk_wait_log 0 "Application startup complete." 600 >/dev/null && note "ready at $(since) s" || { note "not ready"; lk_save_logs "$out"; exit 1; }
    docker kill lkreal-rank0 >/dev/null; note "docker kill lkreal-rank0 at $(since) s"
    if t=$(lk_wait_exit 1 "${LK_OBSERVE_S:-120}"); then note "rank1 exited ${t} s after the kill, code $(lk_exitcode 1)"
    else note "rank1 (headless) still running ${LK_OBSERVE_S:-120} s after rank0 was killed"
        t=$(date +%s.%N); docker stop -t 30 lkreal-rank1 >/dev/null
        note "docker stop -t 30 lkreal-rank1 (orphan): $(echo "$(date +%s.%N) - $t" | bc) s, exit code $(lk_exitcode 1)"
    fi
    ;;
kv_too_small)
    # The tiny model says 2048 positions; the override lets --max-model-len ask for more than the
    # KV cache holds (1 GiB per rank at 512 B per token per rank in float32 = 2,097,152 tokens).
    LK_MAX_MODEL_LEN=${LK_MAX_MODEL_LEN:-4194304}
    boot --hf-overrides "{\"max_position_embeddings\": $LK_MAX_MODEL_LEN}"
    for r in 0 1; do
        if t=$(lk_wait_exit "$r" "${LK_OBSERVE_S:-300}"); then note "rank$r exited at $(since) s, code $(lk_exitcode "$r")"
        else note "rank$r still running at $(since) s"; fi
    done
    ;;
*) echo "unknown case $case_name" >&2; exit 2 ;;
esac
lk_save_logs "$out"
lk_clean
