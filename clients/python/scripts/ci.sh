#!/usr/bin/env bash
# CI of the Python client (clients/python): lint, types, unit tests, then the live tests,
# the end-to-end Agents SDK test, the OpenAI-compatible API tests (the openai and agents
# packages against /v1), LangGraph's checkpointer conformance suite and graphs on
# AgentSessionsSaver, ADK's session-service behaviours and Runner on AgentSessionsService, Strands Agents' repository session-manager tests on
# AgentSessionsRepository, the Agents SDK's EncryptedSession tests, and the Agents SDK's
# own session test-suite against the real
# service (with AgentSessionsSession, then with OpenAIConversationsSession), on SQLite and
# on Postgres.
#
#   AGENT_SESSIONS_BIN=target/release/agent-sessions bash clients/python/scripts/ci.sh
#
# Environment:
#   AGENT_SESSIONS_BIN        the agent-sessions binary (required)
#   PG_URL                    admin URL of a Postgres that may create databases
#                             (default postgres://postgres@127.0.0.1:5432/postgres)
#   AGENT_SESSIONS_BACKENDS   which backends to test (default "sqlite postgres")
#   PYTHON                    the interpreter that makes the venv (default python3)
#   VENV                      where the venv lives (default clients/python/.venv)
#
# Everything is installed into the venv, nothing globally. The last line is the total,
# "N passed, M failed"; the exit status is non-zero when anything failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${AGENT_SESSIONS_BIN:?set AGENT_SESSIONS_BIN to the agent-sessions binary}"
AGENT_SESSIONS_BIN="$(realpath "$AGENT_SESSIONS_BIN")"
[[ -x "$AGENT_SESSIONS_BIN" ]] || { echo "not executable: $AGENT_SESSIONS_BIN" >&2; exit 2; }
export AGENT_SESSIONS_BIN
export PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
backends="${AGENT_SESSIONS_BACKENDS:-sqlite postgres}"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$here/.venv}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# --- the venv ---------------------------------------------------------------------------
if [[ ! -x "$VENV/bin/python" ]]; then
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    # Debian without python3-venv: virtualenv from PyPI, installed into the temp dir only.
    rm -rf "$VENV"
    "$PYTHON" -m pip install -q --target "$work/virtualenv" virtualenv
    PYTHONPATH="$work/virtualenv" "$PYTHON" -m virtualenv -q "$VENV"
  fi
fi
py="$VENV/bin/python"
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q "$here[agents,langgraph,adk]" -r "$here/requirements-test.txt"
# Reinstall the package itself (not editable: the tests use what `pip install` gives).
"$py" -m pip install -q --no-deps --force-reinstall "$here"
"$py" -c 'import agent_sessions_client, pathlib, sys
typed = pathlib.Path(agent_sessions_client.__file__).with_name("py.typed")
sys.exit(0 if typed.exists() else "py.typed is missing from the installed package")'

# The openai-agents version pinned by the [agents] extra is the one whose suite we run.
sdk_version="$("$py" - "$here/pyproject.toml" <<'PY'
import re, sys, tomllib
extra = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["agents"]
print(re.search(r"openai-agents==([\w.]+)", " ".join(extra)).group(1))
PY
)"

declare -a stage_names=() stage_status=()
passed=0
failed=0
skipped=0

record() {  # record NAME JUNIT_XML EXIT_CODE: add a pytest stage's counts to the totals
  local name="$1" xml="$2" code="$3" counts p f s
  if [[ -f "$xml" ]]; then
    counts="$("$py" - "$xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
n = lambda key: sum(int(s.get(key, 0)) for s in suites)
bad = n("failures") + n("errors")
print(n("tests") - bad - n("skipped"), bad, n("skipped"))
PY
)"
  else
    counts="0 1 0"  # pytest died before writing a report: count the stage as one failure
  fi
  read -r p f s <<<"$counts"
  # Exit 5 is "no tests ran": a stage that runs nothing has failed.
  if [[ "$code" -ne 0 && "$f" -eq 0 ]]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  stage_names+=("$name"); stage_status+=("$p passed, $f failed, $s skipped")
}

check() {  # check NAME COMMAND...: a lint step counts as one test
  local name="$1"; shift
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); stage_names+=("$name"); stage_status+=("ok")
  else failed=$((failed + 1)); stage_names+=("$name"); stage_status+=("FAILED"); fi
}

