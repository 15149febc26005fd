#!/usr/bin/env bash
# kleaf against a broker listener that requires SASL/SCRAM over TLS (issue 15 item 2). The test makes its own certificate (keytool), starts a second broker with a SASL_SSL
# listener beside a plaintext one (for the admin steps), creates the SCRAM user with Kafka's own
# tool, then runs every role through SASL_SSL only: an allocator and a gateway (IDs over HTTP), a
# producer and a BatchConsumer (IDs from the ids topic), and `kleaf state export`; a gateway with a
# wrong password must stop at once (well within the 30 s setup deadline it would otherwise wait
# out) with an error that says Kafka refused it.
#
# Usage: sasl_ssl_integration_test.sh KLEAF_BINARY BATCH_CONSUMER_EXAMPLE
# Needs KLEAF_TEST_KAFKA_SCRIPT (compose/kafka.sh); without it it exits 77 (skipped).
set -euo pipefail
kleaf=$1
consumer=$2
if [[ -z ${KLEAF_TEST_KAFKA_SCRIPT:-} ]]; then
  echo "no compose/kafka.sh (KLEAF_TEST_KAFKA_SCRIPT): skipped"
  exit 77
fi
kafka_sh=$KLEAF_TEST_KAFKA_SCRIPT
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/kleaf-sasl-test.XXXXXX)
declare -a pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  "$kafka_sh" stop --dir "$work/kafka" --clean >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# A self-signed certificate for 127.0.0.1: the broker's key store, and its certificate as the CA
# file librdkafka verifies the broker with (hostname verification stays on).
keytool -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 2 -dname CN=127.0.0.1 \
  -ext SAN=ip:127.0.0.1 -keystore "$work/broker.p12" -storetype PKCS12 -storepass changeit \
  -keypass changeit >/dev/null 2>&1 || fail "keytool -genkeypair failed"
keytool -exportcert -rfc -alias broker -keystore "$work/broker.p12" -storepass changeit \
  -file "$work/ca.pem" >/dev/null 2>&1 || fail "keytool -exportcert failed"

plain=$("$kafka_sh" free-port)
sasl=$("$kafka_sh" free-port)
controller=$("$kafka_sh" free-port)
"$kafka_sh" start --port "$plain" --dir "$work/kafka" --controller-port "$controller" \
  --prop "listeners=PLAINTEXT://127.0.0.1:$plain,CONTROLLER://127.0.0.1:$controller,SASL_SSL://127.0.0.1:$sasl" \
  --prop "advertised.listeners=PLAINTEXT://127.0.0.1:$plain,SASL_SSL://127.0.0.1:$sasl" \
  --prop "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL" \
  --prop "sasl.enabled.mechanisms=SCRAM-SHA-512" \
  --prop "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;" \
  --prop "ssl.keystore.type=PKCS12" --prop "ssl.keystore.location=$work/broker.p12" \
  --prop "ssl.keystore.password=changeit" --prop "ssl.key.password=changeit" >/dev/null
"$kafka_sh" tool configs --bootstrap-server "127.0.0.1:$plain" --alter --entity-type users \
  --entity-name kleaf --add-config 'SCRAM-SHA-512=[password=kleaf-secret-1]' >/dev/null

config() {  # name role password [extra YAML]
  cat >"$work/$1.yaml" <<YAML
node: {id: $1}
http: {listen: "127.0.0.1:0"}
state: {path: $work/$1}
admin: {token: sasl-test-token-0123456789}
kafka:
  bootstrap: "127.0.0.1:$sasl"
  properties:
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: kleaf
    sasl.password: "$3"
    ssl.ca.location: $work/ca.pem
${4:-}
YAML
}
config sasl-allocator allocator kleaf-secret-1
config sasl-gateway gateway kleaf-secret-1
# The gateway's output files exist before it starts: the redirections happen in the forked child,
# which may run after the first read of g.out below.
: >"$work/g.out"
: >"$work/g.err"
"$kleaf" allocator --config "$work/sasl-allocator.yaml" >"$work/a.out" 2>"$work/a.err" &
pids+=($!)
"$kleaf" gateway --config "$work/sasl-gateway.yaml" >"$work/g.out" 2>"$work/g.err" &
pids+=($!)
port=
for _ in $(seq 1 600); do
  port=$(sed -n 's|.*listening on http://.*:\([0-9]*\)$|\1|p' "$work/g.out")
  [[ -n $port ]] && break
  kill -0 "${pids[1]}" 2>/dev/null || fail "the gateway exited: $(cat "$work/g.err")"
  sleep 0.1
