"""pytest plugin that runs Strands Agents' own repository session-manager tests against
agent-sessions.

Used as ``pytest -p sessions_testkit.strands_suite
<sdist>/tests/strands/session/test_repository_session_manager.py`` from the sdist's root
(see ``scripts/ci.sh``). The test file is run exactly as Strands ships it; this plugin
starts the service and puts ``ServiceBackedRepository``, an ``AgentSessionsRepository``,
in place of the suite's ``MockedSessionRepository`` before the test file imports it. Each
test's session ids get a prefix of their own, so every test starts on empty sessions.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from agent_sessions_client.strands import AgentSessionsRepository

from .suite_plugin import SuitePlugin

PLUGIN = SuitePlugin(
    stand_in="MockedSessionRepository -> AgentSessionsRepository",
    deselected={},
    why_deselected="none: every test runs",
    served="repositories were AgentSessionsRepository",
)
pytest_unconfigure = PLUGIN.pytest_unconfigure
pytest_report_header = PLUGIN.pytest_report_header
pytest_collection_modifyitems = PLUGIN.pytest_collection_modifyitems
pytest_terminal_summary = PLUGIN.pytest_terminal_summary

# The repository methods that name a session: each maps the test's id to the service's.
_SESSION_METHODS = [
    "create_agent",
    "read_agent",
    "update_agent",
    "create_message",
    "read_message",
    "update_message",
    "list_messages",
    "create_multi_agent",
    "read_multi_agent",
    "update_multi_agent",
]


class ServiceBackedRepository(AgentSessionsRepository):
    """``MockedSessionRepository``'s constructor (no arguments), an
    ``AgentSessionsRepository`` on the service underneath."""

    def __init__(self) -> None:
        assert PLUGIN.service_url is not None, "the service is not running"
        super().__init__(base_url=PLUGIN.service_url)
        PLUGIN.made.append(PLUGIN.test_prefix)

    def create_session(self, session: Any, **kwargs: Any) -> Any:
        stored = type(session)(**{**session.__dict__, "session_id": _sid(session.session_id)})
        super().create_session(stored, **kwargs)
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Any:
        found = super().read_session(_sid(session_id), **kwargs)
        if found is not None:
            found.session_id = session_id
        return found


def _sid(session_id: str) -> str:
    return f"{PLUGIN.test_prefix}{session_id}"


def _mapped(name: str) -> Any:
    method = getattr(AgentSessionsRepository, name)

    def call(self: ServiceBackedRepository, session_id: str, *args: Any, **kwargs: Any) -> Any:
        return method(self, _sid(session_id), *args, **kwargs)

    call.__name__ = name
    return call


for _name in _SESSION_METHODS:
    setattr(ServiceBackedRepository, _name, _mapped(_name))


def pytest_configure(config: pytest.Config) -> None:
    PLUGIN.pytest_configure(config)
    # The sdist's own module, importable from its root, where the suite runs.
    import tests.fixtures.mock_session_repository as mocks  # type: ignore[import-not-found]

    mocks.MockedSessionRepository = ServiceBackedRepository


@pytest.fixture(autouse=True)
def _fresh_session_ids() -> Iterator[None]:
    """Every test gets its own id prefix, so its sessions start empty on the service."""
    PLUGIN.fresh_prefix()
    yield
