#!/usr/bin/env bash
# The operator who creates kleaf's state topic by hand on a cluster of three brokers with one
# replica and a min.insync.replicas=1 of its own: an allocator refuses to start (exit 2) naming the
# topic, both values and both fixes; with kafka.allow_unreplicated it runs (warning). The operator
# reassigns the partitions to three brokers as the message says but forgets the second command: the
# allocator names min.insync.replicas alone; after that command it starts, warning about nothing
# (the topics kleaf created took the brokers' RF 3 / min ISR 2). Then the operator lowers Kafka's
# own transaction log (__transaction_state, which holds the fence of every allocator's
# transactional id) to min.insync.replicas=1: a new allocator refuses to start naming it and its
# fix; the test puts the setting back, also when it fails.
#
# Usage: replication_cluster3_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA3_BOOTSTRAP and KLEAF_TEST_KAFKA3_SCRIPT (scripts/test.sh exports them for
# the tests labelled cluster3); without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
if [[ -z ${KLEAF_TEST_KAFKA3_BOOTSTRAP:-} || -z ${KLEAF_TEST_KAFKA3_SCRIPT:-} ]]; then
  echo "no three-broker cluster (KLEAF_TEST_KAFKA3_BOOTSTRAP): skipped"
  exit 77
fi
# broker_test_lib.sh's helpers (tool, fail, await_group_assignment) against the three brokers.
KLEAF_TEST_KAFKA_BOOTSTRAP=$KLEAF_TEST_KAFKA3_BOOTSTRAP KLEAF_TEST_KAFKA_SCRIPT=$KLEAF_TEST_KAFKA3_SCRIPT
source "$(dirname "$0")/broker_test_lib.sh"
work=$(mktemp -d /tmp/kleaf-replication3-test.XXXXXX)
prefix=repl3c$(date +%s%N | tail -c 9)
pid=
txn_log_lowered=
restore_txn_log() {
  tool configs --alter --entity-type topics --entity-name __transaction_state \
    --add-config min.insync.replicas=2 >/dev/null
  txn_log_lowered=
}
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  # The cluster is shared with the other cluster3 tests: never leave it lowered.
  [[ -n $txn_log_lowered ]] && restore_txn_log || true
  rm -rf "$work"
}
trap cleanup EXIT

tool topics --create --topic "$prefix.state" --partitions 12 --replication-factor 1 \
  --config cleanup.policy=compact --config min.insync.replicas=1 >/dev/null
config() {  # NAME [KAFKA_KEYS]
  cat >"$work/$1.yaml" <<YAML
node: {id: $1}
state: {path: $work/$1-state}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix${2:+, $2}}
YAML
  echo "$work/$1.yaml"
}
allocator=$(config allocator)
allocator_store=$work/allocator-state

# refused: the allocator exits 2 on the state topic; stderr in $work/err.
refused() {
  local rc=0
  timeout 120 "$kleaf" allocator --config "$allocator" >"$work/out" 2>"$work/err" || rc=$?
  ((rc == 2)) || fail "the allocator exited $rc on $1: $(cat "$work/err")"
  [[ ! -e $allocator_store/CURRENT ]] || fail "the refused allocator created a store"
}

# 1. One replica, one in sync: both values and both fixes named, and only the state topic (kleaf
# created the others with the brokers' RF 3 and min ISR 2).
refused "a state topic with one replica"
grep -q "topic $prefix.state has replication factor 1 and min.insync.replicas 1 on a cluster of 3 brokers" \
  "$work/err" || fail "no reason given: $(cat "$work/err")"
grep -q -- "kafka-reassign-partitions.sh --bootstrap-server B --reassignment-json-file plan.json --execute" \
  "$work/err" || fail "no reassignment given: $(cat "$work/err")"
grep -q -- "--entity-name $prefix.state --add-config min.insync.replicas=2" "$work/err" \
  || fail "no min.insync.replicas fix given: $(cat "$work/err")"
grep -q "kafka.allow_unreplicated: true" "$work/err" || fail "no way out named: $(cat "$work/err")"
if grep -q "topic $prefix.requests has\|topic $prefix.layout has" "$work/err"; then
  fail "a topic kleaf created is named: $(cat "$work/err")"
fi
described=$(tool topics --describe --topic "$prefix.requests")
grep -q "ReplicationFactor: 3" <<<"$described" || fail "kleaf's requests topic: $described"

