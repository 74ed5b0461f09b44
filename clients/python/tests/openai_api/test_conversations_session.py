"""The Agents SDK's ``OpenAIConversationsSession`` with its ``openai_client`` on the
service: the items it stores are the conversation's, in the Conversations API's shape."""

from __future__ import annotations

from typing import Any, List

from agents import TResponseInputItem
from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI


def texts(items: List[Any]) -> List[str]:
    return ["".join(p["text"] for p in item["content"]) for item in items]


async def test_add_get_pop_clear(client: AsyncOpenAI) -> None:
    session = OpenAIConversationsSession(openai_client=client)
    assert await session.get_items() == []
    conversation_id = session.session_id
    assert conversation_id.startswith("conv_")

    # More than one request's worth: the session sends 20 items a request.
    items: List[TResponseInputItem] = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"} for n in range(25)
    ]
    await session.add_items(items)
    stored = await session.get_items()
    assert texts(stored) == [f"turn {n}" for n in range(25)]
    assert [i["role"] for i in stored] == [i["role"] for i in items]  # type: ignore[typeddict-item]
    assert all(i["type"] == "message" and i["id"] for i in stored)  # type: ignore[typeddict-item]
    assert texts(await session.get_items(limit=3)) == ["turn 22", "turn 23", "turn 24"]

    # The conversation behind it holds the same items.
    listed = [i async for i in client.conversations.items.list(conversation_id, order="asc")]
    assert [i.id for i in listed] == [i["id"] for i in stored]  # type: ignore[typeddict-item]

    popped = await session.pop_item()
    assert popped is not None
    assert texts([popped]) == ["turn 24"]
    assert texts(await session.get_items(limit=1)) == ["turn 23"]
    assert len(await session.get_items()) == 24

    # A second session on the same conversation id sees the same history.
    other = OpenAIConversationsSession(conversation_id=conversation_id, openai_client=client)
    assert texts(await other.get_items(limit=2)) == ["turn 22", "turn 23"]

    # Clearing deletes the conversation; the session then starts a new, empty one.
    await session.clear_session()
    assert await session.get_items() == []
    assert session.session_id != conversation_id
    assert await session.pop_item() is None
