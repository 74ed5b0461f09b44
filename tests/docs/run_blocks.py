"""Runs the `sh` and `python` blocks of README.md and docs/*.md against a fresh server.

Each block runs in one bash process against the release binary on a new SQLite file
(`localhost:8080` in the text is rewritten to the server's address). Every curl reports
its status code; a command followed by a `# → NNN` comment must answer NNN, any other
curl must answer 2xx. Blocks that start another process or need what a test cannot have
(a Docker engine, the test runner itself) are listed with the reason and not run. Runs
go to a fake LLM: it calls the first tool a request offers, answers a tool's output and
echoes the rest at once, so a walk that passes holds whatever the model's speed.
A `python` block runs with `DOCS_PYTHON` (default: the Python client's venv, which
`clients/python/scripts/ci.sh` makes with the `openai` and `openai-agents` packages) and
passes when it exits 0.

    AGENT_SESSIONS_BIN=target/release/agent-sessions python3 tests/docs/run_blocks.py
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A block containing one of these is not run, for the reason given.
NOT_RUN = [
    ("cargo run", "starts the service: this test runs that binary itself"),
    ("scripts/test.sh", "the test command, which runs this test"),
    ("scripts/conformance.sh", "a CI stage of its own (.ci/run)"),
    ("docker compose", "needs a Docker engine; `docker-compose config` checks the file"),
    ("bench/", "a benchmark, not a test"),
    ("ADMIN_API_KEY", "needs authentication on; tests/api/auth makes these calls"),
]

EXPECT = re.compile(r"#\s*→\s*(\d{3})")


def blocks(language: str = "sh") -> list[tuple[str, int, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = path.read_text().split("\n")
        start = None
        for number, line in enumerate(lines, 1):
            if start is None and line.strip() == f"```{language}":
                start = number
            elif start is not None and line.strip() == "```":
                found.append((str(path.relative_to(ROOT)), start, "\n".join(lines[start:number - 1])))
                start = None
    return found


def run_python(addr: str, block: str) -> list[str]:
    """Runs one Python block; returns its failure, if it failed."""
    python = os.environ.get("DOCS_PYTHON", str(ROOT / "clients/python/.venv/bin/python"))
    code = block.replace("localhost:8080", addr).replace("127.0.0.1:8080", addr)
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return [f"exit {done.returncode}\n{done.stderr[-3000:]}"]
    return []


def complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def commands(block: str) -> list[tuple[str, int | None]]:
    """The block's commands, each with the status its text expects."""
    found: list[tuple[str, int | None]] = []
    pending = ""
    for line in block.split("\n"):
        if not pending and line.lstrip().startswith("#"):
            match = EXPECT.search(line)
            if match and found and found[-1][1] is None:
                found[-1] = (found[-1][0], int(match.group(1)))
            continue
        if not pending and not line.strip():
            continue
        pending = f"{pending}\n{line}" if pending else line
        if complete(pending):
            match = EXPECT.search(pending.split("\n")[-1])
            found.append((pending, int(match.group(1)) if match else None))
            pending = ""
    return found


def docs_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The fake LLM's answer for the docs' walkthroughs."""
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"role": "assistant", "content": f"The tool says: {last.get('content')}"}
    if body.get("tools"):
        name = body["tools"][0]["function"]["name"]
        call = {"id": "call_7Qx", "type": "function",
                "function": {"name": name, "arguments": json.dumps({"city": "Oslo"})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    said = str(last.get("content", ""))
    return {"role": "assistant", "content": f"echo: {said}"}


# The host the docs' webhooks name; the fake LLM's own host, which answers `/tool`, is
# put in its place.
HOOKS_HOST = "hooks.internal:9000"


def start_server(workdir: str, llm_url: str, hooks: str) -> tuple[subprocess.Popen[str], str]:
    env = dict(
        os.environ,
        TOOL_WEBHOOK_ALLOWED_HOSTS=hooks,
        WEBHOOK_SIGNING_SECRET="whsec_ZG9jcyBzaWduaW5nIHNlY3JldA==",
        LLM_BASE_URL=llm_url,
        LLM_MODEL="gpt-4o-mini",
        DATABASE_URL=f"sqlite://{workdir}/docs.db",
        LISTEN_ADDR="127.0.0.1:0",
        LOG_FORMAT="json",
        RUST_LOG="info",
    )
    server = subprocess.Popen(
        [os.environ["AGENT_SESSIONS_BIN"]], env=env, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    for line in server.stdout:
        event = json.loads(line)
        if event.get("message") == "listening":
            return server, event["addr"]
    raise SystemExit("the server stopped before it listened")


def run_block(addr: str, hooks: str, block: str) -> list[str]:
    """Runs one block; returns what did not answer as the text says."""
    cmds = commands(block)
    script = ["curl() { command curl \"$@\" -w '%{stderr}@@status %{http_code}\\n'; }"]
    for index, (command, _) in enumerate(cmds):
        command = command.replace("localhost:8080", addr).replace("127.0.0.1:8080", addr)
        command = command.replace(HOOKS_HOST, hooks)
        script.append(f"echo '@@command {index}' >&2")
        script.append(command)
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=120
    )
    statuses: dict[int, list[int]] = {}
    current = -1
    for line in done.stderr.split("\n"):
        if line.startswith("@@command "):
            current = int(line.split()[1])
            statuses[current] = []
        elif line.startswith("@@status "):
            statuses.setdefault(current, []).append(int(line.split()[1]))
    problems = []
    for index, (command, expected) in enumerate(cmds):
        got = statuses.get(index, [])
        first = command.split("\n")[0]
        if "curl" not in command:
            continue
        if not got:
            problems.append(f"no answer to: {first}\n{done.stderr[-2000:]}")
        elif expected is not None and got[-1] != expected:
            problems.append(f"{first}\n    answered {got[-1]}, the text says {expected}")
        elif expected is None and not all(200 <= s < 300 for s in got):
            problems.append(f"{first}\n    answered {got}, not 2xx")
    return problems


def main() -> int:
    failed = ran = 0
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    import fake_llm

    fake_llm.reply_for = docs_reply
    with tempfile.TemporaryDirectory() as workdir, fake_llm.FakeLLM() as llm:
        server, addr = start_server(workdir, llm.base_url, llm.host)
        try:
            for path, line, block in blocks():
                reason = next((why for needle, why in NOT_RUN if needle in block), None)
                if reason:
                    print(f"not run  {path}:{line}: {reason}")
                    continue
                ran += 1
                problems = run_block(addr, llm.host, block)
                status = "FAILED" if problems else "ok"
                print(f"{status:<8} {path}:{line} ({len(commands(block))} commands)")
                for problem in problems:
                    print(f"    {problem}")
                failed += bool(problems)
            for path, line, block in blocks("python"):
                ran += 1
                problems = run_python(addr, block)
                print(f"{'FAILED' if problems else 'ok':<8} {path}:{line} (python)")
                for problem in problems:
                    print(f"    {problem}")
                failed += bool(problems)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"{ran - failed} blocks passed, {failed} failed")
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
