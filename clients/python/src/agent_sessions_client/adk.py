"""``AgentSessionsService``: Google ADK's ``BaseSessionService`` over this API.

``Runner(..., session_service=AgentSessionsService(base_url=...))`` keeps ADK sessions,
their events and their state in the service instead of ADK's own database:

- an ADK session ``(app_name, user_id, session_id)`` is one session here, owned by that
  app and user (ADK's ids are unique per app and user, so the same ``s1`` of two users is
  two sessions); its ADK ids are in its metadata;
- each event is an item, exactly as ADK serializes it (``Event.model_dump``);
- state is split by prefix as ADK splits it: ``app:`` keys go to the app's state
  document, ``user:`` keys to the user's, ``temp:`` keys are never stored, the rest is the
  session's state; an event's delta commits with the event, in one request;
- a writer whose session object is stale (someone appended since it was read) is
  refused with ADK's ``StaleSessionError``, through ``If-Match`` on the append.

Importing this module registers the ``agent-sessions://host:port`` URI scheme with ADK,
so ``adk web --session_service_uri agent-sessions://localhost:8080`` works once the agent
directory's ``services.py`` imports it. Needs the ``adk`` extra.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from datetime import datetime, timezone
from typing import Any, Optional, cast
from urllib.parse import urlsplit

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from ._owned_client import client_for
from .client import AgentSessionsClient
from .errors import Conflict, NotFound, RevisionMismatch
from .types import JSONObject

SCHEME = "agent-sessions"
_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
# What a session, an app or a user may be called here; other names are hashed.
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]*[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]*$")
_METADATA = ("adk_app_name", "adk_user_id", "adk_session_id", "adk_created_at")


class AgentSessionsService(BaseSessionService):
    """ADK sessions in agent-sessions. ``client`` is shared (not closed here); without
    one the service makes its own from ``base_url`` (or ``uri``,
    ``agent-sessions://host:port``) and ``api_key`` (default: ``AGENT_SESSIONS_API_KEY``)."""

    def __init__(
        self,
        client: Optional[AgentSessionsClient] = None,
        *,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        uri: Optional[str] = None,
        **_: Any,
    ) -> None:
        if uri is not None:
            base_url = _base_url(uri)
        api_key = api_key or os.environ.get("AGENT_SESSIONS_API_KEY")
        self.client, self._owns_client = client_for(client, base_url=base_url, api_key=api_key)

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Optional[dict[str, Any]] = None,
        session_id: Optional[str] = None,
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        key = _session_key(app_name, user_id, session_id)
        # A session's last update is its newest event's time, or when it was made.
        created_at = datetime.now(timezone.utc).timestamp()
        metadata = dict(zip(_METADATA, (app_name, user_id, session_id, repr(created_at))))
        try:
            created = await self.client.sessions.create(
                id=key,
                metadata=metadata,
                app_id=_owner(app_name),
                user_id=_owner(user_id),
            )
        except Conflict as error:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from error
        revision = int(created["revision"])
        deltas = _session_util.extract_json_safe_state_delta(state or {})
        if any(deltas.values()):
            await self.client.items.add(key, [], if_match=revision, **_delta_arguments(deltas))
            revision += 1
        merged, _ = await self._state(key)
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=merged,
            last_update_time=created_at,
        )
        session._storage_update_marker = str(revision)
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: Optional[GetSessionConfig] = None,
    ) -> Optional[Session]:
        key = _session_key(app_name, user_id, session_id)
        try:
            # The state first: the events read after it are at least as new, so an
            # append at this revision never follows events this read missed.
            merged, revision = await self._state(key)
            events, newest = await self._events(key, config)
            if newest is None:
                made = (await self.client.sessions.get(key))["metadata"]
                newest = float(made.get("adk_created_at", 0.0))
        except NotFound:
            return None
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=merged,
            events=events,
            last_update_time=newest,
        )
        session._storage_update_marker = str(revision)
        return session

    async def list_sessions(
        self, *, app_name: str, user_id: Optional[str] = None
    ) -> ListSessionsResponse:
        found = [
            row
            async for row in self.client.sessions.list(
                app_id=_owner(app_name),
                user_id=_owner(user_id) if user_id is not None else None,
            )
            if row["metadata"].get("adk_app_name") == app_name
            and (user_id is None or row["metadata"].get("adk_user_id") == user_id)
        ]
        sessions = []
        for row in found:
            metadata = row["metadata"]
            try:
                merged, _ = await self._state(str(row["id"]))
            except NotFound:
                continue  # deleted meanwhile
            made = float(metadata.get("adk_created_at", 0.0))
            updated = _timestamp(row["updated_at"]) if row["item_count"] else made
            sessions.append(
                Session(
                    id=metadata["adk_session_id"],
                    app_name=app_name,
                    user_id=metadata["adk_user_id"],
                    state=merged,
                    last_update_time=updated,
                )
            )
        # Oldest update first, as ADK's own services order them.
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        with contextlib.suppress(NotFound):
            await self.client.sessions.delete(_session_key(app_name, user_id, session_id))

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        try:
            read = await self.client.state.get_user(_owner(app_name), _owner(user_id))
        except NotFound:
            return {}
        return dict(read["state"])

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        # Temp state lives in the session object for the rest of the invocation only.
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        key = _session_key(session.app_name, session.user_id, session.id)
        marker = session._storage_update_marker
        deltas = _session_util.extract_json_safe_state_delta(event.actions.state_delta or {})
        try:
            await self.client.items.add(
                key,
                [event.model_dump(mode="json", exclude_none=True)],
                # A session object of unknown revision may only be appended to if it exists.
                if_match=int(marker) if marker is not None else "*",
                **_delta_arguments(deltas),
            )
        except RevisionMismatch as error:
            if "does not exist" in error.detail:
                raise SessionNotFoundError(f"Session {session.id} not found.") from error
            raise StaleSessionError(_STALE) from error
        # One append is one step of the session's revision.
        if marker is not None:
            session._storage_update_marker = str(int(marker) + 1)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> AgentSessionsService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _state(self, key: str) -> tuple[dict[str, Any], int]:
        """The session's state merged as ADK shows it (app and user keys prefixed), and
        the revision it was read at, in one request."""
        read = await self.client.state.get(key, include=("user", "app"))
        merged: dict[str, Any] = {}
        for prefix, document in (
            (State.APP_PREFIX, read.get("app_state")),
            (State.USER_PREFIX, read.get("user_state")),
        ):
            for name, value in cast(JSONObject, document or {}).items():
                merged[prefix + name] = value
        merged.update(read["state"])
        return merged, int(read["revision"])

    async def _events(
        self, key: str, config: Optional[GetSessionConfig]
    ) -> tuple[list[Event], Optional[float]]:
        """The session's events, oldest first, as ``config`` limits them, and the time of
        its newest event (None: it has none, or none was read)."""
        limit = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        if limit == 0:
            return [], None
        if limit is None and not after:
            events = [Event.model_validate(i["item"]) async for i in self.client.items.list(key)]
            return events, events[-1].timestamp if events else None
        newest_first: list[Event] = []
        newest: Optional[float] = None
        async for item in self.client.items.list(key, order="desc"):
            event = Event.model_validate(item["item"])
            newest = event.timestamp if newest is None else newest
            if after and event.timestamp < after:
                break
            newest_first.append(event)
            if limit is not None and len(newest_first) >= limit:
                break
        return newest_first[::-1], newest


