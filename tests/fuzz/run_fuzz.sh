#!/usr/bin/env bash
# Runs a libFuzzer target for SECONDS over a copy of the committed seed corpus (which stays as it
# is) and fails on any finding; the crashing input is kept and its path printed.
# Usage: run_fuzz.sh FUZZER SEED_CORPUS_DIR [SECONDS]
set -euo pipefail
fuzzer=$1
seeds=$2
seconds=${3:-60}
work=$(mktemp -d /tmp/kleaf-fuzz.XXXXXX)
mkdir -p "$work/corpus" "$work/artifacts"
cp "$seeds"/* "$work/corpus/"
# Symbolized stack traces in reports when an llvm-symbolizer is installed (any version reads
# clang 16's debug info); without one, addresses only (replay the input where one is).
export ASAN_OPTIONS=symbolize=0 UBSAN_OPTIONS=symbolize=0
for s in llvm-symbolizer-16 llvm-symbolizer llvm-symbolizer-14; do
  if command -v "$s" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH=$(command -v "$s") ASAN_OPTIONS=symbolize=1 UBSAN_OPTIONS=symbolize=1
    break
  fi
done
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" || status=$?
if ((status != 0)) || [[ -n "$(ls -A "$work/artifacts")" ]]; then
  echo "run_fuzz: FINDING (exit $status); inputs kept in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2
  exit 1
fi
rm -rf "$work"
