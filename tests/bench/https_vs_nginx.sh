#!/usr/bin/env bash
# kleaf standalone over HTTPS against nginx over HTTPS serving a 19-byte static file, side by side
# in one run (issue 29, item 1), on 127.0.0.1 with keep-alive: the cost of http.tls next to the
# cost of TLS in nginx. Both servers use the same certificate (an ECDSA P-256 key made here by
# `openssl`, TLS 1.2+) and run the whole time with the same number of I/O threads / worker
# processes; the runs alternate A B A B so both see the same load.
#
#   tests/bench/https_vs_nginx.sh [ROUNDS=3] [SECONDS=10]
#
# wrk -t1 -c32 and -t2 -c128 (each connection handshakes once, then keep-alive) against nginx (A),
# kleaf's single segment ID (B) and single snowflake ID (C), ROUNDS times A B C; prints each run,
# each round's B/A and C/A, and the ratio of the means. The plain-HTTP figures of the same machine
# come from tests/bench/http_vs_nginx.sh.
#
# Environment: WORKERS (nginx workers = kleaf I/O threads; default nproc), BUILD_DIR (default
# build-bench: a Release build the script makes). Needs wrk, nginx and openssl
# (scripts/install-deps.sh --bench). The load average is printed before and after: figures from a
# busy machine understate a quiet one.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
duration=${2:-10}
workers=${WORKERS:-$(nproc)}
build=${BUILD_DIR:-build-bench}
./scripts/install-deps.sh --bench >/dev/null
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKLEAF_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target kleaf >/dev/null

. tests/bench/http/servers.sh   # $work, $pids, the servers' configs

load() { cut -d' ' -f1-3 /proc/loadavg; }

# One CA and a server certificate for 127.0.0.1, readable by nginx's workers (user nobody).
pki=$work/pki
mkdir -p "$pki"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/ca.key" \
  -out "$pki/ca.pem" -days 2 -subj '/CN=kleaf bench CA' 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/server.key" \
  -out "$pki/server.csr" -subj '/CN=127.0.0.1' 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$pki/ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -set_serial 1 \
  -days 2 -extfile "$pki/ext" -out "$pki/server.pem" 2>/dev/null
chmod 755 "$pki"
chmod 644 "$pki"/*

# wait_https URL: until URL answers 2xx over TLS verified against the CA (30 s at most).
wait_https() {
  for _ in $(seq 300); do curl -sf --cacert "$pki/ca.pem" "$1" >/dev/null && return 0; sleep 0.1; done
  return 1
}

# start_nginx NAME WORKERS: sets $port; servers.sh's config with its listener turned to TLS.
start_nginx() {
  local name=$1 n=$2
  local dir=$work/$name
  port=$(free_port)
  nginx_conf "$dir" "$port" "$n"
  sed -i "s|listen 127.0.0.1:$port;|listen 127.0.0.1:$port ssl; ssl_certificate $pki/server.pem; ssl_certificate_key $pki/server.key; ssl_protocols TLSv1.2 TLSv1.3;|" \
    "$dir/nginx.conf"
  nginx -c "$dir/nginx.conf" > "$dir/out" 2>&1 &
  pids+=($!)
  wait_https "https://127.0.0.1:$port/id.txt"
}

# start_kleaf NAME THREADS: sets $port; servers.sh's config with http.tls.
start_kleaf() {
  local name=$1 n=$2
  local dir=$work/$name
  port=$(free_port)
  kleaf_conf "$dir" "$port" "$n"
  sed -i "s|^  threads: $n\$|  threads: $n\n  tls: {cert_file: $pki/server.pem, key_file: $pki/server.key}|" \
    "$dir/kleaf.yaml"
  "$build/kleaf" standalone --config "$dir/kleaf.yaml" > "$dir/out" 2>&1 &
  pids+=($!)
  wait_https "https://127.0.0.1:$port/healthz"
  curl -sf --cacert "$pki/ca.pem" "https://127.0.0.1:$port/api/segment/get/bench" >/dev/null
}

# Requests/s of a wrk run; fails on any answer that is not 2xx or any socket error.
rps() {
  if grep -q "Non-2xx\|Socket errors" <<<"$1"; then
    echo "wrk saw answers other than 2xx or socket errors:" >&2
    echo "$1" >&2
    exit 1
  fi
  awk '/Requests\/sec/ {print $2}' <<<"$1"
}

echo "## HTTPS throughput: $workers nginx workers, $workers kleaf I/O threads, wrk ${duration} s per run"
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(openssl version)"
echo "load average before: $(load)"
start_nginx nginx "$workers"
nginx_port=$port
start_kleaf kleaf "$workers"
kleaf_port=$port
nginx_url="https://127.0.0.1:$nginx_port/id.txt"
segment_url="https://127.0.0.1:$kleaf_port/api/segment/get/bench"
snowflake_url="https://127.0.0.1:$kleaf_port/api/snowflake/get/bench"
throughput_table "HTTPS " "$nginx_url" "$segment_url" "$snowflake_url"
echo "load average after: $(load)"