done
[[ -n $port ]] || fail "the gateway did not start over SASL_SSL: $(cat "$work/g.err")"
curl -sf -X PUT -H "Authorization: Bearer sasl-test-token-0123456789" -d '{"step":100}' \
  "http://127.0.0.1:$port/api/v1/tags/sasl" >/dev/null || fail "PUT tag over SASL_SSL failed"
id=
for _ in $(seq 1 100); do   # a tag's first request may 503 while its first segment is fetched
  id=$(curl -sf "http://127.0.0.1:$port/api/segment/get/sasl") && break
  sleep 0.1
done
[[ $id =~ ^[0-9]+$ ]] || fail "no segment ID over SASL_SSL: $(cat "$work/g.err")"

# The producer keeps batches of the tag on the ids topic; a BatchConsumer (the client library,
# the same properties) takes IDs from it.
config sasl-producer producer kleaf-secret-1 \
  "producer: {batches_ahead: 2, streams: [{tag: sasl, mode: segment, batch_size: 50}]}"
"$kleaf" producer --config "$work/sasl-producer.yaml" >"$work/p.out" 2>"$work/p.err" &
pids+=($!)
rc=0
timeout 120 "$consumer" "127.0.0.1:$sasl" kleaf.ids kleaf.ids.consumers sasl segment 60 60000 \
  security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-512 sasl.username=kleaf \
  sasl.password=kleaf-secret-1 "ssl.ca.location=$work/ca.pem" >"$work/c.out" 2>"$work/c.err" || rc=$?
((rc == 0)) || fail "BatchConsumer over SASL_SSL: exit $rc: $(tail -5 "$work/c.err"); producer: $(tail -5 "$work/p.err")"
[[ $(grep -cE '^[0-9]+$' "$work/c.out") == 60 ]] || fail "BatchConsumer printed $(wc -l <"$work/c.out") lines, want 60 IDs"
[[ $(sort -u "$work/c.out" | wc -l) == 60 ]] || fail "BatchConsumer over SASL_SSL printed a duplicate"
grep -qx "$id" "$work/c.out" && fail "the BatchConsumer got ID $id the gateway served"

# The state commands: an export through SASL_SSL has the tag.
timeout 60 "$kleaf" state export "$work/export.json" --config "$work/sasl-allocator.yaml" \
  >"$work/e.out" 2>"$work/e.err" || fail "state export over SASL_SSL: $(cat "$work/e.err")"
grep -q '"sasl"' "$work/export.json" || fail "state export over SASL_SSL lacks the tag: $(cat "$work/export.json")"

config sasl-wrong gateway wrong-password
rc=0
started=$(date +%s%N)
timeout 15 "$kleaf" gateway --config "$work/sasl-wrong.yaml" >"$work/w.out" 2>"$work/w.err" || rc=$?
ms=$((($(date +%s%N) - started) / 1000000))
((rc != 124)) || fail "a gateway with a wrong password was still starting after 15 s: $(cat "$work/w.err")"
((rc == 1)) || fail "a gateway with a wrong password: exit $rc, want 1: $(cat "$work/w.err")"
grep -q "Kafka refused the connection: .*[Aa]uthentication" "$work/w.err" ||
  fail "no clear error for a wrong password: $(cat "$work/w.err")"
echo "IDs over SASL_SSL (SCRAM-SHA-512, TLS verified) from a gateway and a BatchConsumer fed by a producer; state export; a wrong password refused in $ms ms with exit $rc:"
grep "Kafka refused" "$work/w.err" | head -1
