#!/usr/bin/env bash
# Runs a real single-node Apache Kafka 3.9 broker (KRaft, broker+controller in one JVM) for
# kleaf's development, tests and CI, without Docker: the broker jars come from Maven Central
# through compose/pom.xml. See compose/README.md.
#
#   kafka.sh fetch
#   kafka.sh start --port P [--dir D] [--controller-port C] [--timeout S] [--prop k=v]...
#   kafka.sh wait  --port P [--timeout S]
#   kafka.sh stop  [--port P | --dir D] [--timeout S] [--kill] [--clean]
#   kafka.sh status [--port P | --dir D]
#   kafka.sh free-port
#   kafka.sh libs
#   kafka.sh tool NAME [ARGS...]   Kafka's CLI tools: topics, consumer-groups, get-offsets,
#                                  console-consumer, configs, transactions, delete-records
#                                  (ARGS as for kafka-NAME.sh, e.g. --bootstrap-server H:P --list)
set -euo pipefail

COMPOSE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$COMPOSE_DIR/pom.xml"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1)"
[[ -n "$KAFKA_VERSION" ]] || { echo "kafka.sh: no <kafka.version> in $POM" >&2; exit 1; }
CACHE_ROOT="${KLEAF_KAFKA_CACHE:-$COMPOSE_DIR/.cache}"
CACHE_DIR="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIBS="$CACHE_DIR/libs"
MARKER="$CACHE_DIR/.complete"
# The marker records pom.xml's hash: a changed pom (a jar added) fetches again.
POM_SUM="$(sha256sum "$POM" | cut -d' ' -f1)"
RUN_ROOT="${KLEAF_KAFKA_RUN:-$COMPOSE_DIR/.run}"
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
  # One fetch at a time (parallel test runners may all call start at once).
  exec 9>"$CACHE_DIR/.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if fetched; then exec 9>&-; return 0; fi
  local t0 tmp
  t0=$(now_ms)
  tmp="$CACHE_DIR/libs.tmp.$$"
  rm -rf "$tmp" "$LIBS"
  log "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central into $LIBS"
  if ! mvn -B -q -Dstyle.color=never -f "$POM" "$DEPENDENCY_PLUGIN:copy-dependencies" \
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
# succeeds when the response lists broker $NODE_ID at 127.0.0.1:$port. Takes milliseconds,
# needs nothing but python3 (a JVM tool would take seconds per call on this machine).
metadata_ok() {
  python3 - "$1" "$NODE_ID" <<'PY'
import socket, struct, sys
port, node = int(sys.argv[1]), int(sys.argv[2])
client = b"kleaf-probe"
# header v1: api_key=3 (Metadata), api_version=1, correlation_id, client_id; body: topics=[] (none)
req = struct.pack(">hhih", 3, 1, 7, len(client)) + client + struct.pack(">i", 0)
try:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.settimeout(2)
        s.sendall(struct.pack(">i", len(req)) + req)
        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise OSError("connection closed")
                buf += chunk
            return buf
        size, = struct.unpack(">i", read(4))
        data = read(size)
    corr, nbrokers = struct.unpack_from(">ii", data, 0)
    off = 8
    if corr != 7:
        sys.exit(1)
    for _ in range(nbrokers):
        node_id, hlen = struct.unpack_from(">ih", data, off); off += 6
        host = data[off:off + hlen].decode(); off += hlen
        bport, rlen = struct.unpack_from(">ih", data, off); off += 6
        if rlen > 0:
            off += rlen
        if node_id == node and host == "127.0.0.1" and bport == port:
            sys.exit(0)
except (OSError, struct.error, UnicodeDecodeError):
    pass
sys.exit(1)
PY
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

# Polls the metadata probe until it succeeds, the broker dies or the deadline passes.
wait_ready() {
  local port="$1" timeout="$2" dir="${3:-}" pid="${4:-}" deadline
  deadline=$(( $(now_ms) + timeout * 1000 ))
  while :; do
    if [[ -n "$pid" ]] && ! alive "$pid"; then
      log "broker (pid $pid) exited during startup"
      [[ -n "$dir" ]] && tail_log "$dir"
      return 1
    fi
    if metadata_ok "$port"; then return 0; fi
    if (( $(now_ms) >= deadline )); then
      log "broker on 127.0.0.1:$port not ready after ${timeout}s"
      [[ -n "$dir" ]] && tail_log "$dir"
      return 1
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- config files

write_config() {
  local dir="$1" port="$2" cport="$3"; shift 3
  cat >"$dir/server.properties" <<EOF
# Written by compose/kafka.sh; rewritten on every start.
process.roles=broker,controller
node.id=$NODE_ID
controller.quorum.voters=$NODE_ID@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.cleaner.backoff.ms=1000
# Test speed: abort timed-out transactions within ~1 s of transaction.timeout.ms (default 10 s
# check interval), and allow short consumer session timeouts (default minimum 6 s).
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
group.min.session.timeout.ms=1000
# Fewer idle threads on a 2-core machine.
num.network.threads=2
num.io.threads=4
background.threads=4
EOF
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
  fetch
  need_tools java python3
  dir="$(abs_dir "${dir:-$RUN_ROOT/kafka-$port}")"

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
  write_config "$dir" "$port" "$cport" "${props[@]+"${props[@]}"}"
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
  rm -f "$dir/kafka.pid"
  # setsid: the broker outlives the calling shell and gets none of its terminal signals.
  # All three standard streams are redirected so that $(kafka.sh start ...) returns.
  # shellcheck disable=SC2086,SC2016
  setsid bash -c 'echo $$ >"$1/kafka.pid"; shift; exec "$@"' _ "$dir" \
    java $JVM_OPTS -Djava.awt.headless=true "$log4j" -cp "$cp" kafka.Kafka "$dir/server.properties" \
    </dev/null >>"$dir/kafka.log" 2>&1 &
  local _
  for _ in $(seq 1 50); do [[ -s "$dir/kafka.pid" ]] && break; sleep 0.1; done
  pid="$(cat "$dir/kafka.pid" 2>/dev/null || true)"
  [[ -n "$pid" ]] || { tail_log "$dir"; die "broker did not start"; }

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
    configs) main=kafka.admin.ConfigCommand ;;
    transactions) main=org.apache.kafka.tools.TransactionsCommand ;;
    delete-records) main=org.apache.kafka.tools.DeleteRecordsCommand ;;
    *) die "tool: unknown tool '${name}' (topics, consumer-groups, get-offsets, console-consumer, configs, transactions, delete-records)" ;;
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
  free-port) shift; free_port ;;
  version) echo "$KAFKA_VERSION" ;;
  -h|--help|help|"") usage ;;
  *) echo "kafka.sh: unknown command $1" >&2; usage ;;
esac
