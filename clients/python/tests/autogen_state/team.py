"""The AutoGen team of the live test (autogen-agentchat, with a replaying model): run as
a script it runs one task against the service's session and saves the team's state
there, then exits, so the test goes on in another process."""

from __future__ import annotations

import asyncio
import json
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient

from agent_sessions_client import AgentSessionsClient
from agent_sessions_client.autogen import SavedState


def team(answers: list[str]) -> tuple[RoundRobinGroupChat, ReplayChatCompletionClient]:
    model = ReplayChatCompletionClient(answers)
    agent = AssistantAgent("assistant", model_client=model)
    return RoundRobinGroupChat([agent], max_turns=1), model


async def _first_task(base_url: str, session_id: str) -> None:
    async with AgentSessionsClient(base_url) as client:
        saved = SavedState(client, session_id)
        first, _ = team(["Hello Ada"])
        assert not await saved.load(first)
        result = await first.run(task="Hi, I'm Ada")
        revision = await saved.save(first)
        print(json.dumps({"said": [m.to_text() for m in result.messages], "revision": revision}))


if __name__ == "__main__":
    asyncio.run(_first_task(sys.argv[1], sys.argv[2]))
