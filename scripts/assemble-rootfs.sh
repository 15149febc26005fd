#!/usr/bin/env bash
# Assembles the file system of kleaf's runtime image from a `cmake --install` tree:
# compose/Dockerfile runs it in its build stage and copies the result onto an empty image
# (`FROM scratch`), and scripts/check-rootfs.sh runs kleaf inside the same tree with chroot, so the
# file system that was checked here and the one that ships are made by the same code.
#
# Usage: scripts/assemble-rootfs.sh STAGING ROOTFS
#   STAGING  the DESTDIR of `DESTDIR=STAGING cmake --install BUILD` with prefix /usr/local
#            (STAGING/usr/local/bin/kleaf must exist)
#   ROOTFS   a new or empty directory; it receives the image's file system
#
# What goes in, and why nothing else:
#   - STAGING/usr/local as installed: kleaf, the client library with its headers and CMake package
#     (the image doubles as a place to copy them from), the example configs, the systemd unit.
#   - curl, for compose/docker-compose.yml's healthchecks (`curl -fsS .../readyz`), and sleep, for
#     the Helm chart's preStop hook of the gateways (`sleep N`): both taken from this machine.
#   - Every shared library those ELF files load, as `ldd` resolves them here, at the path it prints,
#     and the dynamic loader. Libraries loaded with dlopen are not seen by ldd. The only ones
#     kleaf may load are Cyrus SASL's plugins, looked for when a config chooses SASL, and needed
#     only for GSSAPI (librdkafka does the other mechanisms itself and is linked in statically):
#     the image has none, so GSSAPI is not supported by it and its config check refuses it
#     (docs/operations.md).
#   - /etc: passwd and group with root and kleaf (uid and gid 10001, which the Dockerfile's USER
#     and the Helm chart's securityContext name), nsswitch.conf (files, then DNS for hosts: glibc
#     2.36 has both built in, no libnss_* module needed), hosts (localhost; Docker and Kubernetes
#     mount their own), Debian's CA bundle and openssl.cnf with OpenSSL's default paths
#     (/usr/lib/ssl/cert.pem, /usr/lib/ssl/certs) pointing at them, as in Debian, so that TLS to
#     Kafka without ssl.ca.location verifies against the public CAs.
#   - /tmp (1777), /var/lib/kleaf owned by 10001 (the state volume: Docker initialises a named
#     volume from it, owner included), and empty /dev, /proc, /sys, /run as mount points.
# Debian's merged /usr layout: /bin, /sbin, /lib and /lib64 are links into /usr, so the paths
# `ldd` prints (/lib/x86_64-linux-gnu/..., /lib64/ld-linux-x86-64.so.2, the ELF interpreter) and
# the /usr paths both resolve. Needs root: files are owned by root and /var/lib/kleaf by 10001.
set -euo pipefail
fail() { echo "assemble-rootfs: $*" >&2; exit 1; }
(($# == 2)) || { echo "usage: $0 STAGING ROOTFS" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || fail "run as root: the tree's files must be owned by root and 10001"
staging=$(realpath "$1")
[[ -x $staging/usr/local/bin/kleaf ]] \
  || fail "$staging/usr/local/bin/kleaf missing: not a cmake --install tree with prefix /usr/local"
mkdir -p "$2"
root=$(realpath "$2")
[[ -z $(ls -A "$root") ]] || fail "$root is not empty"
case $root/ in "$staging"/*) fail "$root is inside $staging" ;; esac

readonly kleaf_uid=10001

# The merged-/usr skeleton first: every later copy goes through these links.
mkdir -p "$root"/usr/{bin,sbin,lib,lib64,local} "$root"/{etc,dev,proc,sys,run,tmp}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
chmod 1777 "$root/tmp"

cp -a "$staging/usr/local/." "$root/usr/local/"
# The installed files belong to root whoever ran `cmake --install`.
chown -R 0:0 "$root/usr/local"
for tool in curl sleep; do
  path=$(command -v "$tool") || fail "$tool is not installed here (the image's probes need it)"
  install -m 0755 "$(readlink -f "$path")" "$root/usr/bin/$tool"
done

# Libraries: every path ldd resolves for every ELF file in the tree, copied (links followed) to
# the same path inside it. ldd lists the whole closure: one pass over the tree's own files does.
copy_lib() {
  local lib=$1
  [[ -e $root$lib ]] && return 0
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
  chmod 0755 "$root$lib"
}
elf_files=()
while IFS= read -r -d '' f; do
  # cmp, not $(head -c4): a command substitution drops NUL bytes, with a warning per file.
  cmp -s -n 4 "$f" <(printf '\177ELF') && elf_files+=("$f")
done < <(find "$root/usr" -type f -print0)
((${#elf_files[@]} >= 4)) || fail "only ${#elf_files[@]} ELF files (kleaf, the client, curl, sleep)"
for f in "${elf_files[@]}"; do
  # LD_LIBRARY_PATH: the client library's own directory, should an installed file load it.
  out=$(LD_LIBRARY_PATH="$root/usr/local/lib" ldd "$f") || fail "ldd ${f#"$root"}: $out"
  while read -r line; do
    case $line in
      *"not found"*) fail "${f#"$root"}: $line" ;;
      linux-vdso.so.*) ;;   # in the kernel, not a file
      *" => $root/"*) ;;    # a file of the tree itself
      *" => /"*) copy_lib "$(awk '{print $3}' <<<"$line")" ;;
      /*) copy_lib "$(awk '{print $1}' <<<"$line")" ;;   # the dynamic loader
      *) fail "${f#"$root"}: unexpected ldd line: $line" ;;
    esac
  done <<<"$out"
done
interp=$(readelf -l "$root/usr/local/bin/kleaf" \
  | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[[ -n $interp && -e $root$interp ]] || fail "kleaf's ELF interpreter $interp is not in the tree"

# /etc
cat >"$root/etc/passwd" <<EOF
root:x:0:0:root:/root:/usr/sbin/nologin
kleaf:x:$kleaf_uid:$kleaf_uid:kleaf:/var/lib/kleaf:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<EOF
root:x:0:
kleaf:x:$kleaf_uid:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
cat >"$root/etc/hosts" <<'EOF'
127.0.0.1 localhost
::1 localhost ip6-localhost ip6-loopback
EOF
chmod 0644 "$root"/etc/{passwd,group,nsswitch.conf,hosts}
bundle=/etc/ssl/certs/ca-certificates.crt
[[ -s $bundle ]] || fail "$bundle missing: install Debian's ca-certificates"
mkdir -p "$root/etc/ssl/certs" "$root/usr/lib/ssl"
install -m 0644 "$bundle" "$root$bundle"
install -m 0644 /etc/ssl/openssl.cnf "$root/etc/ssl/openssl.cnf"
ln -s "$bundle" "$root/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$root/usr/lib/ssl/certs"
ln -s /etc/ssl/openssl.cnf "$root/usr/lib/ssl/openssl.cnf"

install -d -m 0750 -o "$kleaf_uid" -g "$kleaf_uid" "$root/var/lib/kleaf"

echo "assemble-rootfs: $root: ${#elf_files[@]} ELF files, $(find "$root" -type f | wc -l) files," \
  "$(du -sh "$root" | cut -f1)"
