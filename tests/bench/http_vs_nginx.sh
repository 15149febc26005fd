#!/usr/bin/env bash
# kleaf standalone against nginx serving a 19-byte static file, side by side in one run (issue 18,
# items 1 and 3), on 127.0.0.1 with keep-alive. Both servers run the whole time with the same
# number of I/O threads / worker processes; the runs alternate A B A B so both see the same load.
#
#   tests/bench/http_vs_nginx.sh [ROUNDS=3] [SECONDS=10]
#
# 1. Throughput: wrk -t1 -c32 and -t2 -c128 against nginx (A), kleaf's single segment ID (B) and
#    single snowflake ID (C), ROUNDS times A B C; prints each run, each round's B/A and C/A, and
#    the ratio of the means.
# 2. Tail at half load: the server on CPU 0 (one worker / one I/O thread), the load generator on
#    CPU 1 (taskset). kleaf's maximum rate is measured with wrk -t1 -c32; then kleaf_open_loop
#    (tests/bench/http/open_loop.cc: constant rate, latency from each request's due time) offers
#    half of it to nginx and to kleaf, alternating, ROUNDS times. Skipped on a single CPU.
#
# Environment: WORKERS (part 1's nginx workers = kleaf I/O threads; default nproc), BUILD_DIR
# (default build-bench: a Release build the script makes), CONNECTIONS (part 2, default 64).
# Needs wrk and nginx (scripts/install-deps.sh --bench). The load average is printed before and
# after each part: figures from a busy machine understate a quiet one.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
duration=${2:-10}
workers=${WORKERS:-$(nproc)}
build=${BUILD_DIR:-build-bench}
connections=${CONNECTIONS:-64}
./scripts/install-deps.sh --bench >/dev/null
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKLEAF_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target kleaf kleaf_open_loop >/dev/null

. tests/bench/http/servers.sh   # $work, $pids, the servers' configs

load() { cut -d' ' -f1-3 /proc/loadavg; }

# start_nginx NAME WORKERS [taskset-prefix...]: sets $port. Called in this shell, never in
# $(...): a subshell's pids+= would not reach the cleanup, and the server would outlive the run.
start_nginx() {
  local name=$1 n=$2
  shift 2
  local dir=$work/$name
  port=$(free_port)
  nginx_conf "$dir" "$port" "$n"
  "$@" nginx -c "$dir/nginx.conf" > "$dir/out" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$port/id.txt"
}

# start_kleaf NAME THREADS [taskset-prefix...]: sets $port. Called in this shell, never in
# $(...): a subshell's pids+= would not reach the cleanup, and the server would outlive the run.
start_kleaf() {
  local name=$1 n=$2
  shift 2
  local dir=$work/$name
  port=$(free_port)
  kleaf_conf "$dir" "$port" "$n"
  "$@" "$build/kleaf" standalone --config "$dir/kleaf.yaml" > "$dir/out" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$port/healthz"
  curl -sf "http://127.0.0.1:$port/api/segment/get/bench" >/dev/null
}

# Requests/s of a wrk run; fails on any answer that is not 2xx (e.g. nginx's 403 when its
# workers cannot read the file).
rps() {
  if grep -q "Non-2xx" <<<"$1"; then
    echo "wrk saw answers other than 2xx:" >&2
    echo "$1" >&2
    exit 1
  fi
  awk '/Requests\/sec/ {print $2}' <<<"$1"
}

echo "## Throughput: $workers nginx workers, $workers kleaf I/O threads, wrk ${duration} s per run"
echo "load average before: $(load)"
start_nginx nginx "$workers"
nginx_port=$port
start_kleaf kleaf "$workers"
kleaf_port=$port
nginx_url="http://127.0.0.1:$nginx_port/id.txt"
segment_url="http://127.0.0.1:$kleaf_port/api/segment/get/bench"
snowflake_url="http://127.0.0.1:$kleaf_port/api/snowflake/get/bench"
throughput_table "" "$nginx_url" "$segment_url" "$snowflake_url"
echo "load average after: $(load)"
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

if (($(nproc) < 2)); then
  echo "one CPU: the tail at half load needs the server and the load generator on CPUs of their own"
  exit 0
fi
echo
echo "## Tail at half of kleaf's maximum rate: server on CPU 0 (1 worker / 1 I/O thread), load on CPU 1"
echo "load average before: $(load)"
start_nginx nginx1 1 taskset -c 0
nginx_port=$port
start_kleaf kleaf1 1 taskset -c 0
kleaf_port=$port
max=$(rps "$(taskset -c 1 wrk -t1 -c32 -d"${duration}s" "http://127.0.0.1:$kleaf_port/api/segment/get/bench")")
half=$(printf '%.0f' "$(bc -l <<<"$max/2")")
echo "kleaf's maximum (wrk -t1 -c32, ${duration} s): $max req/s; offered below: $half req/s over $connections connections"
echo
echo "| round | load (1 min) | target | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | answered/s |"
echo "|---|---|---|---|---|---|---|---|---|"
open_loop() {  # name port path
  local out
  out=$(taskset -c 1 "$build/kleaf_open_loop" 127.0.0.1 "$2" "$3" "$half" "$duration" "$connections")
  awk -v name="$1" -v r="$round" -v l="$(cut -d' ' -f1 /proc/loadavg)" '
    /^rate/ {answered=$4; sub("/s", "", answered)}
    /^latency_us/ {p50=$3; p90=$5; p99=$7; p999=$9; max=$11}
    END {printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r, l, name, p50, p90, p99, p999, max, answered}' <<<"$out"
}
for round in $(seq "$rounds"); do
  open_loop nginx "$nginx_port" /id.txt
  open_loop "kleaf segment" "$kleaf_port" /api/segment/get/bench
done
echo "load average after: $(load)"