# 2. On purpose: kafka.allow_unreplicated runs on it, with the warning.
rc=0
timeout 120 "$kleaf" state export --config "$(config unreplicated "allow_unreplicated: true")" \
  "$work/export.json" >/dev/null 2>"$work/err" || rc=$?
((rc == 0)) || fail "state export with allow_unreplicated exited $rc: $(cat "$work/err")"
grep -q "\[replication\] topic $prefix.state has replication factor 1" "$work/err" \
  || fail "no warning with allow_unreplicated: $(cat "$work/err")"

# 3. The operator follows the first fix: three replicas per partition (leaders spread over the
# brokers), then waits for the reassignment to finish.
{
  printf '{"version":1,"partitions":['
  for p in $(seq 0 11); do
    a=$((p % 3 + 1)) b=$(((p + 1) % 3 + 1)) c=$(((p + 2) % 3 + 1))
    printf '%s{"topic":"%s","partition":%d,"replicas":[%d,%d,%d]}' "$([[ $p == 0 ]] || echo ,)" \
      "$prefix.state" "$p" "$a" "$b" "$c"
  done
  printf ']}\n'
} >"$work/plan.json"
tool reassign-partitions --reassignment-json-file "$work/plan.json" --execute >/dev/null
for _ in $(seq 1 60); do
  verify=$(tool reassign-partitions --reassignment-json-file "$work/plan.json" --verify 2>&1) || true
  grep -q "in progress" <<<"$verify" || break
  sleep 1
done
((($(grep -c "is completed" <<<"$verify"))== 12)) || fail "reassignment not completed: $verify"

# 4. ... but forgets the second: only min.insync.replicas is named now, with its command.
refused "a state topic with min.insync.replicas 1"
grep -q "topic $prefix.state has replication factor 3 and min.insync.replicas 1" "$work/err" \
  || fail "no reason given: $(cat "$work/err")"
if grep -q "kafka-reassign-partitions" "$work/err"; then
  fail "a reassignment is asked for three replicas: $(cat "$work/err")"
fi
fix=$(grep -o -m1 -- "--entity-name $prefix.state --add-config min.insync.replicas=2" "$work/err" |
  head -n1) || fail "no fix given: $(cat "$work/err")"
# shellcheck disable=SC2086
tool configs --alter --entity-type topics $fix >/dev/null

# 5. It starts, serves all 12 partitions, and warns about nothing.
"$kleaf" allocator --config "$allocator" >"$work/out" 2>"$work/err" &
pid=$!
WATCH_PIDS=$pid await_group_assignment "$prefix.allocators" 12
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
((rc == 0)) || fail "the allocator exited $rc on SIGTERM: $(cat "$work/err")"
if grep -q "\[replication\]" "$work/err"; then
  fail "warned about replication on RF 3 / min ISR 2: $(cat "$work/err")"
fi

# 6. Kafka's transaction log (step 5's transactions made sure it exists) at min.insync.replicas=1:
# a commit decision or a fence acknowledged by one broker dies with its disk. A new allocator is
# refused, naming the topic and its fix, and nothing else.
described=$(tool topics --describe --topic __transaction_state | head -n1)
grep -q "ReplicationFactor: 3" <<<"$described" || fail "the transaction log: $described"
txn_log_lowered=1
tool configs --alter --entity-type topics --entity-name __transaction_state \
  --add-config min.insync.replicas=1 >/dev/null
allocator=$(config allocator2)
allocator_store=$work/allocator2-state
refused "a transaction log with min.insync.replicas 1"
grep -q "topic __transaction_state has replication factor 3 and min.insync.replicas 1" "$work/err" \
  || fail "no reason given: $(cat "$work/err")"
grep -q -- "--entity-name __transaction_state --add-config min.insync.replicas=2" "$work/err" \
  || fail "no fix given: $(cat "$work/err")"
if grep -q "topic $prefix\." "$work/err"; then
  fail "one of kleaf's own topics is named: $(cat "$work/err")"
fi
restore_txn_log
echo "RF 1 / min ISR 1 refused (exit 2, both fixes named), run with allow_unreplicated (warned);" \
  "after the reassignment min ISR 1 refused alone; after kafka-configs it starts; a transaction" \
  "log at min ISR 1 refused"
