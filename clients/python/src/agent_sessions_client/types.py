"""Shapes of the service's resources, as typed dicts (the JSON is returned as parsed).

They are ``TypedDict``s rather than classes so that nothing is copied or validated on the
way through: the service is the authority on its own documents, and a field it adds later
simply appears in the dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Generic, List, Optional, TypedDict, TypeVar, cast

T = TypeVar("T")

JSONObject = Dict[str, Any]


class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    llm_calls: int


class Session(TypedDict, total=False):
    id: str
    created_at: str
    updated_at: str
    metadata: Dict[str, str]
    agent_id: Optional[str]
    #: The app and the user the session belongs to: fixed once set.
    app_id: Optional[str]
    user_id: Optional[str]
    item_count: int
    usage: Usage
    forked_from: Optional[JSONObject]
    last_active_at: str
    expires_after: Optional[JSONObject]
    expires_at: Optional[str]
    revision: int


class SessionState(TypedDict, total=False):
    """A session's state document and the session's revision; with ``include``, the
    documents of its user and app (``None`` when absent)."""

    state: JSONObject
    revision: int
    user_state: Optional[JSONObject]
    app_state: Optional[JSONObject]


class OwnerState(TypedDict, total=False):
    """An app's or a user's state document and its own revision."""

    state: JSONObject
    revision: int


class Item(TypedDict, total=False):
    id: str
    seq: int
    created_at: str
    run_id: Optional[str]
    item: JSONObject


class ToolCall(TypedDict, total=False):
    call_id: str
    name: str
    arguments: str
    #: The MCP server of a call of an MCP tool (its approval request's id is ``call_id``).
    server_label: str


class RequiredAction(TypedDict, total=False):
    type: str
    tool_calls: List[ToolCall]


class RunError(TypedDict, total=False):
    code: str
    message: str


class Run(TypedDict, total=False):
    id: str
    session_id: str
    status: str
    created_at: str
    started_at: Optional[str]
    finished_at: Optional[str]
    model: Optional[str]
    input: List[JSONObject]
    output: List[JSONObject]
    required_action: Optional[RequiredAction]
    usage: Usage
    error: Optional[RunError]
    incomplete_details: Optional[JSONObject]
    metadata: Dict[str, str]


class Agent(TypedDict, total=False):
    id: str
    name: Optional[str]
    model: Optional[str]
    instructions: Optional[str]
    temperature: Optional[float]
    max_output_tokens: Optional[int]
    tools: List[JSONObject]
    max_turns: int
    max_repeated_tool_calls: int
    context: JSONObject
    metadata: Dict[str, str]
    created_at: str
    updated_at: str


class Compaction(TypedDict, total=False):
    id: str
    session_id: str
    created_at: str
    run_id: Optional[str]
    through_item_id: str
    through_seq: int
    items_compacted: int
    summary: str
    model: str
    usage: Usage


class ToolOutput(TypedDict):
    call_id: str
    output: str


class _ApprovalFields(TypedDict):
    call_id: str
    approve: bool


class Approval(_ApprovalFields, total=False):
    """A person's decision on a call of a server-side tool; ``reason`` tells the model
    why a call was rejected."""

    reason: str


@dataclass
class Page(Generic[T]):
    """One page of a listing, with the cursors to read the next one."""

    data: List[T]
    first_id: Optional[str] = None
    last_id: Optional[str] = None
    has_more: bool = False


TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "interrupted"})
"""Statuses a run never leaves."""


@dataclass(frozen=True)
class RunEvent:
    """An event of a run's stream: ``event`` is its name, ``id`` its number in the run."""

    event: str
    id: Optional[int]
    data: JSONObject = field(default_factory=dict)

    @property
    def ends_stream(self) -> bool:
        """True for the events after which the service closes the stream."""
        return self.event in ("run.completed", "run.failed", "run.cancelled", "run.requires_action")


@dataclass(frozen=True)
class RunStatusEvent(RunEvent):
    """``run.created``, ``run.started``, ``run.requires_action``, ``run.completed``,
    ``run.failed``, ``run.cancelled``: the data is the run as it stands."""

    @property
    def run(self) -> Run:
        return cast(Run, self.data)


@dataclass(frozen=True)
class MessageDelta(RunEvent):
    """``message.delta``: a piece of the assistant's answer as it streams."""

    @property
    def delta(self) -> str:
        return str(self.data.get("delta", ""))


@dataclass(frozen=True)
class ItemCreated(RunEvent):
    """``item.created``: an item the run generated, in the shape it will have in history."""

    @property
    def item(self) -> JSONObject:
        item = self.data.get("item")
        return item if isinstance(item, dict) else {}


@dataclass(frozen=True)
class CompactionCreated(RunEvent):
    """``compaction.created``: the run compacted the session's history before its call."""

    @property
    def compaction(self) -> Compaction:
        return cast(Compaction, self.data.get("compaction") or {})


def make_event(event: str, event_id: Optional[int], data: JSONObject) -> RunEvent:
    """The typed event for a name; unknown names stay plain ``RunEvent``s (forward
    compatible: a newer service may send events this client does not know yet)."""
    if event.startswith("run."):
        return RunStatusEvent(event, event_id, data)
    cls = {
        "message.delta": MessageDelta,
        "item.created": ItemCreated,
        "compaction.created": CompactionCreated,
    }.get(event, RunEvent)
    return cls(event, event_id, data)
