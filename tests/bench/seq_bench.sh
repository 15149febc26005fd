#!/usr/bin/env bash
# Benchmark of sequences per key (issue 28, item 6), over HTTP with wrk on 127.0.0.1, keep-alive:
#   1. standalone: `kleaf standalone` (2 I/O threads), space "bench" with the defaults; fan-outs of
#      1,000 random keys of [0, 1,000,000) per POST, single random keys with 64 and with 1,000
#      connections; references in the same run: nginx's 19-byte static file and kleaf's own
#      segment route.
#   2. cluster: a real Kafka broker (compose/kafka.sh), one `kleaf allocator`, one `kleaf gateway`;
#      all the load goes through the gateway: 1,000 connections, single random keys of 1 M keys and
#      fan-outs of 100, closed loop (as fast as answered), then paced (each connection waits
#      between requests) to read the latency below saturation. The gateway's
#      kleaf_kafka_request_seconds{op="next_seq"} and the allocator's kleaf_allocator_commit_seconds
#      are read from /metrics around each run. Also 64 connections, the reference of part 3.
#   3. the owner hop (issue 38): the same broker, two allocators and three gateways with
#      sequence.owner_hop; 64 connections through one gateway (single keys, fan-outs of 100), then
#      spread over the three; the allocators' committed transactions per 1,000 values from
#      /metrics; then one allocator is killed (kill -9) while keys of every partition are asked
#      for every 20 ms, and the longest time any key went unanswered is measured.
# Prints markdown tables for docs/benchmarks.md, the load average before each run, the CPU seconds
# the servers used in each run (cluster: gateway + allocator + broker), the RSS of the
# servers, and keeps wrk's raw output and the metrics in build-seqbench/results-<time>/.
#
#   tests/bench/seq_bench.sh [seconds-per-run]   (default 10)
#   KLEAF_BINARY=path tests/bench/seq_bench.sh 2  uses that binary instead of building one
#
# Needs: wrk and nginx (scripts/install-deps.sh --bench), Java and Maven for the broker
# (compose/kafka.sh fetches its jars once). Builds Release into build-seqbench/.
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-10}
build=build-seqbench
./scripts/install-deps.sh --bench >/dev/null
if [[ -n ${KLEAF_BINARY:-} ]]; then
  kleaf=$(realpath "$KLEAF_BINARY")   # e.g. to try the script itself with a debug build
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKLEAF_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" --target kleaf >/dev/null
  kleaf=$PWD/$build/kleaf
fi
results=$PWD/$build/results-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$results"

# 1,000 connections for wrk and as many sockets for each server.
if (($(ulimit -n) < 8192)); then ulimit -n "$(ulimit -Hn)"; fi
(($(ulimit -n) >= 4096)) || { echo "seq_bench: ulimit -n is $(ulimit -n); 1,000 connections need more" >&2; exit 1; }

