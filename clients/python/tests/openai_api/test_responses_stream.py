"""Streaming with the ``openai`` package's own helpers: ``client.responses.stream(...)``
(which checks every event against its state machine) and reading a stream again from a
sequence number, both through the helper and through ``responses.retrieve(stream=True)``.
"""

from __future__ import annotations

import uuid
from typing import Any, List

from openai import AsyncOpenAI

from .support import MODEL, WEATHER_TOOL, ids

# The fake LLM streams this one word at a time.
SLOW = " ".join(["slow"] * 30)


async def test_the_stream_helper_builds_the_final_response(client: AsyncOpenAI) -> None:
    said = f"hello {uuid.uuid4().hex}"
    kinds: List[str] = []
    sequence: List[int] = []
    deltas: List[str] = []
    async with client.responses.stream(model=MODEL, input=said) as stream:
        async for event in stream:
            kinds.append(event.type)
            sequence.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
                assert event.snapshot == "".join(deltas)
        final = await stream.get_final_response()

    assert final.status == "completed"
    assert final.output_text == f"echo: {said}"
    assert final.model == MODEL
    assert "".join(deltas) == f"echo: {said}"
    assert sequence == list(range(len(sequence)))
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for kind in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ):
        assert kinds.count(kind) == 1, kind

    stored = await client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text
    assert ids(stored.output) == ids(final.output)


async def test_a_stream_read_again_after_a_sequence_number(client: AsyncOpenAI) -> None:
    said = f"one two three four five six {uuid.uuid4().hex}"
    async with client.responses.stream(model=MODEL, input=said) as stream:
        first = [event async for event in stream]
        final = await stream.get_final_response()
    assert final.output_text == f"echo: {said}"
    total = len(first)
    after = 5

    # The server sends only the events after `starting_after`, numbered as before.
    raw = await client.responses.retrieve(final.id, stream=True, starting_after=after)
    again = [event async for event in raw]
    assert [e.sequence_number for e in again] == list(range(after + 1, total))
    assert [e.type for e in again] == [e.type for e in first[after + 1 :]]
    assert again[-1].type == "response.completed"

    # From the start, the helper rebuilds the same response from the replay.
    async with client.responses.stream(response_id=final.id) as replay:
        replayed = [event async for event in replay]
        rebuilt = await replay.get_final_response()
    assert [e.sequence_number for e in replayed] == list(range(total))
    assert rebuilt.output_text == f"echo: {said}"
    assert rebuilt.id == final.id

    # With `starting_after`, the helper yields only the later events.
    async with client.responses.stream(response_id=final.id, starting_after=after) as replay:
        later = [event.sequence_number async for event in replay]
    assert later == list(range(after + 1, total))


async def test_a_stream_joined_while_the_response_runs(client: AsyncOpenAI) -> None:
    background = await client.responses.create(model=MODEL, input="slow, please", background=True)
    assert background.status in ("queued", "in_progress")
    async with client.responses.stream(response_id=background.id) as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert final.status == "completed"
    assert "".join(deltas) == SLOW
    assert final.output_text == SLOW


async def test_a_streamed_function_call_and_its_answer(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create()
    said = f"call get_weather {uuid.uuid4().hex}"
    async with client.responses.stream(
        model=MODEL, input=said, tools=[WEATHER_TOOL], conversation=conversation.id
    ) as stream:
        kinds = [event.type async for event in stream]
        called = await stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    (call,) = called.output
    assert call.type == "function_call"
    assert call.parsed_arguments == {"city": "Oslo"}
    assert called.conversation is not None and called.conversation.id == conversation.id

    answer: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "fog"}
    async with client.responses.stream(
        model=MODEL, input=[answer], tools=[WEATHER_TOOL], conversation=conversation.id
    ) as stream:
        answered = await stream.get_final_response()
    assert answered.output_text == "tool said: fog"
    items = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    assert [i.type for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


async def test_a_background_stream_left_and_resumed(client: AsyncOpenAI) -> None:
    stream = await client.responses.create(
        model=MODEL, input="slow, please", background=True, stream=True
    )
    seen: List[Any] = []
    async for event in stream:
        seen.append(event)
        if event.type == "response.output_text.delta":
            break
    await stream.close()
    created = seen[0]
    assert created.type == "response.created" and created.response.background is True
    # The client left; the response goes on, and the rest of its events are resumed.
    after = seen[-1].sequence_number
    resumed = await client.responses.retrieve(
        created.response.id, stream=True, starting_after=after
    )
    rest = [event async for event in resumed]
    assert rest[0].sequence_number == after + 1
    assert rest[-1].type == "response.completed"
    deltas = [e.delta for e in seen + rest if e.type == "response.output_text.delta"]
    assert "".join(deltas) == SLOW
