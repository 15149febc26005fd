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
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 300); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; return 1; }

nginx_conf() {  # port
  mkdir -p "$work/www" "$work/nginx"
  printf '1234567890123456789' > "$work/www/id.txt"
  cat > "$work/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx;
  proxy_temp_path $work/nginx;
  fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx;
  scgi_temp_path $work/nginx;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$1; root $work/www; }
}
CONF
}

kleaf_conf() {  # port
  cat > "$work/kleaf.yaml" <<CONF
http:
  listen: 127.0.0.1:$1
  threads: 1
state:
  path: $work/data
admin:
  token: bench-token-0123456789
segment:
  auto_create: true
  default_step: 1000000
log:
  level: warn
CONF
  rm -rf "$work/data"
}

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

port=$(free_port)
nginx_conf "$port"
measure_callgrind nginx "http://127.0.0.1:$port/id.txt" nginx -c "$work/nginx.conf"
port=$(free_port)
kleaf_conf "$port"
measure_callgrind kleaf "http://127.0.0.1:$port$kleaf_path" "$kleaf" standalone --config "$work/kleaf.yaml"
port=$(free_port)
nginx_conf "$port"
measure_syscalls nginx "http://127.0.0.1:$port/id.txt" nginx -c "$work/nginx.conf"
port=$(free_port)
kleaf_conf "$port"
measure_syscalls kleaf "http://127.0.0.1:$port$kleaf_path" "$kleaf" standalone --config "$work/kleaf.yaml"
