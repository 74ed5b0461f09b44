#!/usr/bin/env bash
# Run the whole test suite: `scripts/test.sh [extra cargo test args...]`
#
# The Postgres-backed tests use #[sqlx::test], which reads DATABASE_URL,
# connects to that server and creates/drops a fresh database per test, so the
# role in the URL needs CREATEDB (or superuser). This script finds one:
#
#   1. DATABASE_URL already set            -> used as is.
#   2. a Postgres answering on 127.0.0.1:5432 that lets `postgres` in without a
#      password (checked with psql)        -> a scratch database agent_sessions_test_<pid>
#      on it, dropped on exit (sqlx keeps its _sqlx_test schema there)
#   3. initdb/pg_ctl found (PATH, then the highest /usr/lib/postgresql/*/bin)
#                                          -> a throwaway cluster in a temp dir on a
#      free 127.0.0.1 port (trust auth, fsync off), run as the `postgres` OS
#      user when this script runs as root; stopped and deleted on exit.
#   4. none of these                       -> explains how to get one, exits 1.
#
# Environment knobs:
#   DATABASE_URL                         use this server, skip all detection.
#   AGENT_SESSIONS_TEST_FORCE_THROWAWAY=1  skip step 2 and always start a throwaway
#                                        cluster (to test that path, or to keep the
#                                        tests off a shared server).
#
# After cargo test (unless it was given arguments) the release binary is built and the
# Python client's suite (clients/python/scripts/ci.sh), the TypeScript client's
# (clients/typescript/scripts/ci.sh: drift check and tests), the console's browser tests
# (scripts/browser-tests.sh, needs chromium) and the README's and docs' sh blocks
# (tests/docs/run_blocks.py) run against it.
#
# The exit status is non-zero when any test fails.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'test.sh: %s\n' "$*" >&2; }

# Hide a password in a URL before printing it.
redact() { printf '%s' "$1" | sed -E 's#(://[^:/@]+):[^@/]*@#\1:***@#'; }

PG_TMP=""
PG_CTL=""
PG_OWNER=""   # OS user the throwaway cluster runs as when we are root

# Run a command as PG_OWNER (or as ourselves when that is empty).
as_owner() {
  if [[ -z "$PG_OWNER" ]]; then
    "$@"
    return
  fi
  local runuser
  runuser=$(PATH="$PATH:/usr/sbin:/sbin" command -v runuser || true)
  if [[ -n "$runuser" ]]; then
    "$runuser" -u "$PG_OWNER" -- "$@"
  else
    su -s /bin/bash "$PG_OWNER" -c "$(printf '%q ' "$@")"
  fi
}

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
  if [[ -n "$PG_TMP" && -d "$PG_TMP" ]]; then
    if [[ -n "$PG_CTL" && -f "$PG_TMP/data/postmaster.pid" ]]; then
      as_owner "$PG_CTL" -D "$PG_TMP/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$PG_TMP"
  fi
}

# Is something listening on 127.0.0.1:$1?
port_answers() {
  local port=$1
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h 127.0.0.1 -p "$port" -t 3
  else
    timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
  fi
}

port_in_use() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# Directory holding both initdb and pg_ctl: PATH first, then the newest
# /usr/lib/postgresql/<version>/bin.
find_pg_bindir() {
  local d cand=()
  if command -v initdb >/dev/null 2>&1; then
    cand+=("$(dirname "$(command -v initdb)")")
  fi
  if [[ -d /usr/lib/postgresql ]]; then
    while IFS= read -r d; do
      cand+=("$d/bin")
    done < <(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort -rV)
  fi
  for d in ${cand[@]+"${cand[@]}"}; do
    if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
      printf '%s\n' "$d"
      return 0
    fi
  done
  return 1
}

