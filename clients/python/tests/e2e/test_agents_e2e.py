"""The Agents SDK end to end: ``Runner.run`` twice with an ``AgentSessionsSession``.

The model is the SDK's ``OpenAIChatCompletionsModel`` talking to the fake LLM, so what the
second turn was sent is visible; the history is then read back through the HTTP API.
"""

from __future__ import annotations

import uuid
from typing import Any, List, Tuple

import httpx
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from openai import AsyncOpenAI

from agent_sessions_client import AgentSessionsSession
from sessions_testkit.fake_llm import FakeLLM, _text
from sessions_testkit.server import Service


def conversation(messages: List[Any]) -> List[Tuple[str, str]]:
    return [(m["role"], _text(m.get("content"))) for m in messages if m["role"] != "system"]


async def test_a_second_turn_sees_the_first(service: Service, fake_llm: FakeLLM, sid: str) -> None:
    token = uuid.uuid4().hex
    model = OpenAIChatCompletionsModel(
        model="fake-model",
        openai_client=AsyncOpenAI(base_url=fake_llm.base_url, api_key="fake"),
    )
    agent = Agent(name="assistant", instructions="Answer briefly.", model=model)
    config = RunConfig(tracing_disabled=True)
    session = AgentSessionsSession(sid, base_url=service.url)

    first = f"My code word is {token}."
    second = f"What is my code word? ({token})"
    result = await Runner.run(agent, first, session=session, run_config=config)
    assert result.final_output == f"echo: {first}"
    result = await Runner.run(agent, second, session=session, run_config=config)
    assert result.final_output == f"echo: {second}"

    sent = fake_llm.requests_mentioning(second)
    assert len(sent) == 1
    assert conversation(sent[0]["messages"]) == [
        ("user", first),
        ("assistant", f"echo: {first}"),
        ("user", second),
    ]

    async with httpx.AsyncClient() as http:
        response = await http.get(f"{service.url}/v1/sessions/{sid}/items")
    assert response.status_code == 200
    stored = [row["item"] for row in response.json()["data"]]
    assert [(i.get("role"), i.get("type", "message")) for i in stored] == [
        ("user", "message"),
        ("assistant", "message"),
        ("user", "message"),
        ("assistant", "message"),
    ]
    assert stored[0]["content"] == first
    assert stored[3]["content"][0]["text"] == f"echo: {second}"
    assert await session.get_items() == stored
    await session.aclose()
