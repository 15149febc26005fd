#!/usr/bin/env bash
# A Leaf user's migration, with a real MariaDB: Leaf's leaf_alloc table (its real schema) with rows
# as a Leaf server leaves them (a description with a tab, a newline, non-ASCII and a backslash, a
# NULL description, a max_id near kleaf's 2^62 limit), dumped with `mariadb -B` exactly as
# docs/migrating-from-leaf.md says, imported with `kleaf state import --from-leaf` into a cluster
# on the test broker. Every ID the gateway then hands out is at or above the tag's Leaf max_id
# (the first one is max_id itself), Leaf's monitor routes answer on the gateway, and a re-import of
# a newer dump raises without lowering anything.
#
# The MariaDB server is this test's own: mariadb-install-db into a private datadir, mariadbd as
# root on a private socket with networking off; no system service is touched. Needs mariadb-server
# and mariadb-client (scripts/install-deps.sh --test).
#
# Usage: leaf_mariadb_integration_test.sh KLEAF_BINARY
# Needs KLEAF_TEST_KAFKA_BOOTSTRAP and KLEAF_TEST_KAFKA_SCRIPT; without them it exits 77 (skipped).
set -euo pipefail
kleaf=$1
source "$(dirname "$0")/broker_test_lib.sh"
for tool_name in mariadb-install-db mariadb; do
  command -v "$tool_name" >/dev/null || fail "$tool_name not found: install mariadb-client and mariadb-server (scripts/install-deps.sh --test)"
done
mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
[[ -x $mariadbd ]] || fail "mariadbd not found: install mariadb-server (scripts/install-deps.sh --test)"

