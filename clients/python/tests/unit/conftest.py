"""Unit-test fixtures: a respx router standing in for the service."""

from __future__ import annotations

from typing import AsyncIterator, Iterator

import pytest
import respx

from agent_sessions_client import AgentSessionsClient
from sessions_testkit.mocks import BASE, FAST


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client() -> AsyncIterator[AgentSessionsClient]:
    async with AgentSessionsClient(BASE, retry=FAST) as c:
        yield c
