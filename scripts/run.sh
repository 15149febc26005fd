#!/usr/bin/env bash
# Installs what is missing, builds kleaf (Release) and runs `kleaf standalone` on 127.0.0.1:8080
# with its state in ./data. Extra arguments go to kleaf, e.g. `--config my.yaml`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKLEAF_BUILD_TESTS=OFF -DKLEAF_BUILD_BENCH=OFF >/dev/null
cmake --build build
cat <<'MSG'

kleaf standalone is starting on http://127.0.0.1:8080 (state in ./data). In another shell:

  curl -X PUT -H "Authorization: Bearer $(cat data/admin.token)" \
       -d '{"step":1000}' http://127.0.0.1:8080/api/v1/tags/demo
  curl http://127.0.0.1:8080/api/segment/get/demo             # a segment ID
  curl 'http://127.0.0.1:8080/api/v1/snowflake/demo?count=3'  # snowflake IDs (JSON)

Stop with Ctrl-C.
MSG
exec ./build/kleaf standalone "$@"
