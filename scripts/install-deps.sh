#!/usr/bin/env bash
# Installs the Debian packages kleaf needs, and builds librdkafka 2.14 from Debian unstable's (sid)
# source package into a cache outside the repository (bookworm's 2.0.2 has bugs that wedge kleaf,
# and librdkafka before 2.12 has no production-ready KIP-848 consumer groups: see
# docs/operations.md, "librdkafka"). Idempotent: only missing packages are installed and
# librdkafka is built once, so a second run costs a few dpkg look-ups.
#
#   scripts/install-deps.sh           what building and running kleaf need (scripts/run.sh)
#   scripts/install-deps.sh --test    also what the tests need: GoogleTest and Google Benchmark,
#                                     faketime, Chromium, Python 3, MariaDB, clang 16 with its
#                                     sanitizer runtimes, clang-format and clang-tidy
#                                     (scripts/test.sh), a Python venv with confluent-kafka for
#                                     the Python reference consumer and kubernetes-validate,
#                                     helm built with Go (the Helm chart's check, deploy/helm),
#                                     and promtool (from Debian's prometheus package) for the
#                                     alerting rules' test
#   scripts/install-deps.sh --bench   --test, plus wrk and nginx (tests/bench/http_bench.sh)
#
# KLEAF_DEPS_CACHE (default /var/cache/kleaf) is where librdkafka is built and installed
# (<cache>/librdkafka); CMake looks there by default (KLEAF_RDKAFKA_ROOT). With --test, the venv
# is <cache>/venv (KLEAF_PYTHON in CMake: <cache>/venv/bin/python), made from Debian's python3 (its
# pip refuses installs outside a venv); confluent-kafka's wheel bundles its own librdkafka, and
# kubernetes-validate the Kubernetes API schemas. helm goes to <cache>/tools/bin, built by the
# machine's Go (`go install`), the modules it fetches kept in <cache>/go. promtool is
# <cache>/prometheus/promtool (KLEAF_PROMTOOL in CMake).
set -euo pipefail

usage() { echo "usage: $0 [--test | --bench]" >&2; exit 2; }
set_name=run
case ${1:-} in
  '') ;;
  --test) set_name=test ;;
  --bench) set_name=bench ;;
  *) usage ;;
esac
(($# <= 1)) || usage

# Building and running kleaf.
packages=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates dpkg-dev
  librocksdb-dev libboost-dev libboost-system-dev libyaml-cpp-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  # librdkafka's build dependencies (what it links: TLS, SASL, compression codecs).
  libsasl2-dev libssl-dev libzstd-dev liblz4-dev zlib1g-dev
)
if [[ $set_name == test || $set_name == bench ]]; then
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    # Clock tests (libfaketime) and the monitoring page's browser test.
    faketime chromium
    # An independent reader of kleaf's UUIDv7s and ULIDs (tests/e2e/check_uuid7_ulid.py: the
    # standard library's uuid module).
    python3
    # The Leaf migration test runs its own MariaDB server (never the system service) and dumps
    # Leaf's table with its client.
    mariadb-server mariadb-client
    # The fuzzer and the sanitizer build (tests/fuzz): clang 16 with libFuzzer and the sanitizers'
    # runtimes; the style check (scripts/check-style.sh): clang-format and clang-tidy of the same.
    # llvm-16 for llvm-symbolizer: without it a sanitizer report has no function names, and
    # tests/tsan.supp, which matches function names, cannot apply (CI at 89d815f).
    clang-16 libclang-rt-16-dev clang-format-16 clang-tidy-16 llvm-16
    # The Python reference consumer (examples/python) and its test: a venv with confluent-kafka.
    python3 python3-venv
  )
fi
if [[ $set_name == bench ]]; then
  packages+=(wrk nginx-light)
fi

