#!/usr/bin/env bash
# Runs a command with a real PostgreSQL and Redis available (make test needs
# both; see README.md, "Tests"):
#   1. the ones already answering on 127.0.0.1:5432 / 127.0.0.1:6379;
#   2. else throwaway servers started from installed binaries in a temp dir;
#   3. else, as root, the Debian packages are installed first.
# Also makes sure headless Chromium (the inspector's browser test),
# PgBouncer and redis-sentinel (the failover tests) are installed,
# installing Debian's packages as root when they are missing, and unpacks
# Debian's prometheus package for promtool and a Prometheus server (the
# observability tests; exported as WHGUARD_TEST_PROMETHEUS).
# Exports TEST_DATABASE_URL and TEST_REDIS_URL for the tests, and stops and
# removes whatever it started on exit.
# WHGUARD_TEST_PG_ADDR / WHGUARD_TEST_REDIS_ADDR override where to look
# first (used to test the fallback path). WHGUARD_TEST_PG_PRELOAD (a
# shared_preload_libraries value, e.g. pg_stat_statements) always starts a
# throwaway PostgreSQL loading it, with the settings of this machine's own
# server (autovacuum off, fsync and synchronous commit on): make
# bench-statements.
set -euo pipefail

pg_addr=${WHGUARD_TEST_PG_ADDR:-127.0.0.1:5432}
redis_addr=${WHGUARD_TEST_REDIS_ADDR:-127.0.0.1:6379}
pg_host=${pg_addr%:*}; pg_port=${pg_addr##*:}
redis_host=${redis_addr%:*}; redis_port=${redis_addr##*:}

tmp=$(mktemp -d /tmp/whguard-test.XXXXXX)
chmod 755 "$tmp"
started_pg=""; started_redis=""
cleanup() {
  if [ -n "$started_pg" ]; then
    run_as_pg "$pg_ctl" -D "$tmp/pg" -m immediate stop >/dev/null 2>&1 || true
  fi
  if [ -n "$started_redis" ]; then
    redis-cli -h 127.0.0.1 -p "$started_redis" shutdown nosave >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

log() { echo "with-services: $*" >&2; }

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "cannot install $* (not root or no apt-get)"; return 1
  fi
  log "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# PostgreSQL tools refuse to run as root: run them as the postgres user
# (created by the Debian package) or a throwaway one.
pg_user=""
run_as_pg() {
  if [ "$(id -u)" != 0 ]; then "$@"; return; fi
  if [ -z "$pg_user" ]; then
    if id postgres >/dev/null 2>&1; then pg_user=postgres
    else useradd --system --no-create-home whguardpg 2>/dev/null || true; pg_user=whguardpg; fi
    chown -R "$pg_user" "$tmp"
  fi
  runuser -u "$pg_user" -- "$@"
}

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

pg_answers() { pg_isready -q -h "$1" -p "$2" -t 2 >/dev/null 2>&1 || (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

find_pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  command -v initdb >/dev/null && dirname "$(command -v initdb)"
}

preload=${WHGUARD_TEST_PG_PRELOAD:-}
if [ -z "$preload" ] && pg_answers "$pg_host" "$pg_port"; then
  export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@$pg_host:$pg_port/postgres?sslmode=disable}
  log "using PostgreSQL at $pg_host:$pg_port"
else
  bin=$(find_pg_bin || true)
  if [ -z "$bin" ]; then apt_install postgresql; bin=$(find_pg_bin); fi
  initdb=$bin/initdb; pg_ctl=$bin/pg_ctl
  port=$(free_port)
  mkdir -p "$tmp/pg"
  run_as_pg "$initdb" -D "$tmp/pg" -U postgres --auth=trust -E UTF8 >/dev/null
  extra=""
  if [ -n "$preload" ]; then
    extra="-c shared_preload_libraries=$preload -c autovacuum=off -c synchronous_commit=on -c shared_buffers=128MB"
  fi
  run_as_pg "$pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w -t 60 \
    -o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200 $extra" start >/dev/null
  started_pg=$port
  export TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable
  log "started throwaway PostgreSQL on 127.0.0.1:$port"
fi

if [ "$(redis-cli -h "$redis_host" -p "$redis_port" ping 2>/dev/null || true)" = PONG ]; then
  export TEST_REDIS_URL=${TEST_REDIS_URL:-redis://$redis_host:$redis_port/0}
  log "using Redis at $redis_host:$redis_port"
else
  command -v redis-server >/dev/null || apt_install redis-server
  port=$(free_port)
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
    --dir "$tmp" --logfile "$tmp/redis.log" >/dev/null
  started_redis=$port
  for _ in $(seq 50); do [ "$(redis-cli -p "$port" ping 2>/dev/null || true)" = PONG ] && break; sleep 0.1; done
  export TEST_REDIS_URL=redis://127.0.0.1:$port/0
  log "started throwaway Redis on 127.0.0.1:$port"
fi

# The web inspector's browser test drives Debian's headless Chromium.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && [ -z "${WHGUARD_TEST_CHROMIUM:-}" ]; then
  apt_install chromium || log "no Chromium: the inspector's browser test will fail"
fi

# The connection-pooler tests run a real PgBouncer; the Sentinel test runs
# redis-sentinel when installed (else redis-server --sentinel, the same
# program).
if ! command -v pgbouncer >/dev/null && ! [ -x /usr/sbin/pgbouncer ]; then
  apt_install pgbouncer || log "no PgBouncer: the pooler tests will fail"
fi
if ! command -v redis-sentinel >/dev/null; then
  apt_install redis-sentinel || log "no redis-sentinel: the Sentinel test runs redis-server --sentinel"
fi

# The observability tests run promtool and a real Prometheus: Debian's
# prometheus package unpacked into a cache, never installed (installing it
# starts a server on :9090, whguard's default admin address). The tests
# find them through WHGUARD_TEST_PROMETHEUS.
if [ -z "${WHGUARD_TEST_PROMETHEUS:-}" ] && ! command -v promtool >/dev/null; then
  prom_cache=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/whguard-test/prometheus
  if [ ! -x "$prom_cache/usr/bin/promtool" ] || [ ! -x "$prom_cache/usr/bin/prometheus" ]; then
    log "unpacking Debian's prometheus package into $prom_cache"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      # apt-get download needs the package lists; as root it may refresh them.
      (apt-cache show prometheus >/dev/null 2>&1) || apt-get update -qq >/dev/null || true
    fi
    mkdir -p "$tmp/prom" "$prom_cache"
    if (cd "$tmp/prom" && apt-get download prometheus >/dev/null 2>&1) &&
        dpkg -x "$tmp"/prom/prometheus_*.deb "$tmp/prom/x" &&
        [ -x "$tmp/prom/x/usr/bin/promtool" ]; then
      rm -rf "$prom_cache/usr"
      mkdir -p "$prom_cache/usr/bin"
      cp "$tmp/prom/x/usr/bin/promtool" "$tmp/prom/x/usr/bin/prometheus" "$prom_cache/usr/bin/"
    else
      log "no promtool: the observability tests will fail under CI"
    fi
  fi
  if [ -x "$prom_cache/usr/bin/promtool" ]; then
    export WHGUARD_TEST_PROMETHEUS=$prom_cache/usr/bin
  fi
fi

# Run the command as a child we wait for, so an interruption (Ctrl-C, a
# CI or make time-out) reaches it at once and the servers are still
# stopped and removed.
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' TERM
trap 'kill -INT "$child" 2>/dev/null; wait "$child"; exit 130' INT
wait "$child"
