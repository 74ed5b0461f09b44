"""Revisions, If-Match and session state through the client, against the real service."""

from __future__ import annotations

import asyncio
import base64
import uuid

import pytest

from agent_sessions_client import (
    AgentSessionsClient,
    Conflict,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RevisionMismatch,
)


async def test_state_round_trips_and_merges(client: AgentSessionsClient) -> None:
    sid = f"state-{uuid.uuid4().hex}"
    with pytest.raises(NotFound):
        await client.state.get(sid)
    made = await client.state.replace(sid, {"step": "triage", "order": "4711", "n": 2**70})
    assert made == {"state": {"step": "triage", "order": "4711", "n": 2**70}, "revision": 1}
    merged = await client.state.merge(sid, {"order": None, "plan": {"a": 1}}, if_match=1)
    assert merged == {"state": {"step": "triage", "n": 2**70, "plan": {"a": 1}}, "revision": 2}
    assert await client.state.get(sid) == merged
    session = await client.sessions.get(sid)
    assert session["revision"] == 2 and session["item_count"] == 0

    with pytest.raises(InvalidRequest) as not_object:
        await client.state.replace(sid, [1])  # type: ignore[arg-type]
    assert "state" in not_object.value.detail
    with pytest.raises(PayloadTooLarge) as too_large:
        await client.state.merge(sid, {"big": "x" * (1 << 20)})
    assert too_large.value.detail.startswith("state")


async def test_a_stale_revision_writes_nothing(client: AgentSessionsClient) -> None:
    sid = f"rev-{uuid.uuid4().hex}"
    await client.items.add(sid, [{"role": "user", "content": "one"}])
    with pytest.raises(RevisionMismatch) as stale:
        await client.items.add(sid, [{"role": "user", "content": "two"}], if_match=5)
    assert stale.value.status == 412 and stale.value.code == "revision_mismatch"
    assert "revision 1" in stale.value.detail
    with pytest.raises(RevisionMismatch):
        await client.sessions.update(sid, metadata={"k": "v"}, if_match=0)
    with pytest.raises(RevisionMismatch):
        await client.sessions.delete(sid, if_match=3)
    session = await client.sessions.get(sid)
    assert (session["revision"], session["item_count"], session["metadata"]) == (1, 1, {})
    with pytest.raises(RevisionMismatch):
        await client.runs.create(sid, "hi", background=True, if_match=2)
    assert [run async for run in client.runs.list(sid)] == []
    await client.items.add(sid, [{"role": "user", "content": "two"}], if_match=1)
    queued = await client.runs.create(sid, "hi", background=True, if_match=2)
    assert [run["id"] async for run in client.runs.list(sid)] == [queued["id"]]
    await client.runs.wait(sid, queued["id"], timeout=30)
    await client.sessions.update(sid, metadata={"k": "v"}, if_match="*")
    await client.sessions.delete(sid, if_match=(await client.sessions.get(sid))["revision"])
    with pytest.raises(NotFound):
        await client.sessions.get(sid)
    with pytest.raises(RevisionMismatch):
        await client.state.replace(sid, {"a": 1}, if_match="*")


async def test_concurrent_writers_with_if_match_lose_nothing(client: AgentSessionsClient) -> None:
    sid = f"counter-{uuid.uuid4().hex}"
    await client.state.replace(sid, {"counter": 0})

    async def writer() -> None:
        for _ in range(10):
            while True:
                read = await client.state.get(sid)
                try:
                    await client.state.merge(
                        sid, {"counter": read["state"]["counter"] + 1}, if_match=read["revision"]
                    )
                    break
                except RevisionMismatch:
                    continue

    await asyncio.gather(*(writer() for _ in range(6)))
    final = await client.state.get(sid)
    assert final == {"state": {"counter": 60}, "revision": 61}


async def test_history_is_replaced_whole_or_after_an_item(client: AgentSessionsClient) -> None:
    sid = f"history-{uuid.uuid4().hex}"
    first, _ = await client.items.add(sid, [{"n": 1}, {"n": 2}])
    edited = await client.items.replace_one(sid, first["id"], {"n": 1, "edited": True}, if_match=1)
    assert (edited["id"], edited["seq"], edited["item"]) == (
        first["id"],
        1,
        {"n": 1, "edited": True},
    )
    new = await client.items.replace(sid, [{"n": "b"}], after=first["id"], if_match=2)
    assert [i["seq"] for i in new] == [3]
    assert [i["item"]["n"] async for i in client.items.list(sid)] == [1, "b"]
    with pytest.raises(RevisionMismatch):
        await client.items.replace(sid, [{"n": "x"}], if_match=2)
    whole = await client.items.replace(sid, [{"n": "x"}, {"n": "y"}])
    assert [i["seq"] for i in whole] == [4, 5]
    assert (await client.sessions.get(sid))["revision"] == 4


