"""``AgentSessionsRepository``: Strands Agents' ``SessionRepository`` over this API.

``RepositorySessionManager(session_id=..., session_repository=AgentSessionsRepository(...))``
keeps a Strands session in the service instead of local files or S3. A Strands session is
one session here:

- the ``Session`` record, each agent (its state, conversation manager state and internal
  state) and each multi-agent's state live in the session's state document, under
  ``strands``; every change to them is a read, then a write of the whole document with
  ``If-Match``, so two processes never overwrite each other's agents silently (the
  later one reads again and redoes its change on what the other wrote);
- messages are the session's items, ``{"strands_agent_id": ..., **SessionMessage}``, in
  the order they were made; ``list_messages`` pages through them.

Needs the ``strands`` extra (``pip install "agent-sessions-client[strands]"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from strands.session.session_repository import SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage

from ._loop_thread import run_blocking
from ._owned_client import client_for
from .client import AgentSessionsClient
from .errors import Conflict, NotFound, RevisionMismatch
from .types import JSONObject

if TYPE_CHECKING:
    from strands.multiagent import MultiAgentBase

# Where a Strands session keeps its records in the session's state document.
_KEY = "strands"
# The member of an item that names the agent whose message it is.
_AGENT = "strands_agent_id"


class AgentSessionsRepository(SessionRepository):
    """A Strands ``SessionRepository`` on agent-sessions (blocking calls, as Strands makes
    them). ``client`` is shared and not closed here; without one the repository makes
    its own from ``base_url`` and ``api_key``."""

    def __init__(
        self,
        client: Optional[AgentSessionsClient] = None,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
    ) -> None:
        self.client, self._owns_client = client_for(client, base_url=base_url, api_key=api_key)

    # --- the session ---------------------------------------------------------------------

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        async def create() -> Session:
            try:
                await self.client.sessions.create(id=session.session_id)
            except Conflict as error:
                raise SessionException(f"Session {session.session_id} already exists") from error
            records = {"session": session.to_dict(), "agents": {}, "multi_agents": {}}
            await self.client.state.merge(session.session_id, {_KEY: records}, if_match=1)
            return session

        return run_blocking(create())

    def read_session(self, session_id: str, **kwargs: Any) -> Optional[Session]:
        record = run_blocking(self._records(session_id))
        return Session.from_dict(record["session"]) if record else None

    # --- agents --------------------------------------------------------------------------

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        agent_id = session_agent.agent_id

        def add(record: JSONObject) -> None:
            if agent_id in record["agents"]:
                raise SessionException(f"Agent {agent_id} already exists in session {session_id}")
            record["agents"][agent_id] = session_agent.to_dict()

        run_blocking(self._change(session_id, add))

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> Optional[SessionAgent]:
        record = run_blocking(self._records(session_id))
        agent = record["agents"].get(agent_id) if record else None
        return SessionAgent.from_dict(agent) if agent else None

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        agent_id = session_agent.agent_id

        def replace(record: JSONObject) -> None:
            agent = record["agents"].get(agent_id)
            if agent is None:
                raise SessionException(f"Agent {agent_id} does not exist in session {session_id}")
            # The record keeps when the agent was made.
            record["agents"][agent_id] = {
                **session_agent.to_dict(),
                "created_at": agent["created_at"],
            }

        run_blocking(self._change(session_id, replace))

    # --- messages ------------------------------------------------------------------------

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        async def create() -> None:
            record = await self._records(session_id)
            if record is None:
                raise SessionException(f"Session {session_id} does not exist")
            if agent_id not in record["agents"]:
                raise SessionException(f"Agent {agent_id} does not exist in session {session_id}")
            item = {_AGENT: agent_id, **session_message.to_dict()}
            await self.client.items.add(session_id, [item])

        run_blocking(create())

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> Optional[SessionMessage]:
        found = run_blocking(self._find_message(session_id, agent_id, message_id))
        return SessionMessage.from_dict(found[1]) if found else None

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        async def update() -> None:
            message_id = session_message.message_id
            found = await self._find_message(session_id, agent_id, message_id)
            if found is None:
                raise SessionException(
                    f"Message {message_id} does not exist in session {session_id}"
                )
            item_id, stored = found
            updated = {_AGENT: agent_id, **session_message.to_dict()}
            updated["created_at"] = stored["created_at"]
            await self.client.items.replace_one(session_id, item_id, updated)

        run_blocking(update())

    def list_messages(
        self,
        session_id: str,
        agent_id: str,
        limit: Optional[int] = None,
        offset: int = 0,
        **kwargs: Any,
    ) -> list[SessionMessage]:
        async def listed() -> list[SessionMessage]:
            messages = await self._messages(session_id, agent_id)
            end = None if limit is None else offset + limit
            return [SessionMessage.from_dict(m) for _, m in messages[offset:end]]

        return run_blocking(listed())

    # --- multi-agents --------------------------------------------------------------------

    def create_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        state = multi_agent.serialize_state()

        def add(record: JSONObject) -> None:
            record["multi_agents"][multi_agent.id] = state

        run_blocking(self._change(session_id, add))

    def read_multi_agent(
        self, session_id: str, multi_agent_id: str, **kwargs: Any
    ) -> Optional[dict[str, Any]]:
        record = run_blocking(self._records(session_id))
        state = record["multi_agents"].get(multi_agent_id) if record else None
        return dict(state) if state is not None else None

    def update_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        def replace(record: JSONObject) -> None:
            if multi_agent.id not in record["multi_agents"]:
                raise SessionException(
                    f"MultiAgent {multi_agent.id} does not exist in session {session_id}"
                )
            record["multi_agents"][multi_agent.id] = multi_agent.serialize_state()

        run_blocking(self._change(session_id, replace))

    def close(self) -> None:
        if self._owns_client:
            run_blocking(self.client.aclose())

    # --- the state document and the items ------------------------------------------------

    async def _records(self, session_id: str) -> Optional[JSONObject]:
        """The Strands records of the session, or None when it has none."""
        try:
            read = await self.client.state.get(session_id)
        except NotFound:
            return None
        record = read["state"].get(_KEY)
        return record if isinstance(record, dict) and "session" in record else None

    async def _change(self, session_id: str, change: Callable[[JSONObject], None]) -> None:
        """Applies ``change`` to the records and writes the whole document back, at the
        revision it was read at; another writer in between makes it read and redo."""
        while True:
            try:
                read = await self.client.state.get(session_id)
            except NotFound as error:
                raise SessionException(f"Session {session_id} does not exist") from error
            record = read["state"].get(_KEY)
            if not isinstance(record, dict) or "session" not in record:
                raise SessionException(f"Session {session_id} does not exist")
            change(record)
            state = {**read["state"], _KEY: record}
            try:
                await self.client.state.replace(session_id, state, if_match=read["revision"])
                return
            except RevisionMismatch:
                continue

    async def _messages(self, session_id: str, agent_id: str) -> list[tuple[str, JSONObject]]:
        """The agent's messages (with their item ids), oldest first."""
        try:
            items = [item async for item in self.client.items.list(session_id)]
        except NotFound:
            return []
        return [
            (str(item["id"]), dict(item["item"]))
            for item in items
            if item["item"].get(_AGENT) == agent_id
        ]

    async def _find_message(
        self, session_id: str, agent_id: str, message_id: int
    ) -> Optional[tuple[str, JSONObject]]:
        for item_id, message in await self._messages(session_id, agent_id):
            if message.get("message_id") == message_id:
                return item_id, message
        return None


__all__ = ["AgentSessionsRepository"]
