#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/kleaf, offline, in a few seconds (scripts/test.sh runs it
# before the builds):
#   1. `helm lint --strict` and `helm template` with each values set of examples/;
#   2. every rendered object against the Kubernetes API schemas of the oldest and the newest
#      version the chart supports (validate.py: kubernetes-validate's bundled schemas, strict, an
#      unknown apiVersion or field fails);
#   3. that the chart refuses what it must: no config.kafka.bootstrap, a key the chart owns;
#   4. with --kleaf BIN, every rendered kleaf config passes `kleaf config check --role <role>` in
#      BIN, with the environment the pods give it: each key exists, with a valid type and range,
#      and the role's own checks pass (kafka.bootstrap, producer.streams, the SASL mechanism, the
#      TLS files: a throwaway certificate stands at the paths the Secret is mounted on).
# Needs helm and kubernetes-validate: scripts/install-deps.sh --test puts them in
# $KLEAF_DEPS_CACHE (default /var/cache/kleaf): tools/bin/helm and the venv.
#
#   deploy/helm/check.sh [--kleaf BUILD/kleaf]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kleaf=""
case ${1:-} in
  '') ;;
  --kleaf) kleaf=$(realpath "${2:?--kleaf needs the kleaf binary}") ;;
  *) echo "usage: $0 [--kleaf BIN]" >&2; exit 2 ;;
esac
cache=${KLEAF_DEPS_CACHE:-/var/cache/kleaf}
helm=${KLEAF_HELM:-$cache/tools/bin/helm}
python=${KLEAF_PYTHON:-$cache/venv/bin/python}
chart=$here/kleaf
# The chart's kubeVersion floor, and the newest version kubernetes-validate bundles.
kube_versions=(1.25.0 1.37.0)
fail() { echo "check-helm: $*" >&2; exit 1; }
[[ -x $helm ]] || fail "no helm at $helm (scripts/install-deps.sh --test installs it)"
"$python" -c 'import kubernetes_validate' 2>/dev/null \
  || fail "no kubernetes-validate in $python (scripts/install-deps.sh --test installs it)"

work=$(mktemp -d /tmp/kleaf-check-helm.XXXXXX)
trap 'rm -rf "$work"' EXIT
# helm keeps nothing of these runs: its cache and config go to the temporary directory.
export HELM_CACHE_HOME=$work/helm-cache HELM_CONFIG_HOME=$work/helm-config \
  HELM_DATA_HOME=$work/helm-data

sets=("$here"/examples/*.yaml)
((${#sets[@]} >= 2)) || fail "expected at least two values sets in $here/examples"
for values in "${sets[@]}"; do
  set_name=$(basename "$values" .yaml)
  rendered=()
  for version in "${kube_versions[@]}"; do
    "$helm" lint --strict "$chart" -f "$values" --kube-version "$version" >"$work/lint.log" 2>&1 \
      || { cat "$work/lint.log" >&2; fail "helm lint with $set_name (Kubernetes $version) failed"; }
    out=$work/$set_name-$version.yaml
    "$helm" template kleaf "$chart" -f "$values" --namespace kleaf --kube-version "$version" \
      >"$out" 2>"$work/template.log" \
      || { cat "$work/template.log" >&2; fail "helm template with $set_name (Kubernetes $version) failed"; }
    "$python" "$here/validate.py" --kube-version "$version" "$out" \
      || fail "$set_name: rendered objects do not validate against Kubernetes $version"
    rendered+=("$out")
  done

  if [[ -n $kleaf ]]; then
    # Each rendered config as the pod reads it: node.id from its name, the admin token file
    # at the path the Secret is mounted on (here a file of our own).
    configs=$work/$set_name-configs
    mkdir -p "$configs"
    "$python" - "${rendered[0]}" "$configs" <<'EOF'
import sys, yaml
for o in yaml.safe_load_all(open(sys.argv[1])):
    if o and o["kind"] == "ConfigMap":
        for name, text in o["data"].items():
            open(f"{sys.argv[2]}/{name}", "w").write(text)
EOF
    printf 'check-helm-token-0123456789\n' >"$work/admin.token"
    if [[ ! -f $work/tls.crt ]]; then
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=kleaf-check-helm -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null \
        || fail "openssl could not make a throwaway certificate"
    fi
    for config in "$configs"/*.yaml; do
      role=$(basename "$config" .yaml)
      # The TLS files the pod mounts from the Secret: a throwaway certificate at their place.
      tls=()
      if grep -q 'cert_file:' "$config"; then
        ca=""
        grep -q 'client_ca_file:' "$config" && ca=", client_ca_file: $work/tls.crt"
        tls=("KLEAF_HTTP__TLS={cert_file: $work/tls.crt, key_file: $work/tls.key$ca}")
      fi
      env KLEAF_NODE__ID="kleaf-$role-7d4b9c6f5-x2x9q" KLEAF_ADMIN__TOKEN_FILE="$work/admin.token" \
        "${tls[@]}" "$kleaf" config check --role "$role" --config "$config" \
        >/dev/null 2>"$work/check.log" \
        || { cat "$work/check.log" >&2; fail "$set_name: kleaf config check --role $role refuses the rendered $role.yaml"; }
    done
    echo "$set_name: kleaf config check passes the rendered $(cd "$configs" && echo *.yaml)"
  fi
done

# As a team runs it: without --kube-version (install-deps.sh builds helm with the Kubernetes
# version its release builds assume; a plain go install assumed v1.20 and refused the chart).
"$helm" template kleaf "$chart" -f "$here/examples/small.yaml" >/dev/null 2>"$work/template.log" \
  || { cat "$work/template.log" >&2; fail "helm template without --kube-version failed"; }

# What the chart must refuse, each with a message naming the value.
expect_refusal() {
  local want=$1
  shift
  if "$helm" template kleaf "$chart" --kube-version "${kube_versions[-1]}" "$@" \
    >/dev/null 2>"$work/refusal.log"; then
    fail "helm template $* rendered; expected a refusal naming $want"
  fi
  grep -qF -- "$want" "$work/refusal.log" \
    || { cat "$work/refusal.log" >&2; fail "helm template $* failed without naming $want"; }
}
small=$here/examples/small.yaml
expect_refusal config.kafka.bootstrap --set adminToken.generate=true
expect_refusal config.kafka.replication_factor -f "$small" --set config.kafka.replication_factor=0
expect_refusal adminToken.existingSecret -f "$small" --set adminToken.generate=false
expect_refusal 'config node.id' -f "$small" --set config.node.id=gw-1
expect_refusal 'config http.listen' -f "$small" --set gateway.config.http.listen=0.0.0.0:80
expect_refusal producer.config.producer.streams -f "$small" --set producer.enabled=true
expect_refusal 'adminToken.value' -f "$small" --set adminToken.value=short
expect_refusal 'config http.tls' -f "$small" --set config.http.tls.cert_file=/x.pem
expect_refusal 'http.tls.secretName' -f "$small" --set http.tls.enabled=true
expect_refusal backup.persistentVolumeClaim -f "$small" --set backup.enabled=true
expect_refusal metrics.podMonitor.tlsConfig -f "$small" --set metrics.podMonitor.enabled=true \
  --set http.tls.enabled=true --set http.tls.secretName=kleaf-tls
echo "check-helm: chart OK (${#sets[@]} values sets, Kubernetes ${kube_versions[*]})"
