#!/usr/bin/env bash
# The service against raw Postgres, in one run on this machine: pgbench runs the
# transaction shapes of an append and a tail read against a scratch database, then wrk
# sends the same appends and reads to the release binary on that database and on
# SQLite, at the same concurrency. Prints each throughput and its ratio to pgbench's.
#
#   bench/side_by_side.sh [seconds per phase] [connections] [items per session]
#
# Needs pgbench and psql (Postgres at POSTGRES_URL, default the local server) and wrk
# (installed from Debian's packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
connections=${2:-32}
export SESSIONS=1000
items=${3:-20}
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
    DATABASE_URL=$1 LISTEN_ADDR=127.0.0.1:$port RUST_LOG=warn target/release/agent-sessions >"$work/service.log" 2>&1 &
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

# Resident memory of the service now, and its peak so far, in MB.
rss() {
    awk '/VmRSS/ { now = $2 } /VmHWM/ { peak = $2 }
         END { printf "%.0f MB (peak %.0f MB)", now / 1024, peak / 1024 }' "/proc/$service/status"
}

# pgbench with the script $1 and $2 clients: "transactions/s mean-latency".
pgbench_run() {
    pgbench -n -M prepared -c "$2" -j "$(( $2 < 2 ? $2 : 2 ))" -T "$seconds" \
        -D sessions="$SESSIONS" -D body="$body" -f "$here/$1" "$server/$database" 2>&1 |
        awk '/^latency average/ { latency = $4 } /^tps = / { tps = $3 }
             END { printf "%.0f %.2fms", tps, latency }'
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

# Each write phase starts from a settled database: the rows of the phase before are
# vacuumed and flushed, so no phase pays for another's checkpoint.
settle() {
    psql -q "$server/$database" -c "vacuum analyze" -c checkpoint
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
}

psql -q "$server/postgres" -c "drop database if exists $database" -c "create database $database"
echo "$(date -u +%F), $(nproc) cores, $connections connections, $seconds s per phase, $SESSIONS sessions of $items items"

start "$server/$database"
python3 "$here/seed.py" "$base" "$SESSIONS" "$items"
settle
read -r raw_tail _ <<<"$(pgbench_run tail.sql "$connections")"
read -r pg_tail pg_tail_p50 pg_tail_p99 <<<"$(service_rate tail.lua "$connections")"
settle
read -r raw_append _ <<<"$(pgbench_run append.sql "$connections")"
settle
read -r _ raw_seq_append <<<"$(pgbench_run append.sql 1)"
read -r _ raw_seq_tail <<<"$(pgbench_run tail.sql 1)"
settle
read -r pg_append pg_append_p50 pg_append_p99 <<<"$(service_rate append.lua "$connections")"
settle
read -r _ pg_seq_append _ <<<"$(service_rate append.lua 1)"
read -r _ pg_seq_tail _ <<<"$(service_rate tail.lua 1)"
service_rate tail.lua 256 >/dev/null
pg_rss=$(rss)
stop

start "sqlite:$work/bench.db"
python3 "$here/seed.py" "$base" "$SESSIONS" "$items"
read -r lite_tail lite_tail_p50 lite_tail_p99 <<<"$(service_rate tail.lua "$connections")"
read -r lite_append lite_append_p50 lite_append_p99 <<<"$(service_rate append.lua "$connections")"
read -r _ lite_seq_append _ <<<"$(service_rate append.lua 1)"
read -r _ lite_seq_tail _ <<<"$(service_rate tail.lua 1)"
service_rate tail.lua 256 >/dev/null
lite_rss=$(rss)
stop

psql -q "$server/postgres" -c "drop database $database"

cat <<TABLE

| | pgbench | service on Postgres | ratio | service on SQLite | ratio |
|---|---:|---:|---:|---:|---:|
| appends/s | $raw_append | $pg_append (p50 $pg_append_p50, p99 $pg_append_p99) | $(ratio "$pg_append" "$raw_append") | $lite_append (p50 $lite_append_p50, p99 $lite_append_p99) | $(ratio "$lite_append" "$raw_append") |
| tail reads (newest 20)/s | $raw_tail | $pg_tail (p50 $pg_tail_p50, p99 $pg_tail_p99) | $(ratio "$pg_tail" "$raw_tail") | $lite_tail (p50 $lite_tail_p50, p99 $lite_tail_p99) | $(ratio "$lite_tail" "$raw_tail") |
| one client: append latency (pgbench mean, service p50) | $raw_seq_append | $pg_seq_append | | $lite_seq_append | |
| one client: tail latency (pgbench mean, service p50) | $raw_seq_tail | $pg_seq_tail | | $lite_seq_tail | |
| RSS after 256 connections | | $pg_rss | | $lite_rss | |
TABLE