start_throwaway() {
  local bindir=$1 port

  if [[ $(id -u) -eq 0 ]]; then
    # Postgres refuses to run as root.
    if id -u postgres >/dev/null 2>&1; then PG_OWNER=postgres; else PG_OWNER=nobody; fi
    # Under /tmp so that user can reach it whatever TMPDIR is.
    PG_TMP=$(mktemp -d /tmp/agent-sessions-pg.XXXXXX)
    chown "$PG_OWNER" "$PG_TMP"
  else
    PG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/agent-sessions-pg.XXXXXX")
  fi
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  PG_CTL="$bindir/pg_ctl"

  if ! as_owner "$bindir/initdb" -D "$PG_TMP/data" -U postgres -A trust \
      -E UTF8 --no-locale --no-sync >"$PG_TMP/initdb.log" 2>&1; then
    log "initdb failed:"
    cat "$PG_TMP/initdb.log" >&2
    exit 1
  fi

  # Prefer a fixed port (a stable DATABASE_URL between runs), else any free one.
  local candidates=(55432) _
  for _ in $(seq 1 20); do candidates+=($((20000 + RANDOM % 20000))); done
  for port in "${candidates[@]}"; do
    port_in_use "$port" && continue
    if as_owner "$PG_CTL" -D "$PG_TMP/data" -l "$PG_TMP/postgres.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $PG_TMP -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
        start >/dev/null 2>&1; then
      export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
      log "using a throwaway PostgreSQL cluster ($bindir, OS user ${PG_OWNER:-$(id -un)}) at $DATABASE_URL, data in $PG_TMP (removed on exit)"
      return 0
    fi
  done
  log "could not start a throwaway PostgreSQL cluster; its log:"
  cat "$PG_TMP/postgres.log" >&2 2>/dev/null || true
  exit 1
}

if [[ -n "${DATABASE_URL:-}" ]]; then
  log "using PostgreSQL from DATABASE_URL: $(redact "$DATABASE_URL")"
else
  local_url="postgres://postgres@127.0.0.1:5432/postgres"
  use_local=0
  if [[ "${AGENT_SESSIONS_TEST_FORCE_THROWAWAY:-}" != "1" ]] && port_answers 5432; then
    use_local=1
    # The passwordless login must work (psql also makes the scratch database below);
    # if it does not, a throwaway cluster is the better bet.
    if ! command -v psql >/dev/null 2>&1 ||
       ! PGCONNECT_TIMEOUT=5 psql -w -X -q -At "$local_url" -c 'select 1' >/dev/null 2>&1; then
      log "a server answers on 127.0.0.1:5432 but psql cannot log in as postgres; trying a throwaway cluster"
      use_local=0
    fi
  fi

  if [[ $use_local -eq 1 ]]; then
    # sqlx::test keeps its bookkeeping (the _sqlx_test schema) in the database of the
    # URL: give it one of our own, dropped on exit, not the shared server's `postgres`.
    MASTER_DB="agent_sessions_test_$$"
    psql -w -X -q "$local_url" -c "create database $MASTER_DB" >/dev/null
    trap 'psql -w -X -q "$local_url" -c "drop database if exists $MASTER_DB with (force)" >/dev/null 2>&1 || true' EXIT
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$MASTER_DB"
    log "using the local PostgreSQL, database $MASTER_DB (dropped on exit)"
  elif bindir=$(find_pg_bindir); then
    start_throwaway "$bindir"
  else
    cat >&2 <<'EOF'
test.sh: no PostgreSQL found for the tests.
  Either point the tests at a server whose role may create databases:
      DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/postgres scripts/test.sh
  or install PostgreSQL locally (this script then starts a throwaway cluster
  on its own, or uses a server on 127.0.0.1:5432 with trust auth):
      sudo apt-get install postgresql        # Debian/Ubuntu
EOF
    exit 1
  fi
fi

status=0
# Runs one step of the suite and prints how long it took; a failure is remembered.
step() {
  local name=$1 started=$SECONDS
  shift
  "$@" || status=$?
  log "$name: $((SECONDS - started)) s"
}

step "cargo test" cargo test --locked "$@"

# The Python client's suite and the console's browser tests run against the release
# binary; skipped when cargo test was given arguments (a filtered run).
if [[ $status -eq 0 && $# -eq 0 ]]; then
  log "building the release binary for the Python client's tests"
  step "release build" cargo build --release --locked
  bin="${CARGO_TARGET_DIR:-target}/release/agent-sessions"
  export AGENT_SESSIONS_BIN="$bin"
  [[ $status -eq 0 ]] || exit "$status"
  step "Python client" env PG_URL="$DATABASE_URL" bash clients/python/scripts/ci.sh
  step "TypeScript client" bash clients/typescript/scripts/ci.sh
  step "browser tests" bash scripts/browser-tests.sh
  step "docs' blocks" python3 tests/docs/run_blocks.py
fi
exit "$status"
