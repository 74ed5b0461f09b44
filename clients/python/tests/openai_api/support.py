"""What the OpenAI-compatible API tests share besides fixtures."""

from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, Iterable, List

from openai import AsyncOpenAI
from openai.types.responses import Response
from pydantic import BaseModel

from sessions_testkit.server import Service

# What the model names of the OpenAI clients become upstream: the fake LLM takes any.
MODEL_ENV: Dict[str, str] = {"MODEL_ALIASES": "gpt-4.1=fake,*=fake", "LLM_MODEL": "fake"}
# The model the tests ask for, as OpenAI's clients name models.
MODEL = "gpt-4.1"
# The function tool the fake LLM calls when told `call get_weather`.
WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def backend() -> str:
    return os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")


def openai_client(service: Service, api_key: str = "unused") -> AsyncOpenAI:
    """An ``AsyncOpenAI`` on the service's ``/v1``; no retries, so errors show at once."""
    return AsyncOpenAI(base_url=service.url + "/v1", api_key=api_key, max_retries=0)


def dumped(items: Iterable[BaseModel]) -> List[Dict[str, Any]]:
    """Items the ``openai`` package parsed, as JSON objects (unknown fields included)."""
    return [item.model_dump() for item in items]


def text(item: Dict[str, Any]) -> str:
    """The text of a message item's content parts."""
    content = item["content"]
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content)


def ids(items: Iterable[BaseModel]) -> List[str]:
    """The items' ids, every one of them present."""
    found = [getattr(item, "id", None) for item in items]
    assert all(isinstance(i, str) and i for i in found), found
    return [str(i) for i in found]


async def finished(client: AsyncOpenAI, response: Response) -> Response:
    """The response once it is no longer queued or in progress."""
    for _ in range(200):
        if response.status not in ("queued", "in_progress"):
            return response
        await asyncio.sleep(0.05)
        response = await client.responses.retrieve(response.id)
    raise AssertionError(f"{response.id} is still {response.status}")
