#!/usr/bin/env bash
# Runs the production topology of docker-compose.yml as plain processes on 127.0.0.1, without
# Docker, for demos and tests: one Kafka broker (kafka.sh), 2 allocators, 2 gateways, 1 producer.
#
#   local-cluster.sh up     [--dir D] [--port-base N] [--kafka-port P]
#   local-cluster.sh status [--dir D]
#   local-cluster.sh down   [--dir D] [--clean]
#
# --dir D        where configs, state, logs and pids live (default: <repo>/.local-cluster)
# --port-base N  gateways listen on N and N+1, allocators on N+10 and N+11, the producer on
#                N+12 (default 8080: the README's curl goes to gateway 1 on 127.0.0.1:8080)
# --kafka-port P the broker's port (default 9092 when free, else any free port)
# KLEAF_BINARY   the kleaf binary (default <repo>/build/kleaf, built first if missing)
#
# `up` returns once every node is ready and the tag "order" exists; it prints the URLs and the
# admin token's file. `down` stops producer, gateways, allocators (SIGTERM: they release their
# worker ids and keep their segment rests), then the broker; --clean also deletes D.
set -euo pipefail

COMPOSE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$COMPOSE_DIR/.." && pwd)"
KAFKA_SH="$COMPOSE_DIR/kafka.sh"
DIR="$REPO/.local-cluster"
PORT_BASE=8080
KAFKA_PORT=""
CLEAN=0
START_TIMEOUT=90

log() { echo "local-cluster: $*" >&2; }
die() { echo "local-cluster: error: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

parse_args() {
  while (($#)); do
    case "$1" in
      --dir) DIR="$2"; shift 2 ;;
      --port-base) PORT_BASE="$2"; shift 2 ;;
      --kafka-port) KAFKA_PORT="$2"; shift 2 ;;
      --clean) CLEAN=1; shift ;;
      -h|--help) usage ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
  done
  [[ "$PORT_BASE" =~ ^[0-9]+$ ]] && ((PORT_BASE > 0 && PORT_BASE < 65500)) ||
    die "--port-base: expected a port number, got '$PORT_BASE'"
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
}

# Node name, role and HTTP port, in start order.
nodes() {
  echo "alloc-1 allocator $((PORT_BASE + 10))"
  echo "alloc-2 allocator $((PORT_BASE + 11))"
  echo "gw-1 gateway $PORT_BASE"
  echo "gw-2 gateway $((PORT_BASE + 1))"
  echo "producer-1 producer $((PORT_BASE + 12))"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

alive() { [[ -f "$DIR/pids/$1" ]] && kill -0 "$(cat "$DIR/pids/$1")" 2>/dev/null; }

binary() {
  local bin="${KLEAF_BINARY:-$REPO/build/kleaf}"
  if [[ ! -x "$bin" ]]; then
    [[ -n "${KLEAF_BINARY:-}" ]] && die "KLEAF_BINARY=$bin is not an executable"
    log "building $bin (first run)"
    "$REPO/scripts/install-deps.sh"
    cmake -S "$REPO" -B "$REPO/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKLEAF_BUILD_TESTS=OFF \
      -DKLEAF_BUILD_BENCH=OFF >/dev/null
    cmake --build "$REPO/build" --target kleaf >&2
  fi
  echo "$bin"
}

write_config() {  # name role port bootstrap token
  local name=$1 role=$2 port=$3 bootstrap=$4 token=$5
  local file="$DIR/configs/$name.yaml"
  {
    echo "# $role $name of the local cluster (compose/local-cluster.sh)"
    echo "node: {id: $name}"
    echo "http: {listen: \"127.0.0.1:$port\"}"
    echo "state: {path: \"$DIR/state/$name\"}"
    echo "admin: {token_file: \"$DIR/admin.token\"}"
    echo "kafka: {bootstrap: \"$bootstrap\", topic_prefix: kleaf, partitions: 12, replication_factor: 1}"
    echo "log: {level: info}"
    if [[ $role == producer ]]; then
      cat <<'YAML'
producer:
  batches_ahead: 4
  streams:
    - {tag: order, mode: segment, batch_size: 1000}
    - {tag: order, mode: snowflake, batch_size: 100}
YAML
    fi
  } >"$file"
  echo "$file"
}

# Waits until `file` contains `needle`, the process `name` dies, or the deadline passes.
wait_for_line() {  # name file needle
  local name=$1 file=$2 needle=$3 deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    grep -qF "$needle" "$file" 2>/dev/null && return 0
    alive "$name" || { tail -n 20 "$DIR/logs/$name.err" >&2; die "$name exited during startup (log: $DIR/logs/$name.err)"; }
    sleep 0.2
  done
  tail -n 20 "$DIR/logs/$name.err" >&2
  die "$name not ready after ${START_TIMEOUT}s (log: $DIR/logs/$name.err)"
}

start_node() {  # name role port bootstrap token bin
  local name=$1 role=$2 port=$3 bootstrap=$4 token=$5 bin=$6
  if alive "$name"; then log "$name already running"; return 0; fi
  port_in_use "$port" && die "port $port (for $name) is in use; pick another --port-base"
  local config; config=$(write_config "$name" "$role" "$port" "$bootstrap" "$token")
  mkdir -p "$DIR/state/$name"
  : >"$DIR/logs/$name.out"
  setsid "$bin" "$role" --config "$config" >"$DIR/logs/$name.out" 2>"$DIR/logs/$name.err" </dev/null &
  echo $! >"$DIR/pids/$name"
  case "$role" in
    allocator) wait_for_line "$name" "$DIR/logs/$name.out" "kleaf allocator running" ;;
    gateway) wait_for_line "$name" "$DIR/logs/$name.out" "kleaf gateway listening on" ;;
    producer) wait_for_line "$name" "$DIR/logs/$name.out" "kleaf producer running" ;;
  esac
  log "$name ($role) ready on http://127.0.0.1:$port"
}

