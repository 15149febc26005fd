#!/usr/bin/env bash
# The operator who creates kleaf's state topic by hand with Kafka's default cleanup.policy=delete:
# an allocator refuses to start (exit 2) with a message that names the policy and the command
# that fixes it; after the operator runs exactly that command (Kafka's own tool), it starts.
#
# Usage: state_topic_policy_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT; without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
if [[ -z ${KLEAF_TEST_KAFKA_BOOTSTRAP:-} || -z ${KLEAF_TEST_KAFKA_SCRIPT:-} ]]; then
  echo "no test broker (KLEAF_TEST_KAFKA_BOOTSTRAP): skipped"
  exit 77
fi
bootstrap=$KLEAF_TEST_KAFKA_BOOTSTRAP
kafka_sh=$KLEAF_TEST_KAFKA_SCRIPT
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/kleaf-state-policy-test.XXXXXX)
prefix=policy$(date +%s%N | tail -c 9)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$kafka_sh" tool topics --bootstrap-server "$bootstrap" --create --topic "$prefix.state" \
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
"$kafka_sh" tool configs --bootstrap-server "$bootstrap" --alter --entity-type topics $fix >/dev/null
"$kleaf" allocator --config "$work/allocator.yaml" >"$work/out2" 2>"$work/err2" &
pid=$!
members=0
for _ in $(seq 1 60); do
  kill -0 "$pid" 2>/dev/null || fail "the allocator exited after the fix: $(cat "$work/err2")"
  members=$("$kafka_sh" tool consumer-groups --bootstrap-server "$bootstrap" --describe \
    --group "$prefix.allocators" --members 2>/dev/null | awk -v g="$prefix.allocators" '$1 == g' \
    | wc -l) || true
  ((members >= 1)) && break
  sleep 1
done
((members == 1)) || fail "after the fix the allocator did not join its group"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
((rc == 0)) || fail "the allocator exited $rc on SIGTERM"
echo "refused cleanup.policy=delete (exit 2, fix named); started after the fix"
