"""What the plugins that run the Agents SDK's own session tests against the service
share, whichever session class stands in for ``SQLiteSession``: the service for the
whole run, an id prefix of its own for every test, the tests deselected by name with
their reasons, and a summary at the end.

A plugin module makes one ``SuitePlugin`` and takes its hooks as its own
(``pytest_configure = PLUGIN.pytest_configure``, …); its session class reads
``PLUGIN.service_url`` and ``PLUGIN.test_prefix`` and records what it made in
``PLUGIN.made``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any, Dict, List, Optional

import pytest

from .server import binary_from_env, run_service


class SuitePlugin:
    def __init__(
        self, *, stand_in: str, deselected: Dict[str, str], why_deselected: str, served: str
    ) -> None:
        """``stand_in`` names the session class for the report header, ``served`` says
        in the summary what ``len(made)`` counts, ``why_deselected`` heads the reasons."""
        self.stand_in = stand_in
        self.deselected = deselected
        self.why_deselected = why_deselected
        self.served = served
        self.service_url: Optional[str] = None
        self.test_prefix = "unset-"
        self.made: List[str] = []
        self._stack = contextlib.ExitStack()

    def backend(self) -> str:
        return os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")

    def pytest_configure(self, config: pytest.Config) -> None:
        service = self._stack.enter_context(run_service(binary_from_env(), self.backend()))
        self.service_url = service.url

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._stack.close()

    def pytest_report_header(self, config: pytest.Config) -> str:
        return f"agent-sessions suite: {self.stand_in} on {self.backend()}"

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: List[pytest.Item]
    ) -> None:
        keep: List[pytest.Item] = []
        dropped: List[pytest.Item] = []
        for item in items:
            name = getattr(item, "originalname", item.name)
            (dropped if name in self.deselected else keep).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.section("agent-sessions")
        terminalreporter.write_line(f"{len(self.made)} {self.served}")
        terminalreporter.section(f"deselected: {self.why_deselected}")
        for name, reason in self.deselected.items():
            terminalreporter.write_line(f"{name}: {reason}")

    def fresh_prefix(self) -> None:
        """A new id prefix, so that the next test's sessions start empty."""
        self.test_prefix = f"t{uuid.uuid4().hex[:12]}-"