cache=${KLEAF_DEPS_CACHE:-/var/cache/kleaf}
venv=$cache/venv
# from PyPI, into $venv (--test); the pin of the example's own requirements file
confluent_kafka=$(grep -m1 '^confluent-kafka==' "$(dirname "$0")/../examples/python/requirements.txt")
kubernetes_validate=kubernetes-validate==1.37.0   # likewise: schemas of Kubernetes 1.25 to 1.37
helm_version=v3.22.0                        # helm.sh/helm/v3 from the Go module proxy (--test)
rdkafka_prefix=$cache/librdkafka
rdkafka_stamp=$rdkafka_prefix/kleaf-built   # the Debian source version, then "kleaf-patch N"
# kleaf's patch level of librdkafka (patch_librdkafka below; a new level rebuilds the cache).
# KLEAF_RDKAFKA_PATCH=0 builds it without the patch, to measure what the patch does
# (docs/benchmarks.md): give that build a KLEAF_DEPS_CACHE of its own.
rdkafka_patch_level=${KLEAF_RDKAFKA_PATCH:-1}
rdkafka_suite=sid
rdkafka_upstream='2.14.'                    # the upstream series kleaf is written against

die() { echo "install-deps: $*" >&2; exit 1; }
[[ $rdkafka_patch_level == 0 || $rdkafka_patch_level == 1 ]] \
  || die "KLEAF_RDKAFKA_PATCH is '$rdkafka_patch_level': 1 (kleaf's patch, the default) or 0 (none)"
[[ $rdkafka_patch_level == 1 || -n ${KLEAF_DEPS_CACHE:-} ]] \
  || die "KLEAF_RDKAFKA_PATCH=0 needs a KLEAF_DEPS_CACHE of its own (it would replace kleaf's librdkafka in $cache)"