def _delta_arguments(deltas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "state_delta": deltas["session"] or None,
        "user_state_delta": deltas["user"] or None,
        "app_state_delta": deltas["app"] or None,
    }


def _session_key(app_name: str, user_id: str, session_id: str) -> str:
    """The id of the session here: ADK's ids are unique per app and user, ours are not."""
    digest = hashlib.sha256(f"{app_name}\0{user_id}\0{session_id}".encode()).hexdigest()
    return f"adk-{digest[:40]}"


def _owner(name: str) -> str:
    """An app's or user's name as an owner id: itself when the id alphabet allows it."""
    if len(name) <= 120 and _NAME.fullmatch(name):
        return name
    return "sha256-" + hashlib.sha256(name.encode()).hexdigest()[:40]


def _timestamp(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def _base_url(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.scheme not in (SCHEME, f"{SCHEME}+https"):
        raise ValueError(f"not an {SCHEME}:// URI: {uri}")
    scheme = "https" if parts.scheme.endswith("+https") else "http"
    return f"{scheme}://{parts.netloc}{parts.path}"


def _factory(uri: str, **kwargs: Any) -> AgentSessionsService:
    return AgentSessionsService(uri=uri, **kwargs)


def register() -> None:
    """Registers ``agent-sessions://`` (and ``agent-sessions+https://``) with ADK's
    service registry; importing this module does it."""
    from google.adk.cli.service_registry import get_service_registry

    registry = get_service_registry()
    registry.register_session_service(SCHEME, _factory)
    registry.register_session_service(f"{SCHEME}+https", _factory)


register()

__all__ = ["SCHEME", "AgentSessionsService", "register"]
