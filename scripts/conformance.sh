#!/usr/bin/env bash
# API conformance stage: prove the committed openapi.yaml from outside, against the real
# binary, on SQLite and on PostgreSQL.
#
#   scripts/conformance.sh
#
# 1. A virtual environment at .venv-conformance/ (created once, refreshed whenever
#    conformance/requirements.txt changes) holds schemathesis and openapi-python-client at
#    pinned versions; nothing is installed globally.
# 2. `cargo build --release --locked` (the build scripts/test.sh made, when it ran first:
#    the suites run against one build of each profile), then a Python client is generated from openapi.yaml into a
#    temporary directory (conformance/generate_client.py; never committed).
# 3. For each backend (SQLite in a temporary file; PostgreSQL in a fresh database created
#    on the server of DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres,
#    and dropped afterwards) the binary is started on a free port and, once /readyz
#    answers 200:
#      - schemathesis runs every operation of openapi.yaml through all its phases
#        (examples, coverage, fuzzing, stateful) with every default check, a fixed number
#        of examples per operation and a fixed seed (conformance/schemathesis.toml), then
#        the stateful phase again with a few more fixed seeds;
#      - conformance/walkthrough.py drives the generated client through a session's life.
#    SQLite runs without authentication (the embedded default); Postgres with
#    ADMIN_API_KEY set and a tenant's key from `agent-sessions keys create`.
#    The server is stopped afterwards, also when a stage fails or the script is interrupted.
#
# Every stage runs even when an earlier one failed (except what cannot run without the
# setup). The last line is `conformance: N passed, N failed`; the exit status is non-zero
# when any stage failed.
#
# Environment knobs:
#   DATABASE_URL               the PostgreSQL server to create the scratch database on
#                              (its role needs CREATEDB); unset: the local default above.
#   CONFORMANCE_BACKENDS       which backends to test (default "sqlite postgres").
#   CONFORMANCE_MAX_EXAMPLES   schemathesis examples per operation and phase (default 200).
#   CONFORMANCE_SEED           schemathesis seed (default 20261122).
#   CONFORMANCE_EXTRA_STATEFUL_SEEDS
#                              further stateful-only runs, with seeds SEED+1, SEED+2, ...
#                              (default 3; see run_schemathesis).
#   CONFORMANCE_STAGE_TIMEOUT  seconds one schemathesis run may take (default 1200: the
#                              first run, all four phases, takes 6-13 minutes here).
#   CONFORMANCE_PYTHON         the Python that creates the venv (default python3, >= 3.11).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

BACKENDS=${CONFORMANCE_BACKENDS:-sqlite postgres}
MAX_EXAMPLES=${CONFORMANCE_MAX_EXAMPLES:-200}
SEED=${CONFORMANCE_SEED:-20261122}
EXTRA_STATEFUL_SEEDS=${CONFORMANCE_EXTRA_STATEFUL_SEEDS:-3}
STAGE_TIMEOUT=${CONFORMANCE_STAGE_TIMEOUT:-1200}
PYTHON=${CONFORMANCE_PYTHON:-python3}
PG_SERVER_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
VENV=$ROOT/.venv-conformance
REQUIREMENTS=$ROOT/conformance/requirements.txt
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/agent-sessions

log() { printf 'conformance: %s\n' "$*" >&2; }
banner() { printf '\n==> conformance: %s\n' "$*"; }
# Hide a password in a URL before printing it.
redact() { printf '%s' "$1" | sed -E 's#(://[^:/@]+):[^@/]*@#\1:***@#'; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/agent-sessions-conformance.XXXXXX")
SERVER_PID=""
CHILD_PID=""  # the schemathesis run or walkthrough in progress
PG_DB=""

stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      kill -TERM "$SERVER_PID" 2>/dev/null || true
      local _
      for _ in $(seq 1 50); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.2
      done
      kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}

drop_pg_db() {
  if [[ -n "$PG_DB" ]]; then
    "$VENV/bin/python" conformance/pgdb.py drop "$PG_SERVER_URL" "$PG_DB" ||
      log "could not drop the scratch database $PG_DB"
    PG_DB=""
  fi
}

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
  if [[ -n "$CHILD_PID" ]]; then
    kill -TERM "$CHILD_PID" 2>/dev/null || true
    wait "$CHILD_PID" 2>/dev/null || true
  fi
  stop_server
  drop_pg_db
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- stage bookkeeping ------------------------------------------------------------------
PASSED=0
FAILED=0
SUMMARY=()

# stage NAME COMMAND...: runs one stage, records and reports its outcome.
stage() {
  local name=$1 started status=0
  shift
  banner "$name"
  started=$(date +%s)
  "$@" || status=$?
  local took=$(($(date +%s) - started))
  if [[ $status -eq 0 ]]; then
    PASSED=$((PASSED + 1))
    SUMMARY+=("  ok      ${took}s  $name")
  else
    FAILED=$((FAILED + 1))
    SUMMARY+=("  FAILED  ${took}s  $name (exit $status)")
    log "stage failed: $name"
  fi
  return "$status"
}

