#!/usr/bin/env bash
# The browser tests (tests/browser): the console, examples/react-chat (the AI SDK's
# useChat, built with its pinned packages) and a page on another origin using the openai
# package and the TypeScript client (tests/browser/cross_origin), each against the release binary on a fresh
# SQLite file, a fake OpenAI-compatible LLM, and Debian's chromium driven by Playwright.
#
#   scripts/browser-tests.sh                 # build if needed, run the suite
#   scripts/browser-tests.sh --screenshots   # also rewrite docs/console/*.png and docs/react-chat/*.png
#   scripts/browser-tests.sh -k stream       # any other pytest arguments
#
# AGENT_SESSIONS_BIN runs another binary without building; CHROMIUM names the browser
# (default: chromium on PATH, `apt-get install -y chromium`). Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z ${AGENT_SESSIONS_BIN:-} ]]; then
  cargo build --release --quiet # a no-op when the binary is up to date
  AGENT_SESSIONS_BIN="${CARGO_TARGET_DIR:-target}/release/agent-sessions"
fi
export AGENT_SESSIONS_BIN

CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [[ -z $CHROMIUM ]]; then
  echo "chromium not found: apt-get install -y chromium, or set CHROMIUM" >&2
  exit 1
fi
export CHROMIUM

# Playwright drives the system chromium; its own browser download is never needed.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
venv=${BROWSER_TESTS_VENV:-.venv-browser}
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/browser/requirements.txt

# The example's production build, from the exact versions of its package-lock.json.
(cd examples/react-chat && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build >/dev/null)
# The cross-origin page: the TypeScript client built, then bundled with the openai package.
(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
(cd tests/browser/cross_origin && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build >/dev/null)

exec "$venv/bin/python" -m pytest tests/browser -p no:cacheprovider -ra "$@"
