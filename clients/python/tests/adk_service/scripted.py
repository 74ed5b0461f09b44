"""An ADK agent with a scripted model, for the live Runner test: run as a script it plays
the first turn against the service and exits, so the test goes on in another process.

Turn 1, "I'm Ada": the model calls ``remember(name="Ada")``, which writes ``user:name``
and counts ``app:visits``; then it answers "Noted". Turn 2, "Who am I?": the model calls
``recall()``, which reads the state back; then it answers with what the tool returned
and how many messages of history it was sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from agent_sessions_client.adk import AgentSessionsService

APP = "scripted-app"


def remember(name: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remembers the user's name."""
    tool_context.state["user:name"] = name
    tool_context.state["app:visits"] = int(tool_context.state.get("app:visits", 0)) + 1
    tool_context.state["temp:scratch"] = "never stored"
    return {"stored": name}


def recall(tool_context: ToolContext) -> dict[str, Any]:
    """Recalls the user's name."""
    return {
        "name": tool_context.state.get("user:name"),
        "visits": tool_context.state.get("app:visits"),
    }


class ScriptedModel(BaseLlm):
    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = llm_request.contents[-1].parts if llm_request.contents else None
        last = parts[0] if parts else None
        if last is not None and last.function_response is not None:
            answer = last.function_response.response or {}
            if last.function_response.name == "remember":
                text = "Noted"
            else:
                sent = len(llm_request.contents)
                text = f"You are {answer['name']} ({answer['visits']} visit), history {sent}"
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        said = last.text if last is not None else ""
        call = (
            types.Part.from_function_call(name="remember", args={"name": "Ada"})
            if "I'm Ada" in (said or "")
            else types.Part.from_function_call(name="recall", args={})
        )
        yield LlmResponse(content=types.Content(role="model", parts=[call]))


def runner(service: AgentSessionsService) -> Runner:
    agent = LlmAgent(name="assistant", model=ScriptedModel(), tools=[remember, recall])
    return Runner(app_name=APP, agent=agent, session_service=service)


async def turn(runner: Runner, user: str, session_id: str, text: str) -> list[str]:
    """Runs one turn; answers the texts the agent said."""
    said = []
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=user, session_id=session_id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            said.append(event.content.parts[0].text)
    return said


async def _first_turn(base_url: str, user: str, session_id: str) -> None:
    async with AgentSessionsService(base_url=base_url) as service:
        await service.create_session(app_name=APP, user_id=user, session_id=session_id)
        print(json.dumps(await turn(runner(service), user, session_id, "Hi, I'm Ada")))


if __name__ == "__main__":
    asyncio.run(_first_turn(*sys.argv[1:4]))
