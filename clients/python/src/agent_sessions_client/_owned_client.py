"""The client a framework adapter talks through: the caller's, shared and left open, or
one the adapter makes and closes itself."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .client import AgentSessionsClient


def client_for(
    client: Optional[AgentSessionsClient], *, base_url: Optional[str], api_key: Optional[str]
) -> Tuple[AgentSessionsClient, bool]:
    """``client``, or a new one for ``base_url`` and ``api_key``; and whether it is new
    (the adapter then closes it)."""
    if client is not None:
        return client, False
    options: dict[str, Any] = {"api_key": api_key}
    if base_url is not None:
        options["base_url"] = base_url
    return AgentSessionsClient(**options), True
