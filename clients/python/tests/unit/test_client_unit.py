"""AgentSessionsClient against a mocked service: request shapes, pagination, streams."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import httpx
import pytest
import respx

from agent_sessions_client import (
    AgentSessionsClient,
    APIConnectionError,
    Conflict,
    ItemCreated,
    MessageDelta,
    NotFound,
    RunStatusEvent,
)
from agent_sessions_client._sse import SSEDecoder
from agent_sessions_client.types import Approval
from sessions_testkit.mocks import Chunks, body_of, page, problem, sse

RUN = {"id": "r1", "session_id": "s1", "status": "queued"}


def stream(*chunks: bytes, fail: Exception | None = None) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=Chunks(list(chunks), fail)
    )


def run_events(status: str = "completed") -> List[bytes]:
    return [
        sse("run.created", 1, RUN),
        sse("run.started", 2, {**RUN, "status": "running"}),
        sse("message.delta", 3, {"delta": "Hel"}),
        sse("message.delta", 4, {"delta": "lo"}),
        sse("item.created", 5, {"item": {"role": "assistant", "content": "Hello"}}),
        sse(f"run.{status}", 6, {**RUN, "status": status}),
    ]


async def test_sessions_list_filters_by_metadata_and_follows_the_cursor(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.get("/v1/sessions").mock(
        side_effect=[
            page([{"id": "a"}, {"id": "b"}], has_more=True),
            page([{"id": "c"}], has_more=False),
        ]
    )
    found = [s["id"] async for s in client.sessions.list(metadata={"user": "alice"}, page_size=2)]
    assert found == ["a", "b", "c"]
    first, second = (call.request.url.params for call in route.calls)
    assert first["metadata[user]"] == "alice" and first["limit"] == "2" and "after" not in first
    assert second["after"] == "b" and second["metadata[user]"] == "alice"


async def test_session_update_sends_a_merge_patch(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.patch("/v1/sessions/s1").mock(return_value=httpx.Response(200, json={"id": "s1"}))
    await client.sessions.update("s1", metadata={"a": None, "b": "2"})
    await client.sessions.update("s1", metadata=None)
    await client.sessions.update("s1", agent_id=None)
    bodies = [body_of(call.request) for call in route.calls]
    assert bodies == [{"metadata": {"a": None, "b": "2"}}, {"metadata": None}, {"agent_id": None}]


async def test_session_ids_are_escaped_in_paths(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.get("/v1/sessions/user%3A42%40web").mock(
        return_value=httpx.Response(200, json={"id": "user:42@web"})
    )
    assert (await client.sessions.get("user:42@web"))["id"] == "user:42@web"
    assert route.called


async def test_fork_and_compact(api: respx.MockRouter, client: AgentSessionsClient) -> None:
    fork = api.post("/v1/sessions/s1/fork").mock(
        return_value=httpx.Response(201, json={"id": "s2", "forked_from": {"session_id": "s1"}})
    )
    compact = api.post("/v1/sessions/s1/compact").mock(
        return_value=httpx.Response(201, json={"id": "c1", "items_compacted": 12})
    )
    forked = await client.sessions.fork("s1", id="s2", through_item_id="i9")
    assert forked["id"] == "s2"
    assert body_of(fork.calls[0].request) == {"id": "s2", "through_item_id": "i9"}
    compaction = await client.sessions.compact("s1", keep_recent_items=4)
    assert compaction["items_compacted"] == 12
    assert body_of(compact.calls[0].request) == {"keep_recent_items": 4}
    with pytest.raises(ValueError):
        await client.sessions.fork("s1", through_item_id="i9", before_run_id="r1")


async def test_compact_errors_map(api: respx.MockRouter, client: AgentSessionsClient) -> None:
    api.post("/v1/sessions/s1/compact").mock(return_value=problem(409, "session_busy"))
    with pytest.raises(Conflict) as caught:
        await client.sessions.compact("s1")
    assert caught.value.code == "session_busy"


async def test_items_pop_distinguishes_empty_from_missing(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    api.delete("/v1/sessions/s1/items/last").mock(
        side_effect=[problem(404, "session_empty"), problem(404, "session_not_found")]
    )
    assert await client.items.pop("s1") is None
    with pytest.raises(NotFound):
        await client.items.pop("s1")


async def test_runs_create_in_each_mode(api: respx.MockRouter, client: AgentSessionsClient) -> None:
    route = api.post("/v1/sessions/s1/runs").mock(return_value=httpx.Response(200, json=RUN))
    await client.runs.create("s1", "hi", agent_id="a1", metadata={"k": "v"})
    await client.runs.create("s1", [{"role": "user", "content": "x"}], background=True)
    bodies: List[Dict[str, Any]] = [body_of(call.request) for call in route.calls]
    assert bodies[0] == {"input": "hi", "agent_id": "a1", "metadata": {"k": "v"}}
    assert bodies[1] == {"input": [{"role": "user", "content": "x"}], "background": True}


async def test_stream_yields_typed_events(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.post("/v1/sessions/s1/runs").mock(return_value=stream(*run_events()))
    events = [e async for e in client.runs.stream("s1", "hi")]
    assert body_of(route.calls[0].request) == {"input": "hi", "stream": True}
    assert [e.id for e in events] == [1, 2, 3, 4, 5, 6]
    deltas = [e.delta for e in events if isinstance(e, MessageDelta)]
    assert "".join(deltas) == "Hello"
    created = [e for e in events if isinstance(e, ItemCreated)]
    assert created[0].item == {"role": "assistant", "content": "Hello"}
    last = events[-1]
    assert isinstance(last, RunStatusEvent) and last.run["status"] == "completed"


async def test_a_dropped_stream_resumes_with_last_event_id(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    events = run_events()
    api.post("/v1/sessions/s1/runs").mock(
        return_value=stream(*events[:3], events[3][:10], fail=httpx.ReadError("reset"))
    )
    resume = api.get("/v1/sessions/s1/runs/r1/events").mock(
        return_value=stream(events[2], *events[3:])  # the service replays from after id 3
    )
    seen = [e.id async for e in client.runs.stream("s1", "hi")]
    assert seen == [1, 2, 3, 4, 5, 6]
    assert resume.call_count == 1
    assert resume.calls[0].request.headers["last-event-id"] == "3"


async def test_a_stream_that_ends_early_is_resumed_too(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    events = run_events()
    resume = api.get("/v1/sessions/s1/runs/r1/events").mock(
        side_effect=[stream(*events[2:4]), stream(*events[4:])]
    )
    seen = [e.id async for e in client.runs.events("s1", "r1", last_event_id=2)]
    assert seen == [3, 4, 5, 6]
    sent = [call.request.headers["last-event-id"] for call in resume.calls]
    assert sent == ["2", "4"]


async def test_following_an_ended_run_from_its_last_event_yields_nothing(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.get("/v1/sessions/s1/runs/r1/events").mock(
        return_value=stream(run_events()[-1])  # the service repeats the final event
    )
    assert [e async for e in client.runs.events("s1", "r1", last_event_id=6)] == []
    assert [e async for e in client.runs.events("s1", "r1", last_event_id=99)] == []
    assert route.call_count == 2


async def test_a_drop_before_the_run_is_known_resends_the_same_request(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    route = api.post("/v1/sessions/s1/runs").mock(
        side_effect=[stream(b"event: run.cr", fail=httpx.ReadError("reset")), stream(*run_events())]
    )
    seen = [e.id async for e in client.runs.stream("s1", "hi")]
    assert seen == [1, 2, 3, 4, 5, 6]
    keys = {call.request.headers["idempotency-key"] for call in route.calls}
    assert route.call_count == 2 and len(keys) == 1


async def test_a_stream_that_keeps_dropping_gives_up(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    api.get("/v1/sessions/s1/runs/r1/events").mock(
        side_effect=lambda request: stream(fail=httpx.ReadError("reset"))
    )
    with pytest.raises(APIConnectionError):
        [e async for e in client.runs.events("s1", "r1")]


async def test_stream_errors_are_raised_before_any_event(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    api.post("/v1/sessions/s1/runs").mock(return_value=problem(409, "session_busy"))
    with pytest.raises(Conflict):
        [e async for e in client.runs.stream("s1", "hi")]


async def test_wait_follows_the_events_to_the_end(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    api.get("/v1/sessions/s1/runs/r1/events").mock(return_value=stream(*run_events("failed")))
    run = await client.runs.wait("s1", "r1")
    assert run["status"] == "failed"


async def test_tool_outputs(api: respx.MockRouter, client: AgentSessionsClient) -> None:
    route = api.post("/v1/sessions/s1/runs/r1/tool_outputs").mock(
        side_effect=[
            httpx.Response(200, json={**RUN, "status": "completed"}),
            stream(*run_events()[3:]),
        ]
    )
    outputs = [{"call_id": "c1", "output": "sunny"}]
    run = await client.runs.submit_tool_outputs("s1", "r1", [{"call_id": "c1", "output": "sunny"}])
    assert run["status"] == "completed"
    events = [
        e.id
        async for e in client.runs.stream_tool_outputs(
            "s1", "r1", [{"call_id": "c1", "output": "sunny"}], last_event_id=3
        )
    ]
    assert events == [4, 5, 6]
    assert body_of(route.calls[0].request) == {"outputs": outputs}
    assert body_of(route.calls[1].request) == {"outputs": outputs, "stream": True}


async def test_approvals(api: respx.MockRouter, client: AgentSessionsClient) -> None:
    route = api.post("/v1/sessions/s1/runs/r1/approvals").mock(
        return_value=httpx.Response(200, json={**RUN, "status": "completed"})
    )
    decisions: List[Approval] = [
        {"call_id": "c1", "approve": True},
        {"call_id": "c2", "approve": False, "reason": "not now"},
    ]
    run = await client.runs.submit_approvals("s1", "r1", decisions)
    assert run["status"] == "completed"
    assert body_of(route.calls[0].request) == {"approvals": decisions}


async def test_cancel_and_agents(api: respx.MockRouter, client: AgentSessionsClient) -> None:
    cancel = api.post("/v1/sessions/s1/runs/r1/cancel").mock(
        return_value=httpx.Response(200, json={**RUN, "status": "cancelled"})
    )
    agent = api.post("/v1/agents").mock(return_value=httpx.Response(201, json={"id": "a1"}))
    assert (await client.runs.cancel("s1", "r1"))["status"] == "cancelled"
    await client.runs.cancel("s1", "r1", action="interrupt")
    assert [str(c.request.url.query, "ascii") for c in cancel.calls] == ["", "action=interrupt"]
    await client.agents.create(name="support", model="m", max_turns=3)
    assert body_of(agent.calls[0].request) == {"name": "support", "model": "m", "max_turns": 3}


def test_sse_decoder_follows_the_event_stream_rules() -> None:
    decoder = SSEDecoder()
    lines = [": keep-alive", "", "event: x", "id: 7", 'data: {"a":', "data: 1}", "", "data:z", ""]
    messages = [m for m in map(decoder.feed, lines) if m is not None]
    assert [(m.event, m.id, m.data) for m in messages] == [
        ("x", "7", '{"a":\n1}'),
        ("message", None, "z"),
    ]
    assert json.loads(messages[0].data) == {"a": 1}
