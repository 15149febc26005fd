#!/usr/bin/env bash
# Availability of kleaf while Kafka's leaders move (issue 26, item 4): starts a KRaft cluster of
# three brokers (compose/kafka.sh cluster-start: replication factor 3, min.insync.replicas 2), runs
# kleaf_cluster_availability_bench against it (2 allocators, 2 gateways, default steps, steady
# segment and snowflake clients; a state-leader kill, a 15 s controller pause and a rolling restart
# of the brokers) once per group protocol of the allocators (kafka.group_protocol), one after the
# other on the same brokers, and stops the brokers. Prints the tables of docs/benchmarks.md.
#
#   tests/bench/cluster_availability.sh [threads per gateway and kind] [pause ms] [protocols] [lease ms]
#   (default 2 10 "classic auto" 30000: both protocols, auto resolving to the consumer one on
#   Kafka 4.x brokers, worker leases of 30 s)
#
# Uses the test build in build-test/ (the one scripts/test.sh makes); builds what it needs there.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${KLEAF_TEST_BUILD_DIR:-build-test}
if [[ ! -f "$build/build.ninja" ]]; then
  ./scripts/install-deps.sh --test
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target kleaf kleaf_cluster_availability_bench >/dev/null

dir=$(mktemp -d /tmp/kleaf-avail-kafka3.XXXXXX)
trap 'compose/kafka.sh cluster-stop --dir "$dir" --kill --clean >/dev/null 2>&1 || true' EXIT
KLEAF_TEST_KAFKA3_BOOTSTRAP=$(compose/kafka.sh cluster-start --dir "$dir")
export KLEAF_TEST_KAFKA3_BOOTSTRAP KLEAF_TEST_KAFKA3_DIR="$dir" KLEAF_TEST_KAFKA3_SCRIPT="$PWD/compose/kafka.sh"
echo "# $(date -u +%FT%TZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), main at $(git rev-parse --short HEAD)"
status=0
for protocol in ${3:-classic auto}; do
  echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"
  KLEAF_TEST_GROUP_PROTOCOL=$protocol KLEAF_BENCH_WORKER_LEASE_MS=${4:-30000} \
    "$build/kleaf_cluster_availability_bench" "${1:-2}" "${2:-10}" || status=$?
  echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
done
exit $status
