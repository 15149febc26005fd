#!/usr/bin/env bash
# Runs a shell integration test against the main broker ctest gave it: the shell side of
# kafka_slot.cc (which says why). CTEST_RESOURCE_GROUP_<i>_KAFKA ("id:a,slots:1") names one of
# scripts/test.sh's main brokers; its KLEAF_TEST_KAFKA_<ID>_{BOOTSTRAP,PORT,DIR} become the
# KLEAF_TEST_KAFKA_* variables the test reads. Without a resource group nothing changes.
set -euo pipefail
for ((i = 0; i < ${CTEST_RESOURCE_GROUP_COUNT:-0}; i++)); do
  group="CTEST_RESOURCE_GROUP_$i"
  [[ "${!group:-}" == kafka ]] || continue
  allocation_var="${group}_KAFKA"
  allocation="${!allocation_var:-}"
  id="${allocation#*id:}"; id="${id%%,*}"
  [[ -n "$id" && "$allocation" == *id:* ]] \
    || { echo "on_kafka_slot.sh: $allocation_var names no broker id: '$allocation'" >&2; exit 1; }
  id="${id^^}"
  for part in BOOTSTRAP PORT DIR; do
    from="KLEAF_TEST_KAFKA_${id}_${part}"
    [[ -n "${!from:-}" ]] \
      || { echo "on_kafka_slot.sh: ctest gave this test broker $id but $from is unset" >&2; exit 1; }
    export "KLEAF_TEST_KAFKA_${part}=${!from}"
  done
  break
done
exec "$@"
