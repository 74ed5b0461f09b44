"""``AgentSessionsSession``: the OpenAI Agents SDK's ``Session`` protocol over this API.

``Runner.run(agent, input, session=AgentSessionsSession("user-42"))`` keeps the history
in the service instead of a local SQLite file, so any process (or replica) can carry
the conversation on. It behaves like the SDK's own ``SQLiteSession``: ``get_items(limit)``
returns the newest ``limit`` items in chronological order, ``session_settings.limit`` is
the default limit, a session nobody wrote to reads as empty, and mutations run to
completion even if the awaiting task is cancelled (the SDK's sessions do the same, so
the caller never has to guess whether an append happened).
"""

from __future__ import annotations

import asyncio
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    List,
    Mapping,
    Optional,
    TypeVar,
    Union,
    cast,
)

import httpx

from ._loop_thread import run_blocking
from ._transport import DEFAULT_RETRY, DEFAULT_TIMEOUT, RetryPolicy
from .client import DEFAULT_BASE_URL, AgentSessionsClient
from .errors import InvalidRequest, NotFound
from .types import Item

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionABC as _SessionBase
    from agents.memory import SessionSettings
else:
    try:
        from agents.memory import SessionABC as _SessionBase
        from agents.memory import SessionSettings
    except ImportError:  # the SDK is optional: the class still works without it
        _SessionBase = object
        SessionSettings = None
    TResponseInputItem = Mapping[str, Any]

_T = TypeVar("_T")

PAGE = 1000
"""The service's largest page, so that reading a long history takes few requests."""


async def _complete(awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable`` to its end even if our caller is cancelled meanwhile, then
    re-raise the cancellation. A half-awaited HTTP mutation leaves its outcome unknown;
    finishing it keeps the session's state knowable, as the SDK's own sessions do."""
    task = asyncio.ensure_future(awaitable)
    cancellation: Optional[asyncio.CancelledError] = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as error:
            cancellation = cancellation or error
    if cancellation is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise cancellation
    return task.result()


def _coerce_settings(settings: Any) -> Any:
    """The SDK's settings object (a dict is accepted, as the SDK's sessions accept it)."""
    if SessionSettings is None:
        return settings
    if settings is None:
        return SessionSettings()
    from agents.memory.session_settings import coerce_session_settings

    return coerce_session_settings(settings)


class AgentSessionsSession(_SessionBase):
    """A conversation history stored in agent-sessions under ``session_id``.

    ``client`` shares one ``AgentSessionsClient`` (and its connection pools) between
    many sessions; without it the session makes its own from ``base_url``, ``api_key``
    and ``timeout``, and ``close()`` / ``aclose()`` release it.
    """

    session_settings: Optional[SessionSettings] = None

    def __init__(
        self,
        session_id: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: Optional[str] = None,
        session_settings: Union[SessionSettings, Mapping[str, Any], None] = None,
        timeout: Union[float, httpx.Timeout] = DEFAULT_TIMEOUT,
        client: Optional[AgentSessionsClient] = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.session_id = session_id
        self.session_settings = _coerce_settings(session_settings)
        self._owns_client = client is None
        self.client = client or AgentSessionsClient(
            base_url, api_key=api_key, timeout=timeout, retry=retry
        )
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} {self.session_id!r} is closed")

    def _limit(self, limit: Optional[int]) -> Optional[int]:
        if limit is not None:
            return limit
        settings = self.session_settings
        if isinstance(settings, Mapping):
            return cast(Optional[int], settings.get("limit"))
        return cast(Optional[int], getattr(settings, "limit", None))

    async def get_items(self, limit: Optional[int] = None) -> List[TResponseInputItem]:
        """The newest ``limit`` items, oldest first; every item when the limit (the
        argument, else ``session_settings.limit``) is None. ``0`` gives none and a
        negative limit all, like the SDK's SQLite session."""
        self._check_open()
        limit = self._limit(limit)
        if limit == 0:
            return []
        for _ in range(3):
            try:
                rows = await self._read(limit if limit is not None and limit > 0 else None)
            except NotFound as error:
                if error.code == "session_not_found":
                    return []
                raise
            except InvalidRequest as error:
                # A cursor whose item was popped meanwhile is refused: read again.
                if error.detail.startswith(("after", "before")):
                    continue
                raise
            return [cast("TResponseInputItem", row["item"]) for row in rows]
        raise RuntimeError("the history kept changing while it was read")

    async def _read(self, limit: Optional[int]) -> List[Item]:
        """All items (``limit`` None: oldest first, page after page) or the newest
        ``limit`` (read newest first with ``order=desc``, then reversed)."""
        items = self.client.items
        if limit is None:
            return [row async for row in items.list(self.session_id, order="asc", page_size=PAGE)]
        rows: List[Item] = []
        after: Optional[str] = None
        while len(rows) < limit:
            page = await items.page(
                self.session_id, limit=min(PAGE, limit - len(rows)), order="desc", after=after
            )
            rows.extend(page.data)
            if not page.has_more or not page.last_id:
                break
            after = page.last_id
        rows.reverse()
        return rows

    async def add_items(self, items: List[TResponseInputItem]) -> None:
        """Append ``items`` in order (one request per 1,000, each with its own
        ``Idempotency-Key`` reused across its retries)."""
        self._check_open()
        if not items:
            return
        await _complete(
            self.client.items.add(self.session_id, cast(List[Mapping[str, Any]], items))
        )

    async def pop_item(self) -> Optional[TResponseInputItem]:
        """Remove and return the newest item; None when there is none (or no session)."""
        self._check_open()
        try:
            row = await _complete(self.client.items.pop(self.session_id))
        except NotFound as error:
            if error.code == "session_not_found":
                return None
            raise
        return None if row is None else cast("TResponseInputItem", row["item"])

    async def clear_session(self) -> None:
        """Remove every item (a session that does not exist is already clear)."""
        self._check_open()
        try:
            await _complete(self.client.items.clear(self.session_id))
        except NotFound as error:
            if error.code != "session_not_found":
                raise

    async def aclose(self) -> None:
        """Stop using this session; close its client if the session made it."""
        self._closed = True
        if self._owns_client:
            await self.client.aclose()

    def close(self) -> None:
        """Like ``aclose()`` for synchronous code (what the SDK's ``SQLiteSession`` has)."""
        self._closed = True
        if self._owns_client:
            self.client.close()

    async def __aenter__(self) -> AgentSessionsSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class SyncAgentSessionsSession:
    """The same session for synchronous code: ``get_items``, ``add_items``, ``pop_item``
    and ``clear_session`` block until the service has answered."""

    def __init__(self, session_id: str, **options: Any) -> None:
        self.session = AgentSessionsSession(session_id, **options)

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def get_items(self, limit: Optional[int] = None) -> List[TResponseInputItem]:
        return run_blocking(self.session.get_items(limit))

    def add_items(self, items: List[TResponseInputItem]) -> None:
        run_blocking(self.session.add_items(items))

    def pop_item(self) -> Optional[TResponseInputItem]:
        return run_blocking(self.session.pop_item())

    def clear_session(self) -> None:
        run_blocking(self.session.clear_session())

    def close(self) -> None:
        run_blocking(self.session.aclose())

    def __enter__(self) -> SyncAgentSessionsSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
