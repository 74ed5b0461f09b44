"""``AgentSessionsClient``: the whole agent-sessions API over one async HTTP pool.

Resources are grouped as ``client.sessions``, ``client.items``, ``client.agents`` and
``client.runs``. Listings are async iterators that follow the ``after`` cursor, so a
caller never handles pagination unless it asks for one page (``page()``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, AsyncIterator, List, Mapping, Optional, Sequence, Union, cast
from urllib.parse import quote

import httpx

from ._sse import SSEDecoder
from ._transport import DEFAULT_RETRY, DEFAULT_TIMEOUT, Call, QueryParams, RetryPolicy, Transport
from .errors import APIConnectionError, NotFound
from .types import (
    Agent,
    Approval,
    Compaction,
    Item,
    JSONObject,
    OwnerState,
    Page,
    Run,
    RunEvent,
    RunStatusEvent,
    Session,
    SessionState,
    ToolOutput,
    make_event,
)

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
MAX_BATCH = 1000
"""Items per append request: the service's limit."""

STREAM_TIMEOUT = httpx.Timeout(5.0, read=60.0)
"""Event streams: the service sends a keep-alive every 15 s, so 60 s of silence is a
dead connection, which is then resumed with ``Last-Event-ID``."""

WAIT_TIMEOUT = httpx.Timeout(5.0, read=None)
"""Calls that wait for a run or an LLM: the service bounds them (``RUN_WAIT_SECS``)."""


class _Unset:
    """Marks an argument that was not given, where ``None`` means JSON ``null``."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

RunInput = Union[str, Mapping[str, Any], Sequence[Mapping[str, Any]]]


def _p(*segments: str) -> str:
    """A path from segments, each percent-encoded (ids are caller-chosen strings)."""
    return "/" + "/".join(quote(s, safe="") for s in segments)


def _drop_unset(**fields: Any) -> JSONObject:
    return {k: v for k, v in fields.items() if v is not UNSET}


def _drop_none(**fields: Any) -> JSONObject:
    return {k: v for k, v in fields.items() if v is not None}


IfMatch = Union[int, str, None]
"""A session revision (an ``int``, as ``Session["revision"]`` gives it), ``"*"`` (the
session exists), or ``None`` (no condition)."""


def _if_match(if_match: IfMatch) -> dict[str, str]:
    if if_match is None:
        return {}
    return {"if-match": if_match if if_match == "*" else f'"{int(if_match)}"'}


def _page(body: Any) -> Page[Any]:
    return Page(
        data=list(body.get("data", [])),
        first_id=body.get("first_id"),
        last_id=body.get("last_id"),
        has_more=bool(body.get("has_more")),
    )


def _session_filter(metadata: Optional[Mapping[str, str]], **params: Any) -> List[Any]:
    """A listing's query: ``metadata[key]=value`` pairs, then the parameters given."""
    query: List[Any] = [(f"metadata[{k}]", v) for k, v in (metadata or {}).items()]
    return query + [(k, v) for k, v in params.items() if v is not None]


class _Resource:
    def __init__(self, transport: Transport) -> None:
        self._t = transport

    async def _json(self, call: Call) -> Any:
        response = await self._t.send(call)
        return response.json() if response.content else None

    async def _get_page(self, path: str, params: QueryParams) -> Page[Any]:
        return _page(await self._json(Call("GET", path, params, replay_safe=True)))

    async def _iterate(
        self, path: str, params: List[Any], page_size: int, after: Optional[str]
    ) -> AsyncIterator[Any]:
        """Every row of a listing, page after page, following ``last_id``."""
        while True:
            cursor = [("after", after)] if after else []
            page = await self._get_page(path, [*params, ("limit", page_size), *cursor])
            for row in page.data:
                yield row
            if not page.has_more or not page.last_id:
                return
            after = page.last_id


