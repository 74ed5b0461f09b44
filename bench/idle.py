"""What an idle replica costs: the CPU of the service and of its Postgres backends while
nothing happens, with a few workers and with thousands.

The release binary runs on a scratch Postgres database (or a SQLite file) with
`RUN_WORKERS` workers and no requests; after a warm-up, the CPU time of its process and
of the database's backends (read from /proc, the backends found in pg_stat_activity)
is taken over a window and printed as cores.

    AGENT_SESSIONS_BIN=target/release/agent-sessions python3 bench/idle.py
    # options: --seconds 30 --workers 4 2008; PG_URL=postgres://… (an admin URL)

It needs only Python and psql.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: List[int]) -> float:
    """The user and system CPU time of `pids` so far (gone ones count nothing)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def psql(url: str, sql: str) -> str:
    return subprocess.run(
        ["psql", "-X", "-Atq", url, "-c", sql], check=True, capture_output=True, text=True
    ).stdout


@contextmanager
def scratch(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:{tmp}/idle.db"
        return
    name = f"idle_{uuid.uuid4().hex[:12]}"
    psql(PG_URL, f"create database {name}")
    try:
        yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        psql(PG_URL, f"drop database if exists {name} with (force)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def idle_cores(binary: str, backend: str, workers: int, seconds: float) -> tuple[float, float]:
    with scratch(backend) as url:
        port = free_port()
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "RUN_WORKERS": str(workers),
            "RUST_LOG": "warn",
            "LLM_BASE_URL": "http://127.0.0.1:9/v1",
        }
        process = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}"], env=env)
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.1)
            time.sleep(3)
            backends: List[int] = []
            if backend == "postgres":
                name = url.rsplit("/", 1)[1]
                rows = psql(PG_URL, f"select pid from pg_stat_activity where datname = '{name}'")
                backends = [int(pid) for pid in rows.split()]
            service0, database0 = cpu_seconds([process.pid]), cpu_seconds(backends)
            time.sleep(seconds)
            service1, database1 = cpu_seconds([process.pid]), cpu_seconds(backends)
            return (service1 - service0) / seconds, (database1 - database0) / seconds
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 2008])
    parser.add_argument("--backends", nargs="+", default=["postgres", "sqlite"])
    args = parser.parse_args()
    binary = os.environ.get(
        "AGENT_SESSIONS_BIN", str(ROOT / "target" / "release" / "agent-sessions")
    )
    print(f"idle for {args.seconds:.0f} s after 3 s of warm-up; cores of CPU", file=sys.stderr)
    print("| backend | RUN_WORKERS | service | its Postgres backends | in all |")
    print("|---|---:|---:|---:|---:|")
    for backend in args.backends:
        for workers in args.workers:
            service, database = idle_cores(binary, backend, workers, args.seconds)
            shown = f"{database:.4f}" if backend == "postgres" else "—"
            print(f"| {backend} | {workers} | {service:.4f} | {shown} | {service + database:.4f} |")


if __name__ == "__main__":
    main()
