#!/usr/bin/env bash
# Instructions per request (user space, valgrind's callgrind), kleaf standalone against nginx
# serving a 19-byte static file: the repeatable figure of the HTTP path, whatever the machine's
# load. Each server runs one I/O thread / one worker process under callgrind with instrumentation
# off; it is switched on for a wrk run of SECONDS (after a warm-up), and the instructions counted
# are divided by the requests wrk completed. Also counts the system calls per request (strace -c
# -f over a run of the same shape, without valgrind).
#
#   tests/bench/http/callgrind_per_request.sh KLEAF_BINARY [SECONDS=5] [PATH=/api/segment/get/bench]
#
# KEEP_PROFILES=DIR keeps the callgrind files (callgrind_annotate them).
# Needs valgrind, strace, wrk and nginx (scripts/install-deps.sh --bench).
set -euo pipefail
kleaf=$(realpath "$1")
seconds=${2:-5}
kleaf_path=${3:-/api/segment/get/bench}
. "$(dirname "$0")/servers.sh"   # $work, $pids, the servers' configs

requests_of() { awk '/requests in/ {print $1}' <<<"$1"; }

# name url command...: the server runs under callgrind; prints instructions per request.
measure_callgrind() {
  local name=$1 url=$2
  shift 2
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.$name.%p" \
    "$@" > "$work/$name.out" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_http "$url"
  wrk -t1 -c32 -d2s "$url" >/dev/null  # warm-up (the first segment, the allocator's caches)
  callgrind_control -z "$pid" >/dev/null
  callgrind_control -i on "$pid" >/dev/null
  local out
  out=$(wrk -t1 -c32 -d"${seconds}s" "$url")
  callgrind_control -i off "$pid" >/dev/null
  callgrind_control -d "$pid" >/dev/null
  # The counts are dumped; nginx without its master does not always end on SIGTERM under valgrind.
  kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
  [[ -n "${KEEP_PROFILES:-}" ]] && cp "$work"/cg."$name".* "$KEEP_PROFILES"/
  local n ir
  n=$(requests_of "$out")
  ir=$(for f in "$work"/cg."$name".*; do callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'; done | awk '{s+=$1} END {print s}')
  printf '%-8s %10d requests  %12d instructions  %8.0f instructions/request\n' "$name" "$n" "$ir" "$(bc -l <<<"$ir/$n")"
}

# name url command...: the server under strace -c -f; prints system calls per request.
measure_syscalls() {
  local name=$1 url=$2
  shift 2
  strace -c -f -o "$work/strace.$name" "$@" > "$work/$name.strace.out" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_http "$url"
  local out
  out=$(wrk -t1 -c32 -d"${seconds}s" "$url")
  kill "$(pgrep -P "$pid")"; wait "$pid" 2>/dev/null || true  # the server; strace then ends
  local n calls
  n=$(requests_of "$out")
  calls=$(awk '$NF=="total" {print $(NF-2)}' "$work/strace.$name")
  printf '%-8s %10d requests  %12d syscalls      %8.2f syscalls/request   (' "$name" "$n" "$calls" "$(bc -l <<<"$calls/$n")"
  awk 'NR>2 && $1 ~ /^[0-9.]+$/ && $NF!="total" {printf "%s %s ", $NF, $4}' "$work/strace.$name"
  echo ")"
}

# One nginx worker without its master (valgrind follows one process) against one kleaf I/O thread,
# first under callgrind, then under strace.
for measure in measure_callgrind measure_syscalls; do
  port=$(free_port)
  nginx_conf "$work/nginx" "$port" 1 no-master
  "$measure" nginx "http://127.0.0.1:$port/id.txt" nginx -c "$work/nginx/nginx.conf"
  port=$(free_port)
  kleaf_conf "$work/kleaf" "$port" 1
  "$measure" kleaf "http://127.0.0.1:$port$kleaf_path" "$kleaf" standalone --config "$work/kleaf/kleaf.yaml"
done