cd "$here"
check "ruff check" "$VENV/bin/ruff" check src tests
check "ruff format --check" "$VENV/bin/ruff" format --check src tests
check "mypy --strict" "$VENV/bin/mypy" --strict
# The Python benchmarks (bench/*.py) are held to the same rules.
for bench in "$here"/../../bench/*.py; do
  [[ -f "$bench" ]] || continue
  check "bench $(basename "$bench"): ruff + mypy --strict" bash -c '"$1/bin/ruff" check --config pyproject.toml "$2" &&
    "$1/bin/ruff" format --check --config pyproject.toml "$2" && "$1/bin/mypy" --strict "$2"' \
    _ "$VENV" "$bench"
done

echo "== unit tests"
code=0; "$py" -m pytest -p no:cacheprovider tests/unit --junitxml="$work/unit.xml" || code=$?
record "unit tests" "$work/unit.xml" "$code"

# The SDK's sdist, with its tests exactly as released.
echo "== openai-agents $sdk_version sdist"
"$py" -m pip download -q --no-binary :all: --no-deps "openai-agents==$sdk_version" -d "$work/sdist"
tar -xzf "$work/sdist/openai_agents-$sdk_version.tar.gz" -C "$work"
sdk="$work/openai_agents-$sdk_version"
suite="tests/memory/test_session.py"
encrypted="tests/extensions/memory/test_encrypt_session.py"
for file in "$suite" "$encrypted"; do
  [[ -f "$sdk/$file" ]] || { echo "no $file in the openai-agents $sdk_version sdist" >&2; exit 2; }
done

# Strands Agents' sdist, with its tests exactly as released, and a venv of its own.
strands_version="$("$py" - "$here/pyproject.toml" <<'PY'
import re, sys, tomllib
extra = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["strands"]
print(re.search(r"strands-agents==([\w.]+)", " ".join(extra)).group(1))
PY
)"
echo "== strands-agents $strands_version sdist, and the venv of Strands and AutoGen"
frameworks="$work/frameworks-venv"
"$PYTHON" -m venv "$frameworks"
strands_py="$frameworks/bin/python"
"$strands_py" -m pip install -q "$here[strands]" -r "$here/requirements-frameworks.txt"
"$py" -m pip download -q --no-binary :all: --no-deps "strands-agents==$strands_version" -d "$work/strands-sdist"
tar -xzf "$work/strands-sdist/strands_agents-$strands_version.tar.gz" -C "$work"
strands="$work/strands_agents-$strands_version"
strands_suite="tests/strands/session/test_repository_session_manager.py"
[[ -f "$strands/$strands_suite" ]] || { echo "no $strands_suite in the strands-agents sdist" >&2; exit 2; }
check "mypy --strict (Strands and AutoGen tests, in their venv)" bash -c 'cd "$1/tests" &&
  "$2/bin/mypy" --strict --python-version 3.10 --explicit-package-bases --follow-imports=silent \
    ../src/agent_sessions_client/strands.py sessions_testkit/strands_suite.py autogen_state' \
  _ "$here" "$frameworks"

for backend in $backends; do
  export AGENT_SESSIONS_BACKEND="$backend"
  echo "== live, end-to-end, OpenAI API, LangGraph and ADK tests on $backend"
  code=0
  # tests/langgraph_saver runs LangGraph's own conformance suite (every capability);
  # tests/adk_service the behaviours ADK's session-service tests check, and its Runner.
  "$py" -m pytest -p no:cacheprovider tests/live tests/e2e tests/openai_api tests/langgraph_saver \
    tests/adk_service \
    --junitxml="$work/live-$backend.xml" || code=$?
  record "live+openai+langgraph+adk ($backend)" "$work/live-$backend.xml" "$code"

  echo "== Agents SDK session suite on $backend ($suite, SQLiteSession -> AgentSessionsSession)"
  code=0
  (cd "$sdk" && PYTHONPATH="$here/tests" "$py" -m pytest -p no:cacheprovider \
      -p sessions_testkit.sdk_suite "$suite" --junitxml="$work/sdk-$backend.xml") || code=$?
  record "SDK suite ($backend)" "$work/sdk-$backend.xml" "$code"

  echo "== Agents SDK EncryptedSession suite on $backend ($encrypted, over AgentSessionsSession)"
  code=0
  (cd "$sdk" && PYTHONPATH="$here/tests" "$py" -m pytest -p no:cacheprovider \
      -p sessions_testkit.sdk_suite "$encrypted" --junitxml="$work/sdk-enc-$backend.xml") \
    || code=$?
  record "SDK encrypted ($backend)" "$work/sdk-enc-$backend.xml" "$code"

  echo "== Agents SDK session suite on $backend ($suite, SQLiteSession -> OpenAIConversationsSession)"
  code=0
  (cd "$sdk" && PYTHONPATH="$here/tests" "$py" -m pytest -p no:cacheprovider \
      -p openai_api.sdk_conversations_suite "$suite" --junitxml="$work/sdk-conv-$backend.xml") \
    || code=$?
  record "SDK conv suite ($backend)" "$work/sdk-conv-$backend.xml" "$code"

  echo "== Strands suite on $backend ($strands_suite, MockedSessionRepository -> AgentSessionsRepository)"
  code=0
  (cd "$strands" && PYTHONPATH="$here/tests" "$strands_py" -m pytest -p no:cacheprovider \
      -p sessions_testkit.strands_suite "$strands_suite" --junitxml="$work/strands-$backend.xml") \
    || code=$?
  record "Strands suite ($backend)" "$work/strands-$backend.xml" "$code"

  echo "== AutoGen on $backend (tests/autogen_state, SavedState)"
  code=0
  "$strands_py" -m pytest -p no:cacheprovider tests/autogen_state \
    --junitxml="$work/autogen-$backend.xml" || code=$?
  record "AutoGen ($backend)" "$work/autogen-$backend.xml" "$code"
done

echo
echo "== summary"
for i in "${!stage_names[@]}"; do
  printf '  %-28s %s\n' "${stage_names[$i]}" "${stage_status[$i]}"
done
if [[ "$skipped" -gt 0 ]]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[[ "$failed" -eq 0 ]]
