"""ADK's own ``Runner`` on ``AgentSessionsService``: an agent whose tool writes ``user:``
and ``app:`` state runs a turn in one process, and another process resumes the session
from the service and runs the next turn on the history and state the first one left."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from agent_sessions_client.adk import AgentSessionsService
from sessions_testkit.server import Service

from . import scripted


async def test_a_session_resumes_in_another_process(service: Service) -> None:
    user, session_id = "ada", f"s-{uuid.uuid4().hex[:8]}"
    first = subprocess.run(
        [sys.executable, str(Path(scripted.__file__)), service.url, user, session_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(first.stdout.strip().splitlines()[-1]) == ["Noted"]

    async with AgentSessionsService(base_url=service.url) as adk:
        stored = await adk.get_session(app_name=scripted.APP, user_id=user, session_id=session_id)
        assert stored is not None
        assert stored.state == {"user:name": "Ada", "app:visits": 1}, "temp: never stored"
        # The user's message, the tool call, its response and the answer.
        assert [e.author for e in stored.events] == ["user", "assistant", "assistant", "assistant"]
        assert await adk.get_user_state(app_name=scripted.APP, user_id=user) == {"name": "Ada"}

        said = await scripted.turn(scripted.runner(adk), user, session_id, "Who am I?")
        # The model was sent the first turn's four messages, the question and the call.
        assert said == ["You are Ada (1 visit), history 7"]
        resumed = await adk.get_session(app_name=scripted.APP, user_id=user, session_id=session_id)
        assert resumed is not None and len(resumed.events) == 8
        # Another user of the app sees the app's state, not the user's.
        other = await adk.create_session(app_name=scripted.APP, user_id="bob")
        assert other.state == {"app:visits": 1}
