#!/usr/bin/env bash
# CI of the TypeScript client (clients/typescript): the generated code must match
# openapi.yaml, then the tests run against the real service, on SQLite and on Postgres.
#
#   AGENT_SESSIONS_BIN=target/release/agent-sessions bash clients/typescript/scripts/ci.sh
#
# PG_URL (else DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres) is a
# Postgres that may create databases: the Postgres pass runs on a new one, dropped at
# the end. Installs the exact versions of package-lock.json (npm ci) into node_modules.
set -euo pipefail

: "${AGENT_SESSIONS_BIN:?set AGENT_SESSIONS_BIN to the agent-sessions binary}"
AGENT_SESSIONS_BIN="$(realpath "$AGENT_SESSIONS_BIN")"
export AGENT_SESSIONS_BIN
cd "$(dirname "${BASH_SOURCE[0]}")/.."

npm ci --no-audit --no-fund --loglevel=error
npm run --silent check-generated

echo "TypeScript client on SQLite"
npm test

admin="${PG_URL:-${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}}"
database="ts_client_$(date +%s)_$$"
psql -w -X -q "$admin" -c "create database $database"
trap 'psql -w -X -q "$admin" -c "drop database if exists $database with (force)"' EXIT
echo "TypeScript client on Postgres"
AGENT_SESSIONS_DATABASE_URL="${admin%/*}/$database" npm test
