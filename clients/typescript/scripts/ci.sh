#!/usr/bin/env bash
# CI of the TypeScript client (clients/typescript): the generated code must match
# openapi.yaml, then the tests run against the real service.
#
#   AGENT_SESSIONS_BIN=target/release/agent-sessions bash clients/typescript/scripts/ci.sh
#
# Installs the exact versions of package-lock.json (npm ci) into node_modules here.
set -euo pipefail

: "${AGENT_SESSIONS_BIN:?set AGENT_SESSIONS_BIN to the agent-sessions binary}"
AGENT_SESSIONS_BIN="$(realpath "$AGENT_SESSIONS_BIN")"
export AGENT_SESSIONS_BIN
cd "$(dirname "${BASH_SOURCE[0]}")/.."

npm ci --no-audit --no-fund --loglevel=error
npm run --silent check-generated
npm test
