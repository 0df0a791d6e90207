#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (and for trying several hosts on one machine):
#
#   bash scripts/scratch_postgres.sh start DIR [PORT]   initdb in DIR, start on 127.0.0.1:PORT (default: a free
#                                                       port); prints the URL: postgresql://postgres@127.0.0.1:PORT/postgres
#   bash scripts/scratch_postgres.sh stop DIR           stop it (DIR stays; delete it yourself)
#
# Finds initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin (Debian's package). Trust
# authentication on loopback only: scratch use, never production. As root the server runs as the
# 'postgres' user (PostgreSQL refuses to run as root), so DIR is handed to that user.
set -euo pipefail

command="${1:?start|stop}"
dir="${2:?data directory}"

bin_dir=""
if ! command -v pg_ctl >/dev/null 2>&1; then
    bin_dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -n "$bin_dir" ] || { echo "error: no PostgreSQL (initdb, pg_ctl) on PATH or in /usr/lib/postgresql" >&2; exit 2; }
    PATH="$bin_dir:$PATH"
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "error: running as root and there is no 'postgres' user" >&2; exit 2; }
    as_owner=(runuser -u postgres --)
fi

case "$command" in
start)
    port="${3:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
    mkdir -p "$dir"
    [ ${#as_owner[@]} -eq 0 ] || chown postgres "$dir"
    "${as_owner[@]}" initdb -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-instructions >"$dir/initdb.log"
    "${as_owner[@]}" pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
stop)
    "${as_owner[@]}" pg_ctl -D "$dir/data" -m fast -w stop >/dev/null
    ;;
*)
    echo "usage: $0 start DIR [PORT] | stop DIR" >&2
    exit 2
    ;;
esac
