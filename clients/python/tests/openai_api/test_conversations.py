"""``client.conversations`` of the ``openai`` package against the service: create,
retrieve, update, the items (added in batches of 20, read back through the package's
auto-paginating iterator), and delete."""

from __future__ import annotations

from typing import Any, List

import pytest
from openai import AsyncOpenAI, NotFoundError
from openai.types.conversations import Message

from .support import dumped, ids


def user(text: str) -> Any:
    return {"type": "message", "role": "user", "content": text}


def text_of(item: Any) -> str:
    """The text of a message item as the package parsed it."""
    assert isinstance(item, Message), item
    return "".join(getattr(part, "text", "") for part in item.content)


async def test_create_retrieve_update_and_delete(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create(
        items=[user("hello"), {"role": "assistant", "content": "hi there"}],
        metadata={"topic": "demo", "owner": "tests"},
    )
    assert conversation.id.startswith("conv_")
    assert conversation.object == "conversation"
    assert conversation.metadata == {"topic": "demo", "owner": "tests"}
    assert conversation.created_at > 0

    got = await client.conversations.retrieve(conversation.id)
    assert (got.id, got.metadata, got.created_at) == (
        conversation.id,
        conversation.metadata,
        conversation.created_at,
    )

    # Update replaces the metadata: keys it lacks are gone.
    updated = await client.conversations.update(conversation.id, metadata={"stage": "two"})
    assert updated.metadata == {"stage": "two"}
    assert (await client.conversations.retrieve(conversation.id)).metadata == {"stage": "two"}

    items = [item async for item in client.conversations.items.list(conversation.id, order="asc")]
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert [text_of(i) for i in items] == ["hello", "hi there"]
    parts = [item["content"][0]["type"] for item in dumped(items)]
    assert parts == ["input_text", "output_text"]

    deleted = await client.conversations.delete(conversation.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        conversation.id,
        True,
        "conversation.deleted",
    )
    with pytest.raises(NotFoundError):
        await client.conversations.retrieve(conversation.id)
    with pytest.raises(NotFoundError):
        await client.conversations.items.list(conversation.id)
    with pytest.raises(NotFoundError):
        await client.conversations.delete(conversation.id)


async def test_items_page_past_twenty(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create()
    texts = [f"message {n}" for n in range(45)]
    added: List[str] = []
    for start in range(0, len(texts), 20):
        batch = await client.conversations.items.create(
            conversation.id, items=[user(t) for t in texts[start : start + 20]]
        )
        assert [text_of(i) for i in batch.data] == texts[start : start + 20]
        assert batch.first_id == batch.data[0].id
        assert batch.last_id == batch.data[-1].id
        added.extend(ids(batch.data))

    # The iterator follows `last_id`/`has_more` from page to page (20 items a page).
    ascending = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    assert [text_of(i) for i in ascending] == texts
    order = ids(ascending)
    assert order == added
    assert len(set(order)) == 45

    # The default order is newest first, paged the same way.
    descending = [i async for i in client.conversations.items.list(conversation.id)]
    assert ids(descending) == order[::-1]

    # One page at a time, as the package's page objects show it.
    page = await client.conversations.items.list(conversation.id, order="asc", limit=7)
    assert ids(page.data) == order[:7]
    assert page.has_more is True
    assert page.has_next_page()
    second = await page.get_next_page()
    assert ids(second.data) == order[7:14]
    last = await client.conversations.items.list(
        conversation.id, order="asc", after=order[40], limit=100
    )
    assert ids(last.data) == order[41:]
    assert last.has_more is False
    assert not last.has_next_page()


async def test_retrieve_and_delete_an_item(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create(
        items=[user("one"), user("two"), user("three")]
    )
    items = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    middle = ids(items)[1]

    got = await client.conversations.items.retrieve(middle, conversation_id=conversation.id)
    assert got.id == middle
    assert text_of(got) == "two"

    # Deleting an item answers with the conversation.
    after = await client.conversations.items.delete(middle, conversation_id=conversation.id)
    assert after.id == conversation.id
    assert after.object == "conversation"
    left = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    assert [text_of(i) for i in left] == ["one", "three"]

    with pytest.raises(NotFoundError):
        await client.conversations.items.retrieve(middle, conversation_id=conversation.id)
    with pytest.raises(NotFoundError):
        await client.conversations.items.delete(middle, conversation_id=conversation.id)
    with pytest.raises(NotFoundError):
        await client.conversations.items.retrieve("not-an-item", conversation_id=conversation.id)


async def test_unknown_conversation_is_not_found(client: AsyncOpenAI) -> None:
    missing = "conv_00000000000000000000000000000000"
    with pytest.raises(NotFoundError) as raised:
        await client.conversations.retrieve(missing)
    assert raised.value.status_code == 404
    assert raised.value.code == "conversation_not_found"
    with pytest.raises(NotFoundError):
        await client.conversations.items.create(missing, items=[user("x")])
    with pytest.raises(NotFoundError):
        await client.conversations.update(missing, metadata={"a": "b"})
