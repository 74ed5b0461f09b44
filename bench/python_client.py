"""Agents SDK session throughput: agent-sessions (over HTTP) against SQLAlchemySession.

One operation is what an SDK turn does to its session: ``add_items`` of a turn's two
items (the user message and the assistant's answer), then ``get_items(20)``. It is timed
through ``AgentSessionsSession`` (the Python client, talking to the release binary on a
scratch Postgres database) and through the SDK's own ``SQLAlchemySession`` (asyncpg, on
another scratch database of the same Postgres server), in the same run on the same
machine. Each is measured with one session doing operations back to back, and then with
32 sessions doing so concurrently. The script prints a table and the ratio
agent-sessions / SQLAlchemy.

Both sides get the same database budget: the service keeps its default pool of 10
Postgres connections, and the SQLAlchemy engine gets ``pool_size=10, max_overflow=0``.
Concurrent sessions share one ``AgentSessionsClient`` (one HTTP pool) on one side and
one engine on the other.

    AGENT_SESSIONS_BIN=target/release/agent-sessions python3 bench/python_client.py
    # options: --seconds 10 --concurrency 32 --repeat 3; PG_URL=postgres://… (admin URL)

If the packages it needs are not importable, the script installs them into
clients/python/.venv (the venv of clients/python/scripts/ci.sh) and runs itself again
from there. Nothing is installed globally.
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
import uuid
from typing import Any, Callable, Dict, List, Sequence

from client_venv import CLIENT, run_in_client_venv

run_in_client_venv(
    __file__,
    ["agents.extensions.memory.sqlalchemy_session", "asyncpg", "agent_sessions_client"],
    [f"{CLIENT}[agents]"],
    "PYTHON_CLIENT_BENCH_REEXEC",
)
sys.path.insert(0, str(CLIENT / "tests"))

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402

from agent_sessions_client import AgentSessionsClient, AgentSessionsSession  # noqa: E402
from sessions_testkit.server import (  # noqa: E402
    DEFAULT_PG_URL,
    binary_from_env,
    run_service,
    scratch_database,
)

Session = Any  # AgentSessionsSession or SQLAlchemySession: both are SDK sessions


def turn(n: int) -> List[Any]:
    """The two items a turn appends, shaped as the SDK stores them."""
    return [
        {"role": "user", "content": f"Question number {n}: what is the weather like today?"},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": f"Answer {n}: sunny, 21 °C.", "annotations": []}
            ],
        },
    ]


async def drive(session: Session, deadline: float, latencies: List[float]) -> int:
    """Operations on one session until ``deadline``; returns how many were done."""
    done = 0
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        await session.add_items(turn(done))
        items = await session.get_items(20)
        latencies.append(time.perf_counter() - started)
        if not items:
            raise AssertionError("get_items returned nothing after an append")
        done += 1
    return done


async def measure(sessions: Sequence[Session], seconds: float) -> Dict[str, float]:
    """Warm each session up, then run all of them concurrently for ``seconds``."""
    for session in sessions:
        await session.add_items(turn(-1))
        await session.get_items(20)
    latencies: List[float] = []
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    counts = await asyncio.gather(*(drive(s, deadline, latencies) for s in sessions))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "ops": sum(counts),
        "ops_per_s": sum(counts) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


async def bench_service(url: str, seconds: float, concurrency: int) -> Dict[int, Dict[str, float]]:
    results: Dict[int, Dict[str, float]] = {}
    async with AgentSessionsClient(url) as client:
        for n in (1, concurrency):
            sessions = [
                AgentSessionsSession(f"bench-{uuid.uuid4().hex}", client=client) for _ in range(n)
            ]
            results[n] = await measure(sessions, seconds)
    return results


async def bench_sqlalchemy(
    database_url: str, seconds: float, concurrency: int
) -> Dict[int, Dict[str, float]]:
    url = database_url.replace("postgres://", "postgresql+asyncpg://", 1)
    engine = create_async_engine(url, pool_size=10, max_overflow=0)
    results: Dict[int, Dict[str, float]] = {}
    try:
        for n in (1, concurrency):
            sessions = [
                SQLAlchemySession(f"bench-{uuid.uuid4().hex}", engine=engine, create_tables=True)
                for _ in range(n)
            ]
            results[n] = await measure(sessions, seconds)
    finally:
        await engine.dispose()
    return results


def median_of(results: List[Dict[int, Dict[str, float]]], n: int) -> Dict[str, float]:
    """The repetition whose throughput is the median (its latencies come with it)."""
    ranked = sorted(results, key=lambda r: r[n]["ops_per_s"])
    return ranked[len(ranked) // 2][n]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternated")
    args = parser.parse_args()
    pg_url = os.environ.get("PG_URL", DEFAULT_PG_URL)

    ours: List[Dict[int, Dict[str, float]]] = []
    theirs: List[Dict[int, Dict[str, float]]] = []
    load_before = os.getloadavg()[0]
    with (
        run_service(binary_from_env(), "postgres", pg_url=pg_url) as service,
        scratch_database(pg_url) as database_url,
    ):
        for r in range(args.repeat):
            # Alternate which side goes first, so that drift in the machine's load
            # does not favour one of them.
            sides: List[Callable[[], None]] = [
                lambda: ours.append(
                    asyncio.run(bench_service(service.url, args.seconds, args.concurrency))
                ),
                lambda: theirs.append(
                    asyncio.run(bench_sqlalchemy(database_url, args.seconds, args.concurrency))
                ),
            ]
            for side in sides if r % 2 == 0 else reversed(sides):
                side()

    print(
        f"add_items(2 items) + get_items(20); median of {args.repeat} runs of "
        f"{args.seconds:g} s per cell; {datetime.date.today()}; {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print()
    print(
        "| sessions | AgentSessionsSession ops/s | p50 / p99 ms "
        "| SQLAlchemySession ops/s | p50 / p99 ms | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for n in (1, args.concurrency):
        a, b = median_of(ours, n), median_of(theirs, n)
        label = "1 (sequential)" if n == 1 else f"{n} concurrent"
        print(
            f"| {label} | {a['ops_per_s']:.0f} | {a['p50_ms']:.1f} / {a['p99_ms']:.1f} "
            f"| {b['ops_per_s']:.0f} | {b['p50_ms']:.1f} / {b['p99_ms']:.1f} "
            f"| {a['ops_per_s'] / b['ops_per_s']:.2f} |"
        )
    print()
    print("ratio = AgentSessionsSession ops/s / SQLAlchemySession ops/s (above 1: faster)")
    for name, runs in (("AgentSessionsSession", ours), ("SQLAlchemySession", theirs)):
        spread = ", ".join(
            "/".join(f"{r[n]['ops_per_s']:.0f}" for n in (1, args.concurrency)) for r in runs
        )
        print(f"{name} every run (sequential/concurrent ops/s): {spread}")


if __name__ == "__main__":
    main()
