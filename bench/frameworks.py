"""Framework adapters beside the frameworks' own Postgres stores, per call, in one run.

- Google ADK: ``append_event`` of an event with a session and a ``user:`` state delta,
  through ``AgentSessionsService`` (HTTP to the release binary on a scratch Postgres
  database) and through ADK's ``DatabaseSessionService`` (asyncpg, on another scratch
  database of the same Postgres server).
- LangGraph: a 20-step graph's checkpoints, each step a ``put`` that changes one channel
  of five (with the blobs of the channels it changed) and a ``get_tuple`` of the newest,
  through ``AgentSessionsSaver`` and through ``langgraph-checkpoint-postgres``'s
  ``AsyncPostgresSaver`` (psycopg), likewise.

Each side runs one call at a time; both sides are measured alternately, ``--repeat``
times, and the medians and their ratio (agent-sessions / framework store) are printed.
The frameworks' stores hold a direct database connection; ours crosses HTTP.

    AGENT_SESSIONS_BIN=target/release/agent-sessions python3 bench/frameworks.py
    # options: --calls 300 --repeat 3; PG_URL=postgres://… (admin URL)

Runs in clients/python/.venv (the venv of clients/python/scripts/ci.sh) with the
``adk`` and ``langgraph`` extras and, for the reference side,
``langgraph-checkpoint-postgres==3.2.0`` and ``psycopg[binary]==3.3.2``, which it
installs there when they are missing. Nothing is installed globally.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from typing import Any, Callable, Coroutine, Dict, List

from client_venv import CLIENT, run_in_client_venv

REFERENCE = ["langgraph-checkpoint-postgres==3.2.0", "psycopg[binary]==3.3.2"]

run_in_client_venv(
    __file__,
    ["google.adk", "langgraph.checkpoint.postgres.aio", "agent_sessions_client.adk"],
    [f"{CLIENT}[adk,langgraph]", *REFERENCE],
    "FRAMEWORKS_BENCH_REEXEC",
)
sys.path.insert(0, str(CLIENT / "tests"))

from google.adk.events.event import Event  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402
from google.adk.sessions.base_session_service import BaseSessionService  # noqa: E402
from google.adk.sessions.database_session_service import DatabaseSessionService  # noqa: E402
from google.genai import types  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint  # noqa: E402
from langgraph.checkpoint.base.id import uuid6  # noqa: E402
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: E402

from agent_sessions_client import AgentSessionsClient  # noqa: E402
from agent_sessions_client.adk import AgentSessionsService  # noqa: E402
from agent_sessions_client.langgraph import AgentSessionsSaver  # noqa: E402
from sessions_testkit.server import (  # noqa: E402
    DEFAULT_PG_URL,
    binary_from_env,
    run_service,
    scratch_database,
)

Timed = Callable[[int], Coroutine[Any, Any, List[float]]]


async def adk_appends(service: BaseSessionService, calls: int) -> List[float]:
    """Seconds per ``append_event``, one session, ``calls`` events."""
    session = await service.create_session(app_name="bench", user_id="u", state={"turn": 0})
    took: List[float] = []
    for n in range(calls):
        event = Event(
            invocation_id=f"inv-{n}",
            author="assistant" if n % 2 else "user",
            content=types.Content(role="user", parts=[types.Part(text=f"message number {n}")]),
            actions=EventActions(state_delta={"turn": n, "user:last_seen": n}),
        )
        started = time.perf_counter()
        await service.append_event(session, event)
        took.append(time.perf_counter() - started)
    return took


async def graph_steps(saver: BaseCheckpointSaver[Any], calls: int) -> List[float]:
    """Seconds per step of 20-step graphs: a put changing one channel of five, then a
    get_tuple of the newest checkpoint."""
    took: List[float] = []
    while len(took) < calls:
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        channels = {f"channel{c}": f"value {c}" for c in range(5)}
        versions: Dict[str, Any] = {}
        for step in range(20):
            changed = f"channel{step % 5}"
            channels[changed] = f"value at step {step}: " + "x" * 200
            versions[changed] = saver.get_next_version(versions.get(changed), None)
            checkpoint = {
                **checkpoint,
                # Ids that sort in the order they are made, as LangGraph's do.
                "id": str(uuid6(clock_seq=step)),
                "channel_values": dict(channels),
                "channel_versions": dict(versions),
            }
            started = time.perf_counter()
            config = await saver.aput(
                config, checkpoint, {"source": "loop", "step": step}, {changed: versions[changed]}
            )
            newest = await saver.aget_tuple({"configurable": {**config["configurable"]}})
            took.append(time.perf_counter() - started)
            assert newest is not None and newest.checkpoint["id"] == checkpoint["id"]
    return took[:calls]


async def ours_adk(url: str, calls: int) -> List[float]:
    async with AgentSessionsClient(url) as client, AgentSessionsService(client) as service:
        return await adk_appends(service, calls)


async def theirs_adk(database_url: str, calls: int) -> List[float]:
    url = database_url.replace("postgres://", "postgresql+asyncpg://", 1)
    async with DatabaseSessionService(db_url=url) as service:
        return await adk_appends(service, calls)


async def ours_graph(url: str, calls: int) -> List[float]:
    async with AgentSessionsClient(url) as client:
        return await graph_steps(AgentSessionsSaver(client), calls)


async def theirs_graph(database_url: str, calls: int) -> List[float]:
    async with AsyncPostgresSaver.from_conn_string(database_url) as saver:
        await saver.setup()
        return await graph_steps(saver, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternated")
    args = parser.parse_args()
    pg_url = os.environ.get("PG_URL", DEFAULT_PG_URL)
    medians: Dict[str, List[float]] = {}
    with (
        run_service(binary_from_env(), "postgres", pg_url=pg_url) as service,
        scratch_database(pg_url) as database_url,
    ):
        runs: List[tuple[str, Timed]] = [
            ("adk append_event: agent-sessions", lambda n: ours_adk(service.url, n)),
            ("adk append_event: DatabaseSessionService", lambda n: theirs_adk(database_url, n)),
            ("langgraph put+get_tuple: agent-sessions", lambda n: ours_graph(service.url, n)),
            (
                "langgraph put+get_tuple: AsyncPostgresSaver",
                lambda n: theirs_graph(database_url, n),
            ),
        ]
        for r in range(args.repeat):
            # Alternate which side of each pair goes first.
            order = runs if r % 2 == 0 else [runs[1], runs[0], runs[3], runs[2]]
            for name, run in order:
                took = asyncio.run(run(args.calls))
                medians.setdefault(name, []).append(statistics.median(took) * 1e6)
    print(f"{'per call (median of runs, µs)':<48}{'median':>10}{'runs':>30}")
    for name, values in medians.items():
        runs_text = ", ".join(f"{v:.0f}" for v in values)
        print(f"{name:<48}{statistics.median(values):>10.0f}{runs_text:>30}")
    for framework, ours, theirs in (
        ("adk", "adk append_event: agent-sessions", "adk append_event: DatabaseSessionService"),
        (
            "langgraph",
            "langgraph put+get_tuple: agent-sessions",
            "langgraph put+get_tuple: AsyncPostgresSaver",
        ),
    ):
        ratio = statistics.median(medians[ours]) / statistics.median(medians[theirs])
        print(f"{framework}: agent-sessions / framework store = {ratio:.2f}x per call")


if __name__ == "__main__":
    main()
