#!/usr/bin/env bash
# The operator who creates kleaf's state topic by hand with Kafka's default cleanup.policy=delete,
# and with unclean.leader.election.enable=true (as a broker tuned for availability has it): an
# allocator refuses to start (exit 2) with a message that names the first setting and the command
# that fixes it; the operator runs exactly that command (Kafka's own tool), the allocator names
# the second one, and after its command too, it starts.
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

tool topics --create --topic "$prefix.state" --partitions 12 --replication-factor 1 \
  --config cleanup.policy=delete --config unclean.leader.election.enable=true >/dev/null
cat >"$work/allocator.yaml" <<YAML
node: {id: policy-allocator}
state: {path: $work/state}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix}
YAML

# refused_then_fixed KEY BAD GOOD: the allocator exits 2 naming KEY=BAD on the state topic and the
# command that sets GOOD; the operator runs that command.
refused_then_fixed() {
  local key=$1 bad=$2 good=$3 rc=0 fix
  timeout 120 "$kleaf" allocator --config "$work/allocator.yaml" >"$work/out" 2>"$work/err" || rc=$?
  ((rc == 2)) || fail "the allocator exited $rc on a state topic with $key=$bad: $(cat "$work/err")"
  grep -q "topic $prefix.state has $key=$bad" "$work/err" || fail "no reason given: $(cat "$work/err")"
  fix=$(grep -o -m1 -- "--entity-name $prefix.state --add-config $key=$good" "$work/err" | head -n1) \
    || fail "no fix given for $key: $(cat "$work/err")"
  [[ ! -e $work/state/CURRENT ]] || fail "the refused allocator created a store in state.path"
  # The operator runs the command the message gives, through compose/kafka.sh's copy of the tool.
  # shellcheck disable=SC2086
  tool configs --alter --entity-type topics $fix >/dev/null
}
refused_then_fixed cleanup.policy delete compact
refused_then_fixed unclean.leader.election.enable true false

"$kleaf" allocator --config "$work/allocator.yaml" >"$work/out2" 2>"$work/err2" &
pid=$!
WATCH_PIDS=$pid await_group_assignment "$prefix.allocators" 12
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
((rc == 0)) || fail "the allocator exited $rc on SIGTERM"
echo "refused cleanup.policy=delete, then unclean.leader.election.enable=true (exit 2, fix named each time); started after both fixes"
