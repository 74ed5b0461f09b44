"""pytest plugin that runs the Agents SDK's own session tests against agent-sessions.

Used as ``pytest -p sessions_testkit.sdk_suite <sdist>/tests/memory/test_session.py``, and
on ``tests/extensions/memory/test_encrypt_session.py`` (``EncryptedSession`` over our
session), see ``scripts/ci.sh``. The test file is run exactly as the SDK ships it; this plugin

- starts the service (``AGENT_SESSIONS_BIN`` on ``AGENT_SESSIONS_BACKEND`` = ``sqlite``
  or ``postgres``, the latter a scratch database made from ``PG_URL``);
- replaces ``agents.SQLiteSession`` by ``ServiceBackedSession`` before the test file
  imports it: an ``AgentSessionsSession`` that takes ``SQLiteSession``'s constructor
  arguments and maps each (database, id) pair of a test to a fresh id on the service;
- deselects, by name, the tests that examine SQLite itself, each with its reason below.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Union

import agents
import agents.memory
import pytest

from agent_sessions_client import AgentSessionsSession

from .suite_plugin import SuitePlugin

DESELECTED: Dict[str, str] = {
    # SQLiteSession's private connection bookkeeping; the service has no client-side
    # database connections to open, reap or close.
    "test_sqlite_session_close_closes_worker_thread_connections": (
        "inspects SQLiteSession._connections (sqlite3 connections of worker threads)"
    ),
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": (
        "inspects SQLiteSession._connections (sqlite3 connections of exited threads)"
    ),
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": (
        "monkeypatches sqlite3.connect and inspects SQLiteSession._connections"
    ),
    "test_sqlite_session_keeps_connections_of_live_worker_threads": (
        "inspects SQLiteSession._connections (sqlite3 connections of live threads)"
    ),
    "test_sqlite_session_file_lock_is_shared_across_instances": (
        "inspects SQLiteSession's process-local per-file locks (_lock, _file_lock_counts)"
    ),
    # Corrupt rows are written with raw SQL into SQLite's agent_messages table; the
    # service stores only JSON objects, so such rows cannot exist there.
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": (
        "writes a corrupt row into SQLite's agent_messages table with raw SQL"
    ),
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": (
        "writes a corrupt row into SQLite's agent_messages table with raw SQL"
    ),
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": (
        "writes a corrupt row into SQLite's agent_messages table with raw SQL"
    ),
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": (
        "writes a corrupt row into SQLite's agent_messages table with raw SQL"
    ),
    # SQLite transaction and lock handling, provoked through the SQLite file.
    "test_sqlite_session_failed_add_items_releases_write_lock": (
        "probes SQLite's write lock and agent_sessions table in the local database file"
    ),
    "test_sqlite_session_failed_clear_session_rolls_back": (
        "drops SQLite's agent_sessions table to make the clear fail, then probes its lock"
    ),
    "test_sqlite_session_failed_pop_item_releases_write_lock": (
        "drops SQLite's agent_messages table to make the pop fail, then probes its lock"
    ),
    "test_sqlite_session_rollback_failure_evicts_connection": (
        "injects a sqlite3.Connection subclass whose rollback fails"
    ),
    "test_sqlite_session_close_retries_quarantined_connection": (
        "injects a sqlite3.Connection subclass whose rollback and close fail"
    ),
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": (
        "injects a sqlite3.Connection subclass that pauses inside commit()"
    ),
    # The behaviour is covered (RuntimeError, add_items([]) included) by
    # tests/unit/test_session_unit.py::test_closed_session_refuses_every_operation.
    "test_sqlite_session_closed_rejects_empty_add_items": (
        "matches SQLiteSession's own error text 'SQLiteSession is closed'"
    ),
    # tests/extensions/memory/test_encrypt_session.py: EncryptedSession authenticates a
    # popped item inside the SQLite transaction only when the backend is the SDK's own
    # SQLiteSession (`_pop_item_with_validation`; its docstring: other backends "do not
    # provide this atomic authentication guarantee").
    "test_encrypted_pop_wrong_key_preserves_recoverable_history": (
        "atomic authentication of a pop, which EncryptedSession gives only to SQLiteSession"
    ),
    "test_encrypted_pop_rechecks_authentication_after_expired_tail": (
        "atomic authentication of a pop, which EncryptedSession gives only to SQLiteSession"
    ),
    "test_encrypted_pop_authentication_is_atomic_with_concurrent_mutations": (
        "atomic authentication of a pop (SQLiteSession only), probed with sqlite3 on the file"
    ),
    "test_encrypted_pop_wrong_key_preserves_row_identity": (
        "reads SQLite's agent_messages table of the local file with sqlite3"
    ),
    "test_encrypted_pop_cancellation_waits_for_authentication_rollback": (
        "atomic authentication of a pop, which EncryptedSession gives only to SQLiteSession"
    ),
    # EncryptedSession keeps untrusted stored items out of a compaction only through a
    # backend's private `_get_compaction_snapshot` hook (SQLiteSession, AsyncSQLiteSession
    # and SQLAlchemySession have it); without it the SDK compacts the whole history.
    "test_encrypted_compaction_skips_unencrypted_stored_history": (
        "needs the backend's private _get_compaction_snapshot hook (SQLite and SQLAlchemy)"
    ),
}

PLUGIN = SuitePlugin(
    stand_in="SQLiteSession -> AgentSessionsSession",
    deselected=DESELECTED,
    why_deselected="these tests examine SQLite itself",
    served="SQLiteSession constructions were served by AgentSessionsSession",
)
pytest_configure = PLUGIN.pytest_configure
pytest_unconfigure = PLUGIN.pytest_unconfigure
pytest_report_header = PLUGIN.pytest_report_header
pytest_collection_modifyitems = PLUGIN.pytest_collection_modifyitems
pytest_terminal_summary = PLUGIN.pytest_terminal_summary


class ServiceBackedSession(AgentSessionsSession):
    """``SQLiteSession``'s constructor, an ``AgentSessionsSession`` underneath.

    Sessions of one test that share a database file and an id share their history, as
    in SQLite; an in-memory database is private to its instance, so it gets its own id.
    """

    def __init__(
        self,
        session_id: str,
        db_path: Union[str, Path] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Optional[Union[agents.SessionSettings, Mapping[str, Any]]] = None,
    ) -> None:
        if str(db_path) == ":memory:":
            database = uuid.uuid4().hex[:8]
        else:
            database = hashlib.sha256(str(db_path).encode()).hexdigest()[:8]
        assert PLUGIN.service_url is not None, "the service is not running"
        super().__init__(
            f"{PLUGIN.test_prefix}{database}-{session_id}",
            base_url=PLUGIN.service_url,
            session_settings=session_settings,
        )
        self.db_path = db_path
        PLUGIN.made.append(self.session_id)


agents.SQLiteSession = ServiceBackedSession  # type: ignore[assignment,misc]
agents.memory.SQLiteSession = ServiceBackedSession  # type: ignore[assignment,misc]


@pytest.fixture(autouse=True)
def _fresh_session_ids() -> Iterator[None]:
    """Every test gets its own id prefix, so its sessions start empty on the service."""
    PLUGIN.fresh_prefix()
    yield
