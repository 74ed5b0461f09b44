"""A scripted walk through the API with the client that openapi-python-client generates
from the committed openapi.yaml (scripts/conformance.sh generates it and puts it on
PYTHONPATH; it is never committed).

    python conformance/walkthrough.py http://127.0.0.1:PORT

Every call goes through the generated `sync_detailed` functions, with a client that raises
on any status the document does not declare. Each answer must have the status the
contract gives it, its `.parsed` must be the model the document names for that status,
and that model must hold the whole body: `to_dict()` of the parsed model gives back the
JSON the server sent (so no field is unknown to the document, none is missing, and every
value has the declared type). Exits non-zero at the first step that fails.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from agent_sessions_client import Client
from agent_sessions_client import models as m
from agent_sessions_client.api.agents import (
    create_agent,
    delete_agent,
    get_agent,
    list_agents,
    update_agent,
)
from agent_sessions_client.api.items import (
    append_items,
    clear_items,
    delete_item,
    get_item,
    list_items,
    pop_last_item,
)
from agent_sessions_client.api.operations import export, healthz, readyz
from agent_sessions_client.api.runs import cancel_run, create_run, get_run, list_runs
from agent_sessions_client.api.sessions import (
    create_session,
    delete_session,
    get_session,
    list_sessions,
    update_session,
)
from agent_sessions_client.types import Response

OPENAPI = Path(__file__).resolve().parent.parent / "openapi.yaml"
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
# Items of a page: the document inlines the Item schema into Page_Item.
PAGE_ITEM = getattr(m, "PageItemDataItem", m.Item)
PAGE_SESSION = getattr(m, "PageSessionDataItem", m.Session)


class StepFailed(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


def normalize(value: Any) -> Any:
    """JSON with timestamps as datetimes, so `2026-01-01T00:00:00Z` equals its isoformat."""
    if isinstance(value, dict):
        return {key: normalize(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalize(item) for item in value]
    if isinstance(value, str) and TIMESTAMP.match(value):
        return datetime.datetime.fromisoformat(value)
    return value


def expect(response: Response[Any], status: int, model: type | None) -> Any:
    """The answer has `status`, parses into `model` (None: no body) and loses nothing."""
    body = response.content.decode("utf-8", "replace")
    check(
        response.status_code == status,
        f"expected {status}, got {int(response.status_code)}: {body[:500]}",
    )
    check(bool(response.headers.get("x-request-id")), "the answer carries no x-request-id")
    content_type = response.headers.get("content-type", "")
    if model is None:
        check(response.content == b"", f"expected no body, got {body[:200]!r}")
        check(response.parsed is None, f"expected nothing parsed, got {response.parsed!r}")
        return None
    expected_type = "application/problem+json" if model is m.Problem else "application/json"
    check(
        content_type.split(";")[0].strip() == expected_type,
        f"expected content-type {expected_type}, got {content_type!r}",
    )
    parsed = response.parsed
    check(
        isinstance(parsed, model),
        f"expected a {model.__name__}, the client parsed {type(parsed).__name__}: {body[:300]}",
    )
    sent = json.loads(response.content)
    check(
        normalize(parsed.to_dict()) == normalize(sent),
        f"the {model.__name__} model does not hold the whole body:\n"
        f"  server: {sent}\n  model:  {parsed.to_dict()}",
    )
    return parsed


def expect_problem(response: Response[Any], status: int, code: str) -> m.Problem:
    problem = expect(response, status, m.Problem)
    check(problem.status == status, f"problem.status {problem.status} != {status}")
    check(problem.code == code, f"expected code {code!r}, got {problem.code!r}: {problem.detail}")
    check(
        problem.type_ == f"urn:agent-sessions:problem:{code}",
        f"problem.type is {problem.type_!r}",
    )
    return problem


def utc(moment: datetime.datetime) -> None:
    check(moment.utcoffset() == datetime.timedelta(0), f"{moment} is not UTC")


def check_session(session: Any, *, id: str, metadata: dict[str, str], item_count: int) -> None:
    check(session.id == id, f"session id {session.id!r} != {id!r}")
    check(
        session.metadata.to_dict() == metadata,
        f"metadata {session.metadata.to_dict()} != {metadata}",
    )
    check(session.item_count == item_count, f"item_count {session.item_count} != {item_count}")
    usage = session.usage.to_dict()
    check(
        usage == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "llm_calls": 0},
        f"usage {usage}",
    )
    utc(session.created_at)
    utc(session.updated_at)
    check(session.updated_at >= session.created_at, "updated_at precedes created_at")


def same_item(got: Any, want: Any) -> None:
    check(got.to_dict() == want.to_dict(), f"item {got.to_dict()} != {want.to_dict()}")


def by_metadata(pairs: dict[str, str]) -> Any:
    """The `metadata` filter, spelled out in deepObject form.

    openapi-python-client does not implement `style: deepObject`: it flattens the object
    into `?KEY=VALUE` (which this API ignores, as it ignores any unknown parameter), where
    the document, and the server, say `?metadata[KEY]=VALUE`. Giving the generated model
    the bracketed names makes it send what the document describes.
    """
    model = getattr(m, "ListSessionsMetadata", m.Metadata)  # the parameter's schema, if named
    return model.from_dict({f"metadata[{k}]": v for k, v in pairs.items()})


def nul_allowed_in_metadata() -> bool:
    """Whether the committed document lets metadata keys and values hold U+0000."""
    document = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    metadata = document["components"]["schemas"]["Metadata"]
    for schema in (metadata.get("additionalProperties"), metadata.get("propertyNames")):
        pattern = schema.get("pattern") if isinstance(schema, dict) else None
        if pattern is not None and not re.search(pattern, "a\u0000b"):
            return False
    return True


def main(base_url: str) -> int:
    # With authentication on, the conformance stage passes a tenant's key.
    key = os.environ.get("CONFORMANCE_TENANT_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    client = Client(
        base_url=base_url, raise_on_unexpected_status=True, timeout=30.0, headers=headers
    )
    run = uuid.uuid4().hex[:12]
    sid = f"walkthrough-{run}"
    state: dict[str, Any] = {}

    steps: list[tuple[str, Callable[[], None]]] = []

    def step(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
        def register(function: Callable[[], None]) -> Callable[[], None]:
            steps.append((name, function))
            return function

        return register

    @step("the service is up and ready, and exports metrics")
    def _() -> None:
        for operation in (healthz, readyz):
            health = expect(operation.sync_detailed(client=client), 200, m.Health)
            check(health.status == "ok", f"status {health.status!r}")
        metrics = export.sync_detailed(client=client)
        check(metrics.status_code == 200, f"GET /metrics: {int(metrics.status_code)}")
        content_type = metrics.headers.get("content-type", "")
        check(
            content_type.startswith("application/openmetrics-text"),
            f"GET /metrics content-type {content_type!r}",
        )
        check(
            isinstance(metrics.parsed, str) and metrics.parsed.rstrip().endswith("# EOF"),
            "GET /metrics is not an OpenMetrics exposition",
        )

    @step("create a session with a chosen id and metadata")
    def _() -> None:
        response = create_session.sync_detailed(
            client=client,
            body=m.CreateSessionRequest(
                id=sid,
                metadata=m.Metadata.from_dict({"user": "alice", "walkthrough": run}),
            ),
        )
        session = expect(response, 201, m.Session)
        check_session(session, id=sid, metadata={"user": "alice", "walkthrough": run}, item_count=0)
        check(session.agent_id is None, f"agent_id {session.agent_id!r}")
        location = response.headers.get("location")
        check(location == f"/v1/sessions/{sid}", f"location {location!r}")

    @step("create two more sessions, one with a generated id and an agent")
    def _() -> None:
        # A session's agent must exist (404 agent_not_found otherwise): make two helpers.
        for name in ("helper-1", "helper-2"):
            body = m.CreateAgentRequest.from_dict({"name": name, "metadata": {"walkthrough": run}})
            state[name] = expect(create_agent.sync_detailed(client=client, body=body), 201, m.Agent).id
        expect_problem(
            create_session.sync_detailed(
                client=client, body=m.CreateSessionRequest(id=f"{sid}.nobody", agent_id="nobody")
            ),
            404,
            "agent_not_found",
        )
        other = expect(
            create_session.sync_detailed(
                client=client,
                body=m.CreateSessionRequest(
                    id=f"{sid}.bob",
                    metadata=m.Metadata.from_dict({"user": "bob", "walkthrough": run}),
                    agent_id=state["helper-1"],
                ),
            ),
            201,
            m.Session,
        )
        check(other.agent_id == state["helper-1"], f"agent_id {other.agent_id!r}")
        generated = expect(
            create_session.sync_detailed(
                client=client,
                body=m.CreateSessionRequest(
                    metadata=m.Metadata.from_dict(
                        {"user": "alice", "walkthrough": run, "note": "generated id"}
                    )
                ),
            ),
            201,
            m.Session,
        )
        check(uuid.UUID(generated.id).version == 7, f"generated id {generated.id!r} is no UUIDv7")
        state["generated"] = generated.id

    @step("a taken id is 409 session_exists; a bad id is 400 naming the field")
    def _() -> None:
        expect_problem(
            create_session.sync_detailed(client=client, body=m.CreateSessionRequest(id=sid)),
            409,
            "session_exists",
        )
        problem = expect_problem(
            create_session.sync_detailed(
                client=client, body=m.CreateSessionRequest(id="not a valid id!")
            ),
            400,
            "invalid_request",
        )
        check(problem.detail.startswith("id:"), f"detail {problem.detail!r} does not name `id`")

    items = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18°C, cloudy"},
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It is 18°C and cloudy in Paris ☁️."}],
        },
        # Stored and returned as given: key order, big integers, unicode.
        {"z": 1, "a": [1.5, None, True], "big": 123456789012345678901234567890, "ü": "😀"},
    ]

    @step("add items: a batch of five, in order")
    def _() -> None:
        response = append_items.sync_detailed(
            sid,
            client=client,
            body=m.AppendItemsRequest(
                items=[m.AppendItemsRequestItemsItem.from_dict(item) for item in items]
            ),
        )
        appended = expect(response, 201, m.AppendItemsResponse)
        check(len(appended.data) == 5, f"{len(appended.data)} items appended")
        for got, want in zip(appended.data, items, strict=True):
            check(isinstance(got, m.Item), f"an appended item parsed as {type(got).__name__}")
            check(got.item.to_dict() == want, f"item {got.item.to_dict()} != {want}")
            check(got.run_id is None, f"run_id {got.run_id!r}")
            check(got.id.version == 7, f"item id {got.id} is no UUIDv7")
            utc(got.created_at)
        seqs = [item.seq for item in appended.data]
        check(seqs == sorted(set(seqs)), f"seq not strictly increasing: {seqs}")
        # Byte for byte: each item comes back as the very text the client sent.
        raw = json.loads(response.content, object_pairs_hook=lambda pairs: pairs)
        for sent, echoed in zip(items, raw[0][1], strict=True):
            echoed_item = dict(echoed)["item"]
            check(
                [key for key, _ in echoed_item] == list(sent),
                f"key order changed: {[key for key, _ in echoed_item]}",
            )
        check(
            '"big":123456789012345678901234567890' in response.content.decode(),
            "a big integer lost precision",
        )
        state["items"] = list(appended.data)

    @step("add items with an Idempotency-Key: a retry replays, another body is 422")
    def _() -> None:
        key = f"walkthrough-{run}-1"
        batch = [{"role": "user", "content": f"message {n}"} for n in range(3)]
        body = m.AppendItemsRequest(
            items=[m.AppendItemsRequestItemsItem.from_dict(item) for item in batch]
        )
        first = append_items.sync_detailed(sid, client=client, body=body, idempotency_key=key)
        appended = expect(first, 201, m.AppendItemsResponse)
        check(len(appended.data) == 3, f"{len(appended.data)} items appended")
        check("idempotent-replayed" not in first.headers, "a first append claims to be a replay")
        retry = append_items.sync_detailed(sid, client=client, body=body, idempotency_key=key)
        replayed = expect(retry, 201, m.AppendItemsResponse)
        check(retry.headers.get("idempotent-replayed") == "true", "a retry is not marked replayed")
        check(
            [i.id for i in replayed.data] == [i.id for i in appended.data],
            "the retry did not return the first response",
        )
        other = m.AppendItemsRequest(items=[m.AppendItemsRequestItemsItem.from_dict({"x": 1})])
        expect_problem(
            append_items.sync_detailed(sid, client=client, body=other, idempotency_key=key),
            422,
            "idempotency_key_reused",
        )
        state["items"] += list(appended.data)
        session = expect(get_session.sync_detailed(sid, client=client), 200, m.Session)
        check(session.item_count == 8, f"item_count {session.item_count}, the retry appended")

    @step("page through the items, oldest first, three at a time")
    def _() -> None:
        seen: list[Any] = []
        cursor: str | None = None
        pages = 0
        while True:
            kwargs: dict[str, Any] = {"limit": 3}
            if cursor is not None:
                kwargs["after"] = cursor
            page = expect(list_items.sync_detailed(sid, client=client, **kwargs), 200, m.PageItem)
            pages += 1
            check(all(isinstance(i, PAGE_ITEM) for i in page.data), "a page item did not parse")
            check(len(page.data) <= 3, f"a page of {len(page.data)} rows")
            if page.data:
                check(page.first_id == str(page.data[0].id), "first_id is not the first row")
                check(page.last_id == str(page.data[-1].id), "last_id is not the last row")
            seen += page.data
            if not page.has_more:
                break
            cursor = page.last_id
            check(pages < 10, "paging does not end")
        check(pages == 3, f"8 items in pages of 3 took {pages} pages")
        want = [str(i.id) for i in state["items"]]
        check([str(i.id) for i in seen] == want, "paging lost, repeated or reordered items")
        check([i.seq for i in seen] == sorted(i.seq for i in seen), "not in seq order")

    @step("page backwards: newest first, and the page before an id")
    def _() -> None:
        ids = [str(i.id) for i in state["items"]]
        newest = expect(
            list_items.sync_detailed(sid, client=client, limit=2, order=m.ListItemsOrder.DESC),
            200,
            m.PageItem,
        )
        check([str(i.id) for i in newest.data] == ids[::-1][:2], "desc is not newest first")
        check(newest.has_more, "has_more is false with 6 more rows")
        before = expect(
            list_items.sync_detailed(sid, client=client, limit=2, before=ids[4]),
            200,
            m.PageItem,
        )
        check([str(i.id) for i in before.data] == ids[2:4], "the page before an id is wrong")
        check(before.has_more, "has_more is false with rows before the page")

    @step("get one item")
    def _() -> None:
        want = state["items"][1]
        got = expect(get_item.sync_detailed(sid, str(want.id), client=client), 200, m.Item)
        same_item(got, want)
        expect_problem(
            get_item.sync_detailed(sid, str(uuid.uuid4()), client=client), 404, "item_not_found"
        )
        expect_problem(
            get_item.sync_detailed(f"{sid}-absent", str(want.id), client=client),
            404,
            "session_not_found",
        )

    @step("pop the newest item, then delete one from the middle")
    def _() -> None:
        newest = state["items"][-1]
        popped = expect(pop_last_item.sync_detailed(sid, client=client), 200, m.Item)
        same_item(popped, newest)
        expect_problem(
            get_item.sync_detailed(sid, str(newest.id), client=client), 404, "item_not_found"
        )
        again = expect(pop_last_item.sync_detailed(sid, client=client), 200, m.Item)
        check(again.id != newest.id, "a pop returned the same item twice")
        middle = state["items"][2]
        expect(delete_item.sync_detailed(sid, str(middle.id), client=client), 204, None)
        expect_problem(
            delete_item.sync_detailed(sid, str(middle.id), client=client), 404, "item_not_found"
        )
        left = expect(list_items.sync_detailed(sid, client=client), 200, m.PageItem)
        want = [str(i.id) for i in state["items"][:-2] if i.id != middle.id]
        check([str(i.id) for i in left.data] == want, "the listing after pop/delete is wrong")
        session = expect(get_session.sync_detailed(sid, client=client), 200, m.Session)
        check(session.item_count == 5, f"item_count {session.item_count} != 5")

    @step("patch metadata (a merge patch) and the agent")
    def _() -> None:
        session = expect(
            update_session.sync_detailed(
                sid,
                client=client,
                body=m.UpdateSessionRequest.from_dict(
                    {
                        "metadata": {"user": "carol", "topic": "weather"},
                        "agent_id": state["helper-2"],
                    }
                ),
            ),
            200,
            m.Session,
        )
        want = {"user": "carol", "walkthrough": run, "topic": "weather"}
        check_session(session, id=sid, metadata=want, item_count=5)
        check(session.agent_id == state["helper-2"], f"agent_id {session.agent_id!r}")
        session = expect(
            update_session.sync_detailed(
                sid,
                client=client,
                body=m.UpdateSessionRequest.from_dict(
                    {"metadata": {"topic": None}, "agent_id": None}
                ),
            ),
            200,
            m.Session,
        )
        check_session(session, id=sid, metadata={"user": "carol", "walkthrough": run}, item_count=5)
        check(session.agent_id is None, f"agent_id {session.agent_id!r} after null")

    @step("clear the items, keep the session")
    def _() -> None:
        expect(clear_items.sync_detailed(sid, client=client), 204, None)
        page = expect(list_items.sync_detailed(sid, client=client), 200, m.PageItem)
        check(page.data == [] and not page.has_more, "items left after a clear")
        check(page.first_id is None and page.last_id is None, "an empty page names ids")
        session = expect(get_session.sync_detailed(sid, client=client), 200, m.Session)
        check(session.item_count == 0, f"item_count {session.item_count} after a clear")
        expect_problem(pop_last_item.sync_detailed(sid, client=client), 404, "session_empty")

    @step("list sessions by metadata, newest first, one per page")
    def _() -> None:
        found: list[Any] = []
        cursor: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": 1}
            if cursor is not None:
                kwargs["after"] = cursor
            page = expect(
                list_sessions.sync_detailed(
                    client=client, metadata=by_metadata({"walkthrough": run}), **kwargs
                ),
                200,
                m.PageSession,
            )
            check(all(isinstance(s, PAGE_SESSION) for s in page.data), "a session did not parse")
            found += page.data
            if not page.has_more:
                break
            cursor = page.last_id
            check(len(found) < 10, "paging does not end")
        ids = [s.id for s in found]
        check(ids == [state["generated"], f"{sid}.bob", sid], f"sessions by metadata: {ids}")
        both = expect(
            list_sessions.sync_detailed(
                client=client, metadata=by_metadata({"walkthrough": run, "user": "bob"})
            ),
            200,
            m.PageSession,
        )
        check([s.id for s in both.data] == [f"{sid}.bob"], "filters are not ANDed")
        oldest = expect(
            list_sessions.sync_detailed(
                client=client,
                metadata=by_metadata({"walkthrough": run}),
                order=m.ListSessionsOrder.ASC,
            ),
            200,
            m.PageSession,
        )
        check([s.id for s in oldest.data] == ids[::-1], "order=asc is not oldest first")
        none = expect(
            list_sessions.sync_detailed(client=client, metadata=by_metadata({"walkthrough": "-"})),
            200,
            m.PageSession,
        )
        check(none.data == [] and not none.has_more, "a filter matching nothing found sessions")

    @step("bad input is 400 problem+json naming the field")
    def _() -> None:
        problem = expect_problem(
            list_items.sync_detailed(sid, client=client, limit=0), 400, "invalid_request"
        )
        check(problem.detail.startswith("limit:"), f"detail {problem.detail!r}")
        problem = expect_problem(
            update_session.sync_detailed(
                sid,
                client=client,
                body=m.UpdateSessionRequest.from_dict({"agent_id": "has space"}),
            ),
            400,
            "invalid_request",
        )
        check(problem.detail.startswith("agent_id:"), f"detail {problem.detail!r}")

    @step("U+0000 in metadata: as the document says, on every backend, never a 5xx")
    def _() -> None:
        # Valid JSON strings that PostgreSQL's jsonb cannot store. Whether metadata may hold
        # them is the document's call (a `pattern` on the Metadata schema); the answer must
        # follow it: 201/200 and stored exactly, or 400 naming the field. Never a 500.
        allowed = nul_allowed_in_metadata()
        nul = {"k\u0000ey": "v", "key": "va\u0000lue"}
        response = create_session.sync_detailed(
            client=client,
            body=m.CreateSessionRequest(id=f"{sid}.nul", metadata=m.Metadata.from_dict(nul)),
        )
        if allowed:
            session = expect(response, 201, m.Session)
            check_session(session, id=f"{sid}.nul", metadata=nul, item_count=0)
        else:
            problem = expect_problem(response, 400, "invalid_request")
            check(problem.detail.startswith("metadata"), f"detail {problem.detail!r}")
            expect(
                create_session.sync_detailed(
                    client=client, body=m.CreateSessionRequest(id=f"{sid}.nul")
                ),
                201,
                m.Session,
            )
        patch = update_session.sync_detailed(
            f"{sid}.nul",
            client=client,
            body=m.UpdateSessionRequest.from_dict({"metadata": {"other": "x\u0000"}}),
        )
        if allowed:
            expect(patch, 200, m.Session)
        else:
            expect_problem(patch, 400, "invalid_request")
        found = list_sessions.sync_detailed(
            client=client, metadata=by_metadata({"key": "va\u0000lue"})
        )
        if allowed:
            page = expect(found, 200, m.PageSession)
            check([s.id for s in page.data] == [f"{sid}.nul"], "the filter did not find it")
        else:
            expect_problem(found, 400, "invalid_request")
        expect(delete_session.sync_detailed(f"{sid}.nul", client=client), 204, None)

    @step("an agent: create, read, list, patch (whole-float counts), delete")
    def _() -> None:
        body = m.CreateAgentRequest.from_dict(
            {
                "name": f"walkthrough-{run}",
                "instructions": "Be brief.",
                "max_turns": 4,
                "tools": [
                    {
                        "type": "function",
                        "name": "lookup",
                        "parameters": {"type": "object"},
                    }
                ],
                "context": {"max_input_tokens": 4000},
                "metadata": {"walkthrough": run},
            }
        )
        created = create_agent.sync_detailed(client=client, body=body)
        agent = expect(created, 201, m.Agent)
        check(created.headers.get("location") == f"/v1/agents/{agent.id}", "no Location")
        check(uuid.UUID(agent.id).version == 7, f"agent id {agent.id} is not a UUIDv7")
        check(
            agent.max_turns == 4 and agent.tools[0].name == "lookup",
            f"{agent.to_dict()}",
        )
        got = expect(get_agent.sync_detailed(agent.id, client=client), 200, m.Agent)
        check(got.to_dict() == agent.to_dict(), "GET differs from the created agent")
        page = expect(list_agents.sync_detailed(client=client, limit=1000), 200, m.PageAgent)
        check(agent.id in [a.id for a in page.data], "the agent is not listed")
        patch = m.UpdateAgentRequest.from_dict({"max_turns": 2.0, "instructions": None})
        patched = expect(
            update_agent.sync_detailed(agent.id, client=client, body=patch),
            200,
            m.Agent,
        )
        check(
            patched.max_turns == 2 and patched.instructions is None,
            f"{patched.to_dict()}",
        )
        check(patched.name == agent.name, "a field left out of the patch changed")
        state["agent"] = agent.id
        spare = expect(
            create_agent.sync_detailed(client=client, body=m.CreateAgentRequest()),
            201,
            m.Agent,
        )
        expect(delete_agent.sync_detailed(spare.id, client=client), 204, None)
        expect_problem(get_agent.sync_detailed(spare.id, client=client), 404, "agent_not_found")

    @step("a run without a reachable LLM fails as llm_unavailable and keeps the history")
    def _() -> None:
        before = expect(get_session.sync_detailed(sid, client=client), 200, m.Session)
        body = m.CreateRunRequest.from_dict({"input": "hello", "agent_id": state["agent"]})
        key = f"walkthrough-{run}-run"
        first = create_run.sync_detailed(sid, client=client, body=body, idempotency_key=key)
        failed = expect(first, 200, m.Run)
        check(failed.status == m.RunStatus.FAILED, f"status {failed.status}")
        check(failed.error.code == "llm_unavailable", f"error {failed.error.to_dict()}")
        check(failed.session_id == sid and failed.output == [], f"{failed.to_dict()}")
        retry = create_run.sync_detailed(sid, client=client, body=body, idempotency_key=key)
        check(
            retry.headers.get("idempotent-replayed") == "true",
            "a retry is not marked replayed",
        )
        check(expect(retry, 200, m.Run).id == failed.id, "a retry started another run")
        got = expect(get_run.sync_detailed(sid, failed.id, client=client), 200, m.Run)
        check(got.to_dict() == failed.to_dict(), "GET differs from the finished run")
        after = expect(get_session.sync_detailed(sid, client=client), 200, m.Session)
        check(after.item_count == before.item_count, "a failed run changed the history")

        queued = m.CreateRunRequest.from_dict(
            {"input": [{"role": "user", "content": "hi"}], "background": True}
        )
        accepted = create_run.sync_detailed(sid, client=client, body=queued)
        background = expect(accepted, 202, m.Run)
        check(
            accepted.headers.get("location") == f"/v1/sessions/{sid}/runs/{background.id}",
            "no Location",
        )
        page = expect(
            list_runs.sync_detailed(sid, client=client, order=m.ListRunsOrder.ASC),
            200,
            m.PageRun,
        )
        check(
            [r.id for r in page.data] == [failed.id, background.id],
            "runs are not listed in order",
        )
        expect_problem(cancel_run.sync_detailed(sid, failed.id, client=client), 409, "run_finished")
        missing = str(uuid.uuid4())
        expect_problem(get_run.sync_detailed(sid, missing, client=client), 404, "run_not_found")
        expect(delete_agent.sync_detailed(state["agent"], client=client), 204, None)
        gone = m.CreateRunRequest.from_dict({"input": "hi", "agent_id": state["agent"]})
        expect_problem(
            create_run.sync_detailed(sid, client=client, body=gone),
            404,
            "agent_not_found",
        )

    @step("delete the sessions")
    def _() -> None:
        for session_id in (sid, f"{sid}.bob", state["generated"]):
            expect(delete_session.sync_detailed(session_id, client=client), 204, None)
            expect_problem(
                get_session.sync_detailed(session_id, client=client), 404, "session_not_found"
            )
            expect_problem(
                delete_session.sync_detailed(session_id, client=client), 404, "session_not_found"
            )
        expect_problem(list_items.sync_detailed(sid, client=client), 404, "session_not_found")
        page = expect(
            list_sessions.sync_detailed(client=client, metadata=by_metadata({"walkthrough": run})),
            200,
            m.PageSession,
        )
        check(page.data == [], "deleted sessions are still listed")

    for number, (name, function) in enumerate(steps, 1):
        try:
            function()
        except Exception as error:  # noqa: BLE001 - report any failure as the step's
            kind = "" if isinstance(error, StepFailed) else f"{type(error).__name__}: "
            print(f"walkthrough: FAILED step {number}/{len(steps)}: {name}\n  {kind}{error}")
            return 1
        print(f"walkthrough: ok  {number:2}. {name}")
    print(f"walkthrough: all {len(steps)} steps passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