create_demo_tag() {  # token
  local code deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    code=$(curl -s -o "$DIR/logs/tag.json" -w '%{http_code}' -X PUT \
      -H "Authorization: Bearer $1" -d '{"step":1000,"description":"demo tag of the local cluster"}' \
      "http://127.0.0.1:$PORT_BASE/api/v1/tags/order" || true)
    [[ $code == 200 ]] && return 0
    sleep 0.3
  done
  die "could not create the tag 'order' through gw-1 (last HTTP status $code)"
}

cmd_up() {
  local bin; bin=$(binary)
  "$bin" version >/dev/null || die "$bin does not run"
  command -v curl >/dev/null || die "curl is needed (apt-get install curl)"
  mkdir -p "$DIR/configs" "$DIR/state" "$DIR/logs" "$DIR/pids"
  if [[ -z "$KAFKA_PORT" ]]; then
    if [[ -f "$DIR/kafka.port" ]]; then
      KAFKA_PORT=$(cat "$DIR/kafka.port")
    elif port_in_use 9092; then
      KAFKA_PORT=$("$KAFKA_SH" free-port)
    else
      KAFKA_PORT=9092
    fi
  fi
  echo "$KAFKA_PORT" >"$DIR/kafka.port"
  echo "$PORT_BASE" >"$DIR/port-base"
  if ! "$KAFKA_SH" status --dir "$DIR/kafka" >/dev/null 2>&1; then
    log "starting the Kafka broker on 127.0.0.1:$KAFKA_PORT"
    "$KAFKA_SH" start --port "$KAFKA_PORT" --dir "$DIR/kafka" >/dev/null
  fi
  local token
  if [[ ! -s "$DIR/admin.token" ]]; then
    (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$DIR/admin.token")
  fi
  token=$(cat "$DIR/admin.token")
  local name role port
  while read -r name role port; do
    if [[ $role == producer ]]; then create_demo_tag "$token"; fi
    start_node "$name" "$role" "$port" "127.0.0.1:$KAFKA_PORT" "$token" "$bin"
  done < <(nodes)
  cat <<MSG

kleaf local cluster is up (files in $DIR):
  gateways   http://127.0.0.1:$PORT_BASE  http://127.0.0.1:$((PORT_BASE + 1))
  allocators http://127.0.0.1:$((PORT_BASE + 10))  http://127.0.0.1:$((PORT_BASE + 11))   (/metrics /readyz)
  producer   http://127.0.0.1:$((PORT_BASE + 12))   (batches of tag "order": topics kleaf.ids.segment.order, kleaf.ids.snowflake.order)
  kafka      127.0.0.1:$KAFKA_PORT
  admin token: $DIR/admin.token

  curl http://127.0.0.1:$PORT_BASE/api/segment/get/order
  curl 'http://127.0.0.1:$((PORT_BASE + 1))/api/v1/snowflake/order?count=3'
  kcat -C -b 127.0.0.1:$KAFKA_PORT -t kleaf.ids.segment.order -X isolation.level=read_committed -c 2 -e

Stop it with: compose/local-cluster.sh down$( [[ $DIR != "$REPO/.local-cluster" ]] && echo " --dir $DIR")
MSG
}

cmd_status() {
  [[ -d "$DIR/pids" ]] || { echo "no local cluster in $DIR"; exit 3; }
  PORT_BASE=$(cat "$DIR/port-base" 2>/dev/null || echo "$PORT_BASE")
  local name role port state ready down=0
  if "$KAFKA_SH" status --dir "$DIR/kafka" >/dev/null 2>&1; then
    printf '%-11s %-9s %-22s %s\n' kafka broker "127.0.0.1:$(cat "$DIR/kafka.port")" running
  else
    printf '%-11s %-9s %-22s %s\n' kafka broker "127.0.0.1:$(cat "$DIR/kafka.port" 2>/dev/null)" stopped
    down=1
  fi
  while read -r name role port; do
    if alive "$name"; then
      state="running (pid $(cat "$DIR/pids/$name"))"
      ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/readyz" || true)
      state+=", /readyz $ready"
    else
      state="stopped"
      down=1
    fi
    printf '%-11s %-9s %-22s %s\n' "$name" "$role" "http://127.0.0.1:$port" "$state"
  done < <(nodes)
  exit $((down ? 3 : 0))
}

stop_node() {  # name
  local name=$1 pid deadline
  alive "$name" || { rm -f "$DIR/pids/$name"; return 0; }
  pid=$(cat "$DIR/pids/$name")
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop within 30 s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/pids/$name"
  log "$name stopped"
}

cmd_down() {
  [[ -d "$DIR/pids" ]] || { log "no local cluster in $DIR"; [[ $CLEAN == 1 ]] && rm -rf "$DIR"; return 0; }
  PORT_BASE=$(cat "$DIR/port-base" 2>/dev/null || echo "$PORT_BASE")
  local name
  # Producer first, allocators last: gateways and the producer release their worker ids
  # through the allocators.
  for name in $(nodes | awk '{print $1}' | tac); do stop_node "$name"; done
  "$KAFKA_SH" stop --dir "$DIR/kafka" >/dev/null 2>&1 || true
  log "broker stopped"
  if [[ $CLEAN == 1 ]]; then
    rm -rf "$DIR"
    log "removed $DIR"
  fi
}

cmd=${1:-}
[[ -n "$cmd" ]] || usage
shift
parse_args "$@"
case "$cmd" in
  up) cmd_up ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) usage ;;
esac
