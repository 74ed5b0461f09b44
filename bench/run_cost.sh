#!/usr/bin/env bash
# What one run costs the service and its database, against the raw statements: wrk makes
# one-turn sync runs, each on a fresh session, against the release binary on a scratch
# Postgres database (an instant LLM, bench/run_cost/instant_llm.py); then pgbench runs a
# run's minimal statements (bench/side_by_side/run.sql: three transactions, texts as long
# as the service's) on the same database with as many clients. CPU per run from /proc, of
# the service's process and of the database's client backends, over a window inside
# each phase. With PERF=1, a perf profile of the service during the runs is summarised by
# where its time goes.
#
#   bench/run_cost.sh [seconds] [connections] [workers]
#
# Needs psql, pgbench, wrk (installed from Debian's packages when missing) and, with
# PERF=1, perf (Debian's linux-perf).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
connections=${2:-64}
workers=${3:-16}
server=${POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
database=agent_sessions_run_cost
binary=${AGENT_SESSIONS_BIN:-target/release/agent-sessions}
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
[ -n "${AGENT_SESSIONS_BIN:-}" ] || cargo build --release --quiet
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sql() { psql "$server/$1" -qAtc "$2"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
backends() { sql postgres "select pid from pg_stat_activity where datname = '$database' and backend_type = 'client backend' and pid <> pg_backend_pid()"; }
# CPU ticks of the database's client backends now, as "pid ticks" lines.
backend_ticks() { for pid in $(backends); do echo "$pid $(ticks "$pid")"; done; }
# Ticks the backends in $1 (a backend_ticks listing) used since.
backend_delta() { awk 'NR == FNR { before[$1] = $2; next } { total += $2 - before[$1] } END { print total + 0 }' "$1" <(backend_ticks); }
commits() { sql postgres "select xact_commit from pg_stat_database where datname = '$database'"; }
per_run() { python3 -c "import os; print(f'{$1 * 1000 / os.sysconf(\"SC_CLK_TCK\") / $2:.2f}')"; }

sql postgres "drop database if exists $database with (force)"
sql postgres "create database $database"
llm_port=$(free_port)
python3 bench/run_cost/instant_llm.py "$llm_port" & pids+=($!)
port=$(free_port)
DATABASE_URL=$server/$database DATABASE_MAX_CONNECTIONS=32 RUN_WORKERS=$workers \
    LLM_BASE_URL=http://127.0.0.1:$llm_port/v1 LLM_MODEL=bench RUST_LOG=warn \
    "$binary" --listen "127.0.0.1:$port" >"$work/service.log" 2>&1 &
service=$!
pids+=($service)
base=http://127.0.0.1:$port
for _ in $(seq 100); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done

load() { wrk -t2 -c"$connections" -d"$1s" -s bench/run_cost/run.lua "$base"; }
load 3 >/dev/null
sql "$database" analyze
# The window: the middle of the phase, away from its ramps.
window=$(( seconds > 4 ? seconds - 4 : 1 ))
load "$seconds" >"$work/wrk.out" &
wrk_pid=$!
sleep 2
s0=$(ticks "$service"); backend_ticks >"$work/b0"; r0=$(sql "$database" "select count(*) from runs")
[ -n "${PERF:-}" ] && perf record -e cpu-clock -F 999 -p "$service" -o "$work/perf.data" -- sleep "$window" 2>/dev/null || sleep "$window"
s1=$(ticks "$service"); b=$(backend_delta "$work/b0"); r1=$(sql "$database" "select count(*) from runs")
wait "$wrk_pid"
runs=$(( r1 - r0 ))
service_ms=$(per_run $(( s1 - s0 )) "$runs")
database_ms=$(per_run "$b" "$runs")
rate=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' "$work/wrk.out")
errors=$(awk '/Non-2xx/ { print $5 }' "$work/wrk.out")
echo "service: $rate runs/s (${errors:-0} not 200), $runs runs in the window; CPU per run: service $service_ms ms, its Postgres backends $database_ms ms"
kill "$service"; wait "$service" 2>/dev/null || true

# The raw statements on the same database, texts as long as the service's on average.
read -r body item < <(sql "$database" "select (select avg(length(body))::int from runs), (select avg(length(body))::int from items)" | tr '|' ' ')
sql "$database" "vacuum analyze"
pgbench -n -M prepared -j 2 -c "$connections" -T "$seconds" -f bench/side_by_side/run.sql \
    -D body="$(printf 'x%.0s' $(seq "$body"))" -D item="$(printf 'x%.0s' $(seq "$item"))" \
    "$server/$database" >"$work/pgbench.out" 2>&1 &
pgbench_pid=$!
sleep 2
backend_ticks >"$work/b0"; c0=$(commits)
sleep "$window"
b=$(backend_delta "$work/b0"); c1=$(commits)
wait "$pgbench_pid"
# Three transactions a run; the statistics lag by up to a second at both ends alike.
raw_runs=$(( (c1 - c0) / 3 ))
raw_ms=$(per_run "$b" "$raw_runs")
tps=$(awk '/^tps = / { printf "%.0f", $3 }' "$work/pgbench.out")
echo "pgbench: $tps runs/s; CPU per run: Postgres $raw_ms ms"
echo "service / its database: $(python3 -c "print(f'{$service_ms / $database_ms:.2f}')"); database / raw statements: $(python3 -c "print(f'{$database_ms / $raw_ms:.2f}')")"
sql postgres "drop database $database with (force)"

if [ -n "${PERF:-}" ]; then
    perf report -i "$work/perf.data" --stdio --no-children --sort sym 2>/dev/null | python3 bench/run_cost/profile.py
fi
