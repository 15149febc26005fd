#!/usr/bin/env bash
# HTTP benchmark of kleaf standalone against nginx serving a tiny static file, in the same run, on
# 127.0.0.1 with keep-alive (wrk). Prints a table for docs/benchmarks.md.
#
#   tests/bench/http_bench.sh [seconds-per-run]   (default 10)
#
# Needs a Release build in build-bench/ (the script builds it) and wrk + nginx (installed by
# scripts/install-deps.sh --bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10}
./scripts/install-deps.sh --bench
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKLEAF_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench >/dev/null

. tests/bench/http/servers.sh   # $work, $pids, the servers' configs
threads=$(nproc)

# nginx: same number of workers as kleaf has I/O threads.
nginx_port=$(free_port)
nginx_conf "$work/nginx" "$nginx_port" "$threads"
nginx -c "$work/nginx/nginx.conf" > "$work/nginx.out" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$nginx_port/id.txt"

kleaf_port=$(free_port)
kleaf_conf "$work/kleaf" "$kleaf_port" "$threads"
./build-bench/kleaf standalone --config "$work/kleaf/kleaf.yaml" > "$work/kleaf.out" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$kleaf_port/healthz"
curl -sf "http://127.0.0.1:$kleaf_port/api/segment/get/bench" >/dev/null

run() {  # name url [extra wrk args...]
  local name=$1 url=$2
  shift 2
  local out
  out=$(wrk -t2 -c64 -d"${duration}s" --latency "$@" "$url")
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  printf '| %-34s | %12s | %8s | %8s |\n' "$name" "$rps" "$p50" "$p99"
  echo "$rps" > "$work/last_rps"
}

echo "| run | requests/s | p50 | p99 |"
echo "|---|---|---|---|"
run "nginx static file" "http://127.0.0.1:$nginx_port/id.txt"
nginx_rps=$(cat "$work/last_rps")
run "kleaf /api/segment/get (single)" "http://127.0.0.1:$kleaf_port/api/segment/get/bench"
seg_rps=$(cat "$work/last_rps")
run "kleaf /api/snowflake/get (single)" "http://127.0.0.1:$kleaf_port/api/snowflake/get/bench"
run "kleaf /api/v1/segment?count=1000" "http://127.0.0.1:$kleaf_port/api/v1/segment/bench?count=1000"
batch_rps=$(cat "$work/last_rps")
# Half of kleaf's single-ID rate, paced: 64 connections, each pausing PACE_MS between requests.
pace=$(python3 -c "print(max(1, round(64 * 1000 / ($seg_rps / 2))))")
PACE_MS=$pace run "kleaf segment single, paced ~1/2 rate" \
  "http://127.0.0.1:$kleaf_port/api/segment/get/bench" -s tests/bench/http/paced.lua
python3 - "$nginx_rps" "$seg_rps" "$batch_rps" <<'PY'
import sys
nginx, seg, batch = map(float, sys.argv[1:])
print()
print(f"kleaf single-ID / nginx = {seg / nginx:.2f} (target >= 0.80)")
print(f"batch of 1000: {batch * 1000 / 1e6:.1f} M IDs/s (target >= 10)")
PY
