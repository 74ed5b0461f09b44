"""``adk web --session_service_uri agent-sessions://host:port``: an agents directory
whose ``services.py`` imports ``agent_sessions_client.adk`` makes ADK's command line build
an ``AgentSessionsService`` from the URI, the way ``adk web`` and ``adk run`` do."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from google.adk.cli.service_registry import load_services_module
from google.adk.cli.utils.service_factory import create_session_service_from_options

from agent_sessions_client.adk import AgentSessionsService
from sessions_testkit.server import Service


async def test_the_uri_scheme_makes_a_working_service(service: Service, tmp_path: Path) -> None:
    (tmp_path / "services.py").write_text("import agent_sessions_client.adk\n")
    load_services_module(str(tmp_path))
    uri = f"agent-sessions://{urlsplit(service.url).netloc}"
    made = create_session_service_from_options(base_dir=tmp_path, session_service_uri=uri)
    assert isinstance(made, AgentSessionsService)
    assert made.client.base_url.rstrip("/") == service.url.rstrip("/")
    async with made:
        session = await made.create_session(app_name="web", user_id="u", session_id="via-uri")
        assert await made.get_session(app_name="web", user_id="u", session_id="via-uri") == session
