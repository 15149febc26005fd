#!/usr/bin/env bash
# kleaf on a broker with an authorizer (issue 39 item 1): every role runs as its own SASL user that
# holds exactly the ACLs docs/operations.md ("Kafka ACLs") lists for it, and a missing right stops
# a node at start with an error that names the right.
#
# The broker has StandardAuthorizer (no ACL: denied), a PLAINTEXT listener for the admin steps
# (User:ANONYMOUS is a super user, as the controller listener needs) and a SASL_PLAINTEXT listener
# (SCRAM-SHA-512) for kleaf. Then, each as its own user: an allocator, a gateway (a tag made over
# HTTP, segment and snowflake IDs), a producer with a segment stream, a BatchConsumer taking its
# batches (claim floor included: DELETE on the stream topics) and `kleaf state export`. Last,
# with one right taken away each: an allocator without CREATE on topics that do not exist yet,
# an allocator without WRITE on its transactional ids, an allocator without READ on its group, a
# producer without DESCRIBE on the consumers' group and an export without DESCRIBE on the
# readers' group must each exit 1 within 40 s, naming the right.
#
# Usage: acl_integration_test.sh KLEAF_BINARY BATCH_CONSUMER_EXAMPLE
# Needs KLEAF_TEST_KAFKA_SCRIPT (compose/kafka.sh); without it it exits 77 (skipped).
# KLEAF_ACL_TEST_SKIP="role:what" (e.g. "consumer:delete") leaves that grant out, to see the test
# fail.
set -euo pipefail
kleaf=$1
consumer=$2
if [[ -z ${KLEAF_TEST_KAFKA_SCRIPT:-} ]]; then
  echo "no compose/kafka.sh (KLEAF_TEST_KAFKA_SCRIPT): skipped"
  exit 77
fi
kafka_sh=$KLEAF_TEST_KAFKA_SCRIPT
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/kleaf-acl-test.XXXXXX)
declare -a pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  "$kafka_sh" stop --dir "$work/kafka" --clean >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
started_at=$(date +%s)

plain=$("$kafka_sh" free-port)
sasl=$("$kafka_sh" free-port)
controller=$("$kafka_sh" free-port)
"$kafka_sh" start --port "$plain" --dir "$work/kafka" --controller-port "$controller" \
  --prop "listeners=PLAINTEXT://127.0.0.1:$plain,CONTROLLER://127.0.0.1:$controller,SASL_PLAINTEXT://127.0.0.1:$sasl" \
  --prop "advertised.listeners=PLAINTEXT://127.0.0.1:$plain,SASL_PLAINTEXT://127.0.0.1:$sasl" \
  --prop "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT" \
  --prop "sasl.enabled.mechanisms=SCRAM-SHA-512" \
  --prop "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;" \
  --prop "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" \
  --prop "super.users=User:ANONYMOUS" >/dev/null
admin=(--bootstrap-server "127.0.0.1:$plain")
roles=(allocator gateway producer consumer tools)
for role in "${roles[@]}"; do
  "$kafka_sh" tool configs "${admin[@]}" --alter --entity-type users --entity-name "kleaf-$role" \
    --add-config "SCRAM-SHA-512=[password=pw-$role-1]" >/dev/null
done

