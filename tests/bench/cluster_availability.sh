#!/usr/bin/env bash
# Availability of kleaf while Kafka's leaders move (issue 26, item 4): starts a KRaft cluster of
# three brokers (compose/kafka.sh cluster-start: replication factor 3, min.insync.replicas 2), runs
# kleaf_cluster_availability_bench against it (2 allocators, 2 gateways, default steps, steady
# segment and snowflake clients; a state-leader kill, a 15 s controller pause and a rolling restart
# of the brokers) and stops the brokers. Prints the table of docs/benchmarks.md.
#
#   tests/bench/cluster_availability.sh [threads per gateway and kind] [pause ms]   (default 2 10)
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
"$build/kleaf_cluster_availability_bench" "${1:-2}" "${2:-10}"
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
