#!/usr/bin/env bash
# Runs kleaf inside a runtime image's file system made by scripts/assemble-rootfs.sh, with chroot
# instead of a container (containers cannot run on the build machines): as uid and gid 10001 like
# the image's USER, in a private mount namespace with /proc and a minimal /dev mounted like a
# container runtime's, and the environment reduced to PATH (the image's ENV PATH). It checks:
#   - `kleaf version` runs (every library it loads is in the tree, the loader finds them);
#   - `kleaf standalone` starts with its state under /var/lib/kleaf (writable by 10001), answers
#     /readyz to curl run inside the tree as 10001 (compose/docker-compose.yml's healthcheck
#     command), and serves a segment and a snowflake ID, positive integers, to curl on the host;
#   - it stops on SIGTERM with exit status 0 within 30 s;
#   - `sleep 0` runs inside the tree (the Helm chart's preStop hook of the gateways);
#   - the CA bundle at OpenSSL's default path (/usr/lib/ssl/cert.pem, what librdkafka verifies
#     Kafka's certificates with when ssl.ca.location is not set) is readable there by 10001.
# The tree is left as it was: the check's config and state are removed, nothing stays mounted.
#
# Usage: scripts/check-rootfs.sh ROOTFS    (as root: chroot, mounts and --userspec need it)
set -euo pipefail
(($# == 1)) || { echo "usage: $0 ROOTFS" >&2; exit 2; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "check-rootfs.sh must run as root (chroot, mount, --userspec)"
root=$(realpath "$1")
[[ -x $root/usr/local/bin/kleaf ]] || fail "$root/usr/local/bin/kleaf missing: not an image tree"
started=$(date +%s%N)

readonly user=10001:10001
# The image's environment: Dockerfile's ENV PATH, nothing else.
in_tree=(env -i PATH=/usr/local/bin:/usr/bin /usr/sbin/chroot "--userspec=$user" "$root")
"${in_tree[@]}" /usr/bin/sleep 0 2>/dev/null || {
  out=$("${in_tree[@]}" /usr/bin/sleep 0 2>&1) || true
  fail "chroot into $root as $user failed: $out"
}
unshare --mount true 2>/dev/null || fail "this check needs mount namespaces (unshare --mount)"

work=$root/tmp/kleaf-check.$$        # the config, inside the tree so that kleaf can read it
state=/var/lib/kleaf/check-standalone.$$   # the state, where the image keeps it
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  # The mounts belong to the server's mount namespace: gone with it. Wait for that.
  if [[ -n $server_pid ]]; then wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work" "${root:?}$state"
}
trap cleanup EXIT
mkdir -m 0755 "$work"

version=$("${in_tree[@]}" kleaf version 2>&1) || fail "kleaf version in the tree: $version"
[[ $version == "kleaf "* ]] || fail "kleaf version printed: $version"
echo "$version" | head -n2

# The installed example, on a free port of 127.0.0.1 (the host's network: chroot shares it).
token=rootfs-check-token-0123456789
sed -e "s|127.0.0.1:8080|127.0.0.1:0|" -e "s|/var/lib/kleaf/standalone|$state|" \
  "$root/usr/local/share/kleaf/examples/standalone.yaml" >"$work/standalone.yaml"
printf 'admin: {token: "%s"}\n' "$token" >>"$work/standalone.yaml"
chmod 0644 "$work/standalone.yaml"
: >"$work/stdout"
: >"$work/stderr"
# What Docker gives a container: /proc, and a tmpfs /dev with the usual character devices (bound
# from the host's here). In a private mount namespace: they vanish when the server exits, however
# it exits. unshare, sh, env and chroot all exec, so $! is kleaf's own pid.
# shellcheck disable=SC2016  # $1 and $@ are the inner shell's, not this one's
unshare --mount --propagation private -- sh -c '
  root=$1; shift
  mount -t proc proc "$root/proc" || exit 90
  mount -t tmpfs -o mode=0755,nosuid kleaf-dev "$root/dev" || exit 91
  for d in null zero full random urandom; do
    : >"$root/dev/$d" && mount --bind "/dev/$d" "$root/dev/$d" || exit 92
  done
  exec "$@"' sh "$root" "${in_tree[@]}" \
  kleaf standalone --config "/tmp/${work##*/}/standalone.yaml" >"$work/stdout" 2>"$work/stderr" &
server_pid=$!

deadline=$((SECONDS + 30))   # the line appears once RocksDB is open and the socket bound
port=
while ((SECONDS < deadline)); do
  port=$(sed -n 's|.*kleaf standalone listening on http://.*:\([0-9]*\)$|\1|p' "$work/stdout")
  [[ -n $port ]] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $port ]] || fail "kleaf standalone in the tree did not start: $(tail -n 20 "$work/stderr")"

# The compose healthcheck's own command, run inside the tree as the image's user.
health=$("${in_tree[@]}" curl -fsS "http://127.0.0.1:$port/readyz" 2>&1) \
  || fail "the healthcheck (curl -fsS .../readyz inside the tree) failed: $health"

base=http://127.0.0.1:$port
curl -sf -X PUT -H "Authorization: Bearer $token" -d '{"step":100}' "$base/api/v1/tags/rootfs" \
  >/dev/null || fail "creating a tag failed: $(tail -n 5 "$work/stderr")"
segment=$(curl -sf "$base/api/segment/get/rootfs") || fail "no segment ID"
snowflake=$(curl -sf "$base/api/snowflake/get/rootfs") || fail "no snowflake ID"
for id in "$segment" "$snowflake"; do
  [[ $id =~ ^[1-9][0-9]*$ ]] || fail "an ID from kleaf in the tree is not a positive integer: '$id'"
done
not_kleafs=$(find "$root$state" ! -uid 10001 -print -quit)
[[ -z $not_kleafs ]] || fail "kleaf in the tree made ${not_kleafs#"$root"}, not owned by 10001"

kill -TERM "$server_pid"
deadline=$((SECONDS + 30))   # compose's stop_grace_period
while kill -0 "$server_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && fail "kleaf in the tree still runs 30 s after SIGTERM"
rc=0
wait "$server_pid" || rc=$?
server_pid=
((rc == 0)) || fail "kleaf in the tree exited $rc on SIGTERM: $(tail -n 20 "$work/stderr")"
if grep -F " $root/" /proc/self/mountinfo; then fail "mounts under $root remain"; fi

# OpenSSL's default CA file, read by the image's user through the tree's own links.
certs=$("${in_tree[@]}" curl -fsS file:///usr/lib/ssl/cert.pem 2>&1 \
  | grep -c 'BEGIN CERTIFICATE') || true
((certs >= 100)) \
  || fail "/usr/lib/ssl/cert.pem in the tree holds $certs CA certificates, want >= 100"

elapsed_ms=$((($(date +%s%N) - started) / 1000000))
echo "kleaf standalone in $root as $user served segment ID $segment and snowflake ID" \
  "$snowflake, answered the healthcheck and stopped on SIGTERM; $certs CA certificates;" \
  "${elapsed_ms} ms"