. tests/bench/http/servers.sh   # $work, $pids, cleanup, free_port, wait_http, nginx_conf, kleaf_conf
kafka_dir=$work/kafka
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  compose/kafka.sh stop --dir "$kafka_dir" --clean >/dev/null 2>&1 || true
  cleanup
}
trap stop_all EXIT
token=bench-token-0123456789   # kleaf_conf's admin.token
threads=$(nproc)

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
rss_mib() { awk '/VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$1/status"; }
# The processes using the CPU now (top), for the record.
others() { top -b -n1 -w 200 | awk 'NR > 7 && NR <= 14 {printf "%s %s%%; ", $12, $9}'; }

put_space() {  # base-url: creates the space "bench" (section_size 100000, step 10000), retrying
  local code
  for _ in $(seq 150); do
    code=$(curl -s -o "$results/space.json" -w '%{http_code}' -X PUT \
      -H "Authorization: Bearer $token" -d '{}' "$1/api/v1/spaces/bench" || true)
    [[ $code == 200 ]] && return 0
    sleep 0.2
  done
  echo "seq_bench: could not create the space through $1 (HTTP $code)" >&2
  return 1
}

# metrics FILE URL...: concatenates the /metrics of each URL into FILE.
metrics() { local f=$1; shift; : > "$f"; for u in "$@"; do curl -sf "$u/metrics" >> "$f"; done; }

# hist BEFORE AFTER NAME [LABEL]: count, mean and bucket-bound p50/p99 of a histogram between
# two scrapes.
hist() {
  python3 - "$@" <<'PY'
import re, sys
before, after, name = sys.argv[1:4]
label = sys.argv[4] if len(sys.argv) > 4 else ""
def read(path):
    buckets, total, count = {}, 0.0, 0.0
    for line in open(path):
        if not line.startswith(name) or label not in line:
            continue
        m = re.match(r'(\S+?)(\{.*\})? (\S+)$', line.strip())
        if not m:
            continue
        series, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if series == name + "_bucket":
            le = re.search(r'le="([^"]+)"', labels).group(1)
            buckets[float(le)] = buckets.get(float(le), 0.0) + value
        elif series == name + "_sum":
            total += value
        elif series == name + "_count":
            count += value
    return buckets, total, count
b0, s0, c0 = read(before)
b1, s1, c1 = read(after)
n = c1 - c0
if n <= 0:
    print("no observations"); sys.exit()
def q(f):
    for le in sorted(b1):
        if b1[le] - b0.get(le, 0.0) >= f * n:
            return "%g ms" % (le * 1000) if le != float("inf") else "> last bucket"
print("%d observations, mean %.2f ms, p50 <= %s, p99 <= %s" % (n, (s1 - s0) / n * 1000, q(0.5), q(0.99)))
PY
}

# cpu_s PID...: CPU seconds (user + system) the processes used so far.
cpu_s() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  python3 -c "print($t / $(getconf CLK_TCK))"
}

declare -A rate   # name -> requests/s of the last run of that name
declare -A p50s   # name -> wrk's p50 of the last run of that name (e.g. 1.52ms)
# run NAME CONNECTIONS VALUES-PER-REQUEST URL: one wrk run through tests/bench/http/seq.lua (mode
# and keys from SEQ_MODE, SEQ_KEYS, SEQ_PATH, PACE_MS); prints one table row, with the CPU seconds
# the server's processes ($server_pids) used during the run.
run() {
  local name=$1 conns=$2 per=$3 url=$4 load out cpu0
  load=$(loadavg)
  cpu0=$(cpu_s $server_pids)
  out=$(wrk -t2 -c"$conns" -d"${duration}s" --timeout 30s --latency -s tests/bench/http/seq.lua "$url")
  printf '## %s (load %s)\n%s\n\n' "$name" "$load" "$out" >> "$results/wrk.txt"
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errors=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}' <<<"$out")
  rate[$name]=$rps
  p50s[$name]=$p50
  local cpu; cpu=$(python3 -c "print(round($(cpu_s $server_pids) - $cpu0, 1))")
  last_requests=$(awk '/requests in/ {print $1}' <<<"$out")
  printf '| %-40s | %5s | %10.0f | %12.0f | %8s | %8s | %6s | %5s | %s |\n' "$name" "$conns" \
    "$rps" "$(python3 -c "print($rps * $per)")" "$p50" "$p99" "$errors" "$cpu" "$load"
}
header() {
  echo
  echo "| run | conns | requests/s | values/s | p50 | p99 | errors | server CPU s | load avg before |"
  echo "|---|---|---|---|---|---|---|---|---|"
}
# pace_for CONNECTIONS REQUESTS/S: PACE_MS giving about that offered rate.
pace_for() { python3 -c "print(max(1, round($1 * 1000 / $2)))"; }

echo "machine: $(nproc) cores, $(. /etc/os-release; echo "$PRETTY_NAME"), load average $(loadavg)"
echo "busiest processes before: $(others)"
echo "raw results: $results"

