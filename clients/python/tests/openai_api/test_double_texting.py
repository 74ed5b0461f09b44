"""A new response in a busy conversation, through the ``openai`` package: ``if_busy``
(sent as ``extra_body``) interrupts the answer in progress, which keeps what it said as
an incomplete turn, or rolls it back, which leaves nothing of it."""

from __future__ import annotations

import asyncio
from typing import Any, List, Tuple

import pytest
from openai import AsyncOpenAI, NotFoundError
from openai.types.responses import Response

from .support import MODEL, dumped, text


async def started_streaming(client: AsyncOpenAI, response_id: str) -> None:
    """Waits until the answer is in progress and a few words of it have streamed."""
    for _ in range(200):
        if (await client.responses.retrieve(response_id)).status == "in_progress":
            await asyncio.sleep(0.5)
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the response never started")


async def conversation_items(client: AsyncOpenAI, conversation_id: str) -> List[Any]:
    items = client.conversations.items.list(conversation_id, order="asc")
    return dumped([item async for item in items])


async def double_text(client: AsyncOpenAI, said: str, if_busy: str) -> Tuple[str, str, Response]:
    """A conversation whose slow answer is streaming when ``said`` arrives with
    ``if_busy``: its id, the slow response's id, and the response to ``said``."""
    conversation = await client.conversations.create()
    slow = await client.responses.create(
        model=MODEL, input="a slow story", conversation=conversation.id, background=True
    )
    await started_streaming(client, slow.id)
    quick = await client.responses.create(
        model=MODEL, input=said, conversation=conversation.id, extra_body={"if_busy": if_busy}
    )
    return conversation.id, slow.id, quick


async def test_interrupt_keeps_the_partial_answer_as_a_turn(client: AsyncOpenAI) -> None:
    conversation_id, slow_id, quick = await double_text(client, "never mind", "interrupt")
    assert quick.status == "completed"
    assert quick.output_text == "echo: never mind"

    interrupted = await client.responses.retrieve(slow_id)
    assert interrupted.status == "incomplete"
    assert interrupted.incomplete_details is not None
    assert interrupted.incomplete_details.reason == "interrupted"  # type: ignore[comparison-overlap]
    partial = interrupted.output_text
    assert partial.startswith("slow") and len(partial) < len(" ".join(["slow"] * 30))

    items = await conversation_items(client, conversation_id)
    assert [(i["role"], text(i)) for i in items] == [
        ("user", "a slow story"),
        ("assistant", partial),
        ("user", "never mind"),
        ("assistant", "echo: never mind"),
    ]
    assert items[1]["status"] == "incomplete"


async def test_rollback_leaves_nothing_of_the_answer(client: AsyncOpenAI) -> None:
    conversation_id, slow_id, quick = await double_text(client, "start over", "rollback")
    assert quick.output_text == "echo: start over"
    with pytest.raises(NotFoundError):
        await client.responses.retrieve(slow_id)
    items = await conversation_items(client, conversation_id)
    assert [text(i) for i in items] == ["start over", "echo: start over"]
