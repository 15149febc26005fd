#!/usr/bin/env bash
# Installs what is missing, checks the Helm chart (deploy/helm/check.sh: lint, render, validate
# against the Kubernetes schemas), checks the C++ changed since the style base with clang-format and
# clang-tidy (scripts/check-style.sh) and the Prometheus alerting rules with promtool
# (tests/prometheus), builds kleaf with warnings as errors, builds the clang
# sanitizer build and runs the unit tests under ASan+UBSan and the HTTP and TLS fuzzers in it
# (tests/fuzz), builds the unit tests alone under ThreadSanitizer and runs them (build-tsan),
# starts two real Kafka brokers (compose/kafka.sh: 4.4.0, its default) and one of the other generation
# beside them (KLEAF_TEST_KAFKA_COMPAT_VERSION, 3.9.2), runs every test with ctest (unit, e2e against
# the real binary, integration against the main brokers, two at a time, each alone on its broker,
# and the compatibility subset labelled kafka-compat against the other), and stops the brokers; then starts a cluster of three
# brokers (compose/kafka.sh cluster-start) for the tests labelled cluster3. Each phase prints how long it took (test.sh: ... s), so CI's time can be read by phase.
set -euo pipefail
cd "$(dirname "$0")/.."
phase_start=$(date +%s)
phase() {  # phase NAME: the time since the last phase ended
  local now; now=$(date +%s)
  echo "test.sh: $1 took $((now - phase_start)) s" >&2
  phase_start=$now
}
./scripts/install-deps.sh --test
phase "install-deps"
# The Helm chart first: a few seconds, so a chart error fails before the builds.
deploy/helm/check.sh
phase "helm chart check"
build=${KLEAF_TEST_BUILD_DIR:-build-test}
# -g1 (line tables, no variable info): backtraces keep file and line, and the build takes about a
# third less compile time than with -g (gateway/api.cc: 14.1 s against 20.7 s of CPU, gcc 12).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DKLEAF_WERROR=ON >/dev/null
# The tests' costs, seconds each as measured by a run of this command (tests/ctest-costs.txt, the
# tests of 2 s or more): with costs, ctest -j starts the longest tests first, so that a long
# integration test does not start last and leave the other slot idle at the end. A build dir with
# costs of its own (its earlier runs) keeps them.
if [[ ! -s "$build/Testing/Temporary/CTestCostData.txt" ]]; then
  mkdir -p "$build/Testing/Temporary"
  cp tests/ctest-costs.txt "$build/Testing/Temporary/CTestCostData.txt"
fi
# Style first (it needs only the configured build's compile_commands.json): a minute at most.
./scripts/check-style.sh --build-dir "$build"
# The alerting rules, also before the build: promtool needs nothing built (two seconds). The ctest
# run of every test below runs them again.
ctest --test-dir "$build" -L rules --output-on-failure
phase "configure, style and rules"
cmake --build "$build" -j"$(nproc)"
phase "gcc build"
# The chart's rendered configs, loaded by the kleaf just built: every key kleaf knows, in range.
deploy/helm/check.sh --kleaf "$build/kleaf"

# The clang sanitizer build (KLEAF_FUZZ): clang 16, ASan and UBSan (any report fatal) and libFuzzer
# coverage on all of kleaf up to producer/, in a build of its own. In it the unit tests run under
# the sanitizers while the fuzzers (tests/fuzz) run over their committed seed corpora, the HTTP one
# for KLEAF_FUZZ_SECONDS (60), the TLS listener's for KLEAF_HTTPS_FUZZ_SECONDS (30); any finding
# fails its test. -O1 (ASan's advice) and line tables only,
# as in the TSan build below: reports keep file and line, and the build is cheaper.
fuzz_build=${KLEAF_FUZZ_BUILD_DIR:-build-fuzz}
# Reports name functions only through llvm-symbolizer (llvm-16, from install-deps.sh), and
# tests/tsan.supp matches function names: named here rather than left to a search of PATH.
symbolizer=external_symbolizer_path=/usr/lib/llvm-16/bin/llvm-symbolizer
cmake -S . -B "$fuzz_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-16 -DKLEAF_FUZZ=ON \
  -DKLEAF_FUZZ_SECONDS="${KLEAF_FUZZ_SECONDS:-60}" >/dev/null
cmake --build "$fuzz_build" -j"$(nproc)"
phase "sanitizer build"
UBSAN_OPTIONS="print_stacktrace=1 $symbolizer" ASAN_OPTIONS="$symbolizer" \
  ctest --test-dir "$fuzz_build" -L 'fuzz|unit' --output-on-failure --timeout 600 -j2
phase "unit tests under ASan+UBSan, fuzzers"

