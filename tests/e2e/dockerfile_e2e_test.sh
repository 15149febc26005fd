#!/usr/bin/env bash
# Checks compose/Dockerfile without Docker: performs the build stage's `cmake --install` (same
# DESTDIR layout, same install prefix) from this build, takes what the runtime stage's
# `COPY --from=build` would copy, and requires every shared library that `ldd` shows any copied
# ELF file loading to be either among the copied files or in a Debian package that the runtime
# stage installs (or that every Debian image has: libc6, libgcc-s1, libstdc++6). Also checks that
# the ENTRYPOINT is among the copied files.
#
# Usage: dockerfile_e2e_test.sh BUILD_DIR DOCKERFILE
set -euo pipefail
build=$(realpath "$1")
dockerfile=$(realpath "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/kleaf-dockerfile-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Dockerfile continuation lines joined, comments dropped: one instruction per line.
sed -e '/^[[:space:]]*#/d' "$dockerfile" | sed -e ':a' -e '/\\$/{N;s/\\\n/ /;ba}' >"$work/joined"
last_from=$(grep -n '^FROM ' "$work/joined" | tail -n1 | cut -d: -f1)
head -n "$((last_from - 1))" "$work/joined" >"$work/build-stage"
tail -n "+$last_from" "$work/joined" >"$work/runtime-stage"

destdir=$(grep -o 'DESTDIR=[^ ]* cmake --install' "$work/build-stage" | sed 's/DESTDIR=\([^ ]*\) .*/\1/')
prefix=$(grep -o -- '-DCMAKE_INSTALL_PREFIX=[^ ]*' "$work/build-stage" | cut -d= -f2)
[[ -n $destdir && -n $prefix ]] || fail "the build stage has no 'DESTDIR=… cmake --install' with -DCMAKE_INSTALL_PREFIX"
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[[ $configured == "$prefix" ]] \
  || fail "this build's CMAKE_INSTALL_PREFIX is $configured, the image's $prefix: reconfigure to compare"

staging=$work/staging
DESTDIR=$staging cmake --install "$build" >"$work/install.log"

# COPY --from=build SRC DEST: SRC inside the staging tree, mapped to DEST in the image.
read -r copy_src copy_dest < <(grep '^COPY --from=build ' "$work/runtime-stage" | awk '{print $3, $4}')
[[ -n ${copy_src:-} ]] || fail "the runtime stage copies nothing from the build stage"
[[ $copy_src == "$destdir"* ]] || fail "the runtime stage copies $copy_src, not the install in $destdir"
copied=$staging${copy_src#"$destdir"}
[[ -d $copied ]] || fail "$copy_src is not what cmake --install produced (no $copied)"

entrypoint=$(sed -n 's/^ENTRYPOINT \["\([^"]*\)".*/\1/p' "$work/runtime-stage")
[[ -n $entrypoint && $entrypoint == "${copy_dest%/}"/* ]] || fail "ENTRYPOINT $entrypoint is not under $copy_dest"
[[ -x $copied/${entrypoint#"${copy_dest%/}"/} ]] || fail "ENTRYPOINT $entrypoint is not among the copied files"

# The runtime stage's apt-get install list (every word after --no-install-recommends up to &&).
packages=$(grep -o 'apt-get install [^&]*' "$work/runtime-stage" | tr ' ' '\n' \
  | grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install)$' | sort -u)
packages+=$'\nlibc6\nlibgcc-s1\nlibstdc++6'   # in every Debian image (apt needs them)

# The Debian package owning a library path, trying the merged-/usr spellings dpkg may know it by.
owner() {
  local path=$1 real c
  real=$(readlink -f "$path")
  for c in "$path" "$real" "${path#/usr}" "/usr${path#/usr}" "${real#/usr}" "/usr${real#/usr}"; do
    dpkg -S "$c" 2>/dev/null | head -n1 | cut -d: -f1 && return 0
  done
  return 1
}

checked=0
while IFS= read -r -d '' file; do
  head -c4 "$file" | grep -q $'\x7fELF' || continue
  checked=$((checked + 1))
  while read -r line; do
    case $line in
      *"not found"*) fail "$file: $line" ;;
      *" => "/*) lib=$(awk '{print $3}' <<<"$line") ;;
      *) continue ;;
    esac
    [[ $(readlink -f "$lib") == "$staging"/* ]] && continue
    pkg=$(owner "$lib") || fail "$file loads $lib, which no Debian package owns"
    grep -qxF "$pkg" <<<"$packages" \
      || fail "$file loads $lib from package $pkg, which the runtime image does not install"
  done < <(LD_LIBRARY_PATH="$copied/lib" ldd "$file")
done < <(find "$copied" -type f -print0)
((checked >= 2)) || fail "only $checked ELF files among the copied install (want kleaf and the client library)"
echo "$checked ELF files of the image's install load only copied files and runtime packages"
