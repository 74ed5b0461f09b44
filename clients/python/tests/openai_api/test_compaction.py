"""Compaction: ``client.responses.compact`` directly, and the Agents SDK's
``OpenAIResponsesCompactionSession`` (over an in-memory ``SQLiteSession``) compacting a
history through the service and sending the sealed compaction item back as input."""

from __future__ import annotations

import uuid
from typing import Any, Dict, List

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, SQLiteSession
from agents.memory import OpenAIResponsesCompactionSession
from agents.memory.openai_responses_compaction_session import OpenAIResponsesCompactionMode
from openai import AsyncOpenAI, BadRequestError

from sessions_testkit.fake_llm import FakeLLM, _text, reply_for

from .support import MODEL

CONFIG = RunConfig(tracing_disabled=True)


def summary_made_for(fake_llm: FakeLLM, token: str) -> str:
    """The summary the fake LLM wrote when asked first about ``token``."""
    first = fake_llm.requests_mentioning(token)[0]
    return str(reply_for(first)["content"])


def told(request: Dict[str, Any]) -> str:
    """Everything the model was told in ``request``."""
    return "\n".join(_text(m.get("content")) for m in request["messages"])


def last_user(request: Dict[str, Any]) -> str:
    """The last user message of ``request``."""
    users = [m for m in request["messages"] if m["role"] == "user"]
    return _text(users[-1].get("content")) if users else ""


def tamper(sealed: str) -> str:
    """``sealed`` with one character in its middle changed."""
    at = len(sealed) // 2
    return sealed[:at] + ("A" if sealed[at] != "A" else "B") + sealed[at + 1 :]


async def test_compact_an_input_and_answer_from_it(client: AsyncOpenAI, fake_llm: FakeLLM) -> None:
    token = uuid.uuid4().hex
    history: List[Any] = [
        {"role": "user", "content": f"my code word is {token}"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "and my city is Oslo"},
        {"role": "assistant", "content": "noted too"},
    ]
    compacted = await client.responses.compact(model=MODEL, input=history)
    assert compacted.object == "response.compaction"
    kinds = [o.type for o in compacted.output]
    assert kinds == ["message", "message", "compaction"]
    users = [o for o in compacted.output if o.type == "message"]
    assert [u.role for u in users] == ["user", "user"]
    compaction: Dict[str, Any] = compacted.output[-1].model_dump()
    sealed = compaction["encrypted_content"]
    assert isinstance(sealed, str) and sealed
    summary = summary_made_for(fake_llm, token)
    assert summary not in sealed  # sealed, not shown
    assert compacted.usage.total_tokens > 0

    # The compaction goes back in as input: the model is given the summary.
    follow = f"what was it? {uuid.uuid4().hex}"
    replay: List[Any] = [
        {"type": "compaction", "encrypted_content": sealed},
        {"role": "user", "content": follow},
    ]
    answer = await client.responses.create(model=MODEL, input=replay)
    assert answer.output_text == f"echo: {follow}"
    (request,) = fake_llm.requests_mentioning(follow)
    assert summary in told(request)

    # A compaction altered by the client is refused, naming the field.
    forged: Any = {"type": "compaction", "encrypted_content": tamper(sealed)}
    hi: Any = {"role": "user", "content": "hi"}
    with pytest.raises(BadRequestError) as raised:
        await client.responses.create(model=MODEL, input=[hi, forged])
    assert raised.value.param == "input[1].encrypted_content"
    with pytest.raises(BadRequestError) as raised:
        await client.responses.compact(model=MODEL, input=[forged])
    assert str(raised.value.param).endswith("encrypted_content")
    with pytest.raises(BadRequestError) as raised:
        await client.conversations.create(items=[forged])
    assert raised.value.param == "items[0].encrypted_content"


