#!/usr/bin/env bash
# Runs a real single-node Apache Kafka broker (KRaft, broker+controller in one JVM), or a cluster
# of such nodes, for kleaf's development, tests and CI, without Docker: the broker jars come from
# Maven Central through compose/pom.xml. See compose/README.md.
#
# The version is pom.xml's <kafka.version> (4.4.0), or KLEAF_KAFKA_VERSION, or --kafka-version V
# anywhere on the command line (it wins): 3.9.x or 4.x. Each version has its own jar cache; a
# running broker or cluster is stopped and inspected the same way whatever its version.
#
#   kafka.sh fetch
#   kafka.sh start --port P [--dir D] [--controller-port C] [--timeout S] [--prop k=v]...
#   kafka.sh wait  --port P [--timeout S]
#   kafka.sh stop  [--port P | --dir D] [--timeout S] [--kill] [--clean]
#   kafka.sh status [--port P | --dir D]
#   kafka.sh free-port
#   kafka.sh libs
#   kafka.sh tool NAME [ARGS...]   Kafka's CLI tools: topics, consumer-groups, get-offsets,
#                                  console-consumer, configs, transactions, delete-records,
#                                  metadata-quorum, reassign-partitions, features, acls
#                                  (ARGS as for kafka-NAME.sh, e.g. --bootstrap-server H:P --list)
#
# A KRaft cluster of N broker+controller nodes (default 3: RF 3, min ISR 2) under one dir D:
#   kafka.sh cluster-start --dir D [--nodes N] [--timeout S] [--prop k=v]...   prints the bootstrap
#   kafka.sh cluster-stop --dir D [--timeout S] [--kill] [--clean]
#   kafka.sh cluster-status --dir D
#   kafka.sh cluster-bootstrap --dir D
#   kafka.sh cluster-node --dir D N start|stop|kill|freeze|thaw|pid|port|state [--timeout S]
#   kafka.sh cluster-leader --dir D TOPIC PARTITION   the node leading it (-1: none)
#   kafka.sh cluster-controller --dir D               the active KRaft controller's node id
set -euo pipefail

