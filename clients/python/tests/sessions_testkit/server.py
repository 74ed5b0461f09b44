"""Run the agent-sessions binary for tests and benchmarks.

``run_service(binary, "sqlite")`` starts it on a temporary SQLite file; ``"postgres"``
on a scratch database created from ``PG_URL`` (an admin URL such as
``postgres://postgres@127.0.0.1:5432/postgres``) and dropped afterwards. It waits for
``GET /readyz`` to answer 200, because the service runs its migrations before it is ready.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, Optional
from urllib.parse import urlsplit, urlunsplit

DEFAULT_PG_URL = "postgres://postgres@127.0.0.1:5432/postgres"


@dataclass
class Service:
    url: str
    database_url: str
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _admin(url: str, statement: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    async def run() -> None:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


@contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A new, empty Postgres database (its URL), dropped on exit."""
    name = f"as_client_{uuid.uuid4().hex[:12]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin_url, name)
    finally:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def binary_from_env() -> str:
    binary = os.environ.get("AGENT_SESSIONS_BIN")
    if not binary:
        raise RuntimeError("set AGENT_SESSIONS_BIN to the agent-sessions binary")
    return binary


@contextmanager
def run_service(
    binary: str,
    backend: str,
    *,
    pg_url: Optional[str] = None,
    llm_base_url: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
) -> Iterator[Service]:
    """The running service; stopped (SIGTERM, then SIGKILL) and cleaned up on exit."""
    with (
        database(backend, pg_url=pg_url) as database_url,
        tempfile.TemporaryDirectory(prefix="agent-sessions-") as tmp,
        start_on(binary, database_url, Path(tmp), llm_base_url, env) as running,
    ):
        yield running.service


@contextmanager
def database(backend: str, *, pg_url: Optional[str] = None) -> Iterator[str]:
    """The URL of an empty database of ``backend``, removed on exit, for one or more
    processes of the service to share one after another or at once."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="agent-sessions-db-") as tmp:
            yield f"sqlite:{tmp}/service.db"
    elif backend == "postgres":
        admin = pg_url or os.environ.get("PG_URL") or DEFAULT_PG_URL
        with scratch_database(admin) as database_url:
            yield database_url
    else:
        raise ValueError(f"unknown backend {backend!r}")


@dataclass
class Process:
    """One running process of the service; ``kill()`` ends it as a crash would."""

    service: Service
    child: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.child.kill()
        self.child.wait()


@contextmanager
def start_on(
    binary: str,
    database_url: str,
    log_dir: Path,
    llm_base_url: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
) -> Iterator[Process]:
    """A process of the service on ``database_url``, ready; stopped on exit unless it
    was killed already. Its log is a new file in ``log_dir``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = log_dir / f"service-{port}-{uuid.uuid4().hex[:8]}.log"
    child_env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "LLM_BASE_URL": llm_base_url or "http://127.0.0.1:9/v1",
        "LLM_API_KEY": "fake-key",
        "LLM_MODEL": "fake-model",
        "LLM_MAX_RETRIES": "0",
        "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
        # Nothing balances these processes: they stop listening at once.
        "SHUTDOWN_DELAY_SECS": "0",
        **(env or {}),
    }
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [binary, "--listen", f"127.0.0.1:{port}"],
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(url, process, log)
        yield Process(Service(url=url, database_url=database_url, log=log), process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service exited ({process.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the service was not ready within 60 s:\n{log.read_text()}")
