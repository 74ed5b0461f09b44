"""An upstream LLM that cannot be reached or refuses: a response the request waits for
answers the error status of the cause, so OpenAI's clients raise; a streamed one ends
with ``response.failed``; the failed response stays retrievable, and a conversation is
left as it was."""

from __future__ import annotations

import re
import socket
from typing import AsyncIterator, Iterator, List

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner
from openai import APIStatusError, AsyncOpenAI, BadRequestError, RateLimitError

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


def failed_response_id(error: APIStatusError) -> str:
    """The id of the kept failed response, which the error's message names."""
    found = re.search(r"resp_[0-9A-Za-z]+", error.message)
    assert found, error.message
    return found.group(0)


async def test_a_failed_response(down: AsyncOpenAI) -> None:
    conversation = await down.conversations.create(items=[{"role": "user", "content": "before"}])
    with pytest.raises(APIStatusError) as raised:
        await down.responses.create(model=MODEL, input="hi", conversation=conversation.id)
    assert raised.value.status_code == 502
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "server_error", body
    assert "llm_unavailable" in raised.value.message
    kept = await down.responses.retrieve(failed_response_id(raised.value))
    assert kept.status == "failed"
    assert kept.error is not None and "llm_unavailable" in kept.error.message
    assert kept.output == []
    # The failed turn left nothing in the conversation.
    items = [i async for i in down.conversations.items.list(conversation.id)]
    assert len(items) == 1
    # In the background the response is answered before it fails, and is polled.
    queued = await down.responses.create(model=MODEL, input="hi", background=True)
    assert queued.status in ("queued", "in_progress", "failed")


def on_fake_llm(fake_llm: FakeLLM, **env: str) -> Iterator[Service]:
    """The service on the fake LLM, with `env` besides the model names."""
    with run_service(
        binary_from_env(), backend(), llm_base_url=fake_llm.base_url, env={**MODEL_ENV, **env}
    ) as running:
        yield running


@pytest.fixture(scope="module")
def no_retries(fake_llm: FakeLLM) -> Iterator[Service]:
    """The service on the fake LLM, which it does not retry."""
    yield from on_fake_llm(fake_llm, LLM_MAX_RETRIES="0")


async def test_the_status_says_the_cause(no_retries: Service) -> None:
    async with openai_client(no_retries) as client:
        with pytest.raises(RateLimitError) as limited:
            await client.responses.create(model=MODEL, input="refuse with 429")
        assert isinstance(limited.value.body, dict)
        assert limited.value.body["code"] == "rate_limit_exceeded"
        with pytest.raises(BadRequestError) as too_long:
            await client.responses.create(model=MODEL, input="refuse with 400")
        assert isinstance(too_long.value.body, dict)
        assert too_long.value.body["code"] == "context_length_exceeded"
        kept = await client.responses.retrieve(failed_response_id(too_long.value))
        assert kept.status == "failed"
        # An unstored response is gone: the message names none.
        with pytest.raises(APIStatusError) as unstored:
            await client.responses.create(model=MODEL, input="refuse with 503", store=False)
        assert unstored.value.status_code == 502
        assert "resp_" not in unstored.value.message


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
    with pytest.raises(APIStatusError, match="llm_unavailable"):
        await Runner.run(agent, "hi", run_config=RunConfig(tracing_disabled=True))


@pytest.fixture(scope="module")
def short_wait(fake_llm: FakeLLM) -> Iterator[Service]:
    """The service, waiting at most 1 s for a response that is neither streamed nor in
    the background (``RUN_WAIT_SECS``)."""
    yield from on_fake_llm(fake_llm, RUN_WAIT_SECS="1")


async def test_a_response_longer_than_the_wait(short_wait: Service) -> None:
    async with openai_client(short_wait) as client:
        agent = Agent(name="slow", model=OpenAIResponsesModel(model=MODEL, openai_client=client))
        # The fake LLM takes 3 s over a "slow" answer.
        result = await Runner.run(
            agent, "slow, please", run_config=RunConfig(tracing_disabled=True)
        )
        assert result.final_output == " ".join(["slow"] * 30)