class Sessions(_Resource):
    """``/v1/sessions``: create, read, list, change, delete, fork and compact sessions."""

    async def create(
        self,
        *,
        id: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        agent_id: Optional[str] = None,
        app_id: Optional[str] = None,
        user_id: Optional[str] = None,
        expires_after: Optional[Mapping[str, Any]] = UNSET,
    ) -> Session:
        """Create a session (its id is generated when not given); 409 ``Conflict`` if taken.
        ``app_id`` and ``user_id`` name its owners, whose state documents its appends may
        change. ``expires_after={"anchor": "last_active_at", "seconds": 86400}`` deletes
        it after a day without activity; ``None`` keeps it despite the server's default."""
        body = {
            **_drop_none(
                id=id, metadata=metadata, agent_id=agent_id, app_id=app_id, user_id=user_id
            ),
            **_drop_unset(expires_after=expires_after),
        }
        return cast(Session, await self._json(Call("POST", "/v1/sessions", json=body)))

    async def get(self, session_id: str) -> Session:
        return cast(
            Session,
            await self._json(Call("GET", _p("v1", "sessions", session_id), replay_safe=True)),
        )

    def list(
        self,
        *,
        metadata: Optional[Mapping[str, str]] = None,
        app_id: Optional[str] = None,
        user_id: Optional[str] = None,
        order: Optional[str] = None,
        page_size: int = 100,
        after: Optional[str] = None,
    ) -> AsyncIterator[Session]:
        """All sessions (newest first unless ``order="asc"``) whose metadata holds every
        pair of ``metadata``, of the app and user named; pages are fetched as the
        iteration goes."""
        params = _session_filter(metadata, app_id=app_id, user_id=user_id, order=order)
        return self._iterate("/v1/sessions", params, page_size, after)

    async def page(
        self,
        *,
        metadata: Optional[Mapping[str, str]] = None,
        app_id: Optional[str] = None,
        user_id: Optional[str] = None,
        limit: int = 100,
        order: Optional[str] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> Page[Session]:
        """One page of the listing, for callers that keep the cursor themselves."""
        params = _session_filter(
            metadata,
            app_id=app_id,
            user_id=user_id,
            limit=limit,
            order=order,
            after=after,
            before=before,
        )
        return await self._get_page("/v1/sessions", params)

    async def update(
        self,
        session_id: str,
        *,
        metadata: Optional[Mapping[str, Optional[str]]] = UNSET,
        agent_id: Optional[str] = UNSET,
        expires_after: Optional[Mapping[str, Any]] = UNSET,
        if_match: IfMatch = None,
    ) -> Session:
        """Change a session. ``metadata`` is a JSON merge patch (a ``None`` value deletes
        that key, ``metadata=None`` deletes all); ``agent_id=None`` detaches the agent;
        ``expires_after=None`` keeps the session until it is deleted. With ``if_match``
        only at that revision, else ``RevisionMismatch``."""
        body = _drop_unset(metadata=metadata, agent_id=agent_id, expires_after=expires_after)
        call = Call(
            "PATCH",
            _p("v1", "sessions", session_id),
            json=body,
            headers=_if_match(if_match),
            replay_safe=if_match is None,
        )
        return cast(Session, await self._json(call))

    async def delete(self, session_id: str, *, if_match: IfMatch = None) -> None:
        """Delete a session with all its items and runs (with ``if_match``, only at that
        revision)."""
        call = Call("DELETE", _p("v1", "sessions", session_id), headers=_if_match(if_match))
        await self._t.send(call)

    async def fork(
        self,
        session_id: str,
        *,
        id: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        through_item_id: Optional[str] = None,
        before_run_id: Optional[str] = None,
    ) -> Session:
        """A new session holding copies of this one's items, through ``through_item_id``
        (default: all) or as the history stood before ``before_run_id`` started."""
        if through_item_id is not None and before_run_id is not None:
            raise ValueError("give through_item_id or before_run_id, not both")
        body = _drop_none(
            id=id, metadata=metadata, through_item_id=through_item_id, before_run_id=before_run_id
        )
        call = Call("POST", _p("v1", "sessions", session_id, "fork"), json=body)
        return cast(Session, await self._json(call))

    async def compact(
        self,
        session_id: str,
        *,
        keep_recent_items: Optional[int] = None,
        model: Optional[str] = None,
        instructions: Optional[str] = None,
    ) -> Compaction:
        """Summarise every item older than the last ``keep_recent_items`` (the service's
        default is 10). The items stay; runs send the summary instead of them."""
        body = _drop_none(
            keep_recent_items=keep_recent_items, model=model, instructions=instructions
        )
        call = Call(
            "POST",
            _p("v1", "sessions", session_id, "compact"),
            json=body,
            timeout=WAIT_TIMEOUT,
            long=True,
        )
        return cast(Compaction, await self._json(call))


class Items(_Resource):
    """``/v1/sessions/{id}/items``: a session's history."""

    def list(
        self,
        session_id: str,
        *,
        order: str = "asc",
        page_size: int = 100,
        after: Optional[str] = None,
    ) -> AsyncIterator[Item]:
        """Every item, oldest first (or newest first with ``order="desc"``)."""
        path = _p("v1", "sessions", session_id, "items")
        return self._iterate(path, [("order", order)], page_size, after)

    async def page(
        self,
        session_id: str,
        *,
        limit: int = 100,
        order: Optional[str] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> Page[Item]:
        """One page of items (``limit`` 1-1000)."""
        params = [
            (k, v)
            for k, v in (("limit", limit), ("order", order), ("after", after), ("before", before))
            if v is not None
        ]
        return await self._get_page(_p("v1", "sessions", session_id, "items"), params)

    async def add(
        self,
        session_id: str,
        items: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: Optional[str] = None,
        if_match: IfMatch = None,
        state_delta: Optional[Mapping[str, Any]] = None,
        user_state_delta: Optional[Mapping[str, Any]] = None,
        app_state_delta: Optional[Mapping[str, Any]] = None,
        app_id: Optional[str] = None,
        user_id: Optional[str] = None,
    ) -> List[Item]:
        """Append ``items`` in order, creating the session if needed.

        One request per 1,000 items (the service's limit). Each request carries its own
        ``Idempotency-Key``, kept across that request's retries, so a retry after a lost
        response appends nothing twice. With ``idempotency_key`` the keys are derived from
        it (``key``, or ``key:1``, ``key:2``… for several batches), which makes a repeat of
        the whole call safe too. With ``if_match`` the append happens only at that
        revision (else ``RevisionMismatch``), so it must fit in one request.

        ``state_delta``, ``user_state_delta`` and ``app_state_delta`` are JSON merge
        patches of the session's state and of its user's and app's, committed with the
        items or not at all (so the items must fit in one request; none is fine).
        ``app_id`` and ``user_id`` name the session's owners, taken by a session that has
        none.
        """
        path = _p("v1", "sessions", session_id, "items")
        created: List[Item] = []
        extra = _drop_none(
            state_delta=state_delta,
            user_state_delta=user_state_delta,
            app_state_delta=app_state_delta,
            app_id=app_id,
            user_id=user_id,
        )
        batches = [items[i : i + MAX_BATCH] for i in range(0, len(items), MAX_BATCH)]
        if (if_match is not None or extra) and len(batches) > 1:
            raise ValueError(f"an append with if_match or state holds at most {MAX_BATCH} items")
        if extra and not batches:
            batches = [[]]
        for n, batch in enumerate(batches):
            if idempotency_key is None:
                key = str(uuid.uuid4())
            else:
                key = idempotency_key if len(batches) == 1 else f"{idempotency_key}:{n + 1}"
            call = Call(
                "POST",
                path,
                json={"items": list(batch), **extra},
                headers={"idempotency-key": key, **_if_match(if_match)},
                replay_safe=True,
            )
            body = await self._json(call)
            created.extend(body.get("data", []))
        return created

    async def get(self, session_id: str, item_id: str) -> Item:
        call = Call("GET", _p("v1", "sessions", session_id, "items", item_id), replay_safe=True)
        return cast(Item, await self._json(call))

    async def replace(
        self,
        session_id: str,
        items: Sequence[Mapping[str, Any]],
        *,
        after: Optional[str] = None,
        if_match: IfMatch = None,
        idempotency_key: Optional[str] = None,
    ) -> List[Item]:
        """Replace the whole history (or what follows the item ``after``) with ``items``
        (at most 1,000), at once; the new items get new ids and seqs. With ``if_match``
        only at that revision: compare-and-swap on the history."""
        if len(items) > MAX_BATCH:
            raise ValueError(f"a replacement holds at most {MAX_BATCH} items")
        key = idempotency_key or str(uuid.uuid4())
        call = Call(
            "PUT",
            _p("v1", "sessions", session_id, "items"),
            params=[("after", after)] if after is not None else (),
            json={"items": list(items)},
            headers={"idempotency-key": key, **_if_match(if_match)},
            replay_safe=True,
        )
        return cast(List[Item], (await self._json(call)).get("data", []))

    async def replace_one(
        self, session_id: str, item_id: str, item: Mapping[str, Any], *, if_match: IfMatch = None
    ) -> Item:
        """Replace one item's object in place (its id and seq stay)."""
        call = Call(
            "PUT",
            _p("v1", "sessions", session_id, "items", item_id),
            json={"item": item},
            headers=_if_match(if_match),
            replay_safe=if_match is None,
        )
        return cast(Item, await self._json(call))

    async def delete(self, session_id: str, item_id: str) -> None:
        await self._t.send(Call("DELETE", _p("v1", "sessions", session_id, "items", item_id)))

    async def pop(self, session_id: str) -> Optional[Item]:
        """Remove and return the newest item; None when the session has none.

        A missing session still raises ``NotFound`` (``session_not_found``) here; the
        Agents SDK adapter treats it as empty. Never retried once it may have reached the
        service: a repeat could remove a second item.
        """
        try:
            call = Call("DELETE", _p("v1", "sessions", session_id, "items", "last"))
            return cast(Item, await self._json(call))
        except NotFound as error:
            if error.code == "session_empty":
                return None
            raise

    async def clear(self, session_id: str) -> None:
        """Remove every item and keep the session (replay-safe: clearing twice is clearing)."""
        call = Call("DELETE", _p("v1", "sessions", session_id, "items"), replay_safe=True)
        await self._t.send(call)


class States(_Resource):
    """State documents: a session's (``/v1/sessions/{id}/state``), and those its app and
    its user share (``/v1/apps/{app_id}/state``, ``/v1/apps/{app_id}/users/{user_id}/state``),
    each written with its revision."""

    async def get(self, session_id: str, *, include: Sequence[str] = ()) -> SessionState:
        """The session's state; ``include=("user", "app")`` adds its user's and app's
        documents, read in the same snapshot."""
        params = [("include", ",".join(include))] if include else []
        call = Call(
            "GET", _p("v1", "sessions", session_id, "state"), params=params, replay_safe=True
        )
        return cast(SessionState, await self._json(call))

    async def replace(
        self,
        session_id: str,
        state: Mapping[str, Any],
        *,
        if_match: IfMatch = None,
        idempotency_key: Optional[str] = None,
        app_id: Optional[str] = None,
        user_id: Optional[str] = None,
    ) -> SessionState:
        """Replace the state (creating the session if needed); with ``if_match`` only at
        that revision, else ``RevisionMismatch``. ``app_id`` and ``user_id`` name the
        session's owners, taken by a session that has none."""
        path = _p("v1", "sessions", session_id, "state")
        body = {"state": state, **_drop_none(app_id=app_id, user_id=user_id)}
        return cast(SessionState, await self._write("PUT", path, body, if_match, idempotency_key))

    async def merge(
        self,
        session_id: str,
        patch: Mapping[str, Any],
        *,
        if_match: IfMatch = None,
        idempotency_key: Optional[str] = None,
        app_id: Optional[str] = None,
        user_id: Optional[str] = None,
    ) -> SessionState:
        """Apply ``patch`` as a JSON merge patch (``None`` removes a key, objects merge)."""
        path = _p("v1", "sessions", session_id, "state")
        body = {"state": patch, **_drop_none(app_id=app_id, user_id=user_id)}
        return cast(SessionState, await self._write("PATCH", path, body, if_match, idempotency_key))

    async def get_app(self, app_id: str) -> OwnerState:
        """The state shared by the app's sessions (``NotFound`` when it has none)."""
        call = Call("GET", _p("v1", "apps", app_id, "state"), replay_safe=True)
        return cast(OwnerState, await self._json(call))

    async def replace_app(
        self, app_id: str, state: Mapping[str, Any], *, if_match: IfMatch = None
    ) -> OwnerState:
        path = _p("v1", "apps", app_id, "state")
        return cast(OwnerState, await self._write("PUT", path, {"state": state}, if_match))

    async def merge_app(
        self, app_id: str, patch: Mapping[str, Any], *, if_match: IfMatch = None
    ) -> OwnerState:
        path = _p("v1", "apps", app_id, "state")
        return cast(OwnerState, await self._write("PATCH", path, {"state": patch}, if_match))

    async def get_user(self, app_id: str, user_id: str) -> OwnerState:
        """The state shared by one user's sessions of the app."""
        call = Call("GET", _p("v1", "apps", app_id, "users", user_id, "state"), replay_safe=True)
        return cast(OwnerState, await self._json(call))

    async def replace_user(
        self, app_id: str, user_id: str, state: Mapping[str, Any], *, if_match: IfMatch = None
    ) -> OwnerState:
        path = _p("v1", "apps", app_id, "users", user_id, "state")
        return cast(OwnerState, await self._write("PUT", path, {"state": state}, if_match))

    async def merge_user(
        self, app_id: str, user_id: str, patch: Mapping[str, Any], *, if_match: IfMatch = None
    ) -> OwnerState:
        path = _p("v1", "apps", app_id, "users", user_id, "state")
        return cast(OwnerState, await self._write("PATCH", path, {"state": patch}, if_match))

    async def _write(
        self,
        method: str,
        path: str,
        body: JSONObject,
        if_match: IfMatch,
        idempotency_key: Optional[str] = None,
    ) -> Any:
        # Writing the same state (or merge patch) twice leaves it as once; with If-Match a
        # repeat after a lost answer would be refused, so a conditional write is repeated
        # only under an Idempotency-Key, which answers the repeat as the first time.
        headers = _if_match(if_match)
        if idempotency_key is not None:
            headers["idempotency-key"] = idempotency_key
        call = Call(
            method,
            path,
            json=body,
            headers=headers,
            replay_safe=if_match is None or idempotency_key is not None,
        )
        return await self._json(call)


class Checkpoints(_Resource):
    """Checkpoints of an agent's execution (LangGraph's model), per session and namespace:
    ``checkpoint`` and each blob and write are ``{"type": ..., "data": <base64>}``."""

    async def put(
        self,
        session_id: str,
        checkpoint_id: str,
        checkpoint: Mapping[str, Any],
        *,
        namespace: str = "",
        parent_id: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        channel_versions: Optional[Mapping[str, str]] = None,
        blobs: Sequence[Mapping[str, Any]] = (),
        if_match: IfMatch = None,
    ) -> JSONObject:
        """Store a checkpoint (the same id again replaces it) with the blobs of the
        channels it changed; makes the session if needed. The request is idempotent as
        it is (a ``PUT``), so its retries need no ``Idempotency-Key``."""
        body = {
            "parent_id": parent_id,
            "checkpoint": dict(checkpoint),
            "metadata": dict(metadata or {}),
            "channel_versions": dict(channel_versions or {}),
            "blobs": [dict(b) for b in blobs],
        }
        call = Call(
            "PUT",
            _p("v1", "sessions", session_id, "checkpoints", checkpoint_id),
            params=[("namespace", namespace)],
            json=body,
            headers=_if_match(if_match),
            replay_safe=True,
        )
        return cast(JSONObject, await self._json(call))

    async def put_writes(
        self,
        session_id: str,
        checkpoint_id: str,
        task_id: str,
        writes: Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        task_path: str = "",
    ) -> None:
        """Store a task's writes (``{"idx", "channel", "type", "data"}``) on a checkpoint.
        Writing the same ``(task_id, idx)`` again keeps the first (a negative ``idx``
        replaces it), so a retry changes nothing and needs no ``Idempotency-Key``."""
        call = Call(
            "POST",
            _p("v1", "sessions", session_id, "checkpoints", checkpoint_id, "writes"),
            params=[("namespace", namespace)],
            json={"task_id": task_id, "task_path": task_path, "writes": [dict(w) for w in writes]},
            replay_safe=True,
        )
        await self._t.send(call)

    async def get(self, session_id: str, checkpoint_id: str, *, namespace: str = "") -> JSONObject:
        """One checkpoint with its ``blobs`` and ``writes`` (``NotFound`` when absent)."""
        call = Call(
            "GET",
            _p("v1", "sessions", session_id, "checkpoints", checkpoint_id),
            params=[("namespace", namespace)],
            replay_safe=True,
        )
        return cast(JSONObject, await self._json(call))

    async def list(
        self,
        session_id: Optional[str] = None,
        *,
        namespace: Optional[str] = None,
        before: Optional[str] = None,
        limit: Optional[int] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> List[JSONObject]:
        """Checkpoints newest first, whole: of one session (or of every session), of one
        namespace (or all), before an id, whose metadata has these members."""
        path = (
            _p("v1", "sessions", session_id, "checkpoints")
            if session_id is not None
            else "/v1/checkpoints"
        )
        found: List[JSONObject] = []
        while limit is None or len(found) < limit:
            page_size = 1000 if limit is None else min(1000, limit - len(found))
            params: List[Any] = [("limit", page_size)]
            if namespace is not None:
                params.append(("namespace", namespace))
            if before is not None:
                params.append(("before", before))
            if metadata:
                params.append(("metadata", json.dumps(dict(metadata))))
            body = await self._json(Call("GET", path, params=params, replay_safe=True))
            found.extend(body["data"])
            if not body["has_more"] or not body["data"]:
                break
            before = body["data"][-1]["id"]
        return found

    async def delete(self, session_id: str, *, if_match: IfMatch = None) -> None:
        """Delete a session's checkpoints, blobs and writes (the session stays)."""
        call = Call(
            "DELETE",
            _p("v1", "sessions", session_id, "checkpoints"),
            headers=_if_match(if_match),
            replay_safe=if_match is None,
        )
        await self._t.send(call)

    async def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the checkpoints whose ``metadata.run_id`` is one of ``run_ids``."""
        call = Call(
            "POST", "/v1/checkpoints/delete", json={"run_ids": list(run_ids)}, replay_safe=True
        )
        return int((await self._json(call))["deleted"])

    async def prune(self, session_ids: Sequence[str], *, keep: str = "latest") -> int:
        """Keep of each namespace of these sessions the newest checkpoint (``"latest"``) or
        none (``"none"``)."""
        body = {"session_ids": list(session_ids), "keep": keep}
        call = Call("POST", "/v1/checkpoints/prune", json=body, replay_safe=True)
        return int((await self._json(call))["deleted"])


class Agents(_Resource):
    """``/v1/agents``: reusable run configurations."""

    async def create(self, **config: Any) -> Agent:
        """Create an agent from the API's fields: ``name``, ``model``, ``instructions``,
        ``temperature``, ``max_output_tokens``, ``tools``, ``max_turns``,
        ``max_repeated_tool_calls``, ``context``, ``metadata``."""
        return cast(Agent, await self._json(Call("POST", "/v1/agents", json=config)))

    async def get(self, agent_id: str) -> Agent:
        return cast(
            Agent, await self._json(Call("GET", _p("v1", "agents", agent_id), replay_safe=True))
        )

    def list(self, *, page_size: int = 100, after: Optional[str] = None) -> AsyncIterator[Agent]:
        return self._iterate("/v1/agents", [], page_size, after)

    async def update(self, agent_id: str, **changes: Any) -> Agent:
        """Change the named fields; a ``None`` resets a field to its default."""
        call = Call("PATCH", _p("v1", "agents", agent_id), json=changes, replay_safe=True)
        return cast(Agent, await self._json(call))

    async def delete(self, agent_id: str) -> None:
        await self._t.send(Call("DELETE", _p("v1", "agents", agent_id)))


class Runs(_Resource):
    """``/v1/sessions/{id}/runs``: run agent turns, follow them, answer their tool calls."""

    def _create_call(
        self,
        session_id: str,
        input: RunInput,
        mode: JSONObject,
        *,
        agent_id: Optional[str],
        agent: Optional[Mapping[str, Any]],
        if_busy: Optional[str],
        metadata: Optional[Mapping[str, str]],
        idempotency_key: Optional[str],
        if_match: IfMatch,
    ) -> Call:
        background = bool(mode.get("background"))
        body = _drop_none(
            input=input, agent_id=agent_id, agent=agent, if_busy=if_busy, metadata=metadata
        )
        return Call(
            "POST",
            _p("v1", "sessions", session_id, "runs"),
            json={**body, **mode},
            headers={
                "idempotency-key": idempotency_key or str(uuid.uuid4()),
                **_if_match(if_match),
            },
            replay_safe=True,
            timeout=None if background else STREAM_TIMEOUT if mode.get("stream") else WAIT_TIMEOUT,
            long=not background,
        )

    async def create(
        self,
        session_id: str,
        input: RunInput,
        *,
        background: bool = False,
        agent_id: Optional[str] = None,
        agent: Optional[Mapping[str, Any]] = None,
        if_busy: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        idempotency_key: Optional[str] = None,
        if_match: IfMatch = None,
    ) -> Run:
        """Run a turn. By default wait for it (the finished run, or the run as it stands
        if it outlasts the service's ``RUN_WAIT_SECS``); with ``background=True`` return
        the queued run at once. An ``Idempotency-Key`` (generated unless given) makes the
        retries safe: a retried request never starts a second run. With ``if_match`` the
        run is created only while the session is at that revision
        (:class:`RevisionMismatch` otherwise)."""
        mode = {"background": True} if background else {}
        call = self._create_call(
            session_id,
            input,
            mode,
            agent_id=agent_id,
            agent=agent,
            if_busy=if_busy,
            metadata=metadata,
            idempotency_key=idempotency_key,
            if_match=if_match,
        )
        return cast(Run, await self._json(call))

    def stream(
        self,
        session_id: str,
        input: RunInput,
        *,
        agent_id: Optional[str] = None,
        agent: Optional[Mapping[str, Any]] = None,
        if_busy: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        idempotency_key: Optional[str] = None,
        if_match: IfMatch = None,
    ) -> AsyncIterator[RunEvent]:
        """Run a turn and yield its events as they happen, up to its final event or
        ``run.requires_action``. A dropped connection is resumed with ``Last-Event-ID``,
        so every event is yielded exactly once."""
        call = self._create_call(
            session_id,
            input,
            {"stream": True},
            agent_id=agent_id,
            agent=agent,
            if_busy=if_busy,
            metadata=metadata,
            idempotency_key=idempotency_key,
            if_match=if_match,
        )
        return self._follow(session_id, None, call, None)

    def events(
        self, session_id: str, run_id: str, *, last_event_id: Optional[int] = None
    ) -> AsyncIterator[RunEvent]:
        """Follow an existing run: its events after ``last_event_id`` (all of them by
        default), then live until it ends or asks for tool outputs."""
        return self._follow(session_id, run_id, None, last_event_id)

    async def submit_tool_outputs(
        self, session_id: str, run_id: str, outputs: Sequence[ToolOutput]
    ) -> Run:
        """Answer every tool call of a ``requires_action`` run and wait for it to go on."""
        call = Call(
            "POST",
            _p("v1", "sessions", session_id, "runs", run_id, "tool_outputs"),
            json={"outputs": list(outputs)},
            timeout=WAIT_TIMEOUT,
            long=True,
        )
        return cast(Run, await self._json(call))

    async def submit_approvals(
        self, session_id: str, run_id: str, approvals: Sequence[Approval]
    ) -> Run:
        """Approve or reject every call of a run waiting with ``required_action.type``
        ``approve_tool_calls``, and wait for it to go on."""
        call = Call(
            "POST",
            _p("v1", "sessions", session_id, "runs", run_id, "approvals"),
            json={"approvals": list(approvals)},
            timeout=WAIT_TIMEOUT,
            long=True,
        )
        return cast(Run, await self._json(call))

    def stream_tool_outputs(
        self,
        session_id: str,
        run_id: str,
        outputs: Sequence[ToolOutput],
        *,
        last_event_id: Optional[int] = None,
    ) -> AsyncIterator[RunEvent]:
        """Answer the tool calls and follow the run's events from there. Pass the id of
        the ``run.requires_action`` event you saw as ``last_event_id``: a dropped stream
        then resumes right after it."""
        call = Call(
            "POST",
            _p("v1", "sessions", session_id, "runs", run_id, "tool_outputs"),
            json={"outputs": list(outputs), "stream": True},
            timeout=STREAM_TIMEOUT,
            long=True,
        )
        return self._follow(session_id, run_id, call, last_event_id)

    async def cancel(self, session_id: str, run_id: str, *, action: Optional[str] = None) -> Run:
        """Stop a run; 409 ``Conflict`` (``run_finished``) when it had ended.

        ``action`` is ``"cancel"`` (the default: the history stays as it was),
        ``"interrupt"`` (what the run finished is kept as a turn) or ``"rollback"`` (the
        run is deleted with its events).
        """
        params = () if action is None else (("action", action),)
        path = _p("v1", "sessions", session_id, "runs", run_id, "cancel")
        return cast(Run, await self._json(Call("POST", path, params=params)))

    async def get(self, session_id: str, run_id: str) -> Run:
        call = Call("GET", _p("v1", "sessions", session_id, "runs", run_id), replay_safe=True)
        return cast(Run, await self._json(call))

    def list(
        self, session_id: str, *, page_size: int = 100, after: Optional[str] = None
    ) -> AsyncIterator[Run]:
        """A session's runs, newest first."""
        return self._iterate(_p("v1", "sessions", session_id, "runs"), [], page_size, after)

    async def wait(self, session_id: str, run_id: str, *, timeout: Optional[float] = None) -> Run:
        """The run once it has ended or waits for tool outputs, following its event stream
        (no polling); ``asyncio.TimeoutError`` after ``timeout`` seconds."""

        async def follow() -> Run:
            async for event in self.events(session_id, run_id):
                if event.ends_stream and isinstance(event, RunStatusEvent):
                    return event.run
            return await self.get(session_id, run_id)

        return await asyncio.wait_for(follow(), timeout)

    async def _follow(
        self,
        session_id: str,
        run_id: Optional[str],
        first: Optional[Call],
        last_id: Optional[int],
    ) -> AsyncIterator[RunEvent]:
        """Yield a run's events from ``first`` (a POST answered with a stream) or from the
        events endpoint, reconnecting after a drop with ``Last-Event-ID``.

        Events at or below the last id seen are skipped, so a replay never yields an
        event twice. If the drop comes before the run's id is known, ``first`` is sent
        again: it carries an ``Idempotency-Key``, so no second run starts.
        """
        call = first if first is not None else self._events_call(session_id, run_id or "", last_id)
        drops = 0
        while True:
            try:
                async with self._t.open(call) as response:
                    decoder = SSEDecoder()
                    async for line in response.aiter_lines():
                        message = decoder.feed(line)
                        if message is None:
                            continue
                        event = make_event(
                            message.event, _event_id(message.id), _data(message.data)
                        )
                        if event.id is not None:
                            if last_id is not None and event.id <= last_id:
                                if event.ends_stream:
                                    # The service repeats a run's final event to a
                                    # follower that had already seen it: nothing follows.
                                    return
                                continue
                            last_id = event.id
                        if run_id is None and event.event.startswith("run."):
                            run_id = event.data.get("id")
                        drops = 0
                        yield event
                        if event.ends_stream:
                            return
                cause: Exception = APIConnectionError("the event stream ended before the run did")
            except httpx.TransportError as error:
                cause = error
            drops += 1
            if drops > self._t.retry.max_retries:
                raise APIConnectionError(f"event stream lost {drops} times: {cause!r}") from cause
            if run_id is not None:
                call = self._events_call(session_id, run_id, last_id)
            elif first is None or not first.replay_safe:
                raise APIConnectionError(f"event stream lost: {cause!r}") from cause
            await asyncio.sleep(self._t.retry.delay(drops - 1))

    @staticmethod
    def _events_call(session_id: str, run_id: str, last_id: Optional[int]) -> Call:
        headers = {"last-event-id": str(last_id)} if last_id is not None else {}
        return Call(
            "GET",
            _p("v1", "sessions", session_id, "runs", run_id, "events"),
            headers=headers,
            replay_safe=True,
            timeout=STREAM_TIMEOUT,
            long=True,
        )


def _event_id(raw: Optional[str]) -> Optional[int]:
    return int(raw) if raw is not None and raw.isdigit() else None


def _data(raw: str) -> JSONObject:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


class AgentSessionsClient:
    """Async client of the agent-sessions API.

    One instance can be shared by any number of tasks, sessions and event loops (it keeps
    connection pools per loop). ``api_key`` is sent as ``Authorization: Bearer``;
    ``retry`` tunes the retries of connection errors, 429 and 5xx answers.
    ``max_connections`` bounds the pool of quick calls (event streams and calls that wait
    for a run have a pool of their own); ``http_client`` replaces all pools with yours.
    Close it with ``await client.aclose()`` or ``async with``.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: Optional[str] = None,
        timeout: Union[float, httpx.Timeout] = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        http_client: Optional[httpx.AsyncClient] = None,
        headers: Optional[Mapping[str, str]] = None,
        max_connections: int = 8,
    ) -> None:
        self._transport = Transport(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retry=retry,
            http_client=http_client,
            headers=headers,
            max_connections=max_connections,
        )
        self.sessions = Sessions(self._transport)
        self.items = Items(self._transport)
        self.state = States(self._transport)
        self.checkpoints = Checkpoints(self._transport)
        self.agents = Agents(self._transport)
        self.runs = Runs(self._transport)

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    async def aclose(self) -> None:
        await self._transport.aclose()

    def close(self) -> None:
        """Close without awaiting (see ``Transport.close``), for synchronous callers."""
        self._transport.close()

    async def __aenter__(self) -> AgentSessionsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "DEFAULT_BASE_URL",
    "UNSET",
    "AgentSessionsClient",
    "Agents",
    "Items",
    "Runs",
    "Sessions",
    "States",
]
