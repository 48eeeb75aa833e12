#!/usr/bin/env bash
# pg-test-server.sh: a throwaway PostgreSQL for tests, on 127.0.0.1 only.
#
#   scripts/pg-test-server.sh start [--watch PID]   prints two lines: the URL, then the data dir
#   scripts/pg-test-server.sh stop DIR              stops the server and removes DIR
#   scripts/pg-test-server.sh down DIR              stops the server, keeps DIR (an outage)
#   scripts/pg-test-server.sh up DIR                starts it again on the same port and data
#
# The server runs from a new temp dir as the postgres OS user when run as root
# (initdb refuses root), with trust auth on loopback, no TCP outside
# 127.0.0.1, its socket inside the dir, and fsync off (data is thrown away;
# synchronous_commit stays on so an immediate stop loses no committed
# transaction).
# --watch PID stops the server and removes the dir once process PID ends
# (go test passes its own pid, so a killed test run leaves nothing behind).
#
# Needs the Debian postgresql package (binaries in /usr/lib/postgresql/*/bin);
# PG_BIN overrides the directory.
set -euo pipefail

find_bin() {
  if [[ -n "${PG_BIN:-}" ]]; then echo "$PG_BIN"; return; fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return; fi
  done
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return; fi
  echo "pg-test-server: PostgreSQL binaries not found (apt-get install postgresql)" >&2
  exit 2
}

# as_pg runs a command as the postgres user when we are root.
as_pg() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pg_start() {
  local dir="$1" port="$2" bin
  bin="$(find_bin)"
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
}

cmd_start() {
  local watch=""
  if [[ "${1:-}" == "--watch" ]]; then watch="${2:?--watch needs a pid}"; fi
  local bin dir port tries
  bin="$(find_bin)"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/pg-test.XXXXXX")"
  chmod 0755 "$dir"
  if [[ "$(id -u)" == 0 ]]; then chown postgres: "$dir"; fi
  as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    exit 1
  }
  cat >>"$dir/data/postgresql.conf" <<'EOF'
fsync = off
full_page_writes = off
max_connections = 300
shared_buffers = 32MB
EOF
  for tries in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 30000))
    port_free "$port" || continue
    if pg_start "$dir" "$port" 2>>"$dir/start.err"; then
      echo "$port" >"$dir/port"
      if [[ -n "$watch" ]]; then
        # Detached watcher with no inherited stdio, so callers reading our
        # output are not held open.
        setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" stop "$3"' \
          _ "$watch" "$(readlink -f "$0")" "$dir" </dev/null >/dev/null 2>&1 &
      fi
      echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      echo "$dir"
      return 0
    fi
  done
  echo "pg-test-server: could not start PostgreSQL:" >&2
  cat "$dir/start.err" "$dir/server.log" >&2 2>/dev/null || true
  rm -rf "$dir"
  exit 1
}

cmd_stop() {
  local dir="${1:?usage: stop DIR}" bin
  [[ -d "$dir/data" ]] || { rm -rf "$dir"; return 0; }
  bin="$(find_bin)"
  as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

cmd_down() {
  local dir="${1:?usage: down DIR}" bin
  bin="$(find_bin)"
  as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null
}

cmd_up() {
  local dir="${1:?usage: up DIR}"
  pg_start "$dir" "$(cat "$dir/port")"
}

case "${1:-}" in
start) shift; cmd_start "$@" ;;
stop) cmd_stop "${2:-}" ;;
down) cmd_down "${2:-}" ;;
up) cmd_up "${2:-}" ;;
*)
  echo "usage: $0 start [--watch PID] | stop DIR | down DIR | up DIR" >&2
  exit 2
  ;;
esac
