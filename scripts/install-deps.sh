#!/usr/bin/env bash
# Installs the Debian packages kleaf needs to build, run and test. Idempotent: only missing
# packages are installed, so a second run costs a few dpkg look-ups.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  librdkafka-dev librocksdb-dev libboost-dev libboost-system-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libcli11-dev faketime chromium
  clang-16 libclang-rt-16-dev
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(wrk nginx-light)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