# --- nginx, the reference of both parts.
nginx_port=$(free_port)
nginx_conf "$work/nginx" "$nginx_port" "$threads"
sed -i 's/worker_connections 4096;/worker_connections 8192;/' "$work/nginx/nginx.conf"
nginx -c "$work/nginx/nginx.conf" > "$work/nginx.out" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$nginx_port/id.txt"
nginx_url=http://127.0.0.1:$nginx_port/
nginx_pids="${pids[-1]} $(pgrep -d' ' -P "${pids[-1]}")"   # master and workers
export SEQ_KEYSPACE=1000000 SEQ_SPACE=bench

# --- 1. standalone.
kleaf_port=$(free_port)
kleaf_conf "$work/kleaf" "$kleaf_port" "$threads"
"$kleaf" standalone --config "$work/kleaf/kleaf.yaml" > "$work/kleaf.out" 2>&1 &
standalone_pid=$!
pids+=($standalone_pid)
standalone=http://127.0.0.1:$kleaf_port
wait_http "$standalone/healthz"
curl -sf "$standalone/api/segment/get/bench" >/dev/null
put_space "$standalone"
SEQ_MODE=fanout SEQ_KEYS=1000 wrk -t2 -c64 -d2s -s tests/bench/http/seq.lua "$standalone/" >/dev/null  # warm-up

echo
echo "### Standalone (kleaf standalone, $threads I/O threads)"
header
server_pids=$nginx_pids SEQ_MODE=path SEQ_PATH=/id.txt run "nginx static file" 64 1 "$nginx_url"
server_pids=$standalone_pid
SEQ_MODE=path SEQ_PATH=/api/segment/get/bench run "kleaf segment single (reference)" 64 1 "$standalone/"
SEQ_MODE=path SEQ_PATH=/api/v1/segment/bench?count=1000 \
  run "kleaf segment batch of 1,000 (reference)" 64 1000 "$standalone/"
SEQ_MODE=single run "seq single keys" 64 1 "$standalone/"
SEQ_MODE=fanout SEQ_KEYS=1000 run "seq fan-out of 1,000 keys" 64 1000 "$standalone/"
SEQ_MODE=fanout SEQ_KEYS=100 run "seq fan-out of 100 keys" 64 100 "$standalone/"
server_pids=$nginx_pids SEQ_MODE=path SEQ_PATH=/id.txt \
  run "nginx static file, 1,000 conns" 1000 1 "$nginx_url"
SEQ_MODE=single run "seq single keys, 1,000 conns" 1000 1 "$standalone/"
SEQ_MODE=fanout SEQ_KEYS=100 run "seq fan-out of 100, 1,000 conns" 1000 100 "$standalone/"
echo
echo "standalone RSS $(rss_mib "$standalone_pid"); load average after $(loadavg)"
python3 - "${rate[nginx static file]}" "${rate[kleaf segment single (reference)]}" \
  "${rate[seq single keys]}" "${rate[seq fan-out of 1,000 keys]}" <<'PY'
import sys
nginx, seg, single, batch = map(float, sys.argv[1:])
print(f"seq single / nginx = {single / nginx:.2f}; seq single / segment single = {single / seg:.2f}")
print(f"fan-outs of 1,000: {batch * 1000 / 1e6:.2f} M values/s (target >= 1 M values/s)")
PY
kill "$standalone_pid"
wait "$standalone_pid" 2>/dev/null || true

