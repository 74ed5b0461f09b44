"""``client.responses`` of the ``openai`` package against the service: create, retrieve,
input items, delete, function calls and their answers, background and cancel,
``store: false``, ``text.format``, the models list, and the errors OpenAI's clients raise
on bad requests."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError

from sessions_testkit.fake_llm import FakeLLM

from .support import MODEL, WEATHER_TOOL, dumped, finished, text


def user(text: str) -> Any:
    return {"type": "message", "role": "user", "content": text}


async def test_create_retrieve_list_input_and_delete(client: AsyncOpenAI) -> None:
    said = f"hello {uuid.uuid4().hex}"
    response = await client.responses.create(
        model=MODEL, input=said, instructions="Be brief.", metadata={"run": "one"}
    )
    assert response.id.startswith("resp_")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text == f"echo: {said}"
    assert (response.model, response.instructions, response.metadata) == (
        MODEL,
        "Be brief.",
        {"run": "one"},
    )
    assert response.usage is not None and response.usage.total_tokens > 0

    stored = await client.responses.retrieve(response.id)
    assert stored.model_dump() == response.model_dump()

    inputs = dumped([i async for i in client.responses.input_items.list(response.id)])
    assert [(i["type"], i["role"], text(i)) for i in inputs] == [("message", "user", said)]

    await client.responses.delete(response.id)
    with pytest.raises(NotFoundError):
        await client.responses.retrieve(response.id)
    with pytest.raises(NotFoundError):
        await client.responses.input_items.list(response.id)


async def test_a_function_call_answered_by_the_next_request(
    client: AsyncOpenAI, fake_llm: FakeLLM
) -> None:
    said = f"call get_weather {uuid.uuid4().hex}"
    called = await client.responses.create(
        model=MODEL,
        input=said,
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert called.status == "completed"
    (call,) = called.output
    assert call.type == "function_call"
    assert (call.name, call.arguments) == ("get_weather", '{"city": "Oslo"}')
    assert called.tools[0].type == "function"
    (request,) = fake_llm.requests_mentioning(said)
    assert request["tools"][0]["function"]["name"] == "get_weather"
    assert request["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}

    answered = await client.responses.create(
        model=MODEL,
        previous_response_id=called.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "rain"}],
        tools=[WEATHER_TOOL],
    )
    assert answered.output_text == "tool said: rain"
    assert answered.previous_response_id == called.id

    # Answering an older response again branches; the first branch stays as it was.
    other = await client.responses.create(
        model=MODEL,
        previous_response_id=called.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "snow"}],
        tools=[WEATHER_TOOL],
    )
    assert other.output_text == "tool said: snow"
    assert (await client.responses.retrieve(answered.id)).output_text == "tool said: rain"


async def test_background_and_cancel(client: AsyncOpenAI) -> None:
    quick = await client.responses.create(model=MODEL, input="in the back", background=True)
    assert quick.status in ("queued", "in_progress", "completed")
    done = await finished(client, quick)
    assert done.status == "completed"
    assert done.output_text == "echo: in the back"
    # Cancelling a finished response answers it as it is.
    assert (await client.responses.cancel(done.id)).status == "completed"

    slow = await client.responses.create(model=MODEL, input="slow one", background=True)
    cancelled = await client.responses.cancel(slow.id)
    assert cancelled.id == slow.id
    assert (await finished(client, cancelled)).status == "cancelled"


async def test_store_false_keeps_nothing(client: AsyncOpenAI) -> None:
    said = f"forget me {uuid.uuid4().hex}"
    response = await client.responses.create(model=MODEL, input=said, store=False)
    assert response.status == "completed"
    assert response.output_text == f"echo: {said}"
    assert response.model_dump()["store"] is False
    with pytest.raises(NotFoundError):
        await client.responses.retrieve(response.id)
    with pytest.raises(BadRequestError) as raised:
        await client.responses.create(model=MODEL, input="next", previous_response_id=response.id)
    assert raised.value.code == "previous_response_not_found"
    assert raised.value.param == "previous_response_id"

    # Unstored and streamed: the answer arrives, then nothing is kept either.
    async with client.responses.stream(model=MODEL, input=said, store=False) as stream:
        streamed = await stream.get_final_response()
    assert streamed.output_text == f"echo: {said}"
    with pytest.raises(NotFoundError):
        await client.responses.retrieve(streamed.id)


async def test_store_false_on_a_conversation_leaves_it_unchanged(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create(items=[user("remember 42")])
    response = await client.responses.create(
        model=MODEL, input="what number?", conversation=conversation.id, store=False
    )
    assert response.output_text == "echo: what number?"
    items = [i async for i in client.conversations.items.list(conversation.id)]
    assert len(items) == 1


async def test_models_lists_the_aliases(client: AsyncOpenAI) -> None:
    models = [m.id async for m in client.models.list()]
    assert MODEL in models
    assert "fake" in models


async def test_errors_name_the_parameter(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create()
    with pytest.raises(BadRequestError) as both:
        await client.responses.create(
            model=MODEL,
            input="hi",
            conversation=conversation.id,
            previous_response_id="resp_00000000000000000000000000000000",
        )
    assert both.value.param == "previous_response_id"
    assert both.value.type == "invalid_request_error"

    with pytest.raises(BadRequestError) as unknown:
        await client.responses.create(
            model=MODEL, input="hi", previous_response_id="resp_00000000000000000000000000000000"
        )
    assert (unknown.value.code, unknown.value.param) == (
        "previous_response_not_found",
        "previous_response_id",
    )

    with pytest.raises(NotFoundError):
        await client.responses.create(
            model=MODEL, input="hi", conversation="conv_00000000000000000000000000000000"
        )

    with pytest.raises(BadRequestError) as web_search:
        await client.responses.create(model=MODEL, input="hi", tools=[{"type": "web_search"}])
    assert web_search.value.param == "tools[0].type"

    with pytest.raises(BadRequestError) as empty:
        await client.responses.create(model=MODEL, input="")
    assert empty.value.param == "input"
    with pytest.raises(BadRequestError) as no_items:
        await client.responses.create(model=MODEL, input=[])
    assert no_items.value.param == "input"

    with pytest.raises(BadRequestError) as too_many:
        await client.conversations.items.create(
            conversation.id, items=[user(f"m{n}") for n in range(21)]
        )
    assert too_many.value.param == "items"
    with pytest.raises(BadRequestError) as too_many_at_start:
        await client.conversations.create(items=[user(f"m{n}") for n in range(21)])
    assert too_many_at_start.value.param == "items"
    assert [i async for i in client.conversations.items.list(conversation.id)] == []

    robot: Any = {"type": "message", "role": "robot", "content": "x"}
    with pytest.raises(BadRequestError) as bad_item:
        await client.conversations.items.create(conversation.id, items=[robot])
    assert bad_item.value.param == "items[0].role"
    with pytest.raises(BadRequestError) as limit:
        await client.conversations.items.list(conversation.id, limit=101)
    assert limit.value.param == "limit"


async def test_structured_output_is_asked_of_the_model(
    client: AsyncOpenAI, fake_llm: FakeLLM
) -> None:
    schema: Any = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    said = f"as json {uuid.uuid4().hex}"
    response = await client.responses.create(
        model=MODEL,
        input=said,
        text={"format": {"type": "json_schema", "name": "reply", "schema": schema, "strict": True}},
    )
    assert response.text.format.type == "json_schema"  # type: ignore[union-attr]
    (request,) = fake_llm.requests_mentioning(said)
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": schema, "strict": True},
    }


async def test_models_are_listed_and_retrieved(client: AsyncOpenAI) -> None:
    listed = [model.id async for model in client.models.list()]
    assert "fake" in listed, listed
    model = await client.models.retrieve("fake")
    assert (model.id, model.object) == ("fake", "model")
    with pytest.raises(NotFoundError) as unknown:
        await client.models.retrieve("no-such-model")
    assert unknown.value.code == "model_not_found"
    assert "no-such-model" in unknown.value.message


async def test_what_is_not_served_is_an_error_the_client_reads(client: AsyncOpenAI) -> None:
    with pytest.raises(NotFoundError) as missing:
        await client.vector_stores.list()
    assert isinstance(missing.value.body, dict), missing.value.body
    assert missing.value.body["message"], missing.value.body


async def test_a_conversation_and_a_previous_response_exclude_each_other(
    client: AsyncOpenAI,
) -> None:
    first = await client.responses.create(model=MODEL, input="first")
    conversation = await client.conversations.create()
    with pytest.raises(BadRequestError) as both:
        await client.responses.create(
            model=MODEL, input="x", conversation=conversation.id, previous_response_id=first.id
        )
    assert both.value.code == "mutually_exclusive_parameters"
    assert "Mutually exclusive parameters: Ensure you are only providing one of" in str(
        both.value.body
    )


async def test_an_output_that_answers_no_call_is_refused(client: AsyncOpenAI) -> None:
    output: Any = {"type": "function_call_output", "call_id": "call_none", "output": "x"}
    with pytest.raises(BadRequestError) as refused:
        await client.responses.create(model=MODEL, input=[output])
    assert refused.value.param == "input[0].call_id"
    assert "No tool call found for function call output with call_id call_none" in str(
        refused.value.body
    )


async def test_a_responses_items_are_its_conversations_items(client: AsyncOpenAI) -> None:
    conversation = await client.conversations.create()
    response = await client.responses.create(
        model=MODEL, input="the same ids", conversation=conversation.id
    )
    (message,) = response.output
    assert message.id is not None
    item = await client.conversations.items.retrieve(message.id, conversation_id=conversation.id)
    assert item.id == message.id
    listed = [i.id async for i in client.conversations.items.list(conversation.id, order="asc")]
    inputs = [i.id async for i in client.responses.input_items.list(response.id)]
    assert listed == [*inputs, message.id]
