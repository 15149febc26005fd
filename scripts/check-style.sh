#!/usr/bin/env bash
# Checks the C++ that changed since the style base (the commit named in scripts/style-base: the last
# one the check passed on), committed or not, untracked files included:
#   - clang-format-16 (.clang-format) on every changed line: lines nobody touched keep their layout;
#   - clang-tidy-16 (.clang-tidy, errors are real bugs) on every changed .cc, and on a changed
#     header through its .cc (same name, else a .cc that includes it), with the compile commands of
#     a configured build (default build-test, as scripts/test.sh configures it).
# scripts/test.sh runs it before building. By hand:
#   scripts/check-style.sh [--build-dir DIR]   # what changed since the base; fails on any finding
#   scripts/check-style.sh --all               # every file, whole (a report: old code fails it)
# KLEAF_STYLE_JOBS (2) clang-tidy processes run at once.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "check-style: $*" >&2; exit 2; }

build=${KLEAF_STYLE_BUILD_DIR:-build-test}
jobs=${KLEAF_STYLE_JOBS:-2}
all=0
while (($#)); do
  case $1 in
    --build-dir) build=${2:?--build-dir needs a directory}; shift 2 ;;
    --all) all=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

for tool in clang-format-16 clang-tidy-16; do
  command -v "$tool" >/dev/null || die "$tool not found: run scripts/install-deps.sh"
done
db=$build/compile_commands.json
[[ -f $db ]] || die "$db not found: configure first (cmake -S . -B $build -G Ninja)"
git rev-parse --git-dir >/dev/null 2>&1 || die "not a git checkout: nothing to compare with"
base=$(grep -v '^#' scripts/style-base | grep -m1 -E '^[0-9a-f]{40}$') ||
  die "scripts/style-base names no commit"
git cat-file -e "$base^{commit}" 2>/dev/null ||
  die "style base $base is not in this clone (shallow? git fetch --unshallow)"

tmp=$(mktemp -d /tmp/kleaf-check-style.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
exts=('*.cc' '*.h' '*.cpp' '*.hpp')
start=$SECONDS

# The number of the last line of $1, an unterminated one too; 1 for an empty file.
last_line() { awk 'END { print (NR > 0 ? NR : 1) }' "$1"; }
# "file<TAB>first:last" for every changed line range of the working tree against the base (renamed
# files: only the lines that changed), then every line of untracked files.
if ((all)); then
  git ls-files -- "${exts[@]}" |
    while read -r f; do printf '%s\t1:%s\n' "$f" "$(last_line "$f")"; done
else
  git diff -M -U0 --no-color --no-ext-diff --src-prefix=a/ --dst-prefix=b/ --diff-filter=ACMR \
      "$base" -- "${exts[@]}" |
    awk '/^\+\+\+ b\// { file = substr($0, 7); next }
         /^@@ / { split(substr($3, 2), a, ","); n = (2 in a) ? a[2] : 1
                  if (n > 0) printf "%s\t%d:%d\n", file, a[1], a[1] + n - 1 }'
  git ls-files --others --exclude-standard -- "${exts[@]}" |
    while read -r f; do printf '%s\t1:%s\n' "$f" "$(last_line "$f")"; done
fi >"$tmp/ranges"
mapfile -t files < <(cut -f1 "$tmp/ranges" | sort -u)
if ((${#files[@]} == 0)); then
  echo "check-style: no C++ changed since the style base ${base:0:12}"
  exit 0
fi

# --- clang-format: the changed lines of each file ---
format_failed=()
for f in "${files[@]}"; do
  mapfile -t lines < <(awk -F'\t' -v f="$f" '$1 == f { print "--lines=" $2 }' "$tmp/ranges")
  if ! clang-format-16 --dry-run --Werror "${lines[@]}" "$f" >"$tmp/format.out" 2>&1; then
    cat "$tmp/format.out" >&2
    format_failed+=("clang-format-16 -i ${lines[*]} $f")
  fi
done

# --- clang-tidy: each changed .cc, each changed header through a .cc that includes it ---
grep -o '"file": *"[^"]*"' "$db" | sed 's/^"file": *"//; s/"$//' | sort -u >"$tmp/db_files"
in_db() { grep -qxF "$PWD/$1" "$tmp/db_files"; }
# A compiled .cc that includes header $1: the one of the same name, else one that includes it,
# else (up to $2 levels) one that includes a header that includes it.
unit_of() {
  local h=$1 depth=$2 name includers c
  if in_db "${h%.*}.cc"; then echo "${h%.*}.cc"; return; fi
  name=$(basename "$h" | sed 's/[.]/[.]/g')
  includers=$(git grep -l -E "#include *[<\"](.*/)?$name[>\"]" -- "${exts[@]}" || true)
  for c in $includers; do
    case $c in *.cc|*.cpp) in_db "$c" && { echo "$c"; return; } ;; esac
  done
  ((depth > 1)) || return 0
  for c in $includers; do
    case $c in
      *.h|*.hpp) c=$(unit_of "$c" $((depth - 1))); [[ -n $c ]] && { echo "$c"; return; } ;;
    esac
  done
}
tidy=()
skipped=()
for f in "${files[@]}"; do
  case $f in
    *.cc|*.cpp)
      if in_db "$f"; then tidy+=("$f"); else skipped+=("$f"); fi ;;
    *)
      unit=$(unit_of "$f" 3)
      if [[ -n $unit ]]; then tidy+=("$unit"); else skipped+=("$f"); fi ;;
  esac
