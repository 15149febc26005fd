#!/usr/bin/env bash
# Runs a test command against the second broker of scripts/test.sh, of the other Kafka generation
# (the compatibility lane, label kafka-compat), instead of the main one:
# KLEAF_TEST_KAFKA_COMPAT_{BOOTSTRAP,PORT,DIR,VERSION} become the KLEAF_TEST_KAFKA_* variables every
# integration test reads, and KLEAF_KAFKA_VERSION, so that a broker the test restarts or starts of
# its own (compose/kafka.sh) is of that version too. Without that broker the test is skipped (77).
set -euo pipefail
if [[ -z "${KLEAF_TEST_KAFKA_COMPAT_BOOTSTRAP:-}" ]]; then
  echo "on_kafka_compat.sh: no compatibility broker (KLEAF_TEST_KAFKA_COMPAT_BOOTSTRAP unset): skipped" >&2
  exit 77
fi
export KLEAF_TEST_KAFKA_BOOTSTRAP="$KLEAF_TEST_KAFKA_COMPAT_BOOTSTRAP"
export KLEAF_TEST_KAFKA_PORT="$KLEAF_TEST_KAFKA_COMPAT_PORT"
export KLEAF_TEST_KAFKA_DIR="$KLEAF_TEST_KAFKA_COMPAT_DIR"
export KLEAF_KAFKA_VERSION="$KLEAF_TEST_KAFKA_COMPAT_VERSION"
# A filter that selects nothing would pass silently (GoogleTest 1.12 has no flag against it).
for arg in "${@:2}"; do
  if [[ "$arg" == --gtest_filter=* ]]; then
    "$1" --gtest_list_tests "$arg" | grep -q '^  ' \
      || { echo "on_kafka_compat.sh: $arg selects no test of $1" >&2; exit 1; }
  fi
done
exec "$@"
