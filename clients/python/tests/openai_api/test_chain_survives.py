"""A ``previous_response_id`` chain outlives the process that served it: a response
killed mid-answer (SIGKILL) is answered again by the next process on the same database,
once, and the chain goes on; and two replicas on one Postgres serve one chain and one
conversation turn by turn, each reading what the other wrote."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from sessions_testkit.fake_llm import SLOW_WORDS, FakeLLM
from sessions_testkit.server import binary_from_env, database, start_on

from .support import MODEL, MODEL_ENV, backend, finished, openai_client

# A lease of 1 s lets the next process take over a dead one's response at once.
ENV = {**MODEL_ENV, "RUN_LEASE_SECS": "1"}
SLOW_ANSWER = " ".join(["slow"] * SLOW_WORDS)


def said(request: Dict[str, Any]) -> List[str]:
    """The text of every message the model was sent, in order."""
    texts = []
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(part.get("text", "")) for part in content)
        texts.append(str(content))
    return texts


def last_request_mentioning(fake_llm: FakeLLM, token: str) -> Dict[str, Any]:
    found = fake_llm.requests_mentioning(token)
    assert found, f"the model was never sent {token!r}"
    return found[-1]


async def until_sent(fake_llm: FakeLLM, token: str) -> None:
    for _ in range(200):
        if fake_llm.requests_mentioning(token):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the model was never sent {token!r}")


@pytest.fixture
def database_url() -> Iterator[str]:
    with database(backend()) as url:
        yield url


async def test_a_chain_goes_on_after_its_process_is_killed_mid_answer(
    fake_llm: FakeLLM, database_url: str, tmp_path: Path
) -> None:
    token = uuid.uuid4().hex
    binary = binary_from_env()
    with start_on(binary, database_url, tmp_path, fake_llm.base_url, ENV) as first:
        async with openai_client(first.service) as client:
            one = await client.responses.create(model=MODEL, input=f"first {token}")
            two = await client.responses.create(
                model=MODEL,
                input=f"slow second {token}",
                previous_response_id=one.id,
                background=True,
            )
            await until_sent(fake_llm, f"slow second {token}")
            first.kill()

    with start_on(binary, database_url, tmp_path, fake_llm.base_url, ENV) as second:
        async with openai_client(second.service) as client:
            two = await finished(client, await client.responses.retrieve(two.id))
            assert two.status == "completed", two.error
            assert two.output_text == SLOW_ANSWER
            three = await client.responses.create(
                model=MODEL, input=f"third {token}", previous_response_id=two.id
            )
            assert three.output_text == f"echo: third {token}"

    # The killed answer was asked for again, and the model saw the whole chain with the
    # killed turn in it once.
    asked = [r for r in fake_llm.requests if said(r)[-1] == f"slow second {token}"]
    assert len(asked) == 2
    assert said(last_request_mentioning(fake_llm, f"third {token}"))[-5:] == [
        f"first {token}",
        f"echo: first {token}",
        f"slow second {token}",
        SLOW_ANSWER,
        f"third {token}",
    ]


@pytest.mark.skipif(backend() != "postgres", reason="replicas share a Postgres database")
async def test_two_replicas_serve_one_chain_and_one_conversation(
    fake_llm: FakeLLM, database_url: str, tmp_path: Path
) -> None:
    token = uuid.uuid4().hex
    binary = binary_from_env()
    with (
        start_on(binary, database_url, tmp_path, fake_llm.base_url, ENV) as a,
        start_on(binary, database_url, tmp_path, fake_llm.base_url, ENV) as b,
    ):
        async with openai_client(a.service) as on_a, openai_client(b.service) as on_b:
            # A chain whose every step is taken on the other replica.
            previous = None
            for step, client in enumerate([on_a, on_b, on_a, on_b]):
                response = await client.responses.create(
                    model=MODEL, input=f"step {step} {token}", previous_response_id=previous
                )
                assert response.output_text == f"echo: step {step} {token}"
                previous = response.id
            texts = said(last_request_mentioning(fake_llm, f"step 3 {token}"))
            assert texts[-7:] == [
                *(t for s in range(3) for t in (f"step {s} {token}", f"echo: step {s} {token}")),
                f"step 3 {token}",
            ]

            # A response started on one replica, streamed from the other.
            background = await on_a.responses.create(
                model=MODEL,
                input=f"slow streamed {token}",
                previous_response_id=previous,
                background=True,
                stream=False,
            )
            deltas = []
            async for event in await on_b.responses.retrieve(background.id, stream=True):
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
            assert "".join(deltas) == SLOW_ANSWER

            # One conversation, its turns taken on both replicas, read from either.
            conversation = await on_b.conversations.create()
            for step, client in enumerate([on_a, on_b]):
                await client.responses.create(
                    model=MODEL, input=f"turn {step} {token}", conversation=conversation.id
                )
            for client in (on_a, on_b):
                items = [
                    item
                    async for item in client.conversations.items.list(conversation.id, order="asc")
                ]
                texts = [json.dumps(item.model_dump()) for item in items]
                assert len(texts) == 4
                assert f"echo: turn 1 {token}" in texts[3]
