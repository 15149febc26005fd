#!/usr/bin/env bash
# The operator who creates kleaf's state topic by hand with Kafka's default cleanup.policy=delete:
# an allocator refuses to start (exit 2) with a message that names the policy and the command
# that fixes it; after the operator runs exactly that command (Kafka's own tool), it starts.
#
# Usage: state_topic_policy_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT; without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
source "$(dirname "$0")/broker_test_lib.sh"
work=$(mktemp -d /tmp/kleaf-state-policy-test.XXXXXX)
prefix=policy$(date +%s%N | tail -c 9)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

tool topics --create --topic "$prefix.state" \
  --partitions 12 --replication-factor 1 --config cleanup.policy=delete >/dev/null
cat >"$work/allocator.yaml" <<YAML
node: {id: policy-allocator}
state: {path: $work/state}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix}
YAML

rc=0
timeout 120 "$kleaf" allocator --config "$work/allocator.yaml" >"$work/out" 2>"$work/err" || rc=$?
((rc == 2)) || fail "the allocator exited $rc on a state topic with cleanup.policy=delete: $(cat "$work/err")"
grep -q "topic $prefix.state has cleanup.policy=delete" "$work/err" || fail "no reason given: $(cat "$work/err")"
fix=$(grep -o -m1 -- "--entity-name $prefix.state --add-config cleanup.policy=compact" "$work/err" | head -n1) \
  || fail "no fix given: $(cat "$work/err")"
[[ ! -e $work/state/CURRENT ]] || fail "the refused allocator created a store in state.path"

# The operator runs the command the message gives, through compose/kafka.sh's copy of the tool.
# shellcheck disable=SC2086
tool configs --alter --entity-type topics $fix >/dev/null
"$kleaf" allocator --config "$work/allocator.yaml" >"$work/out2" 2>"$work/err2" &
pid=$!
WATCH_PIDS=$pid await_group_assignment "$prefix.allocators" 12
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
((rc == 0)) || fail "the allocator exited $rc on SIGTERM"
echo "refused cleanup.policy=delete (exit 2, fix named); started after the fix"