async def test_compact_a_response_chain(client: AsyncOpenAI) -> None:
    first = await client.responses.create(model=MODEL, input="first turn")
    second = await client.responses.create(
        model=MODEL, input="second turn", previous_response_id=first.id
    )
    compacted = await client.responses.compact(model=MODEL, previous_response_id=second.id)
    users = [o for o in compacted.output if o.type == "message"]
    assert [u.content[0].text for u in users] == ["first turn", "second turn"]  # type: ignore[union-attr]
    assert compacted.output[-1].type == "compaction"

    unstored = await client.responses.create(model=MODEL, input="gone", store=False)
    with pytest.raises(BadRequestError) as raised:
        await client.responses.compact(model=MODEL, previous_response_id=unstored.id)
    assert raised.value.code == "previous_response_not_found"


def compacting_session(
    client: AsyncOpenAI, every: int, mode: OpenAIResponsesCompactionMode = "auto"
) -> OpenAIResponsesCompactionSession:
    """Compacts once ``every`` model-made items are in the history."""
    return OpenAIResponsesCompactionSession(
        session_id=f"compaction-{uuid.uuid4().hex}",
        underlying_session=SQLiteSession(f"compaction-{uuid.uuid4().hex}"),
        client=client,
        model=MODEL,
        compaction_mode=mode,
        should_trigger_compaction=lambda context: (
            len(context["compaction_candidate_items"]) >= every
        ),
    )


def agent(client: AsyncOpenAI) -> Agent[Any]:
    model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    return Agent(name="compacted", instructions="Answer briefly.", model=model)


async def test_the_compaction_session_compacts_after_turns(
    client: AsyncOpenAI, fake_llm: FakeLLM
) -> None:
    session = compacting_session(client, every=3)
    token = uuid.uuid4().hex
    turns = [f"turn {n} {token}" for n in range(3)]
    for said in turns:
        result = await Runner.run(agent(client), said, session=session, run_config=CONFIG)
        assert result.final_output == f"echo: {said}"

    stored = await session.underlying_session.get_items()
    assert [i.get("type") for i in stored][-1] == "compaction", stored
    assert [i.get("role") for i in stored[:-1]] == ["user"] * 3
    assert not [i for i in stored if i.get("role") == "assistant"]

    # The next turn sends the compaction item back, and the service takes it.
    said = f"after compaction {uuid.uuid4().hex}"
    result = await Runner.run(agent(client), said, session=session, run_config=CONFIG)
    assert result.final_output == f"echo: {said}"
    (request,) = fake_llm.requests_mentioning(said)
    # The summariser's request is the one that answers none of the turns.
    (summarising,) = [
        r for r in fake_llm.requests_mentioning(token) if last_user(r) not in [*turns, said]
    ]
    summary = str(reply_for(summarising)["content"])
    assert all(t in summary for t in turns)
    assert summary in told(request)
    # What the model was given: the summary and the user messages, no earlier answers.
    assert [m["role"] for m in request["messages"] if m["role"] != "system"] == ["user"] * 4


@pytest.mark.parametrize("mode", ["auto", "input", "previous_response_id"])
async def test_forced_compaction(
    client: AsyncOpenAI, mode: OpenAIResponsesCompactionMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: List[Dict[str, Any]] = []
    compact = client.responses.compact

    async def recorded(**kwargs: Any) -> Any:
        asked.append(kwargs)
        return await compact(**kwargs)

    monkeypatch.setattr(client.responses, "compact", recorded)
    session = compacting_session(client, every=1000, mode=mode)
    said = f"only turn {uuid.uuid4().hex}"
    result = await Runner.run(agent(client), said, session=session, run_config=CONFIG)
    before = await session.get_items()
    assert [i.get("role") for i in before] == ["user", "assistant"]

    await session.run_compaction({"force": True})
    (request,) = asked
    if mode == "input":
        assert [i.get("role") for i in request["input"]] == ["user", "assistant"]
    else:  # auto: the last response was stored, so it is compacted by its id
        assert request["previous_response_id"] == result.last_response_id
    stored = await session.get_items()
    assert [i.get("type") for i in stored] == ["message", "compaction"]
    assert stored[0].get("role") == "user"

    result = await Runner.run(agent(client), "and then?", session=session, run_config=CONFIG)
    assert result.final_output == "echo: and then?"
