"""Python client of agent-sessions, with an OpenAI Agents SDK ``Session`` adapter.

- ``AgentSessionsSession``: pass it as ``session=`` to the SDK's ``Runner``.
- ``AgentSessionsClient``: sessions, items, agents and runs (with streamed events).
- ``errors``: one exception class per family of problem codes.
"""

from ._transport import RetryPolicy
from ._version import __version__
from .client import UNSET, AgentSessionsClient
from .errors import (
    AgentSessionsError,
    APIConnectionError,
    APIError,
    Conflict,
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RevisionMismatch,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
)
from .session import AgentSessionsSession, SyncAgentSessionsSession
from .types import (
    CompactionCreated,
    ItemCreated,
    MessageDelta,
    OwnerState,
    Page,
    RunEvent,
    RunStatusEvent,
    SessionState,
)

__all__ = [
    "UNSET",
    "APIConnectionError",
    "APIError",
    "AgentSessionsClient",
    "AgentSessionsError",
    "AgentSessionsSession",
    "CompactionCreated",
    "Conflict",
    "Forbidden",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "ItemCreated",
    "MessageDelta",
    "NotFound",
    "OwnerState",
    "Page",
    "PayloadTooLarge",
    "RateLimited",
    "RetryPolicy",
    "RevisionMismatch",
    "RunEvent",
    "RunStatusEvent",
    "ServerError",
    "ServiceUnavailable",
    "SessionState",
    "SyncAgentSessionsSession",
    "Unauthorized",
    "__version__",
]
