"""AutoGen's ``save_state()`` / ``load_state()`` documents kept in a session's state.

AutoGen has no storage hook: an agent or a team hands out its state as a JSON document
(``await team.save_state()``) and takes one back (``await team.load_state(doc)``).
``SavedState`` keeps that document in a session's state document, under one key, and
writes it only at the revision it last read or wrote (``If-Match``): two processes
that both loaded the same state cannot both save over it, the second gets
``RevisionMismatch`` and must load again. Works with any object that has those two
methods; AutoGen itself is not imported.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Protocol

from .client import AgentSessionsClient
from .errors import NotFound
from .types import JSONObject


class Stateful(Protocol):
    """What AutoGen's agents and teams have."""

    async def save_state(self) -> Mapping[str, Any]: ...

    async def load_state(self, state: Mapping[str, Any]) -> None: ...


class SavedState:
    """The AutoGen state of one component, in the state of session ``session_id`` under
    ``key``. ``load`` before ``save`` (a session that has none yet may be saved at once)."""

    def __init__(self, client: AgentSessionsClient, session_id: str, *, key: str = "autogen"):
        self.client = client
        self.session_id = session_id
        self.key = key
        # The session's state and revision as last read or written; None: not read yet.
        self._state: JSONObject = {}
        self._revision: Optional[int] = None

    async def load(self, component: Stateful) -> bool:
        """Gives ``component`` the saved state; False (and nothing loaded) when there is
        none yet."""
        try:
            read = await self.client.state.get(self.session_id)
        except NotFound:
            self._state, self._revision = {}, None
            return False
        self._state, self._revision = dict(read["state"]), int(read["revision"])
        saved = self._state.get(self.key)
        if saved is None:
            return False
        await component.load_state(saved)
        return True

    async def save(self, component: Stateful) -> int:
        """Saves ``component``'s state at the revision last seen; answers the new one.
        ``RevisionMismatch`` when another process wrote the session in between."""
        if self._revision is None and await self.load(_Ignore()):
            # Saving over a state this process never loaded would lose it.
            raise ValueError(f"session {self.session_id} has a saved state: load it first")
        state = {**self._state, self.key: dict(await component.save_state())}
        written = await self.client.state.replace(self.session_id, state, if_match=self._revision)
        self._state, self._revision = dict(written["state"]), int(written["revision"])
        return self._revision


class _Ignore:
    """A component that takes a state and does nothing with it."""

    async def save_state(self) -> Mapping[str, Any]:
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        return None


__all__ = ["SavedState", "Stateful"]
