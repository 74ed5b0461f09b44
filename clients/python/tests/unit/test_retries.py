"""Retries and idempotency: what is retried, how often, with which key."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, List

import httpx
import pytest
import respx

from agent_sessions_client import (
    AgentSessionsClient,
    AgentSessionsSession,
    APIConnectionError,
    RetryPolicy,
    ServerError,
    ServiceUnavailable,
)
from sessions_testkit.mocks import BASE, FAST, body_of, item_row, problem


def created(request: httpx.Request) -> httpx.Response:
    items = body_of(request)["items"]
    return httpx.Response(201, json={"data": [item_row(i, it) for i, it in enumerate(items)]})


def keys(route: respx.Route) -> List[str]:
    return [call.request.headers["idempotency-key"] for call in route.calls]


async def test_an_append_retried_after_5xx_reuses_its_idempotency_key(
    api: respx.MockRouter,
) -> None:
    route = api.post("/v1/sessions/s1/items").mock(
        side_effect=[
            problem(503, "database_unavailable"),
            problem(500, "internal_error"),
            httpx.Response(201, json={"data": [item_row(1)]}),
        ]
    )
    session = AgentSessionsSession("s1", base_url=BASE, retry=FAST)
    await session.add_items([{"role": "user", "content": "hi"}])
    assert route.call_count == 3
    first, *rest = keys(route)
    assert uuid.UUID(first).version == 4
    assert rest == [first, first]


async def test_each_append_gets_a_fresh_key(api: respx.MockRouter) -> None:
    route = api.post("/v1/sessions/s1/items").mock(side_effect=created)
    session = AgentSessionsSession("s1", base_url=BASE, retry=FAST)
    await session.add_items([{"role": "user", "content": "a"}])
    await session.add_items([{"role": "user", "content": "a"}])
    assert len(set(keys(route))) == 2


async def test_a_large_append_is_split_in_batches_of_1000_with_own_keys(
    api: respx.MockRouter,
) -> None:
    route = api.post("/v1/sessions/s1/items").mock(side_effect=created)
    session = AgentSessionsSession("s1", base_url=BASE, retry=FAST)
    items: List[Any] = [{"role": "user", "content": str(n)} for n in range(2500)]
    await session.add_items(items)
    sent = [body_of(call.request)["items"] for call in route.calls]
    assert [len(batch) for batch in sent] == [1000, 1000, 500]
    assert [x["content"] for batch in sent for x in batch] == [str(n) for n in range(2500)]
    assert len(set(keys(route))) == 3


async def test_connection_errors_are_retried_then_reported(api: respx.MockRouter) -> None:
    route = api.get("/v1/sessions/s1").mock(side_effect=httpx.ConnectError("refused"))
    client = AgentSessionsClient(BASE, retry=FAST)
    with pytest.raises(APIConnectionError):
        await client.sessions.get("s1")
    assert route.call_count == FAST.max_retries + 1


async def test_a_read_is_retried_after_a_dropped_response(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.get("/v1/sessions/s1").mock(
        side_effect=[httpx.ReadError("reset"), httpx.Response(200, json={"id": "s1"})]
    )
    assert (await client.sessions.get("s1"))["id"] == "s1"
    assert route.call_count == 2


async def test_a_pop_is_not_repeated_once_it_may_have_reached_the_service(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.delete("/v1/sessions/s1/items/last").mock(side_effect=httpx.ReadError("reset"))
    with pytest.raises(APIConnectionError):
        await client.items.pop("s1")
    assert route.call_count == 1

    route.side_effect = [problem(500, "internal_error")]
    with pytest.raises(ServerError):
        await client.items.pop("s1")
    assert route.call_count == 2


async def test_a_pop_is_retried_when_it_never_reached_the_service(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.delete("/v1/sessions/s1/items/last").mock(
        side_effect=[
            httpx.ConnectError("refused"),
            problem(429, "rate_limited", **{"retry-after": "0"}),
            httpx.Response(200, json=item_row(1)),
        ]
    )
    popped = await client.items.pop("s1")
    assert popped is not None and popped["id"] == "id1"
    assert route.call_count == 3


async def test_retry_after_is_honoured(
    api: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: List[float] = []
    real_sleep = asyncio.sleep

    async def record(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", record)
    api.get("/v1/sessions/s1").mock(
        side_effect=[
            problem(429, "rate_limited", **{"retry-after": "2"}),
            httpx.Response(200, json={"id": "s1"}),
        ]
    )
    await AgentSessionsClient(BASE, retry=FAST).sessions.get("s1")
    assert waits == [2.0]


async def test_a_retry_after_beyond_the_policy_is_not_waited_for(
    api: respx.MockRouter,
) -> None:
    route = api.get("/v1/sessions/s1").mock(
        return_value=problem(503, "database_unavailable", **{"retry-after": "3600"})
    )
    with pytest.raises(ServiceUnavailable):
        await AgentSessionsClient(BASE, retry=FAST).sessions.get("s1")
    assert route.call_count == 1


async def test_retries_give_up_after_max_retries(api: respx.MockRouter) -> None:
    route = api.get("/v1/sessions/s1").mock(return_value=problem(502, "bad_gateway"))
    client = AgentSessionsClient(BASE, retry=RetryPolicy(max_retries=2, backoff_base=0.001))
    with pytest.raises(ServerError) as caught:
        await client.sessions.get("s1")
    assert caught.value.status == 502
    assert route.call_count == 3


def test_backoff_is_jittered_below_an_exponential_ceiling() -> None:
    policy = RetryPolicy(backoff_base=0.5, backoff_max=3.0)
    for retry, ceiling in [(0, 0.5), (1, 1.0), (2, 2.0), (5, 3.0)]:
        delays = [policy.delay(retry) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # jittered across the range, not fixed at 0


async def test_api_key_is_sent_as_bearer(api: respx.MockRouter) -> None:
    route = api.get("/v1/sessions/s1").mock(return_value=httpx.Response(200, json={"id": "s1"}))
    await AgentSessionsClient(BASE, api_key="ask_secret").sessions.get("s1")
    assert route.calls[0].request.headers["authorization"] == "Bearer ask_secret"


async def test_runs_carry_an_idempotency_key_reused_on_retry(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.post("/v1/sessions/s1/runs").mock(
        side_effect=[httpx.ReadError("reset"), httpx.Response(200, json={"id": "r1"})]
    )
    run = await client.runs.create("s1", "hi")
    assert run["id"] == "r1"
    assert len(set(keys(route))) == 1 and route.call_count == 2
