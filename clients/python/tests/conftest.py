"""Fixtures shared by the test directories.

``unit/`` needs nothing but the package (HTTP is mocked with respx); ``live/`` and
``e2e/`` start the real service (``AGENT_SESSIONS_BIN``, on ``AGENT_SESSIONS_BACKEND``)
with its run worker pointed at a fake LLM.
"""

from __future__ import annotations

import os
import uuid
from typing import AsyncIterator, Iterator

import pytest

from agent_sessions_client import AgentSessionsClient, RetryPolicy
from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.server import Service, binary_from_env, run_service


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="session")
def service(fake_llm: FakeLLM) -> Iterator[Service]:
    backend = os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")
    with run_service(binary_from_env(), backend, llm_base_url=fake_llm.base_url) as running:
        yield running


@pytest.fixture
async def client(service: Service) -> AsyncIterator[AgentSessionsClient]:
    async with AgentSessionsClient(service.url, retry=RetryPolicy(backoff_base=0.05)) as c:
        yield c


@pytest.fixture
def sid() -> str:
    """A session id no other test uses."""
    return f"test-{uuid.uuid4().hex}"
