#!/usr/bin/env bash
# An ordinary rebalance is not a warning: a second allocator joins (each then serves 6 of the 12
# partitions) and leaves again (SIGTERM), and neither allocator logs a line at warning or error
# level (log.format json). The group's assignment is read with Kafka's own tool, not from logs.
#
# Usage: rebalance_log_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT; without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
source "$(dirname "$0")/broker_test_lib.sh"
work=$(mktemp -d /tmp/kleaf-rebalance-log-test.XXXXXX)
prefix=rebalance$(date +%s%N | tail -c 9)
group=$prefix.allocators
declare -A pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start_allocator() {
  local name=$1
  cat >"$work/$name.yaml" <<YAML
node: {id: $name}
state: {path: $work/$name}
log: {format: json}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix}
YAML
  "$kleaf" allocator --config "$work/$name.yaml" >"$work/$name.out" 2>"$work/$name.err" &
  pids[$name]=$!
}

await_assignment() { WATCH_PIDS="${pids[*]}" await_group_assignment "$group" "$1" 90; }

start_allocator first
await_assignment 12
start_allocator second
await_assignment "6 6"
kill -TERM "${pids[second]}"
rc=0
wait "${pids[second]}" || rc=$?
unset 'pids[second]'
((rc == 0)) || fail "the second allocator exited $rc on SIGTERM: $(cat "$work/second.err")"
await_assignment 12
kill -TERM "${pids[first]}"
rc=0
wait "${pids[first]}" || rc=$?
unset 'pids[first]'
((rc == 0)) || fail "the first allocator exited $rc on SIGTERM: $(cat "$work/first.err")"

# The first allocator's partitions were revoked when the second joined: logged, at info.
grep -q '"level":"info","message":"partition [0-9]* no longer served: revoked"' "$work/first.err" \
  || fail "the first allocator logged no revocation at info: $(cat "$work/first.err")"
for name in first second; do
  if grep -E '"level":"(warning|error|critical)"' "$work/$name.err"; then
    fail "$name logged the lines above at warning or error level during an ordinary rebalance"
  fi
done
echo "two allocators joined and left (12 -> 6+6 -> 12 partitions): no warning or error logged"