# True when the cache holds librdkafka of this script's series, built with its patch level (a cache
# of an older series, e.g. 2.8 from trixie, is rebuilt).
rdkafka_current() {
  [[ -f $rdkafka_stamp ]] || return 1
  local version
  version=$(sed -n 1p "$rdkafka_stamp")
  [[ ${version#*:} == "$rdkafka_upstream"* \
    && $(sed -n 2p "$rdkafka_stamp") == "kleaf-patch $rdkafka_patch_level" ]]
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  [[ $(id -u) -eq 0 ]] || die "missing packages: ${missing[*]} (run as root or install them)"
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Earlier versions of this script left their trixie deb-src entry in apt's sources: every later
# `apt-get update` then fetched trixie's source index. Remove it (the entry now lives only in the
# build's temporary directory, see below).
legacy_src_list=/etc/apt/sources.list.d/kleaf-trixie-src.sources
if [[ -e $legacy_src_list ]]; then
  if [[ $(id -u) -eq 0 ]]; then
    rm -f "$legacy_src_list"
    echo "install-deps: removed $legacy_src_list (left by an earlier version of this script)"
  else
    echo "install-deps: $legacy_src_list was left by an earlier version of this script: remove it as root" >&2
  fi
fi

# --- the Python venv of the reference consumer's test and the chart's check (--test, --bench) ---
# Fast when already there: one import and a version check per package, no pip call.
if [[ $set_name != run ]]; then
  for pin in "$confluent_kafka" "$kubernetes_validate"; do
    have=$("$venv/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' \
      "${pin%%==*}" 2>/dev/null || true)
    [[ $have == "${pin#*==}" ]] && continue
    mkdir -p "$cache" || die "cannot create $cache (run as root once)"
    [[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv" || die "cannot create the venv $venv"
    echo "install-deps: installing $pin into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pin" \
      || die "pip could not install $pin into $venv"
  done
fi

# --- helm, for the Helm chart's check (deploy/helm/check.sh; --test, --bench) ---
# Built once from its Go module with the machine's Go (several minutes on 2 cores: see
# docs/operations.md, "How the chart is checked"). A helm in the cache whose build info names
# this module version is kept (`helm version` says only "v3.22" of a build without release flags).
helm=$cache/tools/bin/helm
go=$(command -v go || echo /usr/local/go/bin/go)
# A helm built by go install alone assumes Kubernetes v1.20 when no --kube-version is given, below
# the chart's kubeVersion floor (1.25): `helm template` refused the chart. helm's own release build
# sets the version and that assumption with -ldflags (its Makefile: the major and minor of the
# k8s.io/client-go it is built with); so does this build, and a cached helm that does not report
# the full version was built without them and is rebuilt.
if [[ $set_name != run && ( ! -x $go || \
      $("$go" version -m "$helm" 2>/dev/null | awk '$1 == "mod" { print $3 }') != "$helm_version" || \
      $("$helm" version --template '{{.Version}}' 2>/dev/null) != "$helm_version" ) ]]; then
  [[ -x $go ]] || die "helm $helm_version is built with Go, and this machine has no go"
  mkdir -p "$cache/tools/bin" "$cache/go" || die "cannot create $cache/tools (run as root once)"
  echo "install-deps: building helm $helm_version with $("$go" env GOVERSION) into $cache/tools/bin"
  started=$(date +%s)
  # The modules stay in <cache>/go for a later version; the build cache (hundreds of MB) goes.
  gocache=$(mktemp -d "$cache/go/build-cache.XXXXXX")
  helm_mod=$(GOPATH=$cache/go GOCACHE=$gocache GOFLAGS=-modcacherw "$go" mod download -json \
    "helm.sh/helm/v3@$helm_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  k8s_minor=$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$helm_mod" | head -n1)
  [[ -n $k8s_minor ]] || { rm -rf "$gocache"; die "no k8s.io/client-go version in helm $helm_version's go.mod ($helm_mod)"; }
  helm_ldflags="-X helm.sh/helm/v3/internal/version.version=$helm_version"
  for pkg in pkg/chartutil pkg/lint/rules; do
    helm_ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
  done
  GOBIN=$cache/tools/bin GOPATH=$cache/go GOCACHE=$gocache GOFLAGS=-modcacherw CGO_ENABLED=0 \
    nice -n 10 "$go" install -ldflags "$helm_ldflags" "helm.sh/helm/v3/cmd/helm@$helm_version" \
    || { rm -rf "$gocache"; die "go install helm.sh/helm/v3/cmd/helm@$helm_version failed"; }
  rm -rf "$gocache"
  echo "install-deps: built helm $helm_version in $(($(date +%s) - started)) s"
fi

# --- promtool, for the alerting rules' test (--test, --bench) ---
# Taken out of Debian's prometheus package into the cache, not installed with it: the package's
# maintainer scripts would enable and start a Prometheus server (port 9090, at every boot), and
# it pulls in a dozen JavaScript packages for its web pages.
promtool=$cache/prometheus/promtool
if [[ $set_name != run && ! -x $promtool ]]; then
  [[ $(id -u) -eq 0 ]] || die "promtool is not in $cache/prometheus yet (run as root once)"
  mkdir -p "$cache/prometheus"
  promtool_work=$(mktemp -d "$cache/prometheus/download.XXXXXX")
  chown _apt "$promtool_work" 2>/dev/null || true   # apt downloads as its unprivileged _apt user
  # apt checks the .deb against the SHA256 in Debian's signed index; update it if it has none.
  (cd "$promtool_work" && { apt-get download -qq prometheus 2>/dev/null \
    || { apt-get update -qq && apt-get download -qq prometheus; }; }) \
    || die "apt could not download Debian's prometheus package (for its promtool)"
  dpkg-deb --fsys-tarfile "$promtool_work"/prometheus_*.deb \
    | tar -x -C "$promtool_work" ./usr/bin/promtool
  mv "$promtool_work/usr/bin/promtool" "$promtool"
  rm -rf "$promtool_work"
  echo "install-deps: $("$promtool" --version 2>&1 | head -n1) into $promtool"
fi

if rdkafka_current; then
  exit 0
fi

# --- librdkafka 2.14 from Debian sid's source package, built once into the cache ---

if [[ -f $rdkafka_stamp ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    # It works, only slower (see patch_librdkafka): build on, and say how to get the patch.
    echo "install-deps: librdkafka in $rdkafka_prefix lacks kleaf's patch level $rdkafka_patch_level; run this script as root once to rebuild it" >&2
    exit 0
  fi
  echo "install-deps: librdkafka in $rdkafka_prefix is not $rdkafka_upstream* with kleaf's patch level $rdkafka_patch_level: rebuilding it"
fi
[[ $(id -u) -eq 0 ]] || die "librdkafka $rdkafka_upstream* is not built in $rdkafka_prefix yet (run as root once)"

# The mirror this machine already uses for its own Debian release: the first URI of a "deb" entry
# whose suites include the release's codename, in deb822 (*.sources) or one-line (*.list) form.
mirror_uri() {
  local codename=$1 f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v want="$codename" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uris != "") {
          split(uris, u, " "); print u[1]; found = 1; exit
        }
        types = ""; suites = ""; uris = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      tolower($1) == "types:"  { $1 = ""; types = $0 }
      tolower($1) == "suites:" { $1 = ""; suites = $0 }
      tolower($1) == "uris:"   { $1 = ""; uris = $0; sub(/^ +/, "", uris) }
      END { if (!found) flush() }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    # deb [options] URI suite components...
    sed -E 's/\[[^]]*\]//' "$f" | awk -v want="$codename" '$1 == "deb" && $3 == want { print $2 }'
  done
}
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[[ -n $codename ]] || die "cannot tell this machine's Debian codename from /etc/os-release"
mirror=$(mirror_uri "$codename" | head -n1)
[[ -n $mirror ]] || die "no 'deb' entry for $codename in /etc/apt/sources.list{,.d/}: cannot tell which Debian mirror to fetch librdkafka's source from"

# sid's index is signed with keys that an up-to-date bookworm debian-archive-keyring carries
# (2023.3+deb12u2 does: trixie's and the automatic keys that sign sid); a keyring without them is upgraded from bookworm itself.
if [[ ! -e /usr/share/keyrings/debian-archive-trixie-automatic.gpg ]]; then
  apt-get update -qq
  apt-get install -y -qq --only-upgrade debian-archive-keyring
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # two concurrent first runs build once
if rdkafka_current; then
  exit 0
fi

started=$(date +%s)
work=$(mktemp -d "$cache/librdkafka-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
chown _apt "$work" 2>/dev/null || true   # apt downloads as its unprivileged _apt user

# The sid entry exists only in this temporary file, and only the two apt calls below read it
# (Dir::Etc::sourcelist replaces the machine's sources for them, sourceparts=- drops
# sources.list.d): nothing is added to apt's configuration, so no later apt-get update or install
# ever sees sid. It is a deb-src line: even these calls can only fetch source packages.
src_list=$work/kleaf-$rdkafka_suite-src.list
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $rdkafka_suite main" \
  >"$src_list"
apt_sid_src=(-o Dir::Etc::sourcelist="$src_list" -o Dir::Etc::sourceparts=-)

# The chain of trust, checked by apt, not by dpkg-source:
#   1. `apt-get update` accepts sid's InRelease only if its OpenPGP signature verifies against
#      Debian's archive keys (debian-archive-keyring, above); InRelease lists the SHA256 of the
#      Sources index, which apt checks on download.
#   2. `apt-get source` checks the .dsc, the .orig tarball and the .debian tarball against the
#      SHA256 sums that this Sources index lists, and fails on any mismatch.
# dpkg-source then warns that it cannot verify the .dsc's own (uploader's) signature: that needs
# the debian-keyring package (a 30 MB download for bookworm), and
# adds nothing to steps 1-2, which already tie every byte to Debian's signed archive.
# Only sid's source index is refreshed (List-Cleanup=0 keeps the machine's own lists; the next
# ordinary `apt-get update` drops sid's, as no source names it).
apt-get update -qq "${apt_sid_src[@]}" -o APT::Get::List-Cleanup=0
(cd "$work" && apt-get source -qq --download-only "${apt_sid_src[@]}" "librdkafka/$rdkafka_suite")
dsc=$(ls "$work"/librdkafka_*.dsc)
version=$(sed -n 's/^Version: //p' "$dsc")
[[ ${version#*:} == "$rdkafka_upstream"* ]] || die "$rdkafka_suite's librdkafka is $version, not $rdkafka_upstream*"
# --skip-patches: upstream's source as released. Debian's patches (debian/patches/series in
# 2.14.2-1) only switch the build to Debian's own cJSON and nanopb and move the OpenTelemetry
# protobuf files, which debian/rules regenerates with nanopb_generator: upstream's CMake build
# uses the copies it vendors, and needs none of that.
dpkg-source --skip-patches -x "$dsc" "$work/src" >/dev/null

# kleaf's one change to librdkafka (patch level 1). A transactional producer registers each
# partition it first writes to in a transaction with the coordinator (AddPartitionsToTxn) and holds
# the partition's messages until the answer. librdkafka 2.8 means to send that request at once:
# rd_kafka_txn_add_partition() and the AddPartitionsToTxn answer's handler pass "1 /*immediate*/"
# to rd_kafka_txn_schedule_register_partitions(), whose argument is a backoff in milliseconds
# (0 is what it treats as immediate). So every transaction of an allocator waited 1 ms before its
# registration was sent, and 1 ms more when a partition arrived while a registration was in
# flight: about 1 of the 3 ms of a segment fetch's round trip (docs/benchmarks.md, "Kafka segment
# fetch round trip"). Passing 0 sends it as soon as librdkafka's main thread runs. What a
# transaction holds, and that no message is sent before its partition is registered, do not
# change. Each edit must match exactly once, or the build stops: a new librdkafka is checked, not
# patched blindly.
patch_librdkafka() {
  local src=$1 file=$2 from=$3 to=$4 count
  count=$(grep -cF -- "$from" "$src/$file" || true)
  [[ $count == 1 ]] \
    || die "librdkafka's $file has $count lines with '$from' (1 expected): kleaf's patch does not fit this version"
  FROM=$from TO=$to perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$src/$file"
  grep -qF -- "$to" "$src/$file" || die "patching librdkafka's $file failed"
}
# A build fix, at every patch level: librdkafka 2.14's CMake build writes WITH_OAUTHBEARER_OIDC as
# 0 or 1 into its config.h (#cmakedefine01), and every use tests its value except one, which tests
# whether it is defined and so includes <curl/curl.h> in a build without curl (kleaf's: OIDC token
# fetching is the only thing curl brings, and kleaf does not use it).
patch_librdkafka "$work/src" src/rdkafka_conf.c '#ifdef WITH_OAUTHBEARER_OIDC' '#if WITH_OAUTHBEARER_OIDC'
if ((rdkafka_patch_level >= 1)); then
  patch_librdkafka "$work/src" src/rdkafka_txnmgr.h \
    'rd_kafka_txn_schedule_register_partitions(rk, 1 /*immediate*/);' \
    'rd_kafka_txn_schedule_register_partitions(rk, 0 /*immediate: kleaf*/);'
  patch_librdkafka "$work/src" src/rdkafka_txnmgr.c \
    ': 1 /*immediate*/);' \
    ': 0 /*immediate: kleaf*/);'
fi

nice -n 5 cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX="$rdkafka_prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DRDKAFKA_BUILD_STATIC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DRDKAFKA_BUILD_EXAMPLES=OFF -DRDKAFKA_BUILD_TESTS=OFF \
  -DWITH_SSL=ON -DWITH_SASL=ON -DWITH_ZSTD=ON -DWITH_ZLIB=ON -DENABLE_LZ4_EXT=ON -DWITH_CURL=OFF \
  >"$work/cmake.log" || { cat "$work/cmake.log" >&2; die "configuring librdkafka failed"; }
nice -n 5 cmake --build "$work/build" -j"$(nproc)" >"$work/build.log" \
  || { tail -n 50 "$work/build.log" >&2; die "building librdkafka failed"; }
rm -rf "$rdkafka_prefix"
cmake --install "$work/build" >/dev/null
printf '%s\nkleaf-patch %s\n' "$version" "$rdkafka_patch_level" >"$rdkafka_stamp"
echo "install-deps: built librdkafka $version (kleaf patch $rdkafka_patch_level) into $rdkafka_prefix in $(($(date +%s) - started)) s"
