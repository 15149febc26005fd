#!/usr/bin/env bash
# Kafka's own CLI tools, as compose/kafka.sh fetches and runs them, against a kleaf allocator on the
# test broker: the topics it created (the state topic compacted), its consumer group with one
# member, and the offsets of its topics. What an operator would type (compose/README.md).
#
# Usage: kafka_tools_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT (scripts/test.sh exports them);
# without them it exits 77 (ctest: skipped).
set -euo pipefail
kleaf=$1
source "$(dirname "$0")/broker_test_lib.sh"

work=$(mktemp -d /tmp/kleaf-kafka-tools-test.XXXXXX)
prefix=tools$(date +%s%N | tail -c 9)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/allocator.yaml" <<EOF
node: {id: tools-allocator}
state: {path: $work/state}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix}
EOF
"$kleaf" allocator --config "$work/allocator.yaml" >"$work/stdout" 2>"$work/stderr" &
pid=$!

# Until the allocator has created its topics and joined its group (the tools themselves are the
# observation): one member, serving all 12 partitions.
WATCH_PIDS=$pid await_group_assignment "$prefix.allocators" 12

topics=$(tool topics --list)
for t in requests state replies; do
  grep -qx "$prefix.$t" <<<"$topics" || fail "topics --list lacks $prefix.$t: $topics"
done
described=$(tool topics --describe --topic "$prefix.state")
grep -q "cleanup.policy=compact" <<<"$described" || fail "the state topic is not compacted: $described"
partitions=$(grep -c "Partition: " <<<"$described")
((partitions == 12)) || fail "the state topic has $partitions partitions, want 12 (kleaf's default)"
offsets=$(tool get-offsets --topic "$prefix.requests")
((($(wc -l <<<"$offsets")) == 12)) || fail "get-offsets printed: $offsets"
grep -q "^$prefix.requests:0:" <<<"$offsets" || fail "get-offsets printed: $offsets"
# A tool's own error reaches the caller (exit status), as an operator's script would rely on.
if tool topics --describe --topic "$prefix.no-such-topic" >/dev/null 2>&1; then
  fail "topics --describe of a missing topic exited 0"
fi

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
((rc == 0)) || fail "the allocator exited $rc on SIGTERM: $(cat "$work/stderr")"
echo "kafka.sh tool: $prefix.* topics listed and described (12 partitions, compacted state)," \
  "1 member in $prefix.allocators, offsets of 12 partitions"
