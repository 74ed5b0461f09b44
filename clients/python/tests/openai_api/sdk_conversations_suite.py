"""pytest plugin that runs the Agents SDK's own session tests with
``OpenAIConversationsSession`` on the service's Conversations API.

Used as ``pytest -p openai_api.sdk_conversations_suite <sdist>/tests/memory/test_session.py``
with ``PYTHONPATH=clients/python/tests`` (see ``scripts/ci.sh``). The test file is run
exactly as the SDK ships it; this plugin

- starts the service (``AGENT_SESSIONS_BIN`` on ``AGENT_SESSIONS_BACKEND``);
- replaces ``agents.SQLiteSession`` by ``ConversationBackedSession`` before the test file
  imports it: an ``OpenAIConversationsSession`` whose ``AsyncOpenAI`` client is on the
  service's ``/v1``, taking ``SQLiteSession``'s constructor arguments and mapping each
  (database, id) pair of a test to a conversation of its own;
- deselects, by name, the tests that cannot apply, each with its reason below.

Items come back from the Conversations API in its canonical shape, on OpenAI as here:
with an ``id``, a ``type`` and a ``status``, and message content as typed parts
(``[{"type": "input_text", "text": "Hello"}]`` for ``"Hello"``). The SDK's tests compare
what they read with what they wrote (``item.get("content") == "Hello"``), as SQLite keeps
items verbatim. So ``get_items`` and ``pop_item`` of this class hand items back as they
were given: ``as_given`` drops the fields the API adds and turns a message's single text
part back into its string. Nothing else is changed; everything the SDK's
``OpenAIConversationsSession`` does (paging, ``limit`` by ``order=desc``, 20 items per
add, delete by item id, delete of the conversation) runs against the service unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
import weakref
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import agents
import agents.memory
import pytest
from agents import SessionSettings, TResponseInputItem
from agents.memory import OpenAIConversationsSession
from openai import AsyncOpenAI, OpenAI

from sessions_testkit.sdk_suite import DESELECTED as SQLITE_INTERNALS
from sessions_testkit.suite_plugin import SuitePlugin

# The SQLite internals the client's suite deselects too (sessions_testkit/sdk_suite.py),
# but for the closed-session test: this session's error text is not SQLiteSession's
# either, and the SDK's own class raises what the test expects.
DESELECTED: Dict[str, str] = {
    **{
        name: why
        for name, why in SQLITE_INTERNALS.items()
        if name != "test_sqlite_session_closed_rejects_empty_add_items"
    },
    # OpenAIConversationsSession serialises an instance's calls with asyncio.Lock, which
    # is not thread-safe: a lock waited on from one thread's event loop is not woken by
    # another thread's release, and the test hangs. A property of the SDK class (on
    # OpenAI as here), not of the service; SQLiteSession locks with threading.Lock.
    "test_sqlite_session_concurrent_access": (
        "shares one session between five threads, each with its own event loop"
    ),
    # SQLiteSession's close(): OpenAIConversationsSession has no close.
    "test_sqlite_session_closed_rejects_empty_add_items": (
        "matches SQLiteSession's own error text 'SQLiteSession is closed'"
    ),
}

# The fields the Conversations API adds to every item it returns.
_ADDED = ("id", "status")
_TEXT_PARTS = ("input_text", "output_text")

PLUGIN = SuitePlugin(
    stand_in="SQLiteSession -> OpenAIConversationsSession",
    deselected=DESELECTED,
    why_deselected="these tests cannot apply to a Conversations API",
    served="conversations served the SQLiteSession constructions",
)
pytest_configure = PLUGIN.pytest_configure
pytest_unconfigure = PLUGIN.pytest_unconfigure
pytest_report_header = PLUGIN.pytest_report_header
pytest_collection_modifyitems = PLUGIN.pytest_collection_modifyitems
pytest_terminal_summary = PLUGIN.pytest_terminal_summary

_conversations: Dict[Tuple[str, str], str] = {}


def as_given(item: TResponseInputItem) -> TResponseInputItem:
    """``item`` as it was given, before the Conversations API's canonical shape."""
    shown: Dict[str, Any] = {k: v for k, v in dict(item).items() if k not in _ADDED}
    if shown.get("type") == "message" and "role" in shown:
        del shown["type"]
        content = shown.get("content")
        if isinstance(content, list) and len(content) == 1:
            part = content[0]
            keys = set(part) - {"annotations", "logprobs"}
            if part.get("type") in _TEXT_PARTS and keys == {"type", "text"}:
                shown["content"] = part["text"]
    return shown  # type: ignore[return-value]


def _client() -> AsyncOpenAI:
    """An ``AsyncOpenAI`` on the service's ``/v1``."""
    assert PLUGIN.service_url is not None, "the service is not running"
    return AsyncOpenAI(base_url=f"{PLUGIN.service_url}/v1", api_key="unused", max_retries=0)


def _new_conversation() -> str:
    """A new conversation; made at once (not on first use, as the base class does) so
    that every session of a (database, id) pair can share it."""
    assert PLUGIN.service_url is not None, "the service is not running"
    with OpenAI(base_url=f"{PLUGIN.service_url}/v1", api_key="unused", max_retries=0) as client:
        conversation_id = client.conversations.create().id
    PLUGIN.made.append(conversation_id)
    return conversation_id


class ConversationBackedSession(OpenAIConversationsSession):
    """``SQLiteSession``'s constructor, an ``OpenAIConversationsSession`` underneath.

    Sessions of one test that share a database file and an id share a conversation, as
    they would share rows in SQLite; an in-memory database is private to its instance.
    """

    def __init__(
        self,
        session_id: str,
        db_path: Union[str, Path] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Optional[Union[SessionSettings, Mapping[str, Any]]] = None,
    ) -> None:
        if str(db_path) == ":memory:":
            database = uuid.uuid4().hex
        else:
            database = hashlib.sha256(str(db_path).encode()).hexdigest()
        key = (f"{PLUGIN.test_prefix}{database}", session_id)
        if key not in _conversations:
            _conversations[key] = _new_conversation()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )
        super().__init__(
            conversation_id=_conversations[key],
            # Not kept: the property below gives each event loop a client of its own.
            openai_client=_client(),
            session_settings=(
                dict(session_settings)
                if isinstance(session_settings, Mapping)
                else session_settings
            ),
        )
        self.db_path = db_path

    @property
    def _openai_client(self) -> AsyncOpenAI:
        """An ``AsyncOpenAI`` of the running event loop's own.

        The SDK's ``run_sync`` tests run each turn on a new event loop, and a client's
        pooled connections belong to the loop that opened them.
        """
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = _client()
        return client

    @_openai_client.setter
    def _openai_client(self, given: AsyncOpenAI) -> None:
        """The base class sets its default client here; the property makes its own."""

    async def get_items(self, limit: Optional[int] = None) -> List[TResponseInputItem]:
        return [as_given(item) for item in await super().get_items(limit)]

    async def pop_item(self) -> Optional[TResponseInputItem]:
        popped = await super().pop_item()
        return None if popped is None else as_given(popped)

    def close(self) -> None:
        """``SQLiteSession.close``: nothing is held open between requests."""


agents.SQLiteSession = ConversationBackedSession  # type: ignore[assignment,misc]
agents.memory.SQLiteSession = ConversationBackedSession  # type: ignore[assignment,misc]


@pytest.fixture(autouse=True)
def _fresh_conversations() -> None:
    """Every test gets its own conversations, so its sessions start empty."""
    PLUGIN.fresh_prefix()