done
mapfile -t tidy < <(printf '%s\n' "${tidy[@]}" | sed '/^$/d' | sort -u)
tidy_failed=()
if ((${#tidy[@]} > 0)); then
  # The build's commands without its precompiled header (cmake/pch.cmake): clang cannot read a GCC
  # .gch ("input is not a PCH file"), and without it each file is checked with what it includes.
  mkdir "$tmp/db"
  pch='-include|-Xclang -include-pch -Xclang [^ ]*\.pch -Xclang -include -Xclang'
  sed -E "s# -Winvalid-pch ($pch) [^ ]*/cmake_pch\.hxx##" "$db" >"$tmp/db/compile_commands.json"
  printf '%s\n' "${tidy[@]}" | xargs -P"$jobs" -I{} sh -c \
    'clang-tidy-16 -p "$1" --quiet "$2" >"$3/tidy.$(echo "$2" | tr / _)" 2>&1 ||
       echo "$2" >>"$3/tidy.failed"' _ "$tmp/db" {} "$tmp"
  if [[ -f $tmp/tidy.failed ]]; then
    mapfile -t tidy_failed < <(sort "$tmp/tidy.failed")
    for f in "${tidy_failed[@]}"; do
      grep -v -e '^[0-9]* warnings\? generated\.$' -e '^Suppressed [0-9]* warnings' \
        -e '^Use -header-filter' "$tmp/tidy.$(echo "$f" | tr / _)" >&2 || true
    done
  fi
fi

for f in "${skipped[@]}"; do
  echo "check-style: clang-tidy skipped $f (no unit of it in $db)"
done
what="changed C++ files since ${base:0:12}"
((all)) && what="C++ files"
echo "check-style: ${#files[@]} $what, clang-tidy on ${#tidy[@]} units, $((SECONDS - start)) s"
if ((${#format_failed[@]} + ${#tidy_failed[@]} == 0)); then
  exit 0
fi
if ((${#format_failed[@]} > 0)); then
  echo >&2
  echo "check-style: changed lines are not as clang-format-16 (.clang-format) lays them out." >&2
  echo "Format them (only the changed lines) with:" >&2
  printf '  %s\n' "${format_failed[@]}" >&2
fi
if ((${#tidy_failed[@]} > 0)); then
  echo >&2
  echo "check-style: clang-tidy (.clang-tidy) errors, shown above, in: ${tidy_failed[*]}" >&2
  echo "Each is a likely bug: fix the code (a NOLINT(check-name) needs a comment saying why)." >&2
  echo "Re-run: scripts/check-style.sh --build-dir $build (clang-tidy-16 -p $build alone trips" >&2
  echo "on the build's precompiled headers: cmake/pch.cmake)" >&2
fi
exit 1
