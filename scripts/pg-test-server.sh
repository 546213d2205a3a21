#!/usr/bin/env bash
# Makes a PostgreSQL server available for the p5 merge tests and prints the line to eval:
#
#   eval "$(bash scripts/pg-test-server.sh)"     # exports P5_TEST_PG_URL
#   bash scripts/pg-test-server.sh stop          # stops a throwaway server started here
#
# 1. P5_TEST_PG_URL already set and reachable: printed as is.
# 2. postgres://postgres@127.0.0.1:5432/test reachable (database `test` created if missing).
# 3. Otherwise a throwaway server from Debian's package (`apt-get install postgresql` when
#    missing and running as root): initdb in $P5_PG_DIR (default /tmp/p5-pg-test), trust
#    authentication, listening on 127.0.0.1:${P5_PG_PORT:-55432}, database `test`.
set -euo pipefail

dir=${P5_PG_DIR:-/tmp/p5-pg-test}
port=${P5_PG_PORT:-55432}

find_bin() {
    local name=$1 p
    if p=$(command -v "$name" 2>/dev/null); then echo "$p"; return 0; fi
    for p in /usr/lib/postgresql/*/bin/"$name"; do
        [ -x "$p" ] && { echo "$p"; return 0; }
    done
    return 1
}

as_pg() {
    # PostgreSQL refuses to run as root: use the package's postgres user then.
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

reachable() {
    # reachable HOST PORT
    timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

if [ "${1:-}" = stop ]; then
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_pg "$(find_bin pg_ctl)" -D "$dir/data" -m fast stop >&2
    fi
    exit 0
fi

if [ -n "${P5_TEST_PG_URL:-}" ]; then
    echo "export P5_TEST_PG_URL='$P5_TEST_PG_URL'"
    exit 0
fi

if reachable 127.0.0.1 5432; then
    if command -v psql >/dev/null; then
        psql -h 127.0.0.1 -U postgres -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'test'" 2>/dev/null \
            | grep -q 1 || psql -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE test" >&2 || true
    fi
    echo "export P5_TEST_PG_URL='postgres://postgres@127.0.0.1:5432/test'"
    exit 0
fi

if ! find_bin initdb >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    if command -v apt-get >/dev/null; then
        echo "installing postgresql from the Debian package" >&2
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
    else
        echo "no PostgreSQL found: install the postgresql package or set P5_TEST_PG_URL" >&2
        exit 1
    fi
fi
initdb=$(find_bin initdb)
pg_ctl=$(find_bin pg_ctl)

if ! reachable 127.0.0.1 "$port"; then
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_pg "$initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >&2
    fi
    as_pg "$pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2
fi
psql_bin=$(find_bin psql)
"$psql_bin" -h 127.0.0.1 -p "$port" -U postgres -d postgres -Atc \
    "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 \
    || "$psql_bin" -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE test" >&2
echo "export P5_TEST_PG_URL='postgres://postgres@127.0.0.1:$port/test'"
