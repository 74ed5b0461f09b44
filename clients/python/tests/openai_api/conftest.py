"""Fixtures of the OpenAI-compatible API tests: the service with ``MODEL_ALIASES`` (every
model name the ``openai`` and ``agents`` packages send goes to the fake LLM) and an
``AsyncOpenAI`` client pointed at its ``/v1``.
"""

from __future__ import annotations

from typing import AsyncIterator, Iterator

import pytest
from agents import set_tracing_disabled
from openai import AsyncOpenAI

from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.server import Service, binary_from_env, run_service

from .support import MODEL_ENV, backend, openai_client

# The Agents SDK would otherwise export traces to OpenAI.
set_tracing_disabled(True)


@pytest.fixture(scope="session")
def api_service(fake_llm: FakeLLM) -> Iterator[Service]:
    """The service, authentication off, its run worker on the fake LLM."""
    with run_service(
        binary_from_env(), backend(), llm_base_url=fake_llm.base_url, env=MODEL_ENV
    ) as running:
        yield running


@pytest.fixture
async def client(api_service: Service) -> AsyncIterator[AsyncOpenAI]:
    async with openai_client(api_service) as c:
        yield c
