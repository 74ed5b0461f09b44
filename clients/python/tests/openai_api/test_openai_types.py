"""What the service answers, checked field by field against the ``openai`` package's own
pydantic models. The package itself builds its objects without validation (a missing or
mistyped field surfaces only when read), so the raw JSON of every kind of answer is
validated here with ``model_validate``."""

from __future__ import annotations

import json
import typing
from typing import Any, Dict, List, Type

from openai import AsyncOpenAI
from openai._legacy_response import LegacyAPIResponse
from openai.types import Model
from openai.types.conversations import (
    Conversation,
    ConversationDeletedResource,
    ConversationItemList,
    Message,
)
from openai.types.responses import Response, ResponseItem, ResponseStreamEvent
from openai.types.responses.compacted_response import CompactedResponse
from openai.types.responses.response_item_list import ResponseItemList
from pydantic import BaseModel, TypeAdapter, ValidationError

from .support import MODEL

TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def event_types() -> Dict[str, Type[BaseModel]]:
    """The class of each stream event, by its ``type``."""
    union = typing.get_args(ResponseStreamEvent)[0]
    found: Dict[str, Type[BaseModel]] = {}
    for cls in typing.get_args(union):
        (kind,) = typing.get_args(cls.model_fields["type"].annotation)
        found[kind] = cls
    return found


def problems(cls: Any, data: Any, where: str) -> List[str]:
    """Where ``data`` is not a valid ``cls``: ``where/field.path: error type``."""
    try:
        TypeAdapter(cls).validate_python(data)
    except ValidationError as error:
        return [f"{where}/{'.'.join(map(str, e['loc']))}: {e['type']}" for e in error.errors()]
    return []


async def answers(client: AsyncOpenAI) -> List[str]:
    """The validation problems of one answer of each kind."""
    found: List[str] = []

    async def check(cls: Any, raw: LegacyAPIResponse[Any], where: str) -> Any:
        data = json.loads(raw.text)
        found.extend(problems(cls, data, where))
        return data

    conversations = client.conversations.with_raw_response
    responses = client.responses.with_raw_response
    conversation = await check(
        Conversation,
        await conversations.create(items=[{"role": "user", "content": "hi"}], metadata={"a": "b"}),
        "conversations.create",
    )
    cid = conversation["id"]
    await check(Conversation, await conversations.retrieve(cid), "conversations.retrieve")
    await check(
        Conversation, await conversations.update(cid, metadata={"c": "d"}), "conversations.update"
    )
    called = await check(
        Response,
        await responses.create(
            model=MODEL, input="call get_weather", tools=[TOOL], conversation=cid
        ),
        "responses.create (function_call)",
    )
    answer: Any = {
        "type": "function_call_output",
        "call_id": called["output"][0]["call_id"],
        "output": "sun",
    }
    answered = await check(
        Response,
        await responses.create(model=MODEL, input=[answer], tools=[TOOL], conversation=cid),
        "responses.create (message)",
    )
    await check(Response, await responses.retrieve(answered["id"]), "responses.retrieve")
    await check(
        ResponseItemList,
        await client.responses.input_items.with_raw_response.list(answered["id"]),
        "responses.input_items.list",
    )
    items = await check(
        ConversationItemList,
        await client.conversations.items.with_raw_response.list(cid),
        "conversations.items.list",
    )
    await check(
        ConversationItemList,
        await client.conversations.items.with_raw_response.create(
            cid, items=[{"role": "user", "content": "more"}]
        ),
        "conversations.items.create",
    )
    # OpenAI's compact, too, answers the user messages as they were given (input_text
    # parts), which openai types as output messages; they are checked as messages.
    compacted = json.loads(
        (await responses.compact(model=MODEL, previous_response_id=answered["id"])).text
    )
    users = [o for o in compacted["output"] if o.get("role") == "user"]
    assert users and compacted["output"][-1]["type"] == "compaction"
    found.extend(problems(List[Message], users, "responses.compact user messages"))
    rest = {**compacted, "output": [o for o in compacted["output"] if o not in users]}
    found.extend(problems(CompactedResponse, rest, "responses.compact"))
    item = items["data"][-1]["id"]
    await check(
        typing.get_args(ResponseItem)[0],
        await client.conversations.items.with_raw_response.retrieve(item, conversation_id=cid),
        "conversations.items.retrieve",
    )
    await check(
        Conversation,
        await client.conversations.items.with_raw_response.delete(item, conversation_id=cid),
        "conversations.items.delete",
    )
    background = await check(
        Response,
        await responses.create(model=MODEL, input="slow", background=True),
        "responses.create (background)",
    )
    await check(Response, await responses.cancel(background["id"]), "responses.cancel")
    await check(
        ConversationDeletedResource, await conversations.delete(cid), "conversations.delete"
    )
    for model in json.loads((await client.models.with_raw_response.list()).text)["data"]:
        found.extend(problems(Model, model, "models.list"))

    kinds = event_types()
    for said in ("hello there", "call get_weather"):
        async with client.responses.with_streaming_response.create(
            model=MODEL, input=said, tools=[TOOL], stream=True
        ) as stream:
            async for line in stream.iter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[len("data: ") :])
                    found.extend(problems(kinds[event["type"]], event, f"stream {event['type']}"))
    return found


async def test_answers_match_the_openai_types(client: AsyncOpenAI) -> None:
    """Every field of every kind of answer, as the pinned openai package's models say."""
    assert await answers(client) == []


async def test_usage_has_every_field_the_openai_types_require(client: AsyncOpenAI) -> None:
    response = await client.responses.with_raw_response.create(model=MODEL, input="hi")
    assert problems(Response, json.loads(response.text), "responses.create") == []
