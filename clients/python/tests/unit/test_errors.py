"""Error mapping: every problem document becomes its family's exception, with its fields."""

from __future__ import annotations

import httpx
import pytest
import respx

from agent_sessions_client import (
    AgentSessionsClient,
    APIError,
    Conflict,
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
)
from agent_sessions_client.errors import error_from_response
from sessions_testkit.mocks import problem


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_request", InvalidRequest),
        (400, "not_implemented", InvalidRequest),
        (401, "unauthorized", Unauthorized),
        (403, "forbidden", Forbidden),
        (404, "session_not_found", NotFound),
        (404, "run_not_found", NotFound),
        (409, "session_busy", Conflict),
        (409, "session_exists", Conflict),
        (413, "payload_too_large", PayloadTooLarge),
        (415, "unsupported_media_type", InvalidRequest),
        (422, "idempotency_key_reused", IdempotencyKeyReused),
        (429, "rate_limited", RateLimited),
        (500, "internal_error", ServerError),
        (503, "database_unavailable", ServiceUnavailable),
    ],
)
def test_status_and_code_choose_the_class(status: int, code: str, cls: type[APIError]) -> None:
    response = problem(status, code, f"detail of {code}", **{"x-request-id": "req-7"})
    error = error_from_response(response)
    assert type(error) is cls
    assert (error.status, error.code, error.detail, error.request_id) == (
        status,
        code,
        f"detail of {code}",
        "req-7",
    )
    assert code in str(error) and "req-7" in str(error)


def test_families_nest_where_a_caller_would_catch_them() -> None:
    assert issubclass(PayloadTooLarge, InvalidRequest)
    assert issubclass(IdempotencyKeyReused, Conflict)
    assert issubclass(ServiceUnavailable, ServerError)


def test_rate_limited_carries_retry_after() -> None:
    error = error_from_response(problem(429, "rate_limited", **{"retry-after": "3"}))
    assert isinstance(error, RateLimited)
    assert error.retry_after == 3.0


def test_a_body_that_is_not_a_problem_document_still_maps() -> None:
    response = httpx.Response(502, text="<html>bad gateway</html>")
    error = error_from_response(response)
    assert isinstance(error, ServerError)
    assert error.code == "http_502"
    assert "bad gateway" in error.detail
    assert error.request_id is None


async def test_a_call_raises_the_mapped_error(
    api: respx.MockRouter, client: AgentSessionsClient
) -> None:
    api.get("/v1/sessions/nope").mock(
        return_value=problem(404, "session_not_found", "no session", **{"x-request-id": "r1"})
    )
    with pytest.raises(NotFound) as caught:
        await client.sessions.get("nope")
    assert caught.value.code == "session_not_found"
    assert caught.value.request_id == "r1"
