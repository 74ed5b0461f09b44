"""What an MCP tool call adds to a run over a webhook call of the same tool.

One run: the model (the fake LLM of the Python client's tests) calls ``add``, the
service makes the call, and the model answers with its result. The tool is served by one
process, the official Python MCP SDK's server of the tests (``sessions_testkit.
mcp_server``), both as an MCP tool (``/mcp``) and as a webhook (``/webhook/add``), so
the two differ only in the protocol: the webhook is one POST; the MCP tool is a session
(``initialize``, ``notifications/initialized``), ``tools/list``, ``tools/call`` and the
session's DELETE, per run. Runs alternate between the two, waited for one at a time,
against the release binary; the script prints each one's median and p90 and the
difference of the medians.

    AGENT_SESSIONS_BIN=target/release/agent-sessions python3 bench/mcp_tools.py
    # options: --runs 200 --backend sqlite|postgres; PG_URL=postgres://… (admin URL)

It runs in clients/python/.venv (the venv of clients/python/scripts/ci.sh), installing
the client's test requirements there if they are missing. Nothing is installed globally.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import sys
import time
from typing import Any, Dict, List

from client_venv import CLIENT, ROOT, run_in_client_venv

run_in_client_venv(__file__, ["mcp", "agent_sessions_client"], [str(CLIENT)], "MCP_BENCH_REEXEC")
sys.path.insert(0, str(CLIENT / "tests"))

from agent_sessions_client import AgentSessionsClient  # noqa: E402
from sessions_testkit.fake_llm import FakeLLM  # noqa: E402
from sessions_testkit.mcp_server import McpServer, running  # noqa: E402
from sessions_testkit.server import run_service  # noqa: E402

ASK = 'use add {"a": 19, "b": 23}'


def tools(server: McpServer) -> Dict[str, List[Dict[str, Any]]]:
    webhook = {
        "type": "function",
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        },
        "webhook": {"url": f"http://{server.host}/webhook/add"},
    }
    return {
        "webhook": [webhook],
        "mcp": [
            {
                "type": "mcp",
                "server_label": "calc",
                "server_url": server.url,
                "allowed_tools": ["add"],
            }
        ],
    }


async def measure(url: str, server: McpServer, runs: int) -> Dict[str, List[float]]:
    seconds: Dict[str, List[float]] = {"webhook": [], "mcp": []}
    kinds = tools(server)
    async with AgentSessionsClient(url) as client:
        for n in range(runs + 10):
            # Alternating, and the first ten of each not counted (warm-up).
            for kind in ("webhook", "mcp") if n % 2 == 0 else ("mcp", "webhook"):
                started = time.perf_counter()
                run = await client.runs.create(
                    f"bench-{kind}-{n}", ASK, agent={"tools": kinds[kind]}
                )
                took = time.perf_counter() - started
                said = run["output"][-1]["content"][0]["text"]
                assert run["status"] == "completed" and said == "tool said: 42", run
                if n >= 10:
                    seconds[kind].append(took)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=int, default=200, help="runs of each kind, after 10 of warm-up"
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    binary = os.environ.get(
        "AGENT_SESSIONS_BIN", str(ROOT / "target" / "release" / "agent-sessions")
    )
    with FakeLLM() as llm, running() as server:
        env = {"TOOL_WEBHOOK_ALLOWED_HOSTS": server.host, "RUST_LOG": "error"}
        with run_service(binary, args.backend, llm_base_url=llm.base_url, env=env) as service:
            seconds = asyncio.run(measure(service.url, server, args.runs))
    print(
        f"{datetime.date.today()}, {os.cpu_count()} cores, {platform.python_version()}, "
        f"{args.backend}, {args.runs} runs of each kind"
    )
    print("| run with one call of `add` | median ms | p90 ms |")
    print("|---|---:|---:|")
    medians = {}
    for kind, taken in seconds.items():
        ms = sorted(1000 * t for t in taken)
        medians[kind] = statistics.median(ms)
        print(f"| {kind} | {medians[kind]:.1f} | {ms[int(len(ms) * 0.9)]:.1f} |")
    print(
        f"MCP adds {medians['mcp'] - medians['webhook']:.1f} ms (median) to a run, "
        f"{medians['mcp'] / medians['webhook']:.2f}x the webhook run"
    )


if __name__ == "__main__":
    main()
