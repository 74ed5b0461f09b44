"""HTTP plumbing: one ``httpx.AsyncClient`` per event loop, retries, error mapping.

Why one client per loop: an ``httpx.AsyncClient``'s connections belong to the event loop
that opened them, but the Agents SDK drives sessions from several loops (``Runner.run_sync``
and ``asyncio.run`` in worker threads each make their own). Keeping a pool per loop lets one
session object serve all of them without "bound to a different event loop" errors.
"""

from __future__ import annotations

import asyncio
import random
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Mapping, Sequence, Tuple, Union

import httpx

from ._version import __version__
from .errors import APIConnectionError, error_from_response, parse_retry_after

QueryParams = Sequence[Tuple[str, Union[str, int]]]

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
"""Ordinary calls: the service answers them in milliseconds, 30 s means something broke."""

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry.

    ``max_retries`` retries follow the first attempt, each after a full-jitter exponential
    backoff (a random wait below ``backoff_base * 2**n``, capped at ``backoff_max``) so that
    many clients recovering from one outage do not retry in lockstep. A ``Retry-After``
    from the service is honoured up to ``max_retry_after``; a longer one is not waited for.
    """

    max_retries: int = 3
    backoff_base: float = 0.25
    backoff_max: float = 8.0
    max_retry_after: float = 30.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.backoff_max, self.backoff_base * (2**retry))
        return random.uniform(0, ceiling)


@dataclass
class Call:
    """One API request, described before it is sent so that it can be sent again.

    ``replay_safe`` says whether the request may be repeated after the service might have
    acted on it (a GET, a PATCH, or a POST carrying an ``Idempotency-Key``). Other requests
    (a pop, say) are retried only when they certainly never reached the service: a refused
    connection, or a 429 that the service sends before doing anything.
    """

    method: str
    path: str
    params: QueryParams = ()
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    replay_safe: bool = False
    timeout: httpx.Timeout | None = None
    long: bool = False
    """Holds its connection for long (an event stream, a wait for a run): such calls get
    a pool of their own, so they never queue the quick calls behind them."""


DEFAULT_RETRY = RetryPolicy()

_UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def _retry_delay(
    call: Call,
    policy: RetryPolicy,
    retry: int,
    response: httpx.Response | None = None,
    error: Exception | None = None,
) -> float | None:
    """The wait before retrying ``call``, or None when it must not be retried."""
    if retry >= policy.max_retries:
        return None
    if error is not None:
        if isinstance(error, _UNSENT_ERRORS) or (
            call.replay_safe and isinstance(error, httpx.TransportError)
        ):
            return policy.delay(retry)
        return None
    assert response is not None
    status = response.status_code
    if status == 429 or (call.replay_safe and status in RETRYABLE_STATUSES):
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if retry_after is not None and retry_after > policy.max_retry_after:
            return None
        return policy.delay(retry, retry_after)
    return None


class Transport:
    """Sends ``Call``s with retries and turns error responses into exceptions."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        timeout: float | httpx.Timeout,
        retry: RetryPolicy,
        http_client: httpx.AsyncClient | None,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 8,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.retry = retry
        self._headers = {"user-agent": f"agent-sessions-client/{__version__}"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._headers.update(headers or {})
        self._given = http_client
        self._max_connections = max_connections
        self._clients: dict[tuple[asyncio.AbstractEventLoop, bool], httpx.AsyncClient] = {}
        self._lock = threading.Lock()
        self._closing: set[asyncio.Future[Any]] = set()

    def _client(self, long: bool = False) -> httpx.AsyncClient:
        """The running loop's client for quick or for ``long`` calls, made on first use.

        The quick pool is small on purpose: httpcore scans every pooled connection on
        each request, so 32 connections cost more CPU than they save in waiting (measured
        with 32 concurrent sessions: 8 connections gave about 1.5x the throughput of 32).
        """
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get((loop, long))
            if client is None:
                # Pools of loops that have since closed are dead weight: drop them here,
                # where a new loop shows up, since nothing tells us when a loop ends.
                for key in [key for key in self._clients if key[0].is_closed()]:
                    del self._clients[key]
                size = 1000 if long else self._max_connections
                client = httpx.AsyncClient(
                    timeout=self.timeout,
                    limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                )
                self._clients[(loop, long)] = client
            return client

    def _request(self, call: Call) -> httpx.Request:
        client = self._client(call.long)
        headers = {**self._headers, **call.headers}
        timeout = call.timeout or self.timeout
        return client.build_request(
            call.method,
            self.base_url + call.path,
            params=list(call.params) or None,
            json=call.json,
            headers=headers,
            timeout=timeout,
        )

    async def send(self, call: Call) -> httpx.Response:
        """Send ``call``; return the successful response or raise the mapped error."""
        async with self.open(call, stream=False) as response:
            return response

    @asynccontextmanager
    async def open(self, call: Call, *, stream: bool = True) -> AsyncIterator[httpx.Response]:
        """Send ``call`` and yield the successful response (streamed when ``stream``)."""
        retry = 0
        while True:
            try:
                response = await self._client(call.long).send(self._request(call), stream=stream)
            except httpx.TransportError as error:
                delay = _retry_delay(call, self.retry, retry, error=error)
                if delay is None:
                    raise APIConnectionError(f"{call.method} {call.path}: {error!r}") from error
                await asyncio.sleep(delay)
                retry += 1
                continue
            try:
                if response.status_code < 400:
                    yield response
                    return
                delay = _retry_delay(call, self.retry, retry, response=response)
                if delay is None:
                    await response.aread()
                    raise error_from_response(response)
            finally:
                await response.aclose()
            await asyncio.sleep(delay)
            retry += 1

    async def aclose(self) -> None:
        """Close the pool of the running loop; the others are closed as well as can be."""
        self.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def close(self) -> None:
        """Close every pool without awaiting: usable from synchronous code.

        A pool whose loop runs in this thread is closed by a task on that loop; one whose
        loop runs in another thread is handed to it; one whose loop is idle or closed
        cannot be awaited from here and is left to the garbage collector. A client passed
        in by the caller is theirs to close.
        """
        with self._lock:
            clients, self._clients = self._clients, {}
        for (loop, _), client in clients.items():
            if loop.is_closed():
                continue
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is running:
                task = loop.create_task(client.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)


__all__ = ["DEFAULT_RETRY", "DEFAULT_TIMEOUT", "Call", "RetryPolicy", "Transport"]
