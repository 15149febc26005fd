#!/usr/bin/env bash
# The broker upgrade of docs/operations.md ("Kafka versions", "Upgrading the brokers from 3.9 to
# 4.x"), run as a team would run it, with kleaf serving throughout: a KRaft cluster of three Kafka
# 3.9.2 brokers (RF 3, min ISR 2), two allocators and two gateways on it, clients drawing segment
# and snowflake IDs from both gateways without pause; each broker in turn is stopped (SIGTERM: a
# controlled shutdown), started again on Kafka 4.x, and the next waits until no partition is
# under-replicated; then the cluster's feature levels are finalized (kafka-features upgrade
# --release-version). Passes when no ID was served twice, every broker runs the new version,
# metadata.version is the new one, and the cluster serves IDs after it. Prints what it counted.
# Not part of scripts/test.sh (about three minutes): run it once per kleaf release that changes
# what it asks of Kafka, and when a new Kafka line is added.
#
#   tests/integration/kafka_upgrade_39_to_4.sh KLEAF_BINARY [--from 3.9.2] [--to 4.4.0]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kafka_sh="$repo/compose/kafka.sh"
bin="${1:?usage: $0 KLEAF_BINARY [--from V] [--to V]}"
shift
from=3.9.2
to=$("$kafka_sh" version)
while (($#)); do
  case "$1" in
    --from) from="$2"; shift 2 ;;
    --to) to="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
to_release="${to%.*}"   # 4.4.0 -> 4.4: kafka-features takes the release

dir=$(mktemp -d /tmp/kleaf-upgrade.XXXXXX)
log() { echo "upgrade: [$(date -u +%T)] $*" >&2; }
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$kafka_sh" cluster-stop --dir "$dir/kafka" --kill >/dev/null 2>&1 || true
  if [[ ${KEEP:-0} == 1 ]]; then log "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
fail() { log "FAILED: $*"; KEEP=1; exit 1; }

