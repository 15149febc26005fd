#!/usr/bin/env bash
# A node starts while one broker of three is down (a rolling restart): each broker in turn is
# killed (kill -9) and, at once, while the controller still counts it as alive, an allocator starts
# well within its 30 s setup deadline (the cluster setup every role runs, then its own start). KRaft names a random live broker as "controller" in metadata
# answers, and librdkafka sent every admin request there: one that named the dead broker made the
# setup wait for it until its 30 s deadline ("describing topic ….requests: Local: Timed out").
#
# Usage: startup_broker_down_cluster3_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA3_BOOTSTRAP, _DIR and _SCRIPT (scripts/test.sh exports them for the tests
# labelled cluster3); without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
if [[ -z ${KLEAF_TEST_KAFKA3_BOOTSTRAP:-} || -z ${KLEAF_TEST_KAFKA3_DIR:-} ||
  -z ${KLEAF_TEST_KAFKA3_SCRIPT:-} ]]; then
  echo "no three-broker cluster (KLEAF_TEST_KAFKA3_BOOTSTRAP): skipped"
  exit 77
fi
bootstrap=$KLEAF_TEST_KAFKA3_BOOTSTRAP
kafka_sh=$KLEAF_TEST_KAFKA3_SCRIPT
kafka_dir=$KLEAF_TEST_KAFKA3_DIR
work=$(mktemp -d /tmp/kleaf-broker-down-test.XXXXXX)
prefix=down$(date +%s%N | tail -c 9)
pids=()
down=
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  # Leave the cluster as it was found: all three brokers up.
  [[ -n $down ]] && "$kafka_sh" cluster-node --dir "$kafka_dir" "$down" start >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

config() {  # NAME
  cat >"$work/$1.yaml" <<YAML
node: {id: $1}
state: {path: $work/$1-state}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix}
YAML
  echo "$work/$1.yaml"
}
now_ms() { date +%s%3N; }

# The cluster's topics and layout, made while all three brokers are up (a rolling restart meets an
# existing cluster).
timeout 120 "$kleaf" state export --config "$(config first)" "$work/export.json" >/dev/null \
  2>"$work/first.err" || fail "state export on three brokers: $(cat "$work/first.err")"

# wait_line FILE PATTERN PID WHAT: until FILE has a line matching PATTERN (60 s), PID alive.
wait_line() {
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || fail "broker $node down: the $4 exited: $(tail -5 "$work/$4.err")"
    sleep 0.1
  done
  fail "broker $node down: the $4 did not start in 60 s: $(tail -5 "$work/$4.err")"
}

report=()
for node in 1 2 3; do
  "$kafka_sh" cluster-node --dir "$kafka_dir" "$node" kill >/dev/null
  down=$node
  : >"$work/allocator.out"
  start=$(now_ms)
  "$kleaf" allocator --config "$(config allocator-$node)" >"$work/allocator.out" \
    2>"$work/allocator.err" &
  pids=($!)
  wait_line "$work/allocator.out" "kleaf allocator running" "${pids[0]}" allocator
  allocator_ms=$(($(now_ms) - start))
  # Within the 30 s setup deadline, with room: it did not wait for the dead broker.
  ((allocator_ms < 25000)) || fail "broker $node down: allocator running after $allocator_ms ms"
  kill -TERM "${pids[0]}"
  rc=0
  wait "${pids[0]}" || rc=$?
  pids=()
  ((rc == 0)) || fail "broker $node down: the allocator exited $rc on SIGTERM: $(tail -5 "$work/allocator.err")"
  report+=("broker $node down: allocator running after ${allocator_ms} ms")
  "$kafka_sh" cluster-node --dir "$kafka_dir" "$node" start >/dev/null
  down=
done
printf '%s\n' "${report[@]}"