# The ACLs of docs/operations.md, "Kafka ACLs", for kafka.topic_prefix kleaf, node ids as below
# and the default producer.group. One line per `kafka-acls --add`: role, name (for
# KLEAF_ACL_TEST_SKIP), then the resource and operation arguments.
acls_of() {
  cat <<'EOF'
allocator topics  --topic kleaf. --resource-pattern-type prefixed --operation Describe --operation DescribeConfigs --operation Read --operation Write
allocator create  --topic kleaf. --resource-pattern-type prefixed --operation Create
allocator group   --group kleaf.allocators --operation Read
allocator readers --group kleaf-reader-unused --operation Describe
allocator txn     --transactional-id kleaf.requests.owner. --resource-pattern-type prefixed --operation Write
gateway   topics  --topic kleaf. --resource-pattern-type prefixed --operation Describe --operation DescribeConfigs --operation Read --operation Write
gateway   readers --group kleaf-reader-unused --operation Describe
producer  topics  --topic kleaf. --resource-pattern-type prefixed --operation Create --operation Describe --operation DescribeConfigs --operation Read --operation Write
producer  group   --group kleaf.ids.consumers --operation Describe
producer  readers --group kleaf-reader-unused --operation Describe
producer  txn     --transactional-id kleaf.producer. --resource-pattern-type prefixed --operation Write
consumer  topics  --topic kleaf.ids. --resource-pattern-type prefixed --operation Read --operation Delete
consumer  group   --group kleaf.ids.consumers --operation Read
tools     topics  --topic kleaf. --resource-pattern-type prefixed --operation Describe --operation DescribeConfigs --operation Read
tools     readers --group kleaf-reader-unused --operation Describe
EOF
}
acl() {  # --add|--remove role name
  local op=$1 role=$2 name=$3 r n args
  while read -r r n args; do
    [[ $r == "$role" && $n == "$name" ]] || continue
    # shellcheck disable=SC2086  # args are words
    "$kafka_sh" tool acls "${admin[@]}" "$op" --force --allow-principal "User:kleaf-$role" $args \
      >"$work/acl.out" 2>&1 || fail "kafka-acls $op $role $name: $(cat "$work/acl.out")"
    return 0
  done < <(acls_of)
  fail "no ACL $role $name"
}
while read -r role name _; do
  [[ " ${KLEAF_ACL_TEST_SKIP:-} " == *" $role:$name "* ]] && { echo "left out: $role $name"; continue; }
  acl --add "$role" "$name"
done < <(acls_of)
granted_at=$(date +%s)

config() {  # node-id role [extra YAML]
  cat >"$work/$1.yaml" <<YAML
node: {id: $1}
http: {listen: "127.0.0.1:0"}
state: {path: $work/$1}
admin: {token: acl-test-token-0123456789}
kafka:
  bootstrap: "127.0.0.1:$sasl"
  properties:
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: kleaf-$2
    sasl.password: pw-$2-1
${3:-}
YAML
}
wait_for() {  # file pattern pid what
  for _ in $(seq 1 600); do
    grep -q "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || fail "$4 exited: $(tail -5 "${1%.out}.err")"
    sleep 0.1
  done
  fail "$4 did not start: $(tail -5 "${1%.out}.err")"
}

# The allocator first: it alone (with the producer) may create topics.
config acl-allocator allocator
config acl-gateway gateway
: >"$work/a.out"
: >"$work/g.out"
"$kleaf" allocator --config "$work/acl-allocator.yaml" >"$work/a.out" 2>"$work/a.err" &
pids+=($!)
wait_for "$work/a.out" "kleaf allocator running" "${pids[0]}" "the allocator"
"$kleaf" gateway --config "$work/acl-gateway.yaml" >"$work/g.out" 2>"$work/g.err" &
pids+=($!)
wait_for "$work/g.out" "listening on http://" "${pids[1]}" "the gateway"
port=$(sed -n 's|.*listening on http://.*:\([0-9]*\)$|\1|p' "$work/g.out")
curl -sf -X PUT -H "Authorization: Bearer acl-test-token-0123456789" -d '{"step":100}' \
  "http://127.0.0.1:$port/api/v1/tags/acl" >/dev/null || fail "PUT tag failed: $(tail -5 "$work/g.err")"
id=
for _ in $(seq 1 100); do   # a tag's first request may 503 while its first segment is fetched
  id=$(curl -sf "http://127.0.0.1:$port/api/segment/get/acl") && break
  sleep 0.1
done
[[ $id =~ ^[0-9]+$ ]] || fail "no segment ID: $(tail -5 "$work/g.err"); allocator: $(tail -5 "$work/a.err")"
sf=
for _ in $(seq 1 100); do   # the gateway's worker id comes from the allocators' registry
  sf=$(curl -sf "http://127.0.0.1:$port/api/snowflake/get/acl") && break
  sleep 0.1
done
[[ $sf =~ ^[0-9]+$ ]] || fail "no snowflake ID: $(tail -5 "$work/g.err")"

config acl-producer producer \
  "producer: {batches_ahead: 2, streams: [{tag: acl, mode: segment, batch_size: 50}]}"
