"""An upstream LLM that cannot be reached: the response fails as OpenAI's clients expect a
failed response to look, and a conversation is left as it was."""

from __future__ import annotations

import socket
from typing import AsyncIterator, Iterator, List

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner
from agents.exceptions import ModelBehaviorError
from openai import AsyncOpenAI

from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.server import Service, binary_from_env, run_service

from .support import MODEL, MODEL_ENV, backend, openai_client


def closed_port() -> int:
    """A port nothing listens on (it was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llm_down() -> Iterator[Service]:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    with run_service(binary_from_env(), backend(), llm_base_url=dead, env=MODEL_ENV) as running:
        yield running


@pytest.fixture
async def down(llm_down: Service) -> AsyncIterator[AsyncOpenAI]:
    async with openai_client(llm_down) as c:
        yield c


async def test_a_failed_response(down: AsyncOpenAI) -> None:
    conversation = await down.conversations.create(items=[{"role": "user", "content": "before"}])
    response = await down.responses.create(model=MODEL, input="hi", conversation=conversation.id)
    assert response.status == "failed"
    assert response.error is not None
    assert response.error.code == "server_error"
    assert "llm_unavailable" in response.error.message
    assert response.output == []
    assert (await down.responses.retrieve(response.id)).status == "failed"
    # The failed turn left nothing in the conversation.
    items = [i async for i in down.conversations.items.list(conversation.id)]
    assert len(items) == 1


async def test_a_failed_stream(down: AsyncOpenAI) -> None:
    kinds: List[str] = []
    async with down.responses.stream(model=MODEL, input="hi") as stream:
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.failed":
                assert event.response.status == "failed"
                assert event.response.error is not None
    assert kinds == ["response.created", "response.in_progress", "response.failed"]


async def test_the_agents_sdk_raises(down: AsyncOpenAI) -> None:
    agent = Agent(name="down", model=OpenAIResponsesModel(model=MODEL, openai_client=down))
    with pytest.raises(ModelBehaviorError, match=r"response\.failed"):
        await Runner.run(agent, "hi", run_config=RunConfig(tracing_disabled=True))


@pytest.fixture(scope="module")
def short_wait(fake_llm: FakeLLM) -> Iterator[Service]:
    """The service, waiting at most 1 s for a response that is neither streamed nor in
    the background (``RUN_WAIT_SECS``)."""
    env = {**MODEL_ENV, "RUN_WAIT_SECS": "1"}
    with run_service(
        binary_from_env(), backend(), llm_base_url=fake_llm.base_url, env=env
    ) as running:
        yield running


async def test_a_response_longer_than_the_wait(short_wait: Service) -> None:
    async with openai_client(short_wait) as client:
        agent = Agent(name="slow", model=OpenAIResponsesModel(model=MODEL, openai_client=client))
        # The fake LLM takes 3 s over a "slow" answer.
        result = await Runner.run(
            agent, "slow, please", run_config=RunConfig(tracing_disabled=True)
        )
        assert result.final_output == " ".join(["slow"] * 30)
