#!/usr/bin/env bash
# POST /v1/responses on a conversation against a direct Chat Completions call and
# LiteLLM's proxy, in one run on one fake LLM (bench/openai.rs says what is measured).
#
#   bench/openai.sh [sqlite|postgres] [rounds]
#
# LiteLLM's proxy (PyPI litellm[proxy], pinned below) goes into target/litellm-venv.
# Postgres is the server at DATABASE_URL (default the local one).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/litellm-venv
if [[ ! -x $venv/bin/litellm ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "litellm[proxy]==1.108.7"
fi
export LITELLM=$PWD/$venv/bin/litellm
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
exec cargo bench --bench openai -- "$@"