# --- 2. cluster: broker, one allocator, one gateway.
kafka_port=$(compose/kafka.sh free-port)
compose/kafka.sh start --port "$kafka_port" --dir "$kafka_dir" >/dev/null
gateway_port=$(free_port)
allocator_port=$(free_port)
node() {  # role name port [prefix [extra-yaml]]: writes its config, starts it, waits for its ready line
  local role=$1 name=$2 port=$3 prefix=${4:-kleaf} extra=${5:-}
  mkdir -p "$work/$name"
  cat > "$work/$name/$name.yaml" <<CONF
node: {id: $name}
http: {listen: "127.0.0.1:$port", threads: $threads}
state: {path: "$work/$name/data"}
admin: {token: $token}
kafka: {bootstrap: "127.0.0.1:$kafka_port", topic_prefix: $prefix, partitions: 12, replication_factor: 1}
log: {level: warn}
$extra
CONF
  "$kleaf" "$role" --config "$work/$name/$name.yaml" > "$work/$name.out" 2> "$work/$name.err" &
  pids+=($!)
  eval "${name//-/_}_pid=$!"
  local needle="kleaf $role listening on"
  [[ $role == allocator ]] && needle="kleaf allocator running"
  for _ in $(seq 900); do grep -qF "$needle" "$work/$name.out" && return 0; sleep 0.1; done
  tail -n 20 "$work/$name.err" >&2
  echo "seq_bench: $name did not start" >&2
  return 1
}
node allocator alloc-1 "$allocator_port"
node gateway gw-1 "$gateway_port"
gateway=http://127.0.0.1:$gateway_port
allocator=http://127.0.0.1:$allocator_port
put_space "$gateway"
broker_pid=$(cat "$kafka_dir/kafka.pid")
server_pids="$gw_1_pid $alloc_1_pid $broker_pid"
SEQ_MODE=fanout SEQ_KEYS=100 wrk -t2 -c100 -d3s -s tests/bench/http/seq.lua "$gateway/" >/dev/null  # warm-up

