"""A minimal ``text/event-stream`` decoder (the WHATWG rules this service's streams use).

Written here rather than taken from a dependency because the client needs only the
four fields, and exact control over ``id`` is what makes ``Last-Event-ID`` resumption work.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSEMessage:
    """One dispatched event: its name, its ``id`` (None when the event set none) and data."""

    event: str
    data: str
    id: str | None


class SSEDecoder:
    """Feed lines (without their line terminator); get a message at each blank line."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> SSEMessage | None:
        """Consume one line; return the message that a blank line completes, if any."""
        if line == "":
            if not self._data and not self._event:
                self._id = None
                return None
            message = SSEMessage(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._id = "", [], None
            return message
        if line.startswith(":"):
            return None  # a comment: the service's keep-alive
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None
