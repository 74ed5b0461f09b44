"""AutoGen (autogen-agentchat 0.7.5) keeps a team's ``save_state()`` in a session's state
through ``SavedState``: a team saved in one process is restored in another and goes on
with the conversation, and two processes that loaded the same state cannot both save."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agent_sessions_client import AgentSessionsClient, RevisionMismatch
from agent_sessions_client.autogen import SavedState
from sessions_testkit.server import Service

from . import team as teams


async def test_a_team_saved_in_one_process_goes_on_in_another(
    service: Service, client: AgentSessionsClient
) -> None:
    sid = f"autogen-{uuid.uuid4().hex[:8]}"
    first = subprocess.run(
        [sys.executable, str(Path(teams.__file__)), service.url, sid],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    ran = json.loads(first.stdout.strip().splitlines()[-1])
    assert ran["said"] == ["Hi, I'm Ada", "Hello Ada"]

    team, model = teams.team(["You are Ada"])
    saved = SavedState(client, sid)
    assert await saved.load(team)
    result = await team.run(task="Who am I?")
    assert [m.to_text() for m in result.messages] == ["Who am I?", "You are Ada"]
    # The model was sent the first process's conversation, then the new task.
    sent = [m.content for m in model.create_calls[0]["messages"]]
    assert sent[-3:] == ["Hi, I'm Ada", "Hello Ada", "Who am I?"]
    assert await saved.save(team) == ran["revision"] + 1

    # Two processes that loaded the same state: the second save is refused.
    one, two = SavedState(client, sid), SavedState(client, sid)
    team_one, _ = teams.team([])
    team_two, _ = teams.team([])
    assert await one.load(team_one) and await two.load(team_two)
    await one.save(team_one)
    with pytest.raises(RevisionMismatch):
        await two.save(team_two)
    # Saving over a state never loaded is refused too.
    with pytest.raises(ValueError, match="load it first"):
        await SavedState(client, sid).save(team_two)
