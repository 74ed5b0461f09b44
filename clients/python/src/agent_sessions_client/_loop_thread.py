"""One background event loop, shared by every synchronous adapter: blocking code gets the
async implementation without owning a loop, and it also works when called from inside
someone else's running loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, Optional, TypeVar

_T = TypeVar("_T")

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None


def run_blocking(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Runs ``coroutine`` on the shared loop and waits for its result."""
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="agent-sessions", daemon=True).start()
            _loop = loop
    return asyncio.run_coroutine_threadsafe(coroutine, _loop).result()