# A stage that could not run because what it needs failed.
not_run() {
  FAILED=$((FAILED + 1))
  SUMMARY+=("  FAILED  -   $1 (not run: $2)")
}

finish() {
  printf '\n==> conformance: summary\n'
  printf '%s\n' "${SUMMARY[@]}"
  printf 'conformance: %d passed, %d failed\n' "$PASSED" "$FAILED"
  [[ $FAILED -eq 0 ]]
}

# --- setup --------------------------------------------------------------------------------
setup_venv() {
  local stamp=$VENV/.requirements.sha256 want
  want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
  if [[ -x "$VENV/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "reusing $VENV ($("$VENV/bin/st" --version))"
    return 0
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
      log "$PYTHON is older than 3.11; set CONFORMANCE_PYTHON"
      return 1
    }
    "$PYTHON" -m venv "$VENV" || return 1
  fi
  rm -f "$stamp"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-virtualenv -r "$REQUIREMENTS" || return 1
  printf '%s\n' "$want" >"$stamp"
  log "installed $("$VENV/bin/st" --version) into $VENV"
}

build() {
  cargo build --release --locked || return 1
  [[ -x "$BIN" ]] || { log "no binary at $BIN"; return 1; }
}

generate_client() {
  "$VENV/bin/python" conformance/generate_client.py openapi.yaml "$TMP/client"
}

# --- one backend ------------------------------------------------------------------------
# start_server DATABASE_URL LOG: starts the binary on a free port; sets SERVER_PID and
# BASE_URL once /readyz answers 200.
start_server() {
  local url=$1 server_log=$2 addr="" _
  # Runs reach no LLM (nothing listens on the discard port), so they fail fast and
  # every run endpoint still answers as the contract says.
  DATABASE_URL=$url LISTEN_ADDR=127.0.0.1:0 LOG_FORMAT=json RUST_LOG=${RUST_LOG:-info} \
    LLM_BASE_URL=http://127.0.0.1:9/v1 LLM_MAX_RETRIES=0 LLM_MODEL=conformance-model \
    ADMIN_API_KEY=${CONFORMANCE_ADMIN_KEY:-} \
    "$BIN" >"$server_log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      log "the server exited while starting; its log:"
      tail -n 40 "$server_log" >&2
      SERVER_PID=""
      return 1
    fi
    addr=$("$VENV/bin/python" - "$server_log" <<'EOF'
import json, sys
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        entry = json.loads(line)
    except ValueError:
        continue
    if entry.get("message") == "listening" and entry.get("addr"):
        print(entry["addr"])
        break
EOF
    ) || true
    [[ -n "$addr" ]] && break
    sleep 0.2
  done
  if [[ -z "$addr" ]]; then
    log "the server did not log its address within 60s; its log:"
    tail -n 40 "$server_log" >&2
    return 1
  fi
  BASE_URL="http://$addr"
  if ! "$VENV/bin/python" - "$BASE_URL/readyz" <<'EOF'
import sys, time, urllib.request
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=5) as response:
            if response.status == 200:
                sys.exit(0)
    except Exception:
        pass
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.2)
EOF
  then
    log "$BASE_URL/readyz did not answer 200 within 60s; the server's log:"
    tail -n 40 "$server_log" >&2
    return 1
  fi
  log "server up at $BASE_URL (pid $SERVER_PID)"
}

# make_keys DATABASE_URL: turns authentication on for the next server and makes the
# conformance tenant's key; exports what the hooks and the walkthrough send.
make_keys() {
  local printed
  export CONFORMANCE_ADMIN_KEY="conformance-admin-$RANDOM$RANDOM-0123456789abcdef"
  if ! printed=$(DATABASE_URL=$1 "$BIN" keys create --tenant conformance --name schemathesis 2>&1); then
    log "agent-sessions keys create failed: $printed"
    return 1
  fi
  CONFORMANCE_TENANT_KEY=$(printf '%s\n' "$printed" | grep '^ask_')
  CONFORMANCE_TENANT_KEY_ID=$(printf '%s\n' "$printed" | sed -nE 's/^created API key ([0-9a-f-]+) .*/\1/p')
  export CONFORMANCE_TENANT_KEY CONFORMANCE_TENANT_KEY_ID
  log "authentication on; tenant key ${CONFORMANCE_TENANT_KEY:0:8}… ($CONFORMANCE_TENANT_KEY_ID)"
}

