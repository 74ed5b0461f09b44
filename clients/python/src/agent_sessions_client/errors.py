"""Typed errors for the agent-sessions API.

The service answers every error with an RFC 9457 problem document whose ``code`` is
stable. Callers branch on the exception class (one per family of codes, which is what
they usually need: "not there", "conflicting state", "my input was wrong") and read
``code`` when they need the precise reason; ``request_id`` is what to quote in a bug
report, because the service logs the cause under it.
"""

from __future__ import annotations

from typing import Any, Mapping

import httpx

__all__ = [
    "APIConnectionError",
    "APIError",
    "AgentSessionsError",
    "Conflict",
    "Forbidden",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "ServerError",
    "ServiceUnavailable",
    "Unauthorized",
    "error_from_response",
]


class AgentSessionsError(Exception):
    """Base class of everything this package raises, so one ``except`` catches it all."""


class APIConnectionError(AgentSessionsError):
    """The service could not be reached (or stopped answering) after every retry."""


class APIError(AgentSessionsError):
    """The service answered with an error status.

    Attributes mirror the problem document: ``status`` (HTTP status), ``code`` (stable
    snake_case reason such as ``session_not_found``), ``detail`` (human text naming the
    field at fault), ``title`` and ``type``; ``request_id`` comes from the
    ``x-request-id`` response header.
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        title: str = "",
        type: str = "",
        request_id: str | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title
        self.type = type
        self.request_id = request_id
        self.body: Mapping[str, Any] = body or {}
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.detail}"
        if self.request_id:
            text += f" (request id {self.request_id})"
        return text


class InvalidRequest(APIError):
    """400-class input errors: ``invalid_request``, ``not_implemented``, ``nothing_to_compact``…"""


class PayloadTooLarge(InvalidRequest):
    """413 ``payload_too_large``: the body is over the service's ``MAX_BODY_BYTES``."""


class Unauthorized(APIError):
    """401 ``unauthorized``: the API key is missing, unknown, revoked or expired."""


class Forbidden(APIError):
    """403 ``forbidden``: the key is valid but may not do this (a read key writing, say)."""


class NotFound(APIError):
    """404: ``session_not_found``, ``item_not_found``, ``session_empty``, ``run_not_found``…"""


class Conflict(APIError):
    """409: the resource's state forbids it (``session_exists``, ``session_busy``…)."""


class RevisionMismatch(Conflict):
    """412 ``revision_mismatch``: ``if_match`` named another revision than the session's,
    or the session does not exist; nothing was written. Read again and retry."""


class IdempotencyKeyReused(Conflict):
    """422 ``idempotency_key_reused``: the key was used before with another request."""


class RateLimited(APIError):
    """429 ``rate_limited``; ``retry_after`` is the service's advice in seconds, if any."""

    retry_after: float | None = None


class ServerError(APIError):
    """5xx: a fault of the service; quote ``request_id`` when reporting it."""


class ServiceUnavailable(ServerError):
    """503: ``database_unavailable`` or ``request_timeout``; worth retrying later."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: InvalidRequest,
    409: Conflict,
    412: RevisionMismatch,
    413: PayloadTooLarge,
    415: InvalidRequest,
    422: IdempotencyKeyReused,
    429: RateLimited,
    503: ServiceUnavailable,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds only; dates are ignored)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def error_from_response(response: httpx.Response) -> APIError:
    """Build the exception for an error response.

    The class is chosen by status (so an unknown future code still lands in the right
    family); a body that is not a problem document still gives a usable error, because a
    proxy in front of the service may answer with HTML.
    """
    body: dict[str, Any] = {}
    try:
        parsed = response.json()
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    status = response.status_code
    code = body.get("code") if isinstance(body.get("code"), str) else None
    detail = body.get("detail") if isinstance(body.get("detail"), str) else None
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else APIError
    error = cls(
        status,
        code or f"http_{status}",
        detail or (response.text[:500] if not body else "") or response.reason_phrase,
        title=str(body.get("title", "")),
        type=str(body.get("type", "")),
        request_id=response.headers.get("x-request-id"),
        body=body,
    )
    if isinstance(error, RateLimited):
        error.retry_after = parse_retry_after(response.headers.get("retry-after"))
    return error