log "a cluster of three Kafka $from brokers"
bootstrap=$("$kafka_sh" --kafka-version "$from" cluster-start --dir "$dir/kafka")
(umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$dir/admin.token")
token=$(cat "$dir/admin.token")

start_node() {  # name role; its port goes to $dir/name.port
  local name=$1 role=$2 p
  p=$("$kafka_sh" free-port)
  mkdir -p "$dir/state/$name"
  cat >"$dir/$name.yaml" <<YAML
node: {id: $name}
http: {listen: "127.0.0.1:$p"}
state: {path: "$dir/state/$name"}
admin: {token_file: "$dir/admin.token"}
kafka: {bootstrap: "$bootstrap", topic_prefix: up, partitions: 6}
log: {level: info}
YAML
  setsid "$bin" "$role" --config "$dir/$name.yaml" >"$dir/$name.out" 2>"$dir/$name.err" </dev/null &
  pids+=($!)
  local needle="kleaf $role running" deadline=$((SECONDS + 90))
  [[ $role == gateway ]] && needle="kleaf gateway listening on"
  until grep -qF "$needle" "$dir/$name.out" 2>/dev/null; do
    ((SECONDS < deadline)) || { tail -n 20 "$dir/$name.err" >&2; fail "$name did not start"; }
    sleep 0.2
  done
  echo "$p" >"$dir/$name.port"
}
start_node alloc-1 allocator
start_node alloc-2 allocator
start_node gw-1 gateway
start_node gw-2 gateway
gw1=$(cat "$dir/gw-1.port")
gw2=$(cat "$dir/gw-2.port")
log "allocators and gateways up; gateways on $gw1 and $gw2"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $token" \
  -d '{"step":1000}' "http://127.0.0.1:$gw1/api/v1/tags/order")
[[ $code == 200 ]] || fail "creating the tag answered $code"

# Clients: each draws 10 segment IDs, then 10 snowflake IDs, in a loop; every answer's status and
# IDs are kept. A 503 is allowed (it says "try again"); an ID twice is not.
client() {  # gateway-port name
  local p=$1 name=$2 body code
  while [[ ! -f "$dir/stop" ]]; do
    for kind in segment snowflake; do
      body=$(curl -s -m 5 -w '\n%{http_code}' "http://127.0.0.1:$p/api/v1/$kind/order?count=10" || true)
      code=${body##*$'\n'}
      echo "$(date +%s) $kind $code" >>"$dir/$name.status"
      if [[ $code == 200 ]]; then
        grep -o '"[0-9]\+"' <<<"${body%$'\n'*}" | tr -d '"' | sed "s/^/$kind /" >>"$dir/$name.ids"
      fi
    done
  done
}
client "$gw1" c1 &
clients=($!)
client "$gw2" c2 &
clients+=($!)
pids+=("${clients[@]}")
sleep 3   # a baseline of IDs on the old version before the first broker goes

under_replicated() {
  "$kafka_sh" tool topics --bootstrap-server "$bootstrap" --describe --under-replicated-partitions 2>/dev/null
}
for n in 1 2 3; do
  log "broker $n: stop (controlled shutdown), start on Kafka $to"
  "$kafka_sh" cluster-node --dir "$dir/kafka" "$n" stop >/dev/null
  "$kafka_sh" --kafka-version "$to" cluster-node --dir "$dir/kafka" "$n" start >/dev/null
  deadline=$((SECONDS + 120))
  while [[ -n "$(under_replicated)" ]]; do
    ((SECONDS < deadline)) || fail "partitions still under-replicated 120 s after broker $n came back"
    sleep 1
  done
  [[ $(cat "$dir/kafka/node-$n/kafka.version") == "$to" ]] || fail "broker $n does not run $to"
  log "broker $n runs $to; no partition under-replicated"
done
log "finalizing: kafka-features upgrade --release-version $to_release"
"$kafka_sh" --kafka-version "$to" tool features --bootstrap-server "$bootstrap" upgrade --release-version "$to_release" \
  >"$dir/features.out" 2>&1 || { cat "$dir/features.out" >&2; fail "kafka-features upgrade"; }
"$kafka_sh" --kafka-version "$to" tool features --bootstrap-server "$bootstrap" describe >"$dir/features.txt" 2>/dev/null
metadata=$(awk '/Feature: metadata.version/ {for (i = 1; i <= NF; ++i) if ($i == "FinalizedVersionLevel:") print $(i + 1)}' "$dir/features.txt")
[[ $metadata == "$to_release"-* ]] || fail "metadata.version is '$metadata', not $to_release-*"
log "metadata.version $metadata"
sleep 5   # IDs after the finalization, on the new version
touch "$dir/stop"
wait "${clients[@]}" 2>/dev/null || true

total=$(cat "$dir"/c?.ids | wc -l)
dups=$(cat "$dir"/c?.ids | sort | uniq -d | wc -l)
calls=$(cat "$dir"/c?.status | wc -l)
ok=$(awk '$3 == 200' "$dir"/c?.status | wc -l)
unavailable=$(awk '$3 == 503' "$dir"/c?.status | wc -l)
other=$((calls - ok - unavailable))
last=$(sort -n "$dir"/c?.status | tail -n 20 | awk '$3 == 200' | wc -l)
log "IDs: $total ($(grep -c '^segment' "$dir"/c?.ids | awk -F: '{s += $2} END {print s}') segment), duplicates: $dups"
log "calls: $calls, 200: $ok, 503: $unavailable, other: $other; of the last 20, 200: $last"
((total > 0)) || fail "no ID served"
((dups == 0)) || fail "$dups IDs served twice"
((other == 0)) || fail "$other calls answered neither 200 nor 503"
((last == 20)) || fail "the cluster does not serve every call after the upgrade"
log "passed: Kafka $from -> $to under load, no ID twice"
