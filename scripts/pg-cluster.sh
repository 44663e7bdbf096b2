#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for berm's tests and for developers (scale-out, docs/scale-out.md).
#
#   scripts/pg-cluster.sh start DIR   initdb in DIR (created; must be empty or absent), start the
#                                     server on 127.0.0.1 and a free port, create the database
#                                     berm_test, print its URL (postgres://...) on stdout and write
#                                     it to DIR/url. Trust authentication, loopback only: a test
#                                     cluster, never a production one.
#   scripts/pg-cluster.sh stop DIR    stop the server (fast shutdown) and delete DIR
#   scripts/pg-cluster.sh restart DIR restart the server (fast shutdown: every connection is cut)
#                                     on the same port, for fault tests; returns once it accepts
#   scripts/pg-cluster.sh url DIR     print the URL of a started cluster
#
# Typical use:
#   dir=$(mktemp -d); export BERM_TEST_PG_URL=$(scripts/pg-cluster.sh start "$dir")
#   trap 'scripts/pg-cluster.sh stop "$dir"' EXIT
#
# initdb and postgres refuse to run as root: as root the cluster runs as the `postgres` system user
# (created by Debian's postgresql package) through runuser, and DIR is handed to that user.
# The binaries are Debian's (/usr/lib/postgresql/<major>/bin, newest major) or the PATH's.
set -euo pipefail

die() {
  echo "pg-cluster: $*" >&2
  exit 1
}

bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then
    echo "$d"
    return
  fi
  command -v initdb >/dev/null 2>&1 || die "initdb not found: install Debian's postgresql package (apt-get install postgresql)"
  dirname "$(command -v initdb)"
}

# as_owner CMD...: run CMD as the cluster's owner (postgres when we are root, else ourselves)
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    id -u postgres >/dev/null 2>&1 || die "running as root needs the postgres system user (Debian's postgresql package creates it)"
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  # bind port 0 on loopback and report what the kernel chose (the tiny race until postgres binds
  # it is covered by retrying the start)
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local dir=$1 bin port url tries
  [ -n "$dir" ] || die "usage: $0 start DIR"
  bin=$(bindir)
  mkdir -p "$dir"
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty; give a fresh directory"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir"
    chmod 700 "$dir"
  fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    die "initdb failed (log above)"
  }
  for tries in 1 2 3 4 5; do
    port=$(free_port)
    # fsync off: a throwaway cluster; the tests kill berm processes, never the database host
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >/dev/null 2>&1; then
      break
    fi
    port=
    [ "$tries" -lt 5 ] || {
      tail -n 20 "$dir/server.log" >&2 || true
      die "the server did not start (log above)"
    }
  done
  echo "$port" >"$dir/port"
  as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
    -c 'CREATE DATABASE berm_test' >/dev/null || die "cannot create the database berm_test"
  url="postgres://postgres@127.0.0.1:$port/berm_test"
  echo "$url" >"$dir/url"
  echo "$url"
}

stop() {
  local dir=$1 bin
  [ -n "$dir" ] || die "usage: $0 stop DIR"
  [ -d "$dir" ] || return 0
  bin=$(bindir)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

restart() {
  local dir=$1 bin
  [ -n "$dir" ] && [ -f "$dir/data/postmaster.pid" ] || die "usage: $0 restart DIR (a started cluster)"
  bin=$(bindir)
  # pg_ctl restart starts the server again with the options it was started with (postmaster.opts)
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 restart >/dev/null 2>&1 || {
    tail -n 20 "$dir/server.log" >&2 || true
    die "the server did not restart (log above)"
  }
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  restart) restart "${2:-}" ;;
  url) cat "${2:?usage: $0 url DIR}/url" ;;
  *) die "usage: $0 start|stop|restart|url DIR" ;;
esac
