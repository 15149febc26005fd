#!/usr/bin/env bash
# Checks compose/Dockerfile's runtime image without Docker (containers cannot run on the build
# machines): does what its build stage does after compiling, from this build (`DESTDIR=… cmake
# --install`, then scripts/assemble-rootfs.sh into the tree the runtime stage copies onto an empty
# image), and runs kleaf in that tree with chroot (scripts/check-rootfs.sh: as the image's user,
# standalone serving IDs, the healthcheck's curl, SIGTERM). The Dockerfile is read, not assumed:
# its base images must be pinned (a dated tag or a digest), the build stage must assemble the
# tree from its own install with the script, and the runtime stage must be `FROM scratch` plus a
# copy of that tree, with the ENTRYPOINT, USER and PATH the check uses.
#
# Usage: dockerfile_e2e_test.sh BUILD_DIR DOCKERFILE    (as root, as CI runs it)
set -euo pipefail
build=$(realpath "$1")
dockerfile=$(realpath "$2")
src=$(realpath "$(dirname "$dockerfile")/..")
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] \
  || fail "this test needs root: the tree's files are owned by root and 10001, and chroot"
work=$(mktemp -d /tmp/kleaf-dockerfile-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
started=$(date +%s%N)

# Dockerfile continuation lines joined, comments dropped: one instruction per line.
sed -e '/^[[:space:]]*#/d' "$dockerfile" | sed -e ':a' -e '/\\$/{N;s/\\\n/ /;ba}' >"$work/joined"
last_from=$(grep -n '^FROM ' "$work/joined" | tail -n1 | cut -d: -f1)
head -n "$((last_from - 1))" "$work/joined" >"$work/build-stage"
tail -n "+$last_from" "$work/joined" >"$work/runtime-stage"

# Pinned bases: `debian:bookworm` moves with every point release and security update.
while read -r _ image _; do
  [[ $image == scratch || $image == *@sha256:* || $image =~ :[a-z0-9.]+-[0-9]{8}(-[a-z]+)?$ ]] \
    || fail "FROM $image: pin it by a dated tag (e.g. debian:bookworm-YYYYMMDD) or a digest"
done < <(grep '^FROM ' "$work/joined")

destdir=$(grep -o 'DESTDIR=[^ ]* cmake --install' "$work/build-stage" \
  | sed 's/DESTDIR=\([^ ]*\) .*/\1/')
prefix=$(grep -o -- '-DCMAKE_INSTALL_PREFIX=[^ ]*' "$work/build-stage" | cut -d= -f2)
[[ -n $destdir && -n $prefix ]] \
  || fail "the build stage has no 'DESTDIR=… cmake --install' with -DCMAKE_INSTALL_PREFIX"
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[[ $configured == "$prefix" ]] \
  || fail "this build's CMAKE_INSTALL_PREFIX is $configured, the image's $prefix: reconfigure"
read -r assemble_from rootfs < <(grep -o 'scripts/assemble-rootfs.sh [^ ]* [^ ]*' \
  "$work/build-stage" | awk '{print $2, $3}') || true
[[ -n ${rootfs:-} ]] \
  || fail "the build stage does not run scripts/assemble-rootfs.sh STAGING ROOTFS"
[[ $assemble_from == "$destdir" ]] \
  || fail "the build stage assembles the tree from $assemble_from, not its install in $destdir"

[[ $(head -n1 "$work/runtime-stage") == "FROM scratch" ]] \
  || fail "the runtime stage is not FROM scratch: its files would not all come from the tree"
if grep -q '^RUN ' "$work/runtime-stage"; then
  fail "the runtime stage runs a command: scratch has no shell"
fi
copies=$(grep '^COPY \|^ADD ' "$work/runtime-stage")
[[ $copies == "COPY --from=build ${rootfs%/}/ /" ]] \
  || fail "the runtime stage must copy only the assembled tree: 'COPY --from=build ${rootfs%/}/ /'"
entrypoint=$(sed -n 's/^ENTRYPOINT \["\([^"]*\)".*/\1/p' "$work/runtime-stage")
user=$(sed -n 's/^USER //p' "$work/runtime-stage")
path=$(sed -n 's/^ENV PATH=//p' "$work/runtime-stage")
# What scripts/check-rootfs.sh runs kleaf as and with.
[[ $user == 10001:10001 ]] || fail "USER $user: the tree's kleaf user is 10001:10001"
[[ $path == /usr/local/bin:/usr/bin ]] \
  || fail "ENV PATH=$path: the check runs with /usr/local/bin:/usr/bin"

DESTDIR=$work/staging cmake --install "$build" >"$work/install.log"
"$src/scripts/assemble-rootfs.sh" "$work/staging" "$work/rootfs"
[[ -n $entrypoint && -x $work/rootfs$entrypoint ]] \
  || fail "ENTRYPOINT $entrypoint is not an executable of the tree"
"$src/scripts/check-rootfs.sh" "$work/rootfs"
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
echo "the runtime image's tree, assembled and checked in $elapsed_ms ms"