COMPOSE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$COMPOSE_DIR/pom.xml"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1)"
[[ -n "$KAFKA_VERSION" ]] || { echo "kafka.sh: no <kafka.version> in $POM" >&2; exit 1; }
KAFKA_VERSION_GIVEN=0   # 1: from KLEAF_KAFKA_VERSION or --kafka-version, not the pom's default
[[ -n "${KLEAF_KAFKA_VERSION:-}" ]] && { KAFKA_VERSION="$KLEAF_KAFKA_VERSION"; KAFKA_VERSION_GIVEN=1; }
args=()
while (($#)); do
  case "$1" in
    --kafka-version) [[ $# -ge 2 ]] || { echo "kafka.sh: --kafka-version needs a version" >&2; exit 2; }
                     KAFKA_VERSION="$2"; KAFKA_VERSION_GIVEN=1; shift 2 ;;
    --kafka-version=*) KAFKA_VERSION="${1#*=}"; KAFKA_VERSION_GIVEN=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
# kleaf supports the brokers its tests run: 3.9 (the last with ZooKeeper, still on managed services)
# and 4.x (KRaft only). Older brokers lack what kleaf needs of KRaft and of the admin API.
[[ "$KAFKA_VERSION" =~ ^(3\.9|4\.[0-9]+)\.[0-9]+$ ]] || {
  echo "kafka.sh: Kafka '$KAFKA_VERSION' is not supported: 3.9.x or 4.x (e.g. 3.9.2, 4.4.0)" >&2; exit 2; }
CACHE_ROOT="${KLEAF_KAFKA_CACHE:-$COMPOSE_DIR/.cache}"
set_version() {
  KAFKA_VERSION="$1"
  CACHE_DIR="$CACHE_ROOT/kafka-$KAFKA_VERSION"
  LIBS="$CACHE_DIR/libs"
  MARKER="$CACHE_DIR/.complete"
}
set_version "$KAFKA_VERSION"
# A broker's run dir records the version it last ran (kafka.version, written at each launch): a
# restart without a version given runs that one again, so a test that restarts a 3.9 broker never
# upgrades it by accident. A version given explicitly wins (a rolling upgrade names the new one).
version_of_dir() {
  local dir="$1"
  if ((KAFKA_VERSION_GIVEN == 0)) && [[ -s "$dir/kafka.version" ]]; then
    set_version "$(cat "$dir/kafka.version")"
  fi
}
# The marker records pom.xml's hash: a changed pom (a jar added) fetches again.
POM_SUM="$(sha256sum "$POM" | cut -d' ' -f1)"
RUN_ROOT="${KLEAF_KAFKA_RUN:-$COMPOSE_DIR/.run}"
PROBE="$COMPOSE_DIR/kafka_probe.py"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
JVM_OPTS="${KLEAF_KAFKA_JVM_OPTS:--Xms512m -Xmx1g -XX:+UseG1GC}"
NODE_ID=1

log() { echo "kafka.sh: $*" >&2; }
die() { echo "kafka.sh: error: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

now_ms() { date +%s%3N; }
secs_since() { local e=$(( $(now_ms) - $1 )); printf '%d.%d' $((e / 1000)) $(((e % 1000) / 100)); }

# ---------------------------------------------------------------- tools

# Installs missing Debian packages when running as root, otherwise fails clearly.
need_tools() {
  local missing=() pkgs=() t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 && continue
    missing+=("$t")
    case "$t" in
      mvn) pkgs+=(maven) ;;
      java) pkgs+=(openjdk-17-jre-headless) ;;
      python3) pkgs+=(python3) ;;
      *) die "unknown tool $t" ;;
    esac
  done
  ((${#missing[@]} == 0)) && return 0
  if [[ "$(id -u)" != 0 ]]; then
    die "missing ${missing[*]}; install the Debian packages: sudo apt-get install -y ${pkgs[*]}"
  fi
  command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install ${pkgs[*]}"
  log "installing ${pkgs[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2 || die "apt-get install ${pkgs[*]} failed"
  for t in "${missing[@]}"; do
    command -v "$t" >/dev/null 2>&1 || die "$t still missing after installing ${pkgs[*]}"
  done
}

# ---------------------------------------------------------------- fetch

fetched() { [[ -f "$MARKER" ]] && grep -qx "pom=$POM_SUM" "$MARKER"; }

fetch() {
  if fetched; then return 0; fi
  need_tools mvn java
  mkdir -p "$CACHE_DIR"
  # One fetch at a time, of any version: parallel test runners may all call start at once, and
  # scripts/test.sh starts brokers of two versions together, whose Maven runs would otherwise
  # write the artifacts they share into one local repository (~/.m2) at the same time.
  exec 9>"$CACHE_ROOT/.fetch.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if fetched; then exec 9>&-; return 0; fi
  local t0 tmp
  t0=$(now_ms)
  tmp="$CACHE_DIR/libs.tmp.$$"
  rm -rf "$tmp" "$LIBS"
  log "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central into $LIBS"
  if ! mvn -B -q -Dstyle.color=never -f "$POM" -Dkafka.version="$KAFKA_VERSION" \
      "$DEPENDENCY_PLUGIN:copy-dependencies" \
      -DoutputDirectory="$tmp" -DincludeScope=runtime >"$CACHE_DIR/fetch.log" 2>&1; then
    rm -rf "$tmp"
    sed 's/\x1b\[[0-9;]*m//g' "$CACHE_DIR/fetch.log" | tail -n 30 >&2
    die "mvn copy-dependencies failed (is Maven Central reachable?); full output in $CACHE_DIR/fetch.log"
  fi
  [[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" ]] || { rm -rf "$tmp"; die "kafka_2.13-$KAFKA_VERSION.jar not fetched"; }
  mv "$tmp" "$LIBS"
  { echo "kafka_version=$KAFKA_VERSION"; echo "pom=$POM_SUM"
    echo "jars=$(find "$LIBS" -name '*.jar' | wc -l)"; date -u +fetched=%FT%TZ; } >"$MARKER"
  exec 9>&-
  log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars in $(secs_since "$t0") s"
}

# ---------------------------------------------------------------- helpers

free_port() {
  need_tools python3
  python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

port_in_use() {  # true if something listens on 127.0.0.1:$1
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(0.5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
sys.exit(0)
PY
}

# Readiness probe: sends a Kafka Metadata request (v1, no topics) over a plain socket and
# succeeds when the response lists broker $2 (default $NODE_ID) at 127.0.0.1:$1, and with $3 that
# many brokers in all. Takes milliseconds, needs nothing but python3 (a JVM tool would take seconds
# per call on this machine).
metadata_ok() {
  python3 "$PROBE" ready "$1" "${2:-$NODE_ID}" ${3:+"$3"}
}

# Pid of the broker running from run dir $1, or nothing (stale pid files are ignored).
broker_pid() {
  local dir="$1" pid
  [[ -f "$dir/kafka.pid" ]] || return 0
  pid="$(cat "$dir/kafka.pid" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  [[ -r "/proc/$pid/cmdline" ]] || return 0
  # Must be our JVM: kafka.Kafka with this run dir's server.properties.
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $dir/server.properties"; then
    echo "$pid"
  fi
}

# A process that exited but was not reaped yet (zombie) counts as gone.
alive() {
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null || return 1
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
  [[ "$state" != Z && -n "$state" ]]
}

abs_dir() { mkdir -p "$1" && (cd "$1" && pwd); }

tail_log() {
  local dir="$1"
  if [[ -f "$dir/kafka.log" ]]; then
    echo "----- last lines of $dir/kafka.log -----" >&2
    tail -n 60 "$dir/kafka.log" >&2 || true
    echo "-----" >&2
  fi
}

# Polls the metadata probe until it succeeds, the broker dies or the deadline passes. Arguments:
# port, timeout in seconds, and optionally the run dir and pid (to notice an exit), the node id
# (default $NODE_ID) and how many brokers the metadata must list (default: any number).
wait_ready() {
  local port="$1" timeout="$2" dir="${3:-}" pid="${4:-}" node="${5:-$NODE_ID}" brokers="${6:-}"
  local deadline
  deadline=$(( $(now_ms) + timeout * 1000 ))
  while :; do
    if [[ -n "$pid" ]] && ! alive "$pid"; then
      log "broker (pid $pid) exited during startup"
      [[ -n "$dir" ]] && tail_log "$dir"
      return 1
    fi
    if metadata_ok "$port" "$node" "$brokers"; then return 0; fi
    if (( $(now_ms) >= deadline )); then
      log "broker on 127.0.0.1:$port not ready after ${timeout}s${brokers:+ (metadata did not list $brokers brokers)}"
      [[ -n "$dir" ]] && tail_log "$dir"
      return 1
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- config files

# Arguments: run dir, port, controller port, node id, controller.quorum.voters, the replication
# factor of new topics and Kafka's internal topics, min.insync.replicas (also of the transaction
# state), the partitions of the offsets and transaction-state topics; then the --prop overrides.
write_config() {
  local dir="$1" port="$2" cport="$3" node="$4" voters="$5" rf="$6" min_isr="$7" internal="$8"
  shift 8
  cat >"$dir/server.properties" <<EOF
# Written by compose/kafka.sh; rewritten on every start.
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=$internal
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=$internal
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.cleaner.backoff.ms=1000
# Test speed: abort timed-out transactions within ~1 s of transaction.timeout.ms (default 10 s
# check interval), and allow short consumer session timeouts (default minimum 6 s).
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
group.min.session.timeout.ms=1000
# The consumer group protocol (KIP-848, kafka.group_protocol consumer/auto) takes the session from
# the broker, 45 s at least by default: 6 s here, as kleaf's classic groups ask for
# (docs/operations.md, "Kafka versions").
group.consumer.min.session.timeout.ms=1000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
# Fewer idle threads on a 2-core machine.
num.network.threads=2
num.io.threads=4
background.threads=4
EOF
  if ((rf > 1)); then
    # Kafka's default, written out: a replica that was not in sync never becomes leader (it would
    # drop records acknowledged with acks=all).
    echo "unclean.leader.election.enable=false" >>"$dir/server.properties"
  fi
  if (($# > 0)); then
    echo "# --prop overrides" >>"$dir/server.properties"
    printf '%s\n' "$@" >>"$dir/server.properties"
  fi
  cat >"$dir/log4j.properties" <<'EOF'
# Written by compose/kafka.sh. Everything goes to stdout, which kafka.sh sends to kafka.log.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.log.LogCleaner=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.org.apache.kafka.common.utils.AppInfoParser=WARN
log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN
log4j.logger.kafka.server.KafkaConfig=WARN
EOF
}

# ---------------------------------------------------------------- launching

# Launches the broker of run dir $1 (formatted, config written) with JVM options $2 and sets
# LAUNCHED_PID; does not wait for it to answer.
LAUNCHED_PID=""
launch_broker() {
  local dir="$1" jvm_opts="$2"
  local cp="$LIBS/*" log4j="-Dlog4j.configuration=file:$dir/log4j.properties"
  echo "$KAFKA_VERSION" >"$dir/kafka.version"
  rm -f "$dir/kafka.pid"
  # setsid: the broker outlives the calling shell and gets none of its terminal signals.
  # All three standard streams are redirected so that $(kafka.sh start ...) returns.
  # shellcheck disable=SC2086,SC2016
  setsid bash -c 'echo $$ >"$1/kafka.pid"; shift; exec "$@"' _ "$dir" \
    java $jvm_opts -Djava.awt.headless=true "$log4j" -cp "$cp" kafka.Kafka "$dir/server.properties" \
    </dev/null >>"$dir/kafka.log" 2>&1 &
  local _
  for _ in $(seq 1 50); do [[ -s "$dir/kafka.pid" ]] && break; sleep 0.1; done
  LAUNCHED_PID="$(cat "$dir/kafka.pid" 2>/dev/null || true)"
  [[ -n "$LAUNCHED_PID" ]] || { tail_log "$dir"; die "broker did not start"; }
}

# ---------------------------------------------------------------- commands

cmd_start() {
  local port="" dir="" cport="" timeout=60 props=()
  while (($#)); do
    case "$1" in
      --port) port="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      --controller-port) cport="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      --prop) props+=("$2"); shift 2 ;;
      *) die "start: unknown argument $1" ;;
    esac
  done
  [[ "$port" =~ ^[0-9]+$ && "$port" -gt 0 ]] || die "start needs --port P (a free port; see: kafka.sh free-port)"
  [[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout takes whole seconds"
  local t0; t0=$(now_ms)
  dir="$(abs_dir "${dir:-$RUN_ROOT/kafka-$port}")"
  version_of_dir "$dir"
  fetch
  need_tools java python3

  local pid; pid="$(broker_pid "$dir")"
  if [[ -n "$pid" ]]; then
    local oldport; oldport="$(cat "$dir/port" 2>/dev/null || true)"
    [[ "$oldport" == "$port" ]] || die "a broker (pid $pid) already runs from $dir on port ${oldport:-?}"
    log "broker already running from $dir (pid $pid); waiting for it"
    wait_ready "$port" "$timeout" "$dir" "$pid" || exit 1
    echo "$pid"
    return 0
  fi
  port_in_use "$port" && die "127.0.0.1:$port is already in use by another process"

  # Controller port: keep the one this dir used before if it is still free.
  if [[ -z "$cport" && -f "$dir/controller.port" ]]; then
    cport="$(cat "$dir/controller.port")"
    if [[ "$cport" == "$port" ]] || port_in_use "$cport"; then cport=""; fi
  fi
  if [[ -z "$cport" ]]; then
    cport="$(free_port)"
    while [[ "$cport" == "$port" ]]; do cport="$(free_port)"; done
  fi
  port_in_use "$cport" && die "controller port 127.0.0.1:$cport is already in use"

  mkdir -p "$dir/data"
  write_config "$dir" "$port" "$cport" "$NODE_ID" "$NODE_ID@127.0.0.1:$cport" 1 1 1 \
    "${props[@]+"${props[@]}"}"
  echo "$port" >"$dir/port"
  echo "$cport" >"$dir/controller.port"

  local cp="$LIBS/*" log4j="-Dlog4j.configuration=file:$dir/log4j.properties"
  # Cluster id: reuse the formatted one so a restart keeps the data.
  local cid=""
  if [[ -f "$dir/data/meta.properties" ]]; then
    cid="$(sed -n 's/^cluster.id=//p' "$dir/data/meta.properties" | head -n1)"
  fi
  [[ -n "$cid" ]] || cid="$(cat "$dir/cluster.id" 2>/dev/null || true)"
  if [[ -z "$cid" ]]; then
    cid="$(java "$log4j" -cp "$cp" kafka.tools.StorageTool random-uuid 2>>"$dir/kafka.log" | tail -n1)"
    [[ -n "$cid" ]] || { tail_log "$dir"; die "kafka.tools.StorageTool random-uuid failed"; }
  fi
  echo "$cid" >"$dir/cluster.id"
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    if ! java "$log4j" -cp "$cp" kafka.tools.StorageTool format -t "$cid" \
        -c "$dir/server.properties" --ignore-formatted >>"$dir/kafka.log" 2>&1; then
      tail_log "$dir"
      die "kafka.tools.StorageTool format failed"
    fi
  fi

  echo "===== $(date -u +%FT%TZ) kafka.sh start: port $port, controller $cport, kafka $KAFKA_VERSION =====" >>"$dir/kafka.log"
  launch_broker "$dir" "$JVM_OPTS"
  pid="$LAUNCHED_PID"

  if ! wait_ready "$port" "$timeout" "$dir" "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    die "broker failed to start on 127.0.0.1:$port (run dir $dir)"
  fi
  log "kafka $KAFKA_VERSION ready on 127.0.0.1:$port (pid $pid, controller 127.0.0.1:$cport, dir $dir) in $(secs_since "$t0") s"
  echo "$pid"
}

resolve_dir() {  # from --port/--dir arguments
  local port="$1" dir="$2"
  if [[ -n "$dir" ]]; then (cd "$dir" 2>/dev/null && pwd) || echo "$dir"
  elif [[ -n "$port" ]]; then echo "$RUN_ROOT/kafka-$port"
  else die "give --port P or --dir D"; fi
}

cmd_stop() {
  local port="" dir="" timeout=30 clean=0 hard=0
  while (($#)); do
    case "$1" in
      --port) port="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      --clean) clean=1; shift ;;
      --kill) hard=1; shift ;;
      *) die "stop: unknown argument $1" ;;
    esac
  done
  dir="$(resolve_dir "$port" "$dir")"
  local pid; pid="$(broker_pid "$dir")"
  if [[ -z "$pid" ]]; then
    log "no broker running from $dir"
  else
    local t0 deadline; t0=$(now_ms)
    if ((hard)); then
      kill -KILL "$pid" 2>/dev/null || true
    else
      kill -TERM "$pid" 2>/dev/null || true
    fi
    deadline=$(( t0 + timeout * 1000 ))
    while alive "$pid" && (( $(now_ms) < deadline )); do sleep 0.2; done
    if alive "$pid"; then
      log "broker (pid $pid) still running after ${timeout}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      while alive "$pid"; do sleep 0.1; done
    fi
    log "stopped broker pid $pid ($( ((hard)) && echo SIGKILL || echo SIGTERM )) in $(secs_since "$t0") s"
    rm -f "$dir/kafka.pid"
  fi
  if ((clean)) && [[ -d "$dir" ]]; then
    # Only delete what looks like one of our run directories.
    if [[ -f "$dir/server.properties" || -f "$dir/port" ]] && [[ "$dir" != / ]]; then
      rm -rf "$dir"
      log "removed $dir"
    else
      die "refusing to delete $dir: not a kafka.sh run directory"
    fi
  fi
}

status_one() {
  local dir="$1" pid port
  pid="$(broker_pid "$dir")"
  port="$(cat "$dir/port" 2>/dev/null || echo '?')"
  if [[ -z "$pid" ]]; then
    echo "stopped  port=$port dir=$dir"
    return 3
  fi
  if [[ "$port" != '?' ]] && metadata_ok "$port"; then
    echo "running  port=$port pid=$pid dir=$dir"
  else
    echo "starting port=$port pid=$pid dir=$dir (metadata request not answered yet)"
  fi
}

cmd_status() {
  local port="" dir=""
  while (($#)); do
    case "$1" in
      --port) port="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      *) die "status: unknown argument $1" ;;
    esac
  done
  need_tools python3
  if [[ -n "$port" || -n "$dir" ]]; then
    status_one "$(resolve_dir "$port" "$dir")"
    return
  fi
  local d any=3
  for d in "$RUN_ROOT"/*/; do
    [[ -d "$d" ]] || continue
    if status_one "${d%/}"; then any=0; fi
  done
  ((any == 0)) || echo "no broker running under $RUN_ROOT"
  return "$any"
}

cmd_wait() {
  local port="" timeout=60
  while (($#)); do
    case "$1" in
      --port) port="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      *) die "wait: unknown argument $1" ;;
    esac
  done
  [[ -n "$port" ]] || die "wait needs --port P"
  need_tools python3
  wait_ready "$port" "$timeout"
}

# ---------------------------------------------------------------- cluster

# A KRaft cluster of N combined broker+controller nodes (default 3) under one cluster dir D:
#   D/nodes             N
#   D/cluster.id        formatted on every node
#   D/node-K/           node K's run dir, as a single broker's: server.properties, data/, kafka.log,
#                       kafka.pid, port, controller.port (ports chosen at the first start, kept)
# Replication factor min(N, 3), min.insync.replicas 2 from 3 nodes on (1 below), for new topics
# and Kafka's offsets and transaction-state topics (N partitions each); unclean leader election off.
# C1 only (TieredStopAtLevel=1): a node restarted under test load is ready about 30 % sooner on two
# cores (10 s instead of 14 s after kill -9), where C2's compiler threads would compete with the
# other two nodes and the tests.
CLUSTER_JVM_OPTS="${KLEAF_KAFKA3_JVM_OPTS:--Xms256m -Xmx512m -XX:+UseG1GC -XX:TieredStopAtLevel=1}"

node_dir() { echo "$1/node-$2"; }
cluster_size() {
  local n; n="$(cat "$1/nodes" 2>/dev/null || true)"
  [[ "$n" =~ ^[0-9]+$ ]] || die "$1 is not a kafka.sh cluster dir (no nodes file; see cluster-start)"
  echo "$n"
}
cluster_port() { cat "$(node_dir "$1" "$2")/port"; }
cluster_cport() { cat "$(node_dir "$1" "$2")/controller.port"; }
cluster_bootstrap() {
  local dir="$1" n out=""
  for ((n = 1; n <= $(cluster_size "$dir"); n++)); do
    out+="${out:+,}127.0.0.1:$(cluster_port "$dir" "$n")"
  done
  echo "$out"
}

# running, frozen (SIGSTOP) or stopped.
node_state() {
  local pid; pid="$(broker_pid "$(node_dir "$1" "$2")")"
  if [[ -z "$pid" ]] || ! alive "$pid"; then echo stopped; return; fi
  [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == T ]] && echo frozen || echo running
}

# The ports (field $3: port or controller.port) of the nodes that run and are not frozen: a frozen
# node accepts connections and answers nothing, so a probe would wait out its timeout on it.
answering_ports() {
  local dir="$1" file="$2" n out=()
  for ((n = 1; n <= $(cluster_size "$dir"); n++)); do
    [[ "$(node_state "$dir" "$n")" == running ]] && out+=("$(cat "$(node_dir "$dir" "$n")/$file")")
  done
  echo "${out[*]}"
}

cluster_dir_arg() {  # the --dir argument, made absolute; it must exist
  [[ -n "$1" ]] || die "give --dir D (the cluster dir)"
  [[ -d "$1" ]] || die "no cluster dir $1"
  (cd "$1" && pwd)
}

cmd_cluster_start() {
  local dir="" nodes="" timeout=90 props=()
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --nodes) nodes="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      --prop) props+=("$2"); shift 2 ;;
      *) die "cluster-start: unknown argument $1" ;;
    esac
  done
  [[ -n "$dir" ]] || die "cluster-start needs --dir D (e.g. a fresh mktemp -d)"
  [[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout takes whole seconds"
  local t0; t0=$(now_ms)
  fetch
  need_tools java python3
  dir="$(abs_dir "$dir")"
  local n
  if [[ -f "$dir/nodes" ]]; then
    local had; had="$(cluster_size "$dir")"
    [[ -z "$nodes" || "$nodes" == "$had" ]] || die "$dir holds a cluster of $had nodes, not $nodes"
    nodes="$had"
  else
    nodes="${nodes:-3}"
    [[ "$nodes" =~ ^[1-9]$ ]] || die "--nodes takes 1 to 9"
    compgen -G "$dir/node-*" >/dev/null && die "$dir has node dirs but no nodes file: not a cluster dir of kafka.sh"
    # Ports for good: controller.quorum.voters names them on every node.
    local used=" " p
    for ((n = 1; n <= nodes; n++)); do
      mkdir -p "$(node_dir "$dir" "$n")/data"
      for f in port controller.port; do
        p="$(free_port)"
        while [[ "$used" == *" $p "* ]]; do p="$(free_port)"; done
        used+="$p "
        echo "$p" >"$(node_dir "$dir" "$n")/$f"
      done
    done
    echo "$nodes" >"$dir/nodes"
  fi

  local voters="" rf=$((nodes < 3 ? nodes : 3)) min_isr=$((nodes < 3 ? 1 : 2))
  for ((n = 1; n <= nodes; n++)); do
    voters+="${voters:+,}$n@127.0.0.1:$(cluster_cport "$dir" "$n")"
  done
  local ndir
  for ((n = 1; n <= nodes; n++)); do
    ndir="$(node_dir "$dir" "$n")"
    write_config "$ndir" "$(cluster_port "$dir" "$n")" "$(cluster_cport "$dir" "$n")" "$n" \
      "$voters" "$rf" "$min_isr" "$nodes" "${props[@]+"${props[@]}"}"
  done

  # One cluster id, formatted on every node (in parallel: a JVM each).
  local cp="$LIBS/*" log4j="-Dlog4j.configuration=file:$(node_dir "$dir" 1)/log4j.properties"
  local cid; cid="$(cat "$dir/cluster.id" 2>/dev/null || true)"
  if [[ -z "$cid" ]]; then
    cid="$(java "$log4j" -cp "$cp" kafka.tools.StorageTool random-uuid 2>>"$dir/format.log" | tail -n1)"
    [[ -n "$cid" ]] || { cat "$dir/format.log" >&2; die "kafka.tools.StorageTool random-uuid failed"; }
    echo "$cid" >"$dir/cluster.id"
  fi
  local formats=()
  for ((n = 1; n <= nodes; n++)); do
    ndir="$(node_dir "$dir" "$n")"
    [[ -f "$ndir/data/meta.properties" ]] && continue
    java "$log4j" -cp "$cp" kafka.tools.StorageTool format -t "$cid" -c "$ndir/server.properties" \
      --ignore-formatted >>"$ndir/kafka.log" 2>&1 &
    formats+=("$!:$n")
  done
  local f
  for f in "${formats[@]+"${formats[@]}"}"; do
    wait "${f%%:*}" || { tail_log "$(node_dir "$dir" "${f#*:}")"; die "kafka.tools.StorageTool format of node ${f#*:} failed"; }
  done

  local pids=()
  for ((n = 1; n <= nodes; n++)); do
    ndir="$(node_dir "$dir" "$n")"
    local pid; pid="$(broker_pid "$ndir")"
    if [[ -z "$pid" ]]; then
      port_in_use "$(cluster_port "$dir" "$n")" && die "node $n's port 127.0.0.1:$(cluster_port "$dir" "$n") is in use by another process"
      port_in_use "$(cluster_cport "$dir" "$n")" && die "node $n's controller port 127.0.0.1:$(cluster_cport "$dir" "$n") is in use by another process"
      echo "===== $(date -u +%FT%TZ) kafka.sh cluster-start: node $n of $nodes, port $(cluster_port "$dir" "$n"), controller $(cluster_cport "$dir" "$n"), kafka $KAFKA_VERSION =====" >>"$ndir/kafka.log"
      launch_broker "$ndir" "$CLUSTER_JVM_OPTS"
      pid="$LAUNCHED_PID"
    else
      kill -CONT "$pid" 2>/dev/null || true  # a frozen node would never answer
    fi
    pids+=("$pid")
  done
  # Ready: every node answers a metadata request that lists all the nodes as brokers.
  local deadline=$((t0 + timeout * 1000)) left
  for ((n = 1; n <= nodes; n++)); do
    left=$(((deadline - $(now_ms) + 999) / 1000))
    ((left > 0)) || left=1
    if ! wait_ready "$(cluster_port "$dir" "$n")" "$left" "$(node_dir "$dir" "$n")" "${pids[n - 1]}" "$n" "$nodes"; then
      for f in "${pids[@]}"; do kill -KILL "$f" 2>/dev/null || true; done
      die "cluster in $dir failed to start (node $n not ready; every node killed)"
    fi
  done
  log "kafka $KAFKA_VERSION cluster of $nodes ready on $(cluster_bootstrap "$dir") (dir $dir) in $(secs_since "$t0") s"
  cluster_bootstrap "$dir"
}

# Stops node $2 of cluster $1: SIGCONT (a frozen node cannot exit), then SIGTERM or with $3=1
# SIGKILL, SIGKILL after $4 seconds.
stop_node() {
  local dir="$1" n="$2" hard="$3" timeout="$4" pid t0
  pid="$(broker_pid "$(node_dir "$dir" "$n")")"
  [[ -n "$pid" ]] || { log "node $n is not running"; return 0; }
  t0=$(now_ms)
  if ((hard)); then
    kill -KILL "$pid" 2>/dev/null || true
  else
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  fi
  local deadline=$((t0 + timeout * 1000))
  while alive "$pid" && (($(now_ms) < deadline)); do sleep 0.1; done
  if alive "$pid"; then
    log "node $n (pid $pid) still running after ${timeout}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$(node_dir "$dir" "$n")/kafka.pid"
  log "stopped node $n (pid $pid, $( ((hard)) && echo SIGKILL || echo SIGTERM )) in $(secs_since "$t0") s"
}

cmd_cluster_stop() {
  local dir="" timeout=30 clean=0 hard=0
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      --clean) clean=1; shift ;;
      --kill) hard=1; shift ;;
      *) die "cluster-stop: unknown argument $1" ;;
    esac
  done
  dir="$(cluster_dir_arg "$dir")"
  local nodes n pids=()
  nodes="$(cluster_size "$dir")"
  # All at once: a node stopped last would wait for a controller quorum that is gone.
  for ((n = 1; n <= nodes; n++)); do
    stop_node "$dir" "$n" "$hard" "$timeout" &
    pids+=("$!")
  done
  for n in "${pids[@]}"; do wait "$n" || true; done
  if ((clean)); then
    [[ "$dir" != / && -f "$dir/nodes" ]] || die "refusing to delete $dir: not a kafka.sh cluster dir"
    rm -rf "$dir"
    log "removed $dir"
  fi
}

cmd_cluster_status() {
  local dir=""
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      *) die "cluster-status: unknown argument $1" ;;
    esac
  done
  dir="$(cluster_dir_arg "$dir")"
  need_tools python3
  local nodes n state rc=0 ndir
  nodes="$(cluster_size "$dir")"
  for ((n = 1; n <= nodes; n++)); do
    ndir="$(node_dir "$dir" "$n")"
    state="$(node_state "$dir" "$n")"
    if [[ "$state" == running ]] && ! metadata_ok "$(cluster_port "$dir" "$n")" "$n"; then
      state="starting"
    fi
    [[ "$state" == running ]] || rc=3
    echo "node $n $state port=$(cluster_port "$dir" "$n") controller=$(cluster_cport "$dir" "$n") pid=$(broker_pid "$ndir") dir=$ndir"
  done
  local ports; ports="$(answering_ports "$dir" controller.port)"
  # shellcheck disable=SC2086
  echo "active controller: $( [[ -n "$ports" ]] && python3 "$PROBE" controller $ports || echo none)"
  return "$rc"
}

# cluster-node --dir D N ACTION [--timeout S]
cmd_cluster_node() {
  local dir="" timeout=60 args=()
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  ((${#args[@]} == 2)) || die "cluster-node --dir D N start|stop|kill|freeze|thaw|pid|port|state"
  dir="$(cluster_dir_arg "$dir")"
  local n="${args[0]}" action="${args[1]}" nodes ndir pid
  nodes="$(cluster_size "$dir")"
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= nodes)) || die "no node $n in a cluster of $nodes"
  ndir="$(node_dir "$dir" "$n")"
  pid="$(broker_pid "$ndir")"
  case "$action" in
    start)
      local t0; t0=$(now_ms)
      version_of_dir "$ndir"
      fetch
      need_tools java python3
      if [[ -z "$pid" ]]; then
        port_in_use "$(cluster_port "$dir" "$n")" && die "node $n's port is in use by another process"
        echo "===== $(date -u +%FT%TZ) kafka.sh cluster-node $n start =====" >>"$ndir/kafka.log"
        launch_broker "$ndir" "$CLUSTER_JVM_OPTS"
        pid="$LAUNCHED_PID"
      else
        kill -CONT "$pid" 2>/dev/null || true
      fi
      # Ready: it answers a metadata request that lists it (it registered and is unfenced); the
      # other nodes may be down.
      wait_ready "$(cluster_port "$dir" "$n")" "$timeout" "$ndir" "$pid" "$n" || die "node $n did not start"
      log "node $n ready on 127.0.0.1:$(cluster_port "$dir" "$n") (pid $pid) in $(secs_since "$t0") s"
      echo "$pid" ;;
    stop) stop_node "$dir" "$n" 0 "$timeout" ;;
    kill) stop_node "$dir" "$n" 1 "$timeout" ;;
    freeze) [[ -n "$pid" ]] || die "node $n is not running"; kill -STOP "$pid"
      # kill returns before the JVM's threads have stopped (one takes the signal when it next runs,
      # then stops the others): return only once every thread is in state T, so a caller's next
      # request meets a frozen node.
      all_threads_stopped "$pid" 10 || die "node $n (pid $pid) not stopped 10 s after SIGSTOP"
      log "node $n (pid $pid) frozen" ;;
    thaw) [[ -n "$pid" ]] || die "node $n is not running"; kill -CONT "$pid"; log "node $n (pid $pid) thawed" ;;
    pid) [[ -n "$pid" ]] || die "node $n is not running"; echo "$pid" ;;
    port) cluster_port "$dir" "$n" ;;
    state) node_state "$dir" "$n" ;;
    *) die "cluster-node: unknown action $action (start, stop, kill, freeze, thaw, pid, port, state)" ;;
  esac
}

# all_threads_stopped PID SECONDS: waits until every thread of PID is stopped (state T or t).
all_threads_stopped() {
  local pid="$1" deadline=$((SECONDS + $2)) states
  while :; do
    # One letter per thread (a thread that ended meanwhile is skipped).
    states="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' /proc/"$pid"/task/*/stat 2>/dev/null || true)"
    [[ -d /proc/"$pid" ]] || return 1
    [[ -n "$states" ]] && ! grep -qv '^[Tt]$' <<<"$states" && return 0
    ((SECONDS >= deadline)) && return 1
    sleep 0.01
  done
}

# cluster-leader --dir D TOPIC PARTITION: the node leading it, as the first answering node sees it
# (-1: no leader).
cmd_cluster_leader() {
  local dir="" args=()
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  ((${#args[@]} == 2)) || die "cluster-leader --dir D TOPIC PARTITION"
  dir="$(cluster_dir_arg "$dir")"
  need_tools python3
  local ports; ports="$(answering_ports "$dir" port)"
  [[ -n "$ports" ]] || die "no node of $dir is running"
  # shellcheck disable=SC2086
  python3 "$PROBE" leader "${args[0]}" "${args[1]}" $ports || die "no running node knows ${args[0]}/${args[1]}"
}

# cluster-controller --dir D: the active KRaft controller (the quorum leader, from DescribeQuorum on
# the controller listeners). Not Metadata's controller_id: in KRaft that is a random broker.
cmd_cluster_controller() {
  local dir=""
  while (($#)); do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      *) die "cluster-controller: unknown argument $1" ;;
    esac
  done
  dir="$(cluster_dir_arg "$dir")"
  need_tools python3
  local ports; ports="$(answering_ports "$dir" controller.port)"
  [[ -n "$ports" ]] || die "no node of $dir is running"
  # shellcheck disable=SC2086
  python3 "$PROBE" controller $ports || die "no controller of $dir named a quorum leader"
}

# ---------------------------------------------------------------- tool

# Kafka's CLI tools, as kafka-NAME.sh of a Kafka distribution runs them: the main class on the
# fetched jars, warnings only on stderr.
cmd_tool() {
  local name="${1:-}" main
  case "$name" in
    topics) main=org.apache.kafka.tools.TopicCommand ;;
    consumer-groups) main=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
    get-offsets) main=org.apache.kafka.tools.GetOffsetShell ;;
    console-consumer) main=org.apache.kafka.tools.consumer.ConsoleConsumer ;;
    configs)  # moved from core (Scala) to the tools module in Kafka 4.0
      if [[ "$KAFKA_VERSION" == 3.* ]]; then main=kafka.admin.ConfigCommand
      else main=org.apache.kafka.tools.ConfigCommand; fi ;;
    transactions) main=org.apache.kafka.tools.TransactionsCommand ;;
    delete-records) main=org.apache.kafka.tools.DeleteRecordsCommand ;;
    metadata-quorum) main=org.apache.kafka.tools.MetadataQuorumCommand ;;
    reassign-partitions) main=org.apache.kafka.tools.reassign.ReassignPartitionsCommand ;;
    features) main=org.apache.kafka.tools.FeatureCommand ;;
    acls)  # moved from core (Scala) to the tools module in Kafka 4.0, as configs
      if [[ "$KAFKA_VERSION" == 3.* ]]; then main=kafka.admin.AclCommand
      else main=org.apache.kafka.tools.AclCommand; fi ;;
    *) die "tool: unknown tool '${name}' (topics, consumer-groups, get-offsets, console-consumer, configs, transactions, delete-records, metadata-quorum, reassign-partitions, features, acls)" ;;
  esac
  shift
  fetch
  need_tools java
  local log4j="$CACHE_DIR/tools-log4j.properties"
  [[ -f "$log4j" ]] || printf '%s\n' 'log4j.rootLogger=WARN, stderr' \
    'log4j.appender.stderr=org.apache.log4j.ConsoleAppender' \
    'log4j.appender.stderr.Target=System.err' \
    'log4j.appender.stderr.layout=org.apache.log4j.PatternLayout' \
    'log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n' >"$log4j"
  exec java -Xmx256m -Dlog4j.configuration="file:$log4j" -cp "$LIBS/*" "$main" "$@"
}

case "${1:-}" in
  tool) shift; cmd_tool "$@" ;;
  fetch) shift; fetch; echo "$LIBS" ;;
  libs) shift; fetch; echo "$LIBS" ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  wait) shift; cmd_wait "$@" ;;
  cluster-start) shift; cmd_cluster_start "$@" ;;
  cluster-stop) shift; cmd_cluster_stop "$@" ;;
  cluster-status) shift; cmd_cluster_status "$@" ;;
  cluster-node) shift; cmd_cluster_node "$@" ;;
  cluster-leader) shift; cmd_cluster_leader "$@" ;;
  cluster-controller) shift; cmd_cluster_controller "$@" ;;
  cluster-bootstrap) shift; [[ "${1:-}" == --dir ]] || die "cluster-bootstrap --dir D"; cluster_bootstrap "$(cluster_dir_arg "${2:-}")" ;;
  free-port) shift; free_port ;;
  version) echo "$KAFKA_VERSION" ;;
  -h|--help|help|"") usage ;;
  *) echo "kafka.sh: unknown command $1" >&2; usage ;;
esac
