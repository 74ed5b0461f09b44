"""The client against the real service (``AGENT_SESSIONS_BIN``), runs on the fake LLM."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, AsyncIterator, List

import pytest

from agent_sessions_client import (
    AgentSessionsClient,
    AgentSessionsSession,
    Conflict,
    IdempotencyKeyReused,
    InvalidRequest,
    ItemCreated,
    MessageDelta,
    NotFound,
    RetryPolicy,
    RunStatusEvent,
)
from sessions_testkit.fake_llm import SLOW_WORDS
from sessions_testkit.proxy import CuttingProxy
from sessions_testkit.server import Service

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def test_sessions_crud_and_filtered_listing(client: AgentSessionsClient) -> None:
    tag = uuid.uuid4().hex
    ids = [
        (await client.sessions.create(metadata={"tag": tag, "n": str(n)}))["id"] for n in range(5)
    ]
    listed = [s["id"] async for s in client.sessions.list(metadata={"tag": tag}, page_size=2)]
    assert listed == list(reversed(ids))  # newest first, across three pages
    only = [s["id"] async for s in client.sessions.list(metadata={"tag": tag, "n": "3"})]
    assert only == [ids[3]]

    updated = await client.sessions.update(ids[0], metadata={"n": None, "extra": "x"})
    assert updated["metadata"] == {"tag": tag, "extra": "x"}
    retained = await client.sessions.update(
        ids[1], expires_after={"anchor": "created_at", "seconds": 3600}
    )
    assert retained["expires_after"] == {"anchor": "created_at", "seconds": 3600}
    assert retained["expires_at"] is not None
    kept = await client.sessions.update(ids[1], expires_after=None)
    assert kept["expires_after"] is None and kept["expires_at"] is None
    with pytest.raises(Conflict) as exists:
        await client.sessions.create(id=ids[0])
    assert exists.value.code == "session_exists"

    await client.sessions.delete(ids[0])
    with pytest.raises(NotFound) as missing:
        await client.sessions.get(ids[0])
    assert missing.value.code == "session_not_found"
    assert missing.value.request_id  # from x-request-id


async def test_session_protocol_round_trip(service: Service, sid: str) -> None:
    session = AgentSessionsSession(sid, base_url=service.url)
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()

    items: List[Any] = [{"role": "user", "content": f"m{n}", "n": n} for n in range(2500)]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(20) == items[-20:]
    assert await session.get_items(1200) == items[-1200:]
    assert await session.pop_item() == items[-1]
    assert (await session.get_items(1))[0] == items[-2]
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.aclose()


async def test_idempotent_appends(client: AgentSessionsClient, sid: str) -> None:
    key = uuid.uuid4().hex
    batch = [{"role": "user", "content": "once"}]
    first = await client.items.add(sid, batch, idempotency_key=key)
    again = await client.items.add(sid, batch, idempotency_key=key)
    assert [i["id"] for i in again] == [i["id"] for i in first]
    assert len([i async for i in client.items.list(sid)]) == 1
    with pytest.raises(IdempotencyKeyReused):
        await client.items.add(sid, [{"role": "user", "content": "other"}], idempotency_key=key)


async def test_bad_input_names_the_field(client: AgentSessionsClient, sid: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await client.items.page(sid, limit=0)
    assert caught.value.code == "invalid_request"
    assert caught.value.detail.startswith("limit")


async def test_run_waits_and_commits_the_turn(client: AgentSessionsClient, sid: str) -> None:
    run = await client.runs.create(sid, "hello there")
    assert run["status"] == "completed"
    history = [i["item"] async for i in client.items.list(sid)]
    assert history[0] == {"role": "user", "content": "hello there"}
    assert history[1]["content"][0]["text"] == "echo: hello there"
    assert [r["id"] async for r in client.runs.list(sid)] == [run["id"]]


async def test_background_run_and_wait(client: AgentSessionsClient, sid: str) -> None:
    run = await client.runs.create(sid, "in the background", background=True)
    assert run["status"] in ("queued", "running")
    finished = await client.runs.wait(sid, run["id"], timeout=30)
    assert finished["status"] == "completed"
    assert (await client.runs.get(sid, run["id"]))["output"][0]["content"][0]["text"] == (
        "echo: in the background"
    )


async def test_stream_and_replay_from_an_event_id(client: AgentSessionsClient, sid: str) -> None:
    events = [e async for e in client.runs.stream(sid, "stream me")]
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert [e.event for e in events[:2]] == ["run.created", "run.started"]
    assert "".join(e.delta for e in events if isinstance(e, MessageDelta)) == "echo: stream me"
    assert any(isinstance(e, ItemCreated) for e in events)
    last = events[-1]
    assert isinstance(last, RunStatusEvent) and last.run["status"] == "completed"

    replayed = [e async for e in client.runs.events(sid, last.run["id"], last_event_id=2)]
    assert [e.id for e in replayed] == [e.id for e in events[2:]]
    after_end = client.runs.events(sid, last.run["id"], last_event_id=last.id)
    assert [e async for e in after_end] == []


async def test_a_cut_stream_resumes_without_loss_or_duplicates(service: Service, sid: str) -> None:
    async with (
        CuttingProxy(service.url, cut_after=2500) as proxy,
        AgentSessionsClient(proxy.url, retry=RetryPolicy(backoff_base=0.05)) as client,
    ):
        events = [e async for e in client.runs.stream(sid, "slow please")]
        assert proxy.cuts == 1, "the proxy never cut the stream: the test proves nothing"
    ids = [e.id for e in events]
    assert ids == list(range(1, len(ids) + 1))
    text = "".join(e.delta for e in events if isinstance(e, MessageDelta))
    assert text == " ".join(["slow"] * SLOW_WORDS)
    assert events[-1].event == "run.completed"


async def test_client_tools_pause_and_resume(client: AgentSessionsClient, sid: str) -> None:
    agent = await client.agents.create(name="weather", tools=[WEATHER_TOOL])
    run = await client.runs.create(sid, "please call get_weather", agent_id=agent["id"])
    assert run["status"] == "requires_action"
    assert run["required_action"] is not None
    call = run["required_action"]["tool_calls"][0]
    assert call["name"] == "get_weather"
    done = await client.runs.submit_tool_outputs(
        sid, run["id"], [{"call_id": call["call_id"], "output": "sunny"}]
    )
    assert done["status"] == "completed"
    kinds = [i["item"].get("type", "message") async for i in client.items.list(sid)]
    assert kinds == ["message", "function_call", "function_call_output", "message"]

    # The same through streams: the first stops at run.requires_action, the second goes on.
    events = [
        e async for e in client.runs.stream(sid, "call get_weather again", agent_id=agent["id"])
    ]
    pause = events[-1]
    assert isinstance(pause, RunStatusEvent) and pause.event == "run.requires_action"
    assert pause.run["required_action"] is not None
    call_id = pause.run["required_action"]["tool_calls"][0]["call_id"]
    rest = [
        e
        async for e in client.runs.stream_tool_outputs(
            sid, pause.run["id"], [{"call_id": call_id, "output": "rain"}], last_event_id=pause.id
        )
    ]
    assert rest[0].id == (pause.id or 0) + 1
    assert rest[-1].event == "run.completed"
    assert "tool said: rain" in "".join(e.delta for e in rest if isinstance(e, MessageDelta))
    await client.agents.delete(agent["id"])


async def test_busy_session_cancel_and_enqueue(client: AgentSessionsClient, sid: str) -> None:
    slow = await client.runs.create(sid, "slow one", background=True)
    with pytest.raises(Conflict) as busy:
        await client.runs.create(sid, "second")
    assert busy.value.code == "session_busy"
    queued = await client.runs.create(sid, "third", background=True, if_busy="enqueue")
    assert queued["status"] == "queued"

    cancelled = await client.runs.cancel(sid, slow["id"])
    assert cancelled["status"] == "cancelled"
    with pytest.raises(Conflict) as finished:
        await client.runs.cancel(sid, slow["id"])
    assert finished.value.code == "run_finished"
    assert (await client.runs.wait(sid, queued["id"], timeout=30))["status"] == "completed"
    contents = [i["item"].get("content") async for i in client.items.list(sid)]
    assert contents[0] == "third"  # the cancelled turn left nothing behind
    with pytest.raises(NotFound) as gone:
        await client.runs.get(sid, str(uuid.uuid4()))
    assert gone.value.code == "run_not_found"


async def _collect(events: AsyncIterator[Any]) -> List[Any]:
    return [e async for e in events]


async def test_concurrent_sessions_share_one_client(client: AgentSessionsClient) -> None:
    sessions = [AgentSessionsSession(f"c-{uuid.uuid4().hex}", client=client) for _ in range(16)]
    await asyncio.gather(
        *(s.add_items([{"role": "user", "content": s.session_id}]) for s in sessions)
    )
    read = await asyncio.gather(*(s.get_items() for s in sessions))
    assert [r[0]["content"] for r in read] == [s.session_id for s in sessions]  # type: ignore[typeddict-item]


async def test_streams_do_not_hold_up_quick_calls(service: Service, sid: str) -> None:
    """Event streams use their own pool: with a one-connection quick pool, a read still
    goes through while a slow run's stream is open."""
    async with AgentSessionsClient(service.url, max_connections=1) as client:
        events = client.runs.stream(sid, "slow and steady")
        first = await events.__anext__()
        assert first.event == "run.created"
        session = await asyncio.wait_for(client.sessions.get(sid), timeout=2)
        assert session["id"] == sid
        rest = [e async for e in events]
        assert rest[-1].event == "run.completed"
