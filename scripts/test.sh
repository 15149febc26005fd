#!/usr/bin/env bash
# Installs what is missing, builds kleaf with warnings as errors, and runs every test (unit, e2e
# against the real binary over real sockets) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${KLEAF_TEST_BUILD_DIR:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKLEAF_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure --timeout 300 -j2
