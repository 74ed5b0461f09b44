"""Helpers for respx-based unit tests: responses shaped like the service's."""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Dict, List, Optional

import httpx

from agent_sessions_client import RetryPolicy

BASE = "http://agent-sessions.test"
FAST = RetryPolicy(max_retries=3, backoff_base=0.001, backoff_max=0.001)


def problem(status: int, code: str, detail: str = "", **headers: str) -> httpx.Response:
    """A problem+json response as the service sends it."""
    body = {
        "type": f"urn:agent-sessions:problem:{code}",
        "title": "x",
        "status": status,
        "detail": detail or code,
        "code": code,
    }
    return httpx.Response(
        status, json=body, headers={"content-type": "application/problem+json", **headers}
    )


def item_row(n: int, item: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A stored item as the service lists it."""
    return {
        "id": f"id{n}",
        "seq": n,
        "created_at": "2025-01-01T00:00:00Z",
        "run_id": None,
        "item": item or {"role": "user", "content": f"m{n}"},
    }


def page(rows: List[Dict[str, Any]], has_more: bool = False) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "data": rows,
            "first_id": rows[0]["id"] if rows else None,
            "last_id": rows[-1]["id"] if rows else None,
            "has_more": has_more,
        },
    )


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content)


class Chunks(httpx.AsyncByteStream):
    """A response body sent in pieces, optionally failing after them (a dropped link)."""

    def __init__(self, chunks: List[bytes], fail: Optional[Exception] = None) -> None:
        self.chunks = chunks
        self.fail = fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.fail is not None:
            raise self.fail


def sse(event: str, event_id: int, data: Dict[str, Any]) -> bytes:
    return f"event: {event}\nid: {event_id}\ndata: {json.dumps(data)}\n\n".encode()
