#!/usr/bin/env bash
# The service against raw Postgres, in one run on this machine: pgbench runs the
# transaction shapes of an append and a tail read against a scratch database, then wrk
# sends the same appends and reads to the release binary on that database and on
# SQLite, at the same concurrency. Prints each throughput and its ratio to pgbench's.
#
#   bench/side_by_side.sh [seconds per phase] [connections]
#
# Needs pgbench and psql (Postgres at POSTGRES_URL, default the local server) and wrk
# (installed from Debian's packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
connections=${2:-32}
export SESSIONS=1000
items=20
server=${POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
database=agent_sessions_side_by_side
here=bench/side_by_side
body="{\"role\":\"user\",\"content\":\"$(printf 'x%.0s' $(seq 170))\"}"

command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
cargo build --release --quiet
work=$(mktemp -d)
service=
trap '[ -n "$service" ] && kill "$service" 2>/dev/null; rm -rf "$work"' EXIT

# Starts the release binary on $1 and waits until it is ready.
start() {
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    DATABASE_URL=$1 LISTEN_ADDR=127.0.0.1:$port DATABASE_MAX_CONNECTIONS=${DATABASE_MAX_CONNECTIONS:-20} \
        RUST_LOG=warn target/release/agent-sessions >"$work/service.log" 2>&1 &
    service=$!
    base=http://127.0.0.1:$port
    for _ in $(seq 100); do
        curl -sf "$base/readyz" >/dev/null && return
        sleep 0.1
    done
    cat "$work/service.log" >&2
    exit 1
}

stop() {
    kill "$service"
    wait "$service" || true
    service=
}

# Peak resident memory of the service so far, in MB.
peak_rss() {
    awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$service/status"
}

# pgbench's transactions per second for the script $1.
pgbench_tps() {
    pgbench -n -M prepared -c "$connections" -j 2 -T "$seconds" \
        -D sessions="$SESSIONS" -D body="$body" -f "$here/$1" "$server/$database" 2>&1 |
        awk '/^tps = / { printf "%.0f", $3 }'
}

# wrk against the running service: prints "requests/s p50 p99"; fails on any error.
service_rate() {
    local script=$1 clients=$2 out
    out=$(wrk -t"$(( clients < 2 ? clients : 2 ))" -c"$clients" -d"${seconds}s" --latency -s "$here/$script" "$base")
    if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
        echo "$out" >&2
        exit 1
    fi
    awk '/Requests\/sec/ { rate = $2 } / 50%/ { p50 = $2 } / 99%/ { p99 = $2 }
         END { printf "%.0f %s %s", rate, p50, p99 }' <<<"$out"
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

psql -q "$server/postgres" -c "drop database if exists $database" -c "create database $database"
echo "$(date -u +%F), $(nproc) cores, $connections connections, $seconds s per phase, $SESSIONS sessions of $items items"

start "$server/$database"
python3 "$here/seed.py" "$base" "$SESSIONS" "$items"
psql -q "$server/$database" -c analyze
raw_tail=$(pgbench_tps tail.sql)
read -r pg_tail pg_tail_p50 pg_tail_p99 <<<"$(service_rate tail.lua "$connections")"
raw_append=$(pgbench_tps append.sql)
read -r pg_append pg_append_p50 pg_append_p99 <<<"$(service_rate append.lua "$connections")"
read -r _ pg_seq_append _ <<<"$(service_rate append.lua 1)"
read -r _ pg_seq_tail _ <<<"$(service_rate tail.lua 1)"
service_rate tail.lua 256 >/dev/null
pg_rss=$(peak_rss)
stop

start "sqlite:$work/bench.db"
python3 "$here/seed.py" "$base" "$SESSIONS" "$items"
read -r lite_tail lite_tail_p50 lite_tail_p99 <<<"$(service_rate tail.lua "$connections")"
read -r lite_append lite_append_p50 lite_append_p99 <<<"$(service_rate append.lua "$connections")"
read -r _ lite_seq_append _ <<<"$(service_rate append.lua 1)"
read -r _ lite_seq_tail _ <<<"$(service_rate tail.lua 1)"
service_rate tail.lua 256 >/dev/null
lite_rss=$(peak_rss)
stop

psql -q "$server/postgres" -c "drop database $database"

cat <<TABLE

| | pgbench | service on Postgres | ratio | service on SQLite | ratio |
|---|---:|---:|---:|---:|---:|
| appends/s | $raw_append | $pg_append (p50 $pg_append_p50, p99 $pg_append_p99) | $(ratio "$pg_append" "$raw_append") | $lite_append (p50 $lite_append_p50, p99 $lite_append_p99) | $(ratio "$lite_append" "$raw_append") |
| tail reads (newest 20)/s | $raw_tail | $pg_tail (p50 $pg_tail_p50, p99 $pg_tail_p99) | $(ratio "$pg_tail" "$raw_tail") | $lite_tail (p50 $lite_tail_p50, p99 $lite_tail_p99) | $(ratio "$lite_tail" "$raw_tail") |
| one client: append p50 | | $pg_seq_append | | $lite_seq_append | |
| one client: tail p50 | | $pg_seq_tail | | $lite_seq_tail | |
| peak RSS after 256 connections | | $pg_rss MB | | $lite_rss MB | |
TABLE