# The ThreadSanitizer build (KLEAF_TSAN): clang 16, only the unit-test binaries and the libraries they
# link (no app, benchmarks, e2e or integration tests), at -O1 with line tables only, which keeps
# it the cheapest of the three builds. Any race report fails its test; tests/tsan.supp holds the
# suppressions, each with its reason. Not run here: GroupConsumerTest, the only unit tests that
# start librdkafka threads (its mock cluster): librdkafka is linked uninstrumented, and its broker
# threads crash inside TSan's allocator (SIGSEGV in getaddrinfo's realloc on rdk:broker-1); the
# gcc and ASan builds run them.
tsan_build=${KLEAF_TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$tsan_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-16 -DKLEAF_TSAN=ON -DKLEAF_BUILD_BENCH=OFF >/dev/null
cmake --build "$tsan_build" -j"$(nproc)" --target kleaf_unit_tests
phase "TSan build"
TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp second_deadlock_stack=1 $symbolizer" \
  ctest --test-dir "$tsan_build" -L unit -E '^GroupConsumerTest\.' --output-on-failure \
  --timeout 600 -j2
phase "unit tests under TSan"

kafka_dir=$(mktemp -d /tmp/kleaf-test-kafka.XXXXXX)
kafka_port=$(compose/kafka.sh free-port)
kafka_b_dir=$(mktemp -d /tmp/kleaf-test-kafka-b.XXXXXX)
kafka_b_port=$(compose/kafka.sh free-port)
compat_version=${KLEAF_TEST_KAFKA_COMPAT_VERSION:-3.9.2}
compat_dir=$(mktemp -d /tmp/kleaf-test-kafka-compat.XXXXXX)
compat_port=$(compose/kafka.sh free-port)
kafka3_dir=""
stop_kafka() {
  compose/kafka.sh stop --dir "$kafka_dir" --clean >/dev/null 2>&1 || true
  compose/kafka.sh stop --dir "$kafka_b_dir" --clean >/dev/null 2>&1 || true
  compose/kafka.sh stop --dir "$compat_dir" --clean >/dev/null 2>&1 || true
  if [[ -n "$kafka3_dir" ]]; then
    compose/kafka.sh cluster-stop --dir "$kafka3_dir" --kill --clean >/dev/null 2>&1 || true
  fi
}
trap stop_kafka EXIT
# The brokers start together (each version fetches its own jars on a fresh machine).
compose/kafka.sh start --kafka-version "$compat_version" --port "$compat_port" --dir "$compat_dir" \
  >/dev/null &
compat_start=$!
compose/kafka.sh start --port "$kafka_b_port" --dir "$kafka_b_dir" >/dev/null &
b_start=$!
compose/kafka.sh start --port "$kafka_port" --dir "$kafka_dir" >/dev/null
wait "$compat_start"
wait "$b_start"
# Broker a is also the default of every KLEAF_TEST_KAFKA_* variable (a test run without a resource
# group); ctest gives each test of the main brokers one of them (resource `kafka`, below), and
# tests/integration/kafka_slot.cc and on_kafka_slot.sh point the test at it.
export KLEAF_TEST_KAFKA_BOOTSTRAP="127.0.0.1:$kafka_port"
export KLEAF_TEST_KAFKA_PORT="$kafka_port"
export KLEAF_TEST_KAFKA_DIR="$kafka_dir"
export KLEAF_TEST_KAFKA_A_BOOTSTRAP="127.0.0.1:$kafka_port"
export KLEAF_TEST_KAFKA_A_PORT="$kafka_port"
export KLEAF_TEST_KAFKA_A_DIR="$kafka_dir"
export KLEAF_TEST_KAFKA_B_BOOTSTRAP="127.0.0.1:$kafka_b_port"
export KLEAF_TEST_KAFKA_B_PORT="$kafka_b_port"
export KLEAF_TEST_KAFKA_B_DIR="$kafka_b_dir"
resource_spec="$kafka_dir.resources.json"
cat >"$resource_spec" <<'SPEC'
{"version": {"major": 1, "minor": 0},
 "local": [{"kafka": [{"id": "a", "slots": 1}, {"id": "b", "slots": 1}]}]}
SPEC
export KLEAF_TEST_KAFKA_SCRIPT="$PWD/compose/kafka.sh"
export KLEAF_TEST_KAFKA_COMPAT_BOOTSTRAP="127.0.0.1:$compat_port"
export KLEAF_TEST_KAFKA_COMPAT_PORT="$compat_port"
export KLEAF_TEST_KAFKA_COMPAT_DIR="$compat_dir"
export KLEAF_TEST_KAFKA_COMPAT_VERSION="$compat_version"
phase "brokers started (Kafka $(compose/kafka.sh version) twice and $compat_version)"

# Everything but the three-broker tests: on the main brokers, and the kafka-compat subset on the
# other. A broker runs one test at a time (RESOURCE_GROUPS kafka:1 over the spec's brokers a and b,
# RESOURCE_LOCK kafka-compat): with -j2 the integration tests, 1,059 s of the phase's 1,125 s when
# they had one broker, run two at a time, the unit, e2e and kafka-compat tests in between. A
# failure here still runs the cluster3 tests below.
status=0
ctest --test-dir "$build" --output-on-failure --timeout 600 -j2 -LE cluster3 \
  --resource-spec-file "$resource_spec" || status=$?
compose/kafka.sh stop --dir "$kafka_dir" --clean >/dev/null
compose/kafka.sh stop --dir "$kafka_b_dir" --clean >/dev/null
compose/kafka.sh stop --dir "$compat_dir" --clean >/dev/null
rm -f "$resource_spec"
phase "unit, e2e and integration tests (Kafka $(compose/kafka.sh version) and $compat_version)"

# The tests labelled cluster3 on a KRaft cluster of three brokers (RF 3, min ISR 2), each broker
# killed, paused and restarted by the tests (tests/integration/cluster3).
kafka3_dir=$(mktemp -d /tmp/kleaf-test-kafka3.XXXXXX)
KLEAF_TEST_KAFKA3_BOOTSTRAP=$(compose/kafka.sh cluster-start --dir "$kafka3_dir")
export KLEAF_TEST_KAFKA3_BOOTSTRAP
export KLEAF_TEST_KAFKA3_DIR="$kafka3_dir"
export KLEAF_TEST_KAFKA3_SCRIPT="$PWD/compose/kafka.sh"
ctest --test-dir "$build" --output-on-failure --timeout 600 -L cluster3 || status=$?
phase "three-broker tests"
exit "$status"