# cluster_run NAME CONNECTIONS VALUES-PER-REQUEST: run() through the gateway, with the Kafka round
# trips and the allocator's commits of that run.
cluster_run() {
  local tag=${1//[^a-zA-Z0-9]/_} g0 a0 b0
  metrics "$results/$tag.before" "$gateway" "$allocator"
  g0=$(cpu_s "$gw_1_pid"); a0=$(cpu_s "$alloc_1_pid"); b0=$(cpu_s "$broker_pid")
  run "$1" "$2" "$3" "$gateway/"
  metrics "$results/$tag.after" "$gateway" "$allocator"
  local cpu="gateway $(python3 -c "print(round($(cpu_s "$gw_1_pid") - $g0, 1))") s, allocator $(python3 -c "print(round($(cpu_s "$alloc_1_pid") - $a0, 1))") s, broker $(python3 -c "print(round($(cpu_s "$broker_pid") - $b0, 1))") s"
  local trips commits
  trips=$(hist "$results/$tag.before" "$results/$tag.after" kleaf_kafka_request_seconds 'op="next_seq"')
  commits=$(hist "$results/$tag.before" "$results/$tag.after" kleaf_allocator_commit_seconds)
  {
    echo "$1 ($last_requests requests of $3 keys):"
    echo "  gateway next_seq round trips: $trips; $(python3 -c "print(round($last_requests * $3 / max(1, ${trips%% *})))") keys per round trip"
    echo "  allocator commits:            $commits"
    echo "  CPU during the run:           $cpu"
  } >> "$results/kafka.txt"
}

echo
echo "### Cluster: one gateway, one allocator, one Kafka broker, all on this machine"
header
server_pids=$nginx_pids SEQ_MODE=path SEQ_PATH=/id.txt \
  run "nginx static file, 1,000 conns" 1000 1 "$nginx_url"
SEQ_MODE=single cluster_run "gateway seq single keys" 1000 1
SEQ_MODE=fanout SEQ_KEYS=100 cluster_run "gateway seq fan-out of 100" 1000 100
PACE_MS=$(pace_for 1000 "$(python3 -c "print(${rate[gateway seq single keys]} / 2)")") SEQ_MODE=single \
  cluster_run "gateway single, paced at ~1/2 of closed" 1000 1
PACE_MS=$(pace_for 1000 1000) SEQ_MODE=fanout SEQ_KEYS=100 \
  cluster_run "gateway fan-out 100, paced at 100k values/s" 1000 100
SEQ_MODE=single cluster_run "gateway seq single keys, 64 conns" 64 1
echo
echo "gateway RSS $(rss_mib "$gw_1_pid"), allocator RSS $(rss_mib "$alloc_1_pid"); load average after $(loadavg)"
echo "busiest processes after: $(others)"
echo
cat "$results/kafka.txt"
kill "$gw_1_pid" "$alloc_1_pid"
wait "$gw_1_pid" "$alloc_1_pid" 2>/dev/null || true

# --- 3. the owner hop: two allocators, three gateways, sequence.owner_hop on all.
hop_yaml="sequence: {owner_hop: true}"
a1_port=$(free_port); a2_port=$(free_port)
node allocator hop-alloc-1 "$a1_port" kleafhop "$hop_yaml"
node allocator hop-alloc-2 "$a2_port" kleafhop "$hop_yaml"
hop_allocators="http://127.0.0.1:$a1_port http://127.0.0.1:$a2_port"
hop_gateways=()
for g in 1 2 3; do
  port=$(free_port)
  node gateway "hop-gw-$g" "$port" kleafhop "$hop_yaml"
  hop_gateways+=("http://127.0.0.1:$port")
done
put_space "${hop_gateways[0]}"
hop_pids="$hop_gw_1_pid $hop_gw_2_pid $hop_gw_3_pid $hop_alloc_1_pid $hop_alloc_2_pid $broker_pid"
for u in "${hop_gateways[@]}"; do   # warm-up: routes learned, leases taken, on every gateway
  SEQ_MODE=fanout SEQ_KEYS=100 wrk -t1 -c8 -d3s -s tests/bench/http/seq.lua "$u/" >/dev/null
done

# committed NAME: the allocators' committed transactions so far (their /metrics).
committed() {
  metrics "$results/$1.txns" $hop_allocators
  awk '/^kleaf_allocator_transactions_total\{.*outcome="committed"/ {n += $2} END {printf "%d", n}' \
    "$results/$1.txns"
}
# hop_run NAME CONNECTIONS VALUES-PER-REQUEST: run() through hop-gw-1, with the allocators'
# committed transactions per 1,000 values and the gateway's hop calls by outcome.
hop_run() {
  local tag=hop_${1//[^a-zA-Z0-9]/_} t0 t1
  t0=$(committed "$tag.before")
  metrics "$results/$tag.before" "${hop_gateways[0]}"
  run "$1" "$2" "$3" "${hop_gateways[0]}/"
  t1=$(committed "$tag.after")
  metrics "$results/$tag.after" "${hop_gateways[0]}"
  {
    echo "$1 ($last_requests requests of $3 keys):"
    echo "  allocators' committed transactions: $((t1 - t0)); per 1,000 values: $(python3 -c "print(round(($t1 - $t0) * 1000 / max(1, $last_requests * $3), 3))")"
    echo "  hop calls: $(grep '^kleaf_owner_hop_calls_total' "$results/$tag.after" | tr '\n' ' ')"
    echo "  hop round trips: $(hist "$results/$tag.before" "$results/$tag.after" kleaf_owner_hop_seconds)"
  } >> "$results/hop.txt"
}
# spread_run NAME CONNECTIONS: single keys, the connections split over the three gateways (one wrk
# each, at once); requests/s summed, the p50 and p99 the largest of the three.
spread_run() {
  local name=$1 conns=$2 load per_gw i
  load=$(loadavg)
  per_gw=$((conns / 3))
  local wrks=()
  for i in 0 1 2; do
    SEQ_MODE=single wrk -t1 -c"$per_gw" -d"${duration}s" --timeout 30s --latency \
      -s tests/bench/http/seq.lua "${hop_gateways[$i]}/" > "$results/spread-$i.txt" &
    wrks+=($!)
  done
  wait "${wrks[@]}"
  cat "$results"/spread-*.txt >> "$results/wrk.txt"
  python3 - "$name" "$((per_gw * 3))" "$load" "$results"/spread-*.txt <<'PY'
import re, sys
name, conns, load = sys.argv[1:4]
rps, p50, p99, errors = 0.0, [], [], 0
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)$", v)
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
for path in sys.argv[4:]:
    text = open(path).read()
    rps += float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p50.append(ms(re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1)))
    p99.append(ms(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors += int(m.group(1)) if m else 0
print(f"| {name:<40} | {conns:>5} | {rps:10.0f} | {rps:12.0f} | {max(p50):.2f}ms | {max(p99):.2f}ms | {errors:>6} | | {load} |")
with open(sys.argv[4].rsplit("/", 1)[0] + "/spread.rps", "w") as f:
    f.write(str(rps))
PY
  rate[$name]=$(cat "$results/spread.rps")
}

echo
echo "### The owner hop: three gateways, two allocators, one Kafka broker, all on this machine"
header
server_pids=$hop_pids
SEQ_MODE=single hop_run "hop seq single keys" 64 1
SEQ_MODE=fanout SEQ_KEYS=100 hop_run "hop seq fan-out of 100" 64 100
spread_run "hop seq single keys, 3 gateways" 64
echo
cat "$results/hop.txt"

# Failover: kill -9 hop-alloc-1 while keys of every section partition are asked for every 20 ms
# through hop-gw-1; the longest any key went unanswered (503 or no answer) after the kill.
echo
python3 - "${hop_gateways[0]}" "$hop_alloc_1_pid" <<'PY'
import http.client, os, signal, sys, threading, time, urllib.parse
url = urllib.parse.urlparse(sys.argv[1]); victim = int(sys.argv[2])
keys = [k * 100000 for k in range(48)]   # 48 sections (section_size 100,000): every partition
killed = None
longest, unanswered = {}, set()
def poll(key):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    down_since = None
    while killed is None or time.monotonic() < killed + 60:
        started = time.monotonic()
        try:
            conn.request("GET", f"/api/v1/seq/bench/{key}"); r = conn.getresponse(); r.read()
            ok = r.status == 200
        except Exception:
            conn.close(); conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            ok = False
        if killed is not None:
            if not ok and down_since is None: down_since = started
            if ok and down_since is not None:
                longest[key] = max(longest.get(key, 0), time.monotonic() - down_since); down_since = None
            if ok and time.monotonic() > killed + 30: break
        time.sleep(0.02)
    if down_since is not None: unanswered.add(key)
threads = [threading.Thread(target=poll, args=(k,)) for k in keys]
for t in threads: t.start()
time.sleep(2)
killed = time.monotonic(); os.kill(victim, signal.SIGKILL)
for t in threads: t.join()
worst = max(longest.values(), default=0.0)
print(f"failover: kill -9 of hop-alloc-1 while 48 keys over every partition were asked every 20 ms: "
      f"{len(longest)} keys went unanswered for a while, the longest for {worst:.1f} s; still "
      f"unanswered after 60 s: {len(unanswered)}; the bound (session timeout 6 s + L 5 s + 5 s): 16 s")
PY
echo
echo "hop gateways RSS $(rss_mib "$hop_gw_1_pid"), allocator RSS $(rss_mib "$hop_alloc_2_pid"); load average after $(loadavg)"
python3 - "${rate[seq single keys]}" "${rate[seq fan-out of 100 keys]}" \
  "${rate[gateway seq single keys, 64 conns]}" "${rate[hop seq single keys]}" \
  "${rate[hop seq fan-out of 100]}" "${rate[hop seq single keys, 3 gateways]}" \
  "${p50s[seq single keys]}" "${p50s[hop seq single keys]}" <<'PY'
import re, sys
sa_single, sa_fan, kafka_single, hop_single, hop_fan, hop_spread = map(float, sys.argv[1:7])
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)$", v)
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
sa_p50, hop_p50 = ms(sys.argv[7]), ms(sys.argv[8])
print(f"hop p50 / standalone p50 at 64 connections = {hop_p50 / sa_p50:.2f} (target <= 3)")
print(f"hop single / standalone single = {hop_single / sa_single:.2f} (target >= 0.5); "
      f"hop single / requests-topic single = {hop_single / kafka_single:.1f}")
print(f"hop fan-out of 100 / standalone fan-out of 100 = {hop_fan / sa_fan:.2f} (target >= 0.5)")
print(f"hop single over 3 gateways / standalone single = {hop_spread / sa_single:.2f} (target >= 0.4)")
PY
