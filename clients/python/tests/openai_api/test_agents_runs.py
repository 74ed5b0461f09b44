"""``Runner`` of the Agents SDK with ``OpenAIResponsesModel`` on the service: a turn that
calls the caller's function tool ``get_weather``, chained through a server-side
conversation (``conversation_id``), through ``auto_previous_response_id``, streamed, and
with the history in an ``OpenAIConversationsSession``; and the ``ModelSettings`` the SDK
sends, as the upstream model receives them.

The service's run worker talks to the fake LLM, which calls ``get_weather`` when the
user says ``call get_weather`` and answers ``tool said: <output>`` to the tool's output.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, List, Set, Tuple

from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner, function_tool
from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

from agent_sessions_client import AgentSessionsClient, AgentSessionsSession
from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.server import Service

from .support import MODEL, dumped, text

CONFIG = RunConfig(tracing_disabled=True)
WEATHER = "sunny in Oslo"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def weather_agent(client: AsyncOpenAI) -> Agent[Any]:
    model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    return Agent(name="weather", instructions="Use tools.", model=model, tools=[get_weather])


def shape(items: List[Any]) -> List[Tuple[str, str]]:
    """(type, role or tool name) of conversation items."""
    return [(i.type, getattr(i, "role", None) or getattr(i, "name", None) or "") for i in items]


async def test_a_tool_turn_in_a_conversation(client: AsyncOpenAI, fake_llm: FakeLLM) -> None:
    said = f"call get_weather {uuid.uuid4().hex}"
    conversation = await client.conversations.create()
    result = await Runner.run(
        weather_agent(client), said, conversation_id=conversation.id, run_config=CONFIG
    )
    assert result.final_output == f"tool said: {WEATHER}"

    items = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    assert shape(items) == [
        ("message", "user"),
        ("function_call", "get_weather"),
        ("function_call_output", ""),
        ("message", "assistant"),
    ]
    user, call, output, answer = dumped(items)
    assert text(user) == said
    assert call["call_id"] == output["call_id"]
    assert call["arguments"] == '{"city": "Oslo"}'
    assert output["output"] == WEATHER
    assert text(answer) == f"tool said: {WEATHER}"

    # The model saw the conversation: the call and its output in the second request.
    sent = fake_llm.requests_mentioning(said)
    assert len(sent) == 2
    assert [m["role"] for m in sent[1]["messages"] if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
    ]

    # A second turn in the same conversation sees the first.
    again = f"and now? {uuid.uuid4().hex}"
    result = await Runner.run(
        weather_agent(client), again, conversation_id=conversation.id, run_config=CONFIG
    )
    assert result.final_output == f"echo: {again}"
    (request,) = fake_llm.requests_mentioning(again)
    assert said in str(request["messages"])
    assert len([i async for i in client.conversations.items.list(conversation.id)]) == 6


async def test_a_tool_turn_chained_by_previous_response_id(
    client: AsyncOpenAI, fake_llm: FakeLLM
) -> None:
    said = f"call get_weather {uuid.uuid4().hex}"
    result = await Runner.run(
        weather_agent(client), said, auto_previous_response_id=True, run_config=CONFIG
    )
    assert result.final_output == f"tool said: {WEATHER}"
    assert len(result.raw_responses) == 2
    first, last = result.raw_responses
    assert first.response_id and last.response_id
    assert result.last_response_id == last.response_id

    # The second request chained from the first: it sent only the tool's output.
    inputs = [i async for i in client.responses.input_items.list(last.response_id)]
    assert [i.type for i in inputs] == ["function_call_output"]
    assert inputs[0].output == WEATHER  # type: ignore[union-attr]
    stored = await client.responses.retrieve(last.response_id)
    assert stored.previous_response_id == first.response_id
    assert stored.output_text == f"tool said: {WEATHER}"
    called = await client.responses.retrieve(first.response_id)
    assert [o.type for o in called.output] == ["function_call"]
    assert len(fake_llm.requests_mentioning(said)) == 2

    # And a next run may go on from the last response.
    again = f"and now? {uuid.uuid4().hex}"
    result = await Runner.run(
        weather_agent(client),
        again,
        previous_response_id=last.response_id,
        auto_previous_response_id=True,
        run_config=CONFIG,
    )
    assert result.final_output == f"echo: {again}"
    (request,) = fake_llm.requests_mentioning(again)
    assert said in str(request["messages"])
    assert WEATHER in str(request["messages"])


async def test_a_streamed_tool_turn(client: AsyncOpenAI) -> None:
    said = f"call get_weather {uuid.uuid4().hex}"
    conversation = await client.conversations.create()
    streamed = Runner.run_streamed(
        weather_agent(client), said, conversation_id=conversation.id, run_config=CONFIG
    )
    deltas: List[str] = []
    kinds: List[str] = []
    async for event in streamed.stream_events():
        kinds.append(event.type)
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            deltas.append(event.data.delta)
    assert streamed.final_output == f"tool said: {WEATHER}"
    assert "".join(deltas) == f"tool said: {WEATHER}"
    assert len(deltas) > 1
    assert "run_item_stream_event" in kinds
    assert [i.type for i in streamed.new_items] == [
        "tool_call_item",
        "tool_call_output_item",
        "message_output_item",
    ]
    items = [i async for i in client.conversations.items.list(conversation.id, order="asc")]
    assert shape(items) == [
        ("message", "user"),
        ("function_call", "get_weather"),
        ("function_call_output", ""),
        ("message", "assistant"),
    ]


async def test_a_tool_turn_with_a_conversations_session(
    client: AsyncOpenAI, fake_llm: FakeLLM
) -> None:
    # The SDK keeps the history in the conversation and sends all of it every turn: the
    # items come back with the ids and statuses the service gave them.
    session = OpenAIConversationsSession(openai_client=client)
    said = f"call get_weather {uuid.uuid4().hex}"
    result = await Runner.run(weather_agent(client), said, session=session, run_config=CONFIG)
    assert result.final_output == f"tool said: {WEATHER}"
    again = f"and then? {uuid.uuid4().hex}"
    result = await Runner.run(weather_agent(client), again, session=session, run_config=CONFIG)
    assert result.final_output == f"echo: {again}"

    (request,) = fake_llm.requests_mentioning(again)
    assert [m["role"] for m in request["messages"] if m["role"] != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    items = [i async for i in client.conversations.items.list(session.session_id, order="asc")]
    assert shape(items) == [
        ("message", "user"),
        ("function_call", "get_weather"),
        ("function_call_output", ""),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]


async def test_model_settings_reach_the_model(client: AsyncOpenAI, fake_llm: FakeLLM) -> None:
    settings = ModelSettings(
        temperature=0.25,
        top_p=0.5,
        max_tokens=64,
        tool_choice="required",
        parallel_tool_calls=False,
        truncation="auto",
        metadata={"source": "tests"},
        verbosity="low",
    )
    model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    agent = Agent(name="tuned", model=model, model_settings=settings, tools=[get_weather])
    said = f"call get_weather {uuid.uuid4().hex}"
    result = await Runner.run(agent, said, auto_previous_response_id=True, run_config=CONFIG)
    # tool_choice "required" would loop forever; the SDK resets it after the tool's use.
    assert result.final_output == f"tool said: {WEATHER}"
    first = fake_llm.requests_mentioning(said)[0]
    assert first["temperature"] == 0.25
    assert first["top_p"] == 0.5
    assert first["tool_choice"] == "required"
    assert first["parallel_tool_calls"] is False
    assert 64 in (first.get("max_tokens"), first.get("max_completion_tokens"))
    stored = await client.responses.retrieve(result.raw_responses[0].response_id or "")
    assert stored.metadata == {"source": "tests"}
    assert (stored.temperature, stored.top_p, stored.max_output_tokens) == (0.25, 0.5, 64)
    assert stored.truncation == "auto"


async def test_our_session_with_our_responses_as_the_model(api_service: Service) -> None:
    """The Python client's README: the history in ``AgentSessionsSession``, the model
    behind the service's ``/v1/responses`` with ``store=False``, so no turn leaves a
    stand-alone ``resp_…`` session in the native listing."""
    async with AgentSessionsClient(api_service.url) as sessions:

        async def standalone() -> Set[str]:
            return {s["id"] async for s in sessions.sessions.list() if s["id"].startswith("resp_")}

        before = await standalone()
        model_client = AsyncOpenAI(base_url=api_service.url + "/v1", api_key="unused")
        agent = Agent(
            name="Assistant",
            model=OpenAIResponsesModel(model=MODEL, openai_client=model_client),
            model_settings=ModelSettings(store=False),
        )
        session_id = f"ada-{uuid.uuid4().hex}"
        session = AgentSessionsSession(session_id, client=sessions)
        first = await Runner.run(agent, "Hi, I'm Ada.", session=session, run_config=CONFIG)
        assert first.final_output == "echo: Hi, I'm Ada."
        second = await Runner.run(agent, "Who am I?", session=session, run_config=CONFIG)
        assert second.final_output == "echo: Who am I?"
        stored = await session.get_items()
        assert [text(dict(item)) for item in stored if "role" in item] == [
            "Hi, I'm Ada.",
            "echo: Hi, I'm Ada.",
            "Who am I?",
            "echo: Who am I?",
        ]
        for _ in range(50):
            if await standalone() <= before:
                break
            await asyncio.sleep(0.1)
        assert await standalone() <= before
