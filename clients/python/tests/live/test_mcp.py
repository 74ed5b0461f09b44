"""MCP tools against a real MCP server: the official Python SDK's (``mcp``), which the
project does not implement, on the Streamable HTTP transport (``sessions_testkit.
mcp_server``, a process of its own on a free port). The service is the MCP client: it
lists the server's tools at the start of a run, offers them to the model, calls them
and records every list and call in the turn. Failures of the server are errors the
model reads, never a failed or hung run.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from agent_sessions_client import AgentSessionsClient, APIError
from agent_sessions_client.types import Run, ToolCall
from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.mcp_server import McpServer, running
from sessions_testkit.server import (
    Service,
    binary_from_env,
    database,
    free_port,
    run_service,
    start_on,
)

#: How long the service waits for one MCP request in these tests.
TIMEOUT_SECS = "2"


@pytest.fixture(scope="module")
def calc() -> Iterator[McpServer]:
    with running() as server:
        yield server


@pytest.fixture(scope="module")
def crowded() -> Iterator[McpServer]:
    with running("--many-tools", "1000") as server:
        yield server


#: A port nothing listens on, on an allowed host.
NOBODY = f"127.0.0.1:{free_port()}"


def env_for(*servers: McpServer) -> Dict[str, str]:
    hosts = ",".join([*(s.host for s in servers), NOBODY])
    return {"TOOL_WEBHOOK_ALLOWED_HOSTS": hosts, "MCP_CALL_TIMEOUT_SECS": TIMEOUT_SECS}


@pytest.fixture(scope="module")
def mcp_service(fake_llm: FakeLLM, calc: McpServer, crowded: McpServer) -> Iterator[Service]:
    backend = os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")
    env = env_for(calc, crowded)
    with run_service(binary_from_env(), backend, llm_base_url=fake_llm.base_url, env=env) as s:
        yield s


def tool(server: McpServer, label: str = "calc", **fields: Any) -> Dict[str, Any]:
    return {"type": "mcp", "server_label": label, "server_url": server.url, **fields}


def items_of(run: Run, kind: str) -> List[Dict[str, Any]]:
    return [item for item in run["output"] if item.get("type") == kind]


def waiting_calls(run: Run) -> List[ToolCall]:
    """The calls a run waits for approval of."""
    waiting = run["required_action"]
    assert waiting is not None and waiting["type"] == "approve_tool_calls", run
    return waiting["tool_calls"]


def said(run: Run) -> str:
    message = run["output"][-1]
    return str(message["content"][0]["text"])


async def test_a_servers_tools_are_listed_offered_and_called(
    mcp_service: Service, fake_llm: FakeLLM, calc: McpServer
) -> None:
    session = f"mcp-{uuid.uuid4().hex}"
    async with AgentSessionsClient(mcp_service.url) as client:
        run = await client.runs.create(
            session, 'use add {"a": 2, "b": 3}', agent={"tools": [tool(calc)]}
        )
        assert run["status"] == "completed", run
        [listed] = items_of(run, "mcp_list_tools")
        assert listed["server_label"] == "calc"
        names = {t["name"] for t in listed["tools"]}
        assert {"add", "check_auth", "fail", "hang", "big"} <= names
        add = next(t for t in listed["tools"] if t["name"] == "add")
        assert add["input_schema"]["required"] == ["a", "b"]
        [call] = items_of(run, "mcp_call")
        assert call == {
            "type": "mcp_call",
            "id": call["id"],
            "server_label": "calc",
            "name": "add",
            "arguments": '{"a": 2, "b": 3}',
            "output": "5",
            "error": None,
            "status": "completed",
        }
        assert said(run) == "tool said: 5"
        offered = fake_llm.requests_mentioning('use add {\\"a\\": 2')[0]["tools"]
        assert {t["function"]["name"] for t in offered} == names
        # The turn is the session's: what was listed, the call, the answer.
        stored = [item["item"] for item in (await client.items.page(session)).data]
        assert [i.get("type") for i in stored] == [None, "mcp_list_tools", "mcp_call", "message"]


async def test_the_server_gets_the_tools_headers(mcp_service: Service, calc: McpServer) -> None:
    headers = {"Authorization": "Bearer s3cret"}
    async with AgentSessionsClient(mcp_service.url) as client:
        agent = await client.agents.create(name="mcp", tools=[tool(calc, headers=headers)])
        assert agent["tools"][0]["headers"] == {"Authorization": "[REDACTED]"}
        ask = 'use check_auth {"expected": "Bearer s3cret"}'
        run = await client.runs.create(f"mcp-{uuid.uuid4().hex}", ask, agent_id=agent["id"])
        [call] = items_of(run, "mcp_call")
        assert json.loads(call["output"])["authorized"] is True, call
        # A PATCH that sends the redacted value keeps the stored one.
        agent = await client.agents.update(agent["id"], tools=agent["tools"], name="kept")
        run = await client.runs.create(f"mcp-{uuid.uuid4().hex}", ask, agent_id=agent["id"])
        assert json.loads(items_of(run, "mcp_call")[0]["output"])["authorized"] is True


@pytest.mark.parametrize(
    ("ask", "error"),
    [
        ('use fail {"message": "no such account"}', "Error executing tool fail: no such account"),
        ("use hang {}", f"MCP server `calc` did not answer `hang` within {TIMEOUT_SECS} s"),
        ("use big {}", "the result of `big` is 2097152 bytes, over the 1048576"),
        ('use add {"a": "two"}', "Error executing tool add"),
    ],
)
async def test_a_failing_tool_is_an_error_the_model_reads(
    mcp_service: Service, calc: McpServer, ask: str, error: str
) -> None:
    async with AgentSessionsClient(mcp_service.url) as client:
        run = await client.runs.create(
            f"mcp-{uuid.uuid4().hex}", ask, agent={"tools": [tool(calc)]}
        )
    assert run["status"] == "completed", run
    [call] = items_of(run, "mcp_call")
    assert call["status"] == "failed" and call["output"] is None
    assert call["error"].startswith(error), call["error"]
    assert said(run) == f"tool said: error: {call['error']}"


async def test_a_server_that_cannot_list_leaves_the_others(
    mcp_service: Service, calc: McpServer, crowded: McpServer
) -> None:
    down = {"type": "mcp", "server_label": "down", "server_url": f"http://{NOBODY}/mcp"}
    # An HTTP server that speaks no MCP: its admin route answers a POST with 405.
    not_mcp = {
        "type": "mcp",
        "server_label": "not_mcp",
        "server_url": f"http://{calc.host}/admin/calls",
    }
    tools = [down, not_mcp, tool(crowded, "crowded"), tool(calc)]
    async with AgentSessionsClient(mcp_service.url) as client:
        run = await client.runs.create(
            f"mcp-{uuid.uuid4().hex}", 'use add {"a": 1, "b": 1}', agent={"tools": tools}
        )
    assert run["status"] == "completed", run
    listed = {item["server_label"]: item for item in items_of(run, "mcp_list_tools")}
    assert listed["down"]["tools"] == [] and "cannot be reached" in listed["down"]["error"]
    assert listed["not_mcp"]["tools"] == []
    assert "MCP server `not_mcp` could not be opened: " in listed["not_mcp"]["error"]
    assert listed["crowded"]["tools"] == []
    assert "lists 1000 tools to offer" in listed["crowded"]["error"]
    assert "allowed_tools" in listed["crowded"]["error"]
    assert "error" not in listed["calc"]
    assert items_of(run, "mcp_call")[0]["output"] == "2"


async def test_allowed_tools_pick_what_is_offered_and_clashes_are_renamed(
    mcp_service: Service, fake_llm: FakeLLM, calc: McpServer, crowded: McpServer
) -> None:
    function = {"type": "function", "name": "add", "parameters": {"type": "object"}}
    tools = [
        function,
        tool(calc, allowed_tools=["add", "fail"]),
        tool(crowded, "crowded", allowed_tools={"tool_names": ["tool_0007"]}),
    ]
    marker = uuid.uuid4().hex
    async with AgentSessionsClient(mcp_service.url) as client:
        run = await client.runs.create(
            f"mcp-{marker}", f'use calc__add {{"a": 40, "b": 2}} {marker}', agent={"tools": tools}
        )
    offered = [t["function"]["name"] for t in fake_llm.requests_mentioning(marker)[0]["tools"]]
    assert offered == ["add", "calc__add", "fail", "tool_0007"]
    [call] = items_of(run, "mcp_call")
    assert (call["name"], call["output"]) == ("add", "42")


async def test_calls_wait_for_approval_as_configured(mcp_service: Service, calc: McpServer) -> None:
    session = f"mcp-{uuid.uuid4().hex}"
    approval = {"never": {"tool_names": ["add"]}}
    ask = 'use add {"a": 1, "b": 2} use check_auth {"expected": "x"}'
    async with AgentSessionsClient(mcp_service.url) as client:
        run = await client.runs.create(
            session, ask, agent={"tools": [tool(calc, require_approval=approval)]}
        )
        assert run["status"] == "requires_action", run
        assert items_of(run, "mcp_call")[0]["output"] == "3", "`add` needs no approval"
        [call] = waiting_calls(run)
        assert (call["name"], call["server_label"]) == ("check_auth", "calc")
        [request] = items_of(run, "mcp_approval_request")
        assert request["id"] == call["call_id"]
        before = len(calc.admin("calls"))
        done = await client.runs.submit_approvals(
            session,
            run["id"],
            [{"call_id": call["call_id"], "approve": False, "reason": "not now"}],
        )
        assert done["status"] == "completed", done
        assert len(calc.admin("calls")) == before, "a rejected call is never made"
        assert said(done) == 'tool said: {"error":"rejected","reason":"not now"}'

        run = await client.runs.create(
            session, ask, agent={"tools": [tool(calc, require_approval="always")]}
        )
        calls = waiting_calls(run)
        assert [c["name"] for c in calls] == ["add", "check_auth"]
        approvals: List[Any] = [{"call_id": c["call_id"], "approve": True} for c in calls]
        done = await client.runs.submit_approvals(session, run["id"], approvals)
        made = items_of(done, "mcp_call")
        assert sorted((m["name"], m["approval_request_id"]) for m in made) == [
            (c["name"], c["call_id"]) for c in calls
        ], "each approved call is made once, answering its request"
        responses = items_of(done, "mcp_approval_response")
        assert [r["approve"] for r in responses] == [True, True]


async def test_a_forgotten_session_is_opened_again(
    mcp_service: Service, fake_llm: FakeLLM, calc: McpServer
) -> None:
    """The server forgets the session the run opened to list its tools (as a restart or
    an expiry does) before the call: the call goes through on a new session."""
    forgotten: List[Any] = []
    marker = uuid.uuid4().hex

    def forget(body: Dict[str, Any]) -> None:
        if marker in json.dumps(body) and not forgotten:
            forgotten.append(calc.admin("forget-sessions", "POST"))

    fake_llm.before_reply = forget
    try:
        async with AgentSessionsClient(mcp_service.url) as client:
            run = await client.runs.create(
                f"mcp-{marker}",
                f'use add {{"a": 5, "b": 5}} {marker}',
                agent={"tools": [tool(calc)]},
            )
    finally:
        fake_llm.before_reply = None
    assert forgotten and forgotten[0]["forgotten"], "the run's session was open"
    assert items_of(run, "mcp_call")[0]["output"] == "10", run


async def test_a_server_on_a_host_not_allowed_is_refused(mcp_service: Service) -> None:
    outside = {"type": "mcp", "server_label": "x", "server_url": "http://mcp.example/mcp"}
    async with AgentSessionsClient(mcp_service.url) as client:
        with pytest.raises(APIError) as refused:
            await client.runs.create(f"mcp-{uuid.uuid4().hex}", "hi", agent={"tools": [outside]})
    assert refused.value.status == 400
    assert refused.value.detail.startswith(
        "agent.tools[0].server_url: MCP server host `mcp.example`"
    )


def test_a_paused_call_is_made_after_a_restart(
    fake_llm: FakeLLM, calc: McpServer, tmp_path: Path
) -> None:
    """A run waiting for approval survives the process: the next one opens its own
    session with the server and makes the call."""
    import asyncio

    backend = os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")
    binary, env = binary_from_env(), env_for(calc)
    session = f"mcp-{uuid.uuid4().hex}"

    async def pause(url: str) -> Run:
        async with AgentSessionsClient(url) as client:
            agent = {"tools": [tool(calc, require_approval="always")]}
            return await client.runs.create(session, 'use add {"a": 20, "b": 22}', agent=agent)

    async def approve(url: str, run: Run) -> Run:
        call_id = waiting_calls(run)[0]["call_id"]
        async with AgentSessionsClient(url) as client:
            return await client.runs.submit_approvals(
                session, run["id"], [{"call_id": call_id, "approve": True}]
            )

    with database(backend) as database_url:
        with start_on(binary, database_url, tmp_path, fake_llm.base_url, env) as first:
            paused = asyncio.run(pause(first.service.url))
            first.kill()
        with start_on(binary, database_url, tmp_path, fake_llm.base_url, env) as second:
            done = asyncio.run(approve(second.service.url, paused))
    assert done["status"] == "completed", done
    assert items_of(done, "mcp_call")[0]["output"] == "42"
    assert len(items_of(done, "mcp_list_tools")) == 1, "listed once, by the first process"
