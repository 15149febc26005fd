#!/usr/bin/env bash
# `cmake --install` of kleaf into a prefix outside the build and source trees, then the installed
# kleaf run with both trees gone: in a private mount namespace an empty tmpfs covers each, so the
# process sees exactly what it would see after `rm -rf build` (and of the clone). It must print its
# version, accept every installed example config, and serve IDs in standalone.
#
# Usage: install_e2e_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")

fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/kleaf-install-test.XXXXXX)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill -KILL "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
case $work/ in "$build"/* | "$src"/*) fail "$work is inside the trees the test hides" ;; esac

prefix=$work/usr
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

for f in bin/kleaf lib/libkleaf_client.so include/kleaf/batch_consumer.h \
         lib/cmake/kleaf/kleafConfig.cmake lib/systemd/system/kleaf@.service \
         share/kleaf/examples/standalone.yaml share/kleaf/examples/allocator.yaml \
         share/kleaf/examples/gateway.yaml share/kleaf/examples/producer.yaml; do
  [[ -e $prefix/$f ]] || fail "cmake --install did not install $f"
done
# The loader must find nothing through the build tree: no RPATH/RUNPATH at all on the binary.
if readelf -d "$prefix/bin/kleaf" | grep -E '\((RPATH|RUNPATH)\)'; then
  fail "the installed kleaf carries a library search path"
fi
grep -q "^ExecStart=.*/bin/kleaf %i --config /etc/kleaf/%i.yaml$" \
  "$prefix/lib/systemd/system/kleaf@.service" || fail "the systemd unit's ExecStart is not kleaf's"

# "${hide_trees[@]}" CMD runs CMD (by exec: same pid) in a mount namespace where the build and
# source trees are empty directories. The build tree is covered first: it is often inside the
# source tree, which then hides it a second time.
hide_trees=(unshare --mount --propagation private -- sh -c '
  mount -t tmpfs kleaf-gone "$1" && [ -z "$(ls -A "$1")" ] || exit 90
  mount -t tmpfs kleaf-gone "$2" && [ -z "$(ls -A "$2")" ] || exit 91
  shift 2; exec "$@"' sh "$build" "$src")
unshare --mount true 2>/dev/null || fail "this test needs mount namespaces (unshare --mount, as root)"

version=$("${hide_trees[@]}" "$prefix/bin/kleaf" version) || fail "installed kleaf version: exit $?"
[[ $version == "kleaf "* ]] || fail "kleaf version printed: $version"
echo "$version"

# Every example config passes the installed binary's checks of its role (the file names the role).
for example in "$prefix"/share/kleaf/examples/*.yaml; do
  "${hide_trees[@]}" "$prefix/bin/kleaf" config check --role "$(basename "$example" .yaml)" \
    --config "$example" >/dev/null \
    || fail "the installed example $(basename "$example") is refused"
done

# Standalone from the installed example, on a free port, state in the work directory.
token=install-test-token-0123456789
sed -e "s|127.0.0.1:8080|127.0.0.1:0|" -e "s|/var/lib/kleaf/standalone|$work/state|" \
  "$prefix/share/kleaf/examples/standalone.yaml" >"$work/standalone.yaml"
printf 'admin: {token: "%s"}\n' "$token" >>"$work/standalone.yaml"
# The files exist before the server starts: its redirections happen in the forked child, which
# may run after the first read below (seen once on a clean machine: "sed: can't read .../stdout").
: >"$work/stdout"
: >"$work/stderr"
"${hide_trees[@]}" "$prefix/bin/kleaf" standalone --config "$work/standalone.yaml" \
  >"$work/stdout" 2>"$work/stderr" &
server_pid=$!
port=
for _ in $(seq 1 300); do   # 30 s: the line appears once RocksDB is open and the socket bound
  port=$(sed -n 's|.*kleaf standalone listening on http://.*:\([0-9]*\)$|\1|p' "$work/stdout")
  [[ -n $port ]] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $port ]] || fail "installed kleaf standalone did not start: $(cat "$work/stderr")"

curl -sf -X PUT -H "Authorization: Bearer $token" -d '{"step":100}' \
  "http://127.0.0.1:$port/api/v1/tags/install" >/dev/null || fail "creating a tag failed"
first=$(curl -sf "http://127.0.0.1:$port/api/segment/get/install") || fail "no segment ID"
second=$(curl -sf "http://127.0.0.1:$port/api/segment/get/install") || fail "no second ID"
[[ $first =~ ^[0-9]+$ && $second =~ ^[0-9]+$ && $second -gt $first ]] \
  || fail "IDs from the installed kleaf: '$first' then '$second'"
snowflake=$(curl -sf "http://127.0.0.1:$port/api/snowflake/get/install") || fail "no snowflake ID"
[[ $snowflake =~ ^[0-9]+$ ]] || fail "snowflake ID: $snowflake"

kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=
[[ $rc -eq 0 ]] || fail "installed kleaf exited $rc on SIGTERM: $(cat "$work/stderr")"
echo "installed kleaf served $first, $second and $snowflake with the build and source trees hidden"
