"""AgentSessionsSession against a mocked service: the SDK protocol's edge cases."""

from __future__ import annotations

import asyncio
from typing import Any, List

import httpx
import pytest
import respx
from agents.memory import Session, SessionABC, SessionSettings

from agent_sessions_client import (
    AgentSessionsSession,
    InvalidRequest,
    SyncAgentSessionsSession,
)
from sessions_testkit.mocks import BASE, FAST, item_row, page, problem


def session(**options: Any) -> AgentSessionsSession:
    return AgentSessionsSession("s1", base_url=BASE, retry=FAST, **options)


def params(route: respx.Route, n: int = 0) -> dict[str, str]:
    return dict(route.calls[n].request.url.params)


def test_it_is_an_sdk_session() -> None:
    s = session()
    assert isinstance(s, SessionABC)
    assert isinstance(s, Session)
    assert isinstance(s.session_settings, SessionSettings)
    assert s.session_settings.limit is None


async def test_get_items_with_limit_reads_newest_first_and_reverses(
    api: respx.MockRouter,
) -> None:
    route = api.get("/v1/sessions/s1/items").mock(
        return_value=page([item_row(5), item_row(4), item_row(3)], has_more=True)
    )
    items = await session().get_items(limit=3)
    assert [i["content"] for i in items] == ["m3", "m4", "m5"]  # type: ignore[typeddict-item]
    assert params(route) == {"order": "desc", "limit": "3"}


async def test_get_items_without_limit_pages_through_everything(api: respx.MockRouter) -> None:
    route = api.get("/v1/sessions/s1/items").mock(
        side_effect=[
            page([item_row(1), item_row(2)], has_more=True),
            page([item_row(3)], has_more=False),
        ]
    )
    items = await session().get_items()
    assert [i["content"] for i in items] == ["m1", "m2", "m3"]  # type: ignore[typeddict-item]
    assert params(route, 0) == {"order": "asc", "limit": "1000"}
    assert params(route, 1) == {"order": "asc", "limit": "1000", "after": "id2"}


async def test_a_limit_above_a_page_reads_several_pages_backwards(
    api: respx.MockRouter,
) -> None:
    newest = [item_row(n) for n in range(1500, 500, -1)]
    older = [item_row(n) for n in range(500, 0, -1)]
    route = api.get("/v1/sessions/s1/items").mock(
        side_effect=[page(newest, has_more=True), page(older, has_more=False)]
    )
    items = await session().get_items(limit=1500)
    assert [i["content"] for i in items] == [f"m{n}" for n in range(1, 1501)]  # type: ignore[typeddict-item]
    assert params(route, 0) == {"order": "desc", "limit": "1000"}
    assert params(route, 1) == {"order": "desc", "limit": "500", "after": "id501"}


async def test_session_settings_limit_is_the_default_and_an_argument_wins(
    api: respx.MockRouter,
) -> None:
    route = api.get("/v1/sessions/s1/items").mock(return_value=page([item_row(1)]))
    s = session(session_settings=SessionSettings(limit=7))
    await s.get_items()
    await s.get_items(limit=2)
    await session(session_settings={"limit": 4}).get_items()
    assert [params(route, n)["limit"] for n in range(3)] == ["7", "2", "4"]


async def test_limit_zero_reads_nothing_and_a_negative_limit_reads_all(
    api: respx.MockRouter,
) -> None:
    route = api.get("/v1/sessions/s1/items").mock(return_value=page([item_row(1)]))
    assert await session().get_items(limit=0) == []
    assert route.call_count == 0
    assert len(await session().get_items(limit=-1)) == 1
    assert params(route)["order"] == "asc"


def test_unknown_settings_are_refused_like_the_sdk_does() -> None:
    with pytest.raises(TypeError, match="limitt"):
        session(session_settings={"limitt": 1})


async def test_a_session_nobody_wrote_to_reads_as_empty(api: respx.MockRouter) -> None:
    api.get("/v1/sessions/s1/items").mock(return_value=problem(404, "session_not_found"))
    assert await session().get_items() == []
    assert await session().get_items(limit=5) == []


async def test_a_vanished_cursor_restarts_the_read(api: respx.MockRouter) -> None:
    route = api.get("/v1/sessions/s1/items").mock(
        side_effect=[
            page([item_row(1)], has_more=True),
            problem(400, "invalid_request", "after: no row with id `id1` in this listing"),
            page([item_row(2)]),
        ]
    )
    items = await session().get_items()
    assert [i["content"] for i in items] == ["m2"]  # type: ignore[typeddict-item]
    assert route.call_count == 3


async def test_other_bad_requests_are_raised(api: respx.MockRouter) -> None:
    api.get("/v1/sessions/s1/items").mock(
        return_value=problem(400, "invalid_request", "limit: must be 1 to 1000")
    )
    with pytest.raises(InvalidRequest):
        await session().get_items(limit=5)


async def test_pop_returns_the_item_or_none(api: respx.MockRouter) -> None:
    route = api.delete("/v1/sessions/s1/items/last").mock(
        side_effect=[
            httpx.Response(200, json=item_row(9, {"role": "assistant", "content": "x"})),
            problem(404, "session_empty"),
            problem(404, "session_not_found"),
        ]
    )
    s = session()
    assert await s.pop_item() == {"role": "assistant", "content": "x"}
    assert await s.pop_item() is None
    assert await s.pop_item() is None
    assert route.call_count == 3


async def test_clear_of_a_missing_session_succeeds(api: respx.MockRouter) -> None:
    route = api.delete("/v1/sessions/s1/items").mock(
        side_effect=[httpx.Response(204), problem(404, "session_not_found")]
    )
    await session().clear_session()
    await session().clear_session()
    assert route.call_count == 2


async def test_empty_add_sends_nothing(api: respx.MockRouter) -> None:
    route = api.post("/v1/sessions/s1/items")
    await session().add_items([])
    assert route.call_count == 0


async def test_closed_session_refuses_every_operation() -> None:
    s = session()
    s.close()
    for operation in (
        s.get_items(),
        s.add_items([]),
        s.add_items([{"role": "user", "content": "x"}]),
        s.pop_item(),
        s.clear_session(),
    ):
        with pytest.raises(RuntimeError, match="is closed"):
            await operation


async def test_a_cancelled_append_still_completes_before_the_cancellation(
    api: respx.MockRouter,
) -> None:
    finished = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.05)
        finished.set()
        return httpx.Response(201, json={"data": [item_row(1)]})

    api.post("/v1/sessions/s1/items").mock(side_effect=slow)
    task = asyncio.create_task(session().add_items([{"role": "user", "content": "x"}]))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set(), "the cancellation was raised before the append's outcome was known"


def test_the_sync_wrapper_blocks_until_answered(api: respx.MockRouter) -> None:
    api.post("/v1/sessions/s1/items").mock(
        return_value=httpx.Response(201, json={"data": [item_row(1)]})
    )
    api.get("/v1/sessions/s1/items").mock(return_value=page([item_row(2), item_row(1)]))
    api.delete("/v1/sessions/s1/items/last").mock(return_value=problem(404, "session_empty"))
    with SyncAgentSessionsSession("s1", base_url=BASE, retry=FAST) as s:
        s.add_items([{"role": "user", "content": "m1"}])
        got: List[Any] = s.get_items(limit=2)
        assert [i["content"] for i in got] == ["m1", "m2"]
        assert s.pop_item() is None
        assert s.session_id == "s1"
