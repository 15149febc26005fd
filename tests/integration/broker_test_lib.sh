# Sourced by the shell integration tests (*_integration_test.sh): the test broker, failing, and
# the allocators' group as Kafka's own consumer-groups tool reports it.
#
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT (scripts/test.sh exports them);
# without them the sourcing test exits 77 (ctest: skipped).
if [[ -z ${KLEAF_TEST_KAFKA_BOOTSTRAP:-} || -z ${KLEAF_TEST_KAFKA_SCRIPT:-} ]]; then
  echo "no test broker (KLEAF_TEST_KAFKA_BOOTSTRAP): skipped"
  exit 77
fi
bootstrap=$KLEAF_TEST_KAFKA_BOOTSTRAP
kafka_sh=$KLEAF_TEST_KAFKA_SCRIPT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Kafka's CLI tool NAME against the test broker: tool NAME ARGS...
tool() { "$kafka_sh" tool "$@" --bootstrap-server "$bootstrap"; }

# The #PARTITIONS of each member of consumer group $1, sorted, on one line ("6 6"; empty: none).
group_assignment() {
  tool consumer-groups --describe --group "$1" --members 2>/dev/null \
    | awk -v g="$1" '$1 == g { print $NF }' | sort -n | xargs
}

# Waits up to $3 seconds (default 60: a cold JVM per look, a rebalance of a few seconds) until
# group_assignment $1 prints $2 ("any" for at least one member); fails naming what it saw. Each
# pid in $WATCH_PIDS must stay alive meanwhile.
await_group_assignment() {
  local group=$1 want=$2 seconds=${3:-60} got= pid
  for _ in $(seq 1 "$seconds"); do
    for pid in ${WATCH_PIDS:-}; do
      kill -0 "$pid" 2>/dev/null || fail "a node (pid $pid) exited while $group formed"
    done
    got=$(group_assignment "$group") || true
    if [[ $want == any && -n $got ]] || [[ $got == "$want" ]]; then return 0; fi
    sleep 1
  done
  fail "group $group: member partitions '$got', want '$want'"
}