"$kleaf" producer --config "$work/acl-producer.yaml" >"$work/p.out" 2>"$work/p.err" &
pids+=($!)
rc=0
timeout 120 "$consumer" "127.0.0.1:$sasl" kleaf.ids kleaf.ids.consumers acl segment 60 60000 \
  security.protocol=SASL_PLAINTEXT sasl.mechanism=SCRAM-SHA-512 sasl.username=kleaf-consumer \
  sasl.password=pw-consumer-1 >"$work/c.out" 2>"$work/c.err" || rc=$?
((rc == 0)) || fail "BatchConsumer: exit $rc: $(tail -8 "$work/c.err"); producer: $(tail -5 "$work/p.err")"
[[ $(grep -cE '^[0-9]+$' "$work/c.out") == 60 ]] || fail "BatchConsumer printed $(wc -l <"$work/c.out") lines, want 60 IDs"
[[ $(sort -u "$work/c.out" | wc -l) == 60 ]] || fail "BatchConsumer printed a duplicate"
grep -q "claimed=[1-9]" "$work/c.err" || fail "BatchConsumer claimed no batch (claim floor): $(tail -3 "$work/c.err")"
grep -qx "$id" "$work/c.out" && fail "the BatchConsumer got ID $id the gateway served"

config acl-tools tools
timeout 60 "$kleaf" state export "$work/export.json" --config "$work/acl-tools.yaml" \
  >"$work/e.out" 2>"$work/e.err" || fail "state export: $(tail -5 "$work/e.err")"
grep -q '"acl"' "$work/export.json" || fail "state export lacks the tag: $(cat "$work/export.json")"
served_at=$(date +%s)
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()

# One right taken away at a time: the node must stop with exit 1 within 40 s and name it.
refused() {  # role acl-name node-id expected-pattern... ; runs kleaf ROLE (export for tools)
  local role=$1 name=$2 node=$3 rc=0 ms started
  shift 3
  acl --remove "$role" "$name"
  rm -rf "${work:?}/$node"
  started=$(date +%s%N)
  case $role in
    tools) timeout 40 "$kleaf" state export "$work/refused.json" --config "$work/$node.yaml" \
      >"$work/r.out" 2>"$work/r.err" || rc=$? ;;
    *) timeout 40 "$kleaf" "$role" --config "$work/$node.yaml" >"$work/r.out" 2>"$work/r.err" || rc=$? ;;
  esac
  ms=$((($(date +%s%N) - started) / 1000000))
  ((rc != 124)) || fail "$role without $name: still running after 40 s: $(grep -v ' info ' "$work/r.err" | tail -3)"
  ((rc == 1)) || fail "$role without $name: exit $rc, want 1: $(tail -3 "$work/r.err")"
  local last
  last=$(grep -E " error (Kafka refused a right|[^[])" "$work/r.err" | tail -1)
  for want in "$@"; do
    grep -qF -- "$want" <<<"$last" || fail "$role without $name: the error lacks '$want': $last"
  done
  echo "$role without $name: exit $rc in $ms ms: ${last#* error }"
  acl --add "$role" "$name"
}
# A cluster of another prefix (under kleaf., so Describe is granted): its topics do not exist yet.
config acl-fresh allocator "  topic_prefix: kleaf.fresh"
refused allocator create acl-fresh "creating topic kleaf.fresh." "CREATE on topic kleaf.fresh." \
  "created by hand"
refused allocator txn acl-allocator "Transactional Id authorization failed" \
  "WRITE on transactional id kleaf.requests.owner." "Kafka ACLs"
refused allocator group acl-allocator "Group authorization failed" "READ on group kleaf.allocators"
refused producer group acl-producer "Group authorization failed" \
  "DESCRIBE on group kleaf.ids.consumers" "Kafka ACLs"
refused tools readers acl-tools "Group authorization failed" "DESCRIBE on group kleaf-reader-unused"
echo "every role as its own SASL user with the documented ACLs: segment ID $id, snowflake ID $sf," \
  "60 IDs through a BatchConsumer, state export; broker and users $((granted_at - started_at)) s," \
  "roles $((served_at - granted_at)) s, refusals $(($(date +%s) - served_at)) s"