async def test_owners_share_state_documents(client: AgentSessionsClient) -> None:
    app, user = f"app-{uuid.uuid4().hex}", f"user-{uuid.uuid4().hex}"
    sid = f"owned-{uuid.uuid4().hex}"
    session = await client.sessions.create(id=sid, app_id=app, user_id=user)
    assert (session["app_id"], session["user_id"]) == (app, user)
    with pytest.raises(NotFound):
        await client.state.get_app(app)
    await client.items.add(
        sid,
        [{"role": "user", "content": "hi"}],
        state_delta={"step": 1},
        user_state_delta={"name": "Ada"},
        app_state_delta={"model": "small"},
    )
    read = await client.state.get(sid, include=("user", "app"))
    assert read == {
        "state": {"step": 1},
        "revision": 2,
        "user_state": {"name": "Ada"},
        "app_state": {"model": "small"},
    }
    assert await client.state.get_user(app, user) == {"state": {"name": "Ada"}, "revision": 1}
    merged = await client.state.merge_app(app, {"model": None, "tier": "pro"}, if_match=1)
    assert merged == {"state": {"tier": "pro"}, "revision": 2}
    with pytest.raises(RevisionMismatch):
        await client.state.replace_user(app, user, {}, if_match=7)
    assert await client.state.replace_user(app, user, {"x": 1}) == {
        "state": {"x": 1},
        "revision": 2,
    }
    # Only an empty append with a delta: one request, no items.
    assert await client.items.add(sid, [], app_state_delta={"n": 1}) == []
    assert (await client.state.get_app(app))["state"] == {"tier": "pro", "n": 1}
    listed = [s["id"] async for s in client.sessions.list(app_id=app, user_id=user)]
    assert listed == [sid]
    with pytest.raises(Conflict) as other:
        await client.state.merge(sid, {"k": 1}, app_id="another")
    assert other.value.code == "owner_mismatch"


async def test_a_keyed_state_write_answers_its_retry_as_the_first(
    client: AgentSessionsClient,
) -> None:
    sid = f"keyed-{uuid.uuid4().hex}"
    first = await client.state.merge(sid, {"n": 1}, idempotency_key="k", if_match=None)
    await client.state.merge(sid, {"n": 2})
    again = await client.state.merge(sid, {"n": 1}, idempotency_key="k")
    assert again == first == {"state": {"n": 1}, "revision": 1}
    assert (await client.state.get(sid))["state"] == {"n": 2}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def test_checkpoints_round_trip_and_prune(client: AgentSessionsClient) -> None:
    sid = f"graph-{uuid.uuid4().hex}"
    value = {"type": "json", "data": _b64("state")}
    blob = {"channel": "messages", "version": "1", "type": "json", "data": _b64("[]")}
    saved = await client.checkpoints.put(
        sid,
        "0001",
        value,
        metadata={"source": "input", "run_id": "r1"},
        channel_versions={"messages": "1"},
        blobs=[blob],
    )
    assert saved == {"session_id": sid, "namespace": "", "id": "0001", "parent_id": None}
    await client.checkpoints.put(
        sid, "0002", value, parent_id="0001", channel_versions={"messages": "1"}
    )
    write = {"idx": 0, "channel": "messages", "type": "json", "data": _b64('["hi"]')}
    await client.checkpoints.put_writes(sid, "0002", "task-1", [write])
    await client.checkpoints.put_writes(sid, "0002", "task-1", [write])
    got = await client.checkpoints.get(sid, "0002")
    assert got["parent_id"] == "0001"
    assert [(b["channel"], b["data"]) for b in got["blobs"]] == [("messages", _b64("[]"))]
    assert len(got["writes"]) == 1
    newest = await client.checkpoints.list(sid, namespace="", limit=1)
    assert [c["id"] for c in newest] == ["0002"]
    by_run = await client.checkpoints.list(sid, metadata={"run_id": "r1"})
    assert [c["id"] for c in by_run] == ["0001"]
    with pytest.raises(NotFound):
        await client.checkpoints.get(sid, "0003")
    assert await client.checkpoints.prune([sid]) == 1
    assert [c["id"] for c in await client.checkpoints.list(sid)] == ["0002"]
    assert await client.checkpoints.delete_runs(["r1"]) == 0
    await client.checkpoints.delete(sid)
    assert await client.checkpoints.list(sid) == []
