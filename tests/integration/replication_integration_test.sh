#!/usr/bin/env bash
# The replication of the topics kleaf creates, on the one test broker, as an operator configures
# it: with kafka.replication_factor unset the brokers choose (default.replication.factor) and no
# topic gets a min.insync.replicas of its own that would override the brokers' (kleaf used to set
# 1); a replication factor the cluster cannot give is a config error naming the key (exit 2); one
# outside its range too, before Kafka is asked; kafka.allow_unreplicated is accepted, and with one
# broker there is nothing to warn about. (The refusals need three brokers:
# replication_cluster3_integration_test.sh.)
#
# Usage: replication_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT; without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
source "$(dirname "$0")/broker_test_lib.sh"
work=$(mktemp -d /tmp/kleaf-replication-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
run=$(date +%s%N | tail -c 9)

# config PREFIX [KAFKA_KEYS]: a node's config on the test broker with topic prefix PREFIX.
config() {
  cat >"$work/$1.yaml" <<YAML
node: {id: replication-$1}
state: {path: $work/$1-state}
kafka: {bootstrap: "$bootstrap", topic_prefix: $1${2:+, $2}}
YAML
  echo "$work/$1.yaml"
}

# export_state CONFIG: `kleaf state export` (the cluster setup every role runs, then a read of the
# state topic); its exit code, stderr in $work/err.
export_state() {
  local rc=0
  timeout 120 "$kleaf" state export --config "$1" "$work/export.json" >/dev/null 2>"$work/err" || rc=$?
  return $rc
}

# 1. Nothing configured: every topic gets the broker's replication factor (1 here) and no
# min.insync.replicas of its own.
prefix=repl$run
export_state "$(config "$prefix")" || fail "state export exited $?: $(cat "$work/err")"
for t in requests state replies ids layout; do
  described=$(tool topics --describe --topic "$prefix.$t")
  grep -q "ReplicationFactor: 1" <<<"$described" || fail "$prefix.$t: $described"
  overrides=$(tool configs --describe --entity-type topics --entity-name "$prefix.$t")
  if grep -q "min.insync.replicas" <<<"$overrides"; then
    fail "$prefix.$t overrides the brokers' min.insync.replicas: $overrides"
  fi
done
if grep -q "\[replication\]" "$work/err"; then
  fail "warned about replication on one broker: $(cat "$work/err")"
fi

# 2. More replicas than the cluster has brokers: refused by Kafka, reported as the config key.
prefix=repl3$run
rc=0
export_state "$(config "$prefix" "replication_factor: 3")" || rc=$?
((rc == 2)) || fail "replication_factor 3 on one broker exited $rc: $(cat "$work/err")"
grep -q "kafka.replication_factor: 3 is configured, but creating topic $prefix\." "$work/err" \
  || fail "no reason given: $(cat "$work/err")"

# 3. Out of range: a config error before Kafka is asked.
rc=0
export_state "$(config "repl17$run" "replication_factor: 17")" || rc=$?
((rc == 2)) || fail "replication_factor 17 exited $rc: $(cat "$work/err")"
grep -q "kafka.replication_factor: must be between 0 and 16" "$work/err" \
  || fail "no reason given: $(cat "$work/err")"

# 4. An explicit 1 with kafka.allow_unreplicated: the topics get 1 replica and still no
# min.insync.replicas of their own; one broker, so nothing is warned about.
prefix=repl1$run
export_state "$(config "$prefix" "replication_factor: 1, allow_unreplicated: true")" \
  || fail "replication_factor 1 with allow_unreplicated exited $?: $(cat "$work/err")"
described=$(tool topics --describe --topic "$prefix.state")
grep -q "ReplicationFactor: 1" <<<"$described" || fail "$prefix.state: $described"
overrides=$(tool configs --describe --entity-type topics --entity-name "$prefix.state")
if grep -q "min.insync.replicas" <<<"$overrides"; then
  fail "$prefix.state got a min.insync.replicas of its own: $overrides"
fi
if grep -q "\[replication\]" "$work/err"; then
  fail "warned about replication on one broker: $(cat "$work/err")"
fi
echo "unset: broker's replication, no min.insync.replicas override; 3 on one broker and 17: exit 2 naming the key; 1 with allow_unreplicated: started"