work=$(mktemp -d /tmp/kleaf-leaf-mariadb-test.XXXXXX)
prefix=leafmig$(date +%s%N | tail -c 9)
token=leaf-migration-admin-token-0123
db_pid= allocator_pid= gateway_pid=
cleanup() {
  local p
  for p in $gateway_pid $allocator_pid $db_pid; do kill -KILL "$p" 2>/dev/null || true; done
  for p in $gateway_pid $allocator_pid $db_pid; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- Leaf's database ---------------------------------------------------------------------------
mariadb-install-db --no-defaults --datadir="$work/db" --user=root \
  --auth-root-authentication-method=socket --skip-test-db >"$work/install-db.log" 2>&1 \
  || fail "mariadb-install-db failed: $(tail -n 20 "$work/install-db.log")"
"$mariadbd" --no-defaults --datadir="$work/db" --socket="$work/mysqld.sock" \
  --pid-file="$work/mysqld.pid" --skip-networking --user=root --log-error="$work/mariadb.err" \
  --innodb-buffer-pool-size=32M >"$work/mariadbd.out" 2>&1 &
db_pid=$!
sql() { mariadb --no-defaults --socket="$work/mysqld.sock" -uroot --default-character-set=utf8mb4 "$@"; }
for _ in $(seq 1 150); do
  kill -0 "$db_pid" 2>/dev/null || fail "mariadbd exited: $(tail -n 20 "$work/mariadb.err")"
  sql -e 'SELECT 1' >/dev/null 2>&1 && break
  sleep 0.2
done
sql -e 'SELECT 1' >/dev/null || fail "mariadbd did not answer within 30 s: $(tail -n 20 "$work/mariadb.err")"

# Leaf's schema (its README), and rows a Leaf server has been serving from. Leaf hands out the
# IDs of a segment below the row's max_id.
sql <<'SQL'
CREATE DATABASE leaf;
USE leaf;
CREATE TABLE `leaf_alloc` (
  `biz_tag` varchar(128) NOT NULL DEFAULT '',
  `max_id` bigint(20) NOT NULL DEFAULT '1',
  `step` int(11) NOT NULL,
  `description` varchar(256) DEFAULT NULL,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`biz_tag`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES
  ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id'),
  ('orders', 120001, 2000, CONCAT('order ids', CHAR(9), 'v2')),
  ('users', 4000000000000000000, 1000, '用户 IDs \\ 유저'),
  ('pay:refund_v1.x', 3001, 100, NULL),
  ('notes', 77, 5, CONCAT('line one', CHAR(10), 'line two'));
SQL

# The dump, as docs/migrating-from-leaf.md has it.
dump() {
  sql -B -e 'SELECT biz_tag,max_id,step,description FROM leaf_alloc' leaf >"$1"
}
dump "$work/leaf_alloc.tsv"
[[ $(head -n 1 "$work/leaf_alloc.tsv") == $'biz_tag\tmax_id\tstep\tdescription' ]] \
  || fail "unexpected dump header: $(head -n 1 "$work/leaf_alloc.tsv")"
declare -A leaf_max=()
while IFS=$'\t' read -r tag max_id _; do
  [[ $tag == biz_tag ]] || leaf_max[$tag]=$max_id
done <"$work/leaf_alloc.tsv"
((${#leaf_max[@]} == 5)) || fail "the dump holds ${#leaf_max[@]} rows, want 5: $(cat "$work/leaf_alloc.tsv")"

# --- a kleaf cluster ---------------------------------------------------------------------------
config() {  # name [more kafka keys] [more yaml lines]
  cat >"$work/$1.yaml" <<YAML
node: {id: $1}
state: {path: $work/$1}
admin: {token: $token}
log: {level: warn}
kafka: {bootstrap: "$bootstrap", topic_prefix: $prefix, session_timeout_ms: 6000${2:-}}
${3:-}
YAML
}
config allocator
config gateway ", reply_partition: 0" 'http: {listen: "127.0.0.1:0"}'
config importer ", reply_partition: 1"

"$kleaf" allocator --config "$work/allocator.yaml" >"$work/allocator.out" 2>"$work/allocator.err" &
allocator_pid=$!
"$kleaf" gateway --config "$work/gateway.yaml" >"$work/gateway.out" 2>"$work/gateway.err" &
gateway_pid=$!
url=
for _ in $(seq 1 300); do
  for p in $allocator_pid $gateway_pid; do
    kill -0 "$p" 2>/dev/null || fail "a node exited: $(cat "$work/allocator.err" "$work/gateway.err")"
  done
  url=$(grep -o -m1 'listening on http://[^ ]*' "$work/gateway.out" | sed 's/^listening on //') || true
  [[ -n $url ]] && curl -fsS -o /dev/null "$url/readyz" 2>/dev/null && break
  sleep 0.2
done
[[ -n $url ]] && curl -fsS -o /dev/null "$url/readyz" \
  || fail "the gateway was not ready within 60 s: $(curl -sS "$url/readyz" 2>&1; cat "$work/gateway.err")"

# HTTP status and body of a request: http METHOD PATH [curl args]; sets $status and $body.
http() {
  local method=$1 path=$2
  shift 2
  body=$(curl -sS -X "$method" -o - -w '\n%{http_code}' "$@" "$url$path") || fail "curl $method $path failed"
  status=${body##*$'\n'}
  body=${body%$'\n'*}
}
admin=(-H "Authorization: Bearer $token")
# The same, asked again while the answer is 503 (kleaf's "retry" answer, e.g. when a request to the
# allocators got no answer on a loaded machine), as a client following Retry-After (1 s) would, for
# up to 30 s.
http_retrying() {
  local tries=0
  http "$@"
  while ((status == 503 && ++tries < 30)); do
    sleep 1
    http "$@"
  done
}

# --- the import ----------------------------------------------------------------------------------
"$kleaf" state import --from-leaf "$work/leaf_alloc.tsv" --bump 0 --config "$work/importer.yaml" \
  >"$work/import.out" 2>"$work/import.err" || fail "the import failed: $(cat "$work/import.out" "$work/import.err")"
grep -q "imported 5 Leaf tags from $work/leaf_alloc.tsv (bump 0): 5 raised, 0 already as high, 0 failed" \
  "$work/import.out" || fail "unexpected import summary: $(cat "$work/import.out" "$work/import.err")"
# The same dump again, before any ID is drawn: every max_id is as high already, none is raised.
"$kleaf" state import --from-leaf "$work/leaf_alloc.tsv" --bump 0 --config "$work/importer.yaml" \
  >"$work/import-same.out" 2>"$work/import-same.err" || fail "the same import again failed: $(cat "$work/import-same.out" "$work/import-same.err")"
grep -q "imported 5 Leaf tags from $work/leaf_alloc.tsv (bump 0): 0 raised, 5 already as high, 0 failed" \
  "$work/import-same.out" || fail "unexpected summary of the same import again: $(cat "$work/import-same.out" "$work/import-same.err")"

# Every ID is at or above Leaf's max_id; the first is max_id itself (nothing skipped, no overlap).
# Draws follow the 503 'retry' answer too: a draw that needs a segment waits segment.wait_ms
# (100 ms) for the allocators' reply, which a loaded machine can miss (`notes`, step 5, needs a
# fresh segment for its 50 IDs: seen beside a build). A 503 serves no ID.
declare -A highest=()
for tag in "${!leaf_max[@]}"; do
  want=${leaf_max[$tag]}
  http_retrying GET "/api/segment/get/$tag"
  ((status == 200)) || fail "GET $tag: $status $body"
  ((body == want)) || fail "tag $tag: first ID $body, want Leaf's max_id $want"
  highest[$tag]=$body
  for method in POST GET PUT; do
    http_retrying "$method" "/api/segment/get/$tag"
    ((status == 200)) || fail "$method $tag: $status $body"
    ((body > highest[$tag])) || fail "tag $tag: ID $body after ${highest[$tag]}"
    highest[$tag]=$body
  done
  http_retrying GET "/api/v1/segment/$tag?count=50"
  ((status == 200)) || fail "GET $tag ?count=50: $status $body"
  for id in $(grep -o '"[0-9]*"' <<<"$body" | tr -d '"'); do
    ((id >= want)) || fail "tag $tag: ID $id below Leaf's max_id $want"
    ((id > highest[$tag])) || fail "tag $tag: ID $id not above ${highest[$tag]}"
    highest[$tag]=$id
  done
done

# Leaf's descriptions came through unchanged (the tag admin's JSON escapes tab and newline).
expect_tag() {  # tag json-fragment
  http_retrying GET "/api/v1/tags/$1" "${admin[@]}"
  ((status == 200)) || fail "GET /api/v1/tags/$1: $status $body"
  grep -qF -- "$2" <<<"$body" || fail "tag $1: want $2 in $body"
}
expect_tag orders '"description":"order ids\tv2"'
expect_tag users '"description":"用户 IDs \\ 유저"'
expect_tag notes '"description":"line one\nline two"'
expect_tag pay:refund_v1.x '"description":""'
expect_tag leaf-segment-test '"step":2000'

# Leaf's monitor routes on the gateway: /db (admin), /cache, /decodeSnowflakeId.
http GET /db
((status == 401)) || fail "/db without the token: $status $body"
http_retrying GET /db "${admin[@]}"
((status == 200)) || fail "/db: $status $body"
for tag in "${!leaf_max[@]}"; do
  grep -qF "\"biz_tag\":\"$tag\"" <<<"$body" || fail "/db lacks $tag: $body"
done
http GET /cache
((status == 200)) || fail "/cache: $status $body"
grep -qF "\"orders\":{" <<<"$body" && grep -qF '"initOk":true' <<<"$body" || fail "/cache: $body"
http GET /api/snowflake/get/any
((status == 200)) || fail "snowflake: $status $body"
http GET "/decodeSnowflakeId?snowflakeId=$body"
((status == 200)) || fail "/decodeSnowflakeId: $status $body"
grep -qE '^\{"timestamp":"[0-9]+\([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]{12}\)","sequenceId":"[0-9]+","workerId":"[0-9]+"\}$' \
  <<<"$body" || fail "/decodeSnowflakeId: $body"

# --- a re-import of a newer dump: raises, never lowers ----------------------------------------
max_of() {  # tag -> the live max_id
  http_retrying GET "/api/v1/tags/$1" "${admin[@]}"
  ((status == 200)) || fail "GET /api/v1/tags/$1: $status $body"
  grep -o '"max_id":[0-9]*' <<<"$body" | cut -d: -f2
}
declare -A before=()
for tag in "${!leaf_max[@]}"; do before[$tag]=$(max_of "$tag"); done
# Leaf went on serving `notes` (raised well past kleaf's), and an older value of `orders`.
sql leaf -e "UPDATE leaf_alloc SET max_id = max_id + 1000000 WHERE biz_tag = 'notes';
             UPDATE leaf_alloc SET max_id = 5 WHERE biz_tag = 'orders';"
dump "$work/leaf_alloc2.tsv"
"$kleaf" state import --from-leaf "$work/leaf_alloc2.tsv" --bump 0 --config "$work/importer.yaml" \
  >"$work/import2.out" 2>"$work/import2.err" || fail "the re-import failed: $(cat "$work/import2.out" "$work/import2.err")"
# Only `notes` went up in Leaf; the other four are as high in kleaf already (served past, or lower).
grep -q "imported 5 Leaf tags from $work/leaf_alloc2.tsv (bump 0): 1 raised, 4 already as high, 0 failed" \
  "$work/import2.out" || fail "unexpected re-import summary: $(cat "$work/import2.out" "$work/import2.err")"
for tag in "${!leaf_max[@]}"; do
  after=$(max_of "$tag")
  ((after >= before[$tag])) || fail "tag $tag: max_id lowered from ${before[$tag]} to $after"
done
notes_max=$(max_of notes)
((notes_max == 1000077)) || fail "notes: max_id $notes_max after the re-import, want 1000077"
((highest[orders] < $(max_of orders))) || fail "orders: max_id not above the IDs served"
for tag in "${!leaf_max[@]}"; do
  http_retrying GET "/api/segment/get/$tag"
  ((status == 200)) || fail "GET $tag after the re-import: $status $body"
  ((body > highest[$tag])) || fail "tag $tag: ID $body after the re-import, not above ${highest[$tag]}"
done
echo "imported Leaf's leaf_alloc from MariaDB: every ID at or above Leaf's max_id; re-import raised, lowered nothing"
