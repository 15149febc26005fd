# Sourced by the HTTP benchmarks (tests/bench/http_bench.sh, tests/bench/http_vs_nginx.sh,
# tests/bench/http/callgrind_per_request.sh): the two servers they compare, configured the same
# way in each. nginx serves a 19-byte static file; kleaf runs standalone with auto-created tags.
# Each config lives in a directory of its own; the scripts start the servers themselves.
#
# Sourcing it makes $work, a temporary directory removed at exit, and $pids: the processes to
# kill at exit (a script appends each server it starts in the background).

work=$(mktemp -d)
chmod 755 "$work"  # nginx's workers run as nobody: they must reach its files
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http URL: until URL answers 2xx (30 s at most).
wait_http() { for _ in $(seq 300); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done; return 1; }

# nginx_conf DIR PORT WORKERS [master]: writes DIR/nginx.conf (foreground; "master" keeps nginx's
# master process, otherwise the one worker runs alone, as valgrind needs) and DIR/www/id.txt.
nginx_conf() {
  local dir=$1 port=$2 workers=$3 master=${4:-master}
  mkdir -p "$dir/www" "$dir/tmp"
  chmod 755 "$dir" "$dir/www"  # nginx's workers run as nobody: without this they answer 403
  printf '1234567890123456789' > "$dir/www/id.txt"
  {
    echo "daemon off;"
    [[ $master == master ]] || echo "master_process off;"
    cat <<CONF
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$port; root $dir/www; }
}
CONF
  } > "$dir/nginx.conf"
}

# kleaf_conf DIR PORT THREADS: writes DIR/kleaf.yaml (a fresh state directory DIR/data).
kleaf_conf() {
  local dir=$1 port=$2 threads=$3
  mkdir -p "$dir"
  rm -rf "$dir/data"
  cat > "$dir/kleaf.yaml" <<CONF
http:
  listen: 127.0.0.1:$port
  threads: $threads
state:
  path: $dir/data
admin:
  token: bench-token-0123456789
segment:
  auto_create: true
  default_step: 1000000
log:
  level: warn
CONF
}

# throughput_table KIND NGINX_URL SEGMENT_URL SNOWFLAKE_URL: wrk -t1 -c32 and -t2 -c128 (after a
# 1 s warm-up of each URL), $rounds rounds of nginx (A), kleaf's segment ID (B) and snowflake ID
# (C), $duration s each; prints every run with the round's B/A and C/A, then the ratio of the
# means. KIND names the protocol in the header ("" or "HTTPS "); rps (the caller's) reads a run.
throughput_table() {
  local kind=$1 nginx_url=$2 segment_url=$3 snowflake_url=$4 shape r a b c
  for url in "$nginx_url" "$segment_url" "$snowflake_url"; do wrk -t1 -c32 -d1s "$url" >/dev/null; done
  for shape in "-t1 -c32" "-t2 -c128"; do
    echo
    echo "| wrk $shape | round | load (1 min) | nginx ${kind}req/s (A) | kleaf ${kind}segment (B) | kleaf ${kind}snowflake (C) | B/A | C/A |"
    echo "|---|---|---|---|---|---|---|---|"
    local sums=(0 0 0)
    for r in $(seq "$rounds"); do
      # shellcheck disable=SC2086
      a=$(rps "$(wrk $shape -d"${duration}s" "$nginx_url")")
      # shellcheck disable=SC2086
      b=$(rps "$(wrk $shape -d"${duration}s" "$segment_url")")
      # shellcheck disable=SC2086
      c=$(rps "$(wrk $shape -d"${duration}s" "$snowflake_url")")
      sums=("$(bc -l <<<"${sums[0]} + $a")" "$(bc -l <<<"${sums[1]} + $b")" "$(bc -l <<<"${sums[2]} + $c")")
      printf '| %s | %d | %s | %.0f | %.0f | %.0f | %.2f | %.2f |\n' "$shape" "$r" \
        "$(cut -d' ' -f1 /proc/loadavg)" "$a" "$b" "$c" "$(bc -l <<<"$b/$a")" "$(bc -l <<<"$c/$a")"
    done
    printf '\nwrk %s: mean nginx %.0f, kleaf segment %.0f (%.2f x nginx), kleaf snowflake %.0f (%.2f x nginx)\n' \
      "$shape" "$(bc -l <<<"${sums[0]}/$rounds")" "$(bc -l <<<"${sums[1]}/$rounds")" \
      "$(bc -l <<<"${sums[1]}/${sums[0]}")" "$(bc -l <<<"${sums[2]}/$rounds")" \
      "$(bc -l <<<"${sums[2]}/${sums[0]}")"
  done
}