# One run of schemathesis against the server: st_run SEED [st options...]
st_run() {
  local seed=$1 status=0
  shift
  # From the repository root: the config names its hooks file relative to it.
  # Hypothesis keeps caches (unicode tables, constants of local code) in a storage
  # directory: a fresh one for each run of this script, not .hypothesis/ in the repository.
  # In the background and waited for, so that a signal to this script is acted on at once.
  HYPOTHESIS_STORAGE_DIRECTORY="$TMP/hypothesis" \
    timeout --signal=TERM --kill-after=10 "$STAGE_TIMEOUT" \
    "$VENV/bin/st" --config-file conformance/schemathesis.toml run openapi.yaml \
    --url "$BASE_URL" --seed "$seed" --max-examples "$MAX_EXAMPLES" --no-color \
    "$@" &
  CHILD_PID=$!
  wait "$CHILD_PID" || status=$?
  CHILD_PID=""
  [[ $status -eq 124 ]] && log "schemathesis took longer than ${STAGE_TIMEOUT}s"
  return "$status"
}

run_schemathesis() {
  local backend=$1 status=0 seed n
  st_run "$SEED" || status=1
  # Hypothesis abandons a stateful suite as soon as replaying a scenario against the live
  # server draws differently than the first time ("inconsistent data generation"), and
  # Schemathesis then ends the phase: how far one seed gets is luck. More seeds, each
  # fixed, make the phase's reach not hang on one draw.
  for n in $(seq 1 "$EXTRA_STATEFUL_SEEDS"); do
    seed=$((SEED + n))
    banner "schemathesis ($backend): stateful phase again, seed $seed"
    st_run "$seed" --phases stateful || status=1
  done
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    log "the server died during the schemathesis run; the end of its log:"
    tail -n 40 "$TMP/server-$backend.log" >&2
    status=1
  fi
  return "$status"
}

run_walkthrough() {
  local status=0
  PYTHONPATH="$TMP/client" "$VENV/bin/python" conformance/walkthrough.py "$BASE_URL" &
  CHILD_PID=$!
  wait "$CHILD_PID" || status=$?
  CHILD_PID=""
  return "$status"
}

test_backend() {
  local backend=$1 url
  case $backend in
    sqlite)
      mkdir -p "$TMP/sqlite"
      url="sqlite://$TMP/sqlite/agent-sessions.db"
      ;;
    postgres)
      local name="agent_sessions_conformance_$$_$RANDOM"
      if ! url=$("$VENV/bin/python" conformance/pgdb.py create "$PG_SERVER_URL" "$name"); then
        log "could not create a database on $(redact "$PG_SERVER_URL");" \
          "set DATABASE_URL to a server whose role may create databases"
        not_run "schemathesis ($backend)" "no database"
        not_run "walkthrough ($backend)" "no database"
        return 0
      fi
      PG_DB=$name
      log "scratch database $(redact "$url")"
      ;;
    *)
      log "unknown backend $backend (CONFORMANCE_BACKENDS: sqlite, postgres)"
      not_run "backend $backend" "unknown backend"
      return 0
      ;;
  esac

  # SQLite is tested as the embedded default (no authentication), Postgres as a
  # production deployment: authentication on, a tenant's key made with the command
  # line, and the admin key for /v1/api_keys (see schemathesis_hooks.before_call).
  unset CONFORMANCE_ADMIN_KEY CONFORMANCE_TENANT_KEY CONFORMANCE_TENANT_KEY_ID
  if [[ $backend == postgres ]] && ! make_keys "$url"; then
    not_run "schemathesis ($backend)" "no API key"
    not_run "walkthrough ($backend)" "no API key"
    drop_pg_db
    return 0
  fi

  banner "start the server ($backend)"
  if ! start_server "$url" "$TMP/server-$backend.log"; then
    stop_server
    not_run "schemathesis ($backend)" "the server did not start"
    not_run "walkthrough ($backend)" "the server did not start"
    drop_pg_db
    return 0
  fi
  stage "schemathesis ($backend)" run_schemathesis "$backend" || true
  if [[ $CLIENT -eq 0 ]]; then
    not_run "walkthrough ($backend)" "no generated client"
  elif ! kill -0 "$SERVER_PID" 2>/dev/null; then
    not_run "walkthrough ($backend)" "the server is down"
  else
    stage "walkthrough ($backend)" run_walkthrough || true
  fi
  stop_server
  drop_pg_db
  # A 500's cause is logged, never sent: show the server's errors next to the failures.
  local errors
  errors=$(grep -c '"level":"ERROR"' "$TMP/server-$backend.log" || true)
  if [[ ${errors:-0} -gt 0 ]]; then
    log "the server ($backend) logged $errors error(s); the last ones:"
    grep '"level":"ERROR"' "$TMP/server-$backend.log" | tail -n 20 >&2
  fi
}

# --- main -----------------------------------------------------------------------------------
log "backends: $BACKENDS; $MAX_EXAMPLES examples per operation, seed $SEED" \
  "(stateful also with the next $EXTRA_STATEFUL_SEEDS)"
if ! stage "python venv ($VENV)" setup_venv; then
  finish || exit 1
fi
if ! stage "cargo build --release --locked" build; then
  finish || exit 1
fi
CLIENT=1
stage "generate the python client" generate_client || CLIENT=0
for backend in $BACKENDS; do
  test_backend "$backend"
done
finish
