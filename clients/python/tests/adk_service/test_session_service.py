"""``AgentSessionsService`` against the real service: every behaviour that ADK's own
session-service tests check of its services (google/adk-python,
tests/unittests/sessions/test_session_service.py), in tests of our own. The tests there
of one backend's internals (SQLAlchemy engines, rollbacks, table creation, SQLite URLs)
have no counterpart here."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timezone

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agent_sessions_client import AgentSessionsClient
from agent_sessions_client.adk import AgentSessionsService


@pytest.fixture
async def service(client: AgentSessionsClient) -> AsyncIterator[AgentSessionsService]:
    async with AgentSessionsService(client) as adk:
        yield adk


@pytest.fixture
def app() -> str:
    """An app name no other test uses: listings and app state are per app."""
    return f"app-{uuid.uuid4().hex[:10]}"


def _delta(**state: object) -> EventActions:
    return EventActions(state_delta=dict(state))


async def test_a_session_is_created_read_and_deleted(
    service: AgentSessionsService, app: str
) -> None:
    assert await service.get_session(app_name=app, user_id="u", session_id="123") is None
    made = await service.create_session(app_name=app, user_id="u", state={"key": "value"})
    assert (made.app_name, made.user_id, made.state) == (app, "u", {"key": "value"})
    assert made.id
    now = datetime.now(timezone.utc).timestamp()
    assert made.last_update_time <= now
    read = await service.get_session(app_name=app, user_id="u", session_id=made.id)
    assert read == made
    await service.delete_session(app_name=app, user_id="u", session_id=made.id)
    assert await service.get_session(app_name=app, user_id="u", session_id=made.id) is None
    # Deleting what is gone is no error.
    await service.delete_session(app_name=app, user_id="u", session_id=made.id)


async def test_an_id_taken_in_the_app_for_the_user_is_already_exists(
    service: AgentSessionsService, app: str
) -> None:
    await service.create_session(app_name=app, user_id="u", session_id="existing")
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=app, user_id="u", session_id="existing")


async def test_session_ids_are_unique_per_app_and_user(
    service: AgentSessionsService, app: str
) -> None:
    first = await service.create_session(app_name=app, user_id="u1", session_id="s1")
    await service.append_event(first, Event(invocation_id="inv1", author="user"))
    second = await service.create_session(app_name=app, user_id="u2", session_id="s1")
    read = await service.get_session(app_name=app, user_id="u2", session_id="s1")
    assert read is not None and read.user_id == "u2" and read.events == []
    assert second.id == "s1"
    other_app = await service.create_session(app_name=f"{app}-b", user_id="u1", session_id="s1")
    assert other_app.events == []


async def test_sessions_are_listed_per_user_or_for_the_whole_app(
    service: AgentSessionsService, app: str
) -> None:
    ids = [f"session{n}" for n in range(5)]
    for sid in ids:
        await service.create_session(
            app_name=app, user_id="u", session_id=sid, state={"key": f"value{sid}"}
        )
    listed = (await service.list_sessions(app_name=app, user_id="u")).sessions
    assert {s.id for s in listed} == set(ids)
    assert all(s.state == {"key": f"value{s.id}"} and s.events == [] for s in listed)

    for user, sid in (("v1", "a"), ("v1", "b"), ("v2", "c")):
        await service.create_session(app_name=app, user_id=user, session_id=sid, state={"key": sid})
    v1 = (await service.list_sessions(app_name=app, user_id="v1")).sessions
    assert sorted((s.id, s.state["key"]) for s in v1) == [("a", "a"), ("b", "b")]
    v2 = (await service.list_sessions(app_name=app, user_id="v2")).sessions
    assert [(s.id, s.user_id, s.state) for s in v2] == [("c", "v2", {"key": "c"})]
    everyone = (await service.list_sessions(app_name=app)).sessions
    assert len(everyone) == 8
    # Oldest update first: the last one listed is the one most recently active.
    times = [s.last_update_time for s in everyone]
    assert times == sorted(times)
    assert (await service.list_sessions(app_name=f"{app}-none")).sessions == []


async def test_app_state_is_shared_by_every_user_of_the_app(
    service: AgentSessionsService, app: str
) -> None:
    s1 = await service.create_session(
        app_name=app, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    await service.append_event(
        s1, Event(invocation_id="inv1", author="user", actions=_delta(**{"app:k2": "v2"}))
    )
    s2 = await service.create_session(app_name=app, user_id="u2", session_id="s2")
    assert s2.state == {"app:k1": "v1", "app:k2": "v2"}
    again = await service.get_session(app_name=app, user_id="u1", session_id="s1")
    assert again is not None
    assert (again.state["app:k1"], again.state["app:k2"]) == ("v1", "v2")


async def test_user_state_is_shared_by_that_users_sessions_only(
    service: AgentSessionsService, app: str
) -> None:
    s1 = await service.create_session(
        app_name=app, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await service.append_event(
        s1, Event(invocation_id="inv1", author="user", actions=_delta(**{"user:k2": "v2"}))
    )
    same_user = await service.create_session(app_name=app, user_id="u1", session_id="s1b")
    assert same_user.state == {"user:k1": "v1", "user:k2": "v2"}
    other_user = await service.create_session(app_name=app, user_id="u2", session_id="s2")
    assert other_user.state == {}
    assert await service.get_user_state(app_name=app, user_id="u1") == {"k1": "v1", "k2": "v2"}
    assert await service.get_user_state(app_name=app, user_id="u2") == {}


async def test_session_state_is_the_sessions_own(service: AgentSessionsService, app: str) -> None:
    s1 = await service.create_session(
        app_name=app, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    await service.append_event(
        s1, Event(invocation_id="inv1", author="user", actions=_delta(sk2="v2"))
    )
    again = await service.get_session(app_name=app, user_id="u1", session_id="s1")
    assert again is not None and again.state == {"sk1": "v1", "sk2": "v2"}
    other = await service.create_session(app_name=app, user_id="u1", session_id="s1b")
    assert other.state == {}


async def test_temp_state_lives_in_the_session_object_only(
    service: AgentSessionsService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    event = Event(
        invocation_id="inv1", author="agent1", actions=_delta(**{"temp:k1": "v1", "sk": "v2"})
    )
    await service.append_event(session, event)
    assert session.state["temp:k1"] == "v1" and session.state["sk"] == "v2"
    assert event.actions.state_delta == {"sk": "v2"}, "the caller's event is trimmed"
    # A second agent of the same invocation reads it from the session object.
    second = Event(invocation_id="inv1", author="agent2", actions=_delta(**{"temp:out": "a1"}))
    await service.append_event(session, second)
    assert session.state["temp:out"] == "a1" and "temp:out" not in second.actions.state_delta
    stored = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert stored is not None and stored.state == {"sk": "v2"}
    assert all("temp:k1" not in e.actions.state_delta for e in stored.events)


async def test_partial_events_are_not_stored(service: AgentSessionsService, app: str) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    await service.append_event(session, Event(author="user", partial=True))
    assert session.events == []
    stored = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert stored is not None and stored.events == []


async def test_bytes_in_an_event_come_back_as_bytes(
    service: AgentSessionsService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    content = types.Content(
        role="user",
        parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")],
    )
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    event = Event(invocation_id="inv", author="user", content=content, grounding_metadata=grounding)
    await service.append_event(session, event)
    assert session.events[0].content == content
    stored = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert stored is not None and len(stored.events) == 1
    assert stored.events[0].content == content
    assert stored.events[0].grounding_metadata == grounding


async def test_every_field_of_an_event_round_trips(service: AgentSessionsService, app: str) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    await service.append_event(session, event)
    assert await service.get_session(app_name=app, user_id="u", session_id="s") == session


async def test_an_event_moves_the_last_update_time(service: AgentSessionsService, app: str) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    made = session.last_update_time
    event = Event(invocation_id="inv", author="user", timestamp=made + 10)
    await service.append_event(session, event)
    assert session.last_update_time == pytest.approx(event.timestamp, abs=1e-6)
    stored = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert stored is not None
    assert stored.last_update_time == pytest.approx(event.timestamp, abs=1e-6)
    assert stored.last_update_time > made


async def test_the_newest_events_or_those_after_an_instant(
    service: AgentSessionsService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    for n in range(1, 6):
        await service.append_event(session, Event(author="user", timestamp=float(n)))

    async def read(config: GetSessionConfig | None) -> list[float]:
        got = await service.get_session(app_name=app, user_id="u", session_id="s", config=config)
        assert got is not None
        return [e.timestamp for e in got.events]

    assert await read(None) == [1, 2, 3, 4, 5]
    assert await read(GetSessionConfig(num_recent_events=3)) == [3, 4, 5]
    assert await read(GetSessionConfig(after_timestamp=4.0)) == [4, 5], "inclusive"
    assert await read(GetSessionConfig(after_timestamp=50)) == []
    assert await read(GetSessionConfig(after_timestamp=4.0, num_recent_events=3)) == [4, 5]
    assert await read(GetSessionConfig(num_recent_events=0)) == []


async def test_a_stale_session_object_cannot_append(
    service: AgentSessionsService, app: str
) -> None:
    original = await service.create_session(app_name=app, user_id="u", session_id="s")
    t = datetime.now(timezone.utc).timestamp()
    await service.append_event(
        original,
        Event(invocation_id="inv1", author="user", timestamp=t + 1, actions=_delta(sk1="v1")),
    )
    updated = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert updated is not None
    await service.append_event(
        updated,
        Event(invocation_id="inv2", author="user", timestamp=t + 2, actions=_delta(sk2="v2")),
    )
    assert original.last_update_time < updated.last_update_time
    assert len(original.events) == 1 and "sk2" not in original.state
    with pytest.raises(ValueError, match="modified in storage"):
        await service.append_event(
            original,
            Event(invocation_id="inv3", author="user", timestamp=t + 3, actions=_delta(sk3="v3")),
        )
    stored = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert stored is not None
    assert [e.invocation_id for e in stored.events] == ["inv1", "inv2"]
    assert (stored.state.get("sk1"), stored.state.get("sk2"), stored.state.get("sk3")) == (
        "v1",
        "v2",
        None,
    )


async def test_of_two_copies_appending_at_once_one_wins(
    service: AgentSessionsService, app: str
) -> None:
    await service.create_session(app_name=app, user_id="u", session_id="s")
    for round_ in range(8):
        latest = await service.get_session(app_name=app, user_id="u", session_id="s")
        assert latest is not None
        copies = [latest.model_copy(deep=True) for _ in range(2)]
        results = await asyncio.gather(
            *(
                service.append_event(
                    copy,
                    Event(
                        invocation_id=f"inv{round_}-{n}",
                        author="user",
                        timestamp=latest.last_update_time + 11 + n,
                        actions=_delta(**{f"sk{round_}-{n}": f"v{round_}-{n}"}),
                    ),
                )
                for n, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        assert len(failed) == 1 and "modified in storage" in str(failed[0])
    final = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert final is not None and len(final.events) == 8
    for round_ in range(8):
        assert (f"sk{round_}-0" in final.state) != (f"sk{round_}-1" in final.state)


async def test_a_current_session_appends_despite_drift_or_without_a_marker(
    service: AgentSessionsService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    await service.append_event(session, Event(invocation_id="inv1", author="user"))
    session.last_update_time -= 0.0001
    await service.append_event(session, Event(invocation_id="inv2", author="user"))
    session._storage_update_marker = None
    await service.append_event(session, Event(invocation_id="inv3", author="user"))
    stored = await service.get_session(app_name=app, user_id="u", session_id="s")
    assert stored is not None
    assert [e.invocation_id for e in stored.events] == ["inv1", "inv2", "inv3"]


async def test_appending_to_a_deleted_session_is_session_not_found(
    service: AgentSessionsService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="u", session_id="s")
    await service.delete_session(app_name=app, user_id="u", session_id="s")
    with pytest.raises(ValueError, match="not found"):
        await service.append_event(session, Event(invocation_id="inv", author="user"))
    assert await service.get_session(app_name=app, user_id="u", session_id="s") is None


async def test_sessions_made_at_once_in_several_apps_all_exist(
    service: AgentSessionsService, app: str
) -> None:
    await asyncio.gather(
        *(
            service.create_session(app_name=f"{app}-{n}", user_id="user", session_id=f"sess_{n}")
            for n in range(5)
        )
    )
    for n in range(5):
        got = await service.get_session(
            app_name=f"{app}-{n}", user_id="user", session_id=f"sess_{n}"
        )
        assert got is not None and got.app_name == f"{app}-{n}"


async def test_names_outside_the_id_alphabet_work(service: AgentSessionsService, app: str) -> None:
    name = f"my app/{app} ✓"
    user = "user with spaces@example.com"
    made = await service.create_session(
        app_name=name, user_id=user, session_id="a b", state={"app:x": 1}
    )
    got = await service.get_session(app_name=name, user_id=user, session_id="a b")
    assert got == made
    listed = (await service.list_sessions(app_name=name, user_id=user)).sessions
    assert [(s.id, s.app_name, s.user_id) for s in listed] == [("a b", name, user)]
