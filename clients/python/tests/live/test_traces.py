"""Traces as an OpenTelemetry collector receives them: the service exports OTLP over HTTP
to a receiver here, which decodes each export with ``opentelemetry-proto``, the
reference protobuf bindings. One run's spans are checked for their names, kinds,
parent/child links and GenAI attributes; the fake LLM and a webhook tool for the
``traceparent`` they were sent; every export for what a span must never carry."""

from __future__ import annotations

import os
import secrets
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Dict, Iterator, List

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.mcp_server import McpServer, running
from sessions_testkit.server import binary_from_env, database, start_on

# Text that the run's input, instructions, metadata and headers carry, and no span may.
CANARY = f"canary-{uuid.uuid4().hex}"
ADMIN_KEY = f"admin-{CANARY}"
RUN_CREATED = "POST /v1/sessions/{session_id}/runs"
ANSWERED = "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs"


@dataclass
class Span:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: Dict[str, Any]
    resource: Dict[str, Any]
    status_code: int


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Collector:
    """An OTLP/HTTP receiver of traces: keeps each export's bytes and its spans."""

    def __init__(self) -> None:
        self.exports: List[bytes] = []
        self.spans: List[Span] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector._keep(body, request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host!s}:{port}"

    def _keep(self, body: bytes, request: ExportTraceServiceRequest) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        Span(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            status_code=span.status.code,
                        )
                    )
        with self._lock:
            self.exports.append(body)
            self.spans.extend(spans)

    def trace(self, trace_id: str, until: Any, timeout: float = 20.0) -> List[Span]:
        """The spans of ``trace_id``, once ``until(spans)`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = [s for s in self.spans if s.trace_id == trace_id]
            if until(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def close(self) -> None:
        self._server.shutdown()


class Tool:
    """A webhook tool that answers ``sunny`` and keeps the headers of each call."""

    def __init__(self) -> None:
        self.headers: List[Dict[str, str]] = []
        seen = self.headers

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                seen.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(200)
                self.send_header("content-length", "5")
                self.end_headers()
                self.wfile.write(b"sunny")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        host, port = self._server.server_address[:2]
        self.host = f"{host!s}:{port}"
        self.url = f"http://{self.host}/weather"

    def close(self) -> None:
        self._server.shutdown()


@dataclass
class Traced:
    urls: List[str]
    collector: Collector
    tool: Tool
    key: str
    mcp: McpServer


@pytest.fixture(scope="module")
def traced(fake_llm: FakeLLM) -> Iterator[Traced]:
    """The service exporting traces, with authentication on: on Postgres two replicas,
    the first of which executes no runs."""
    backend = os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")
    collector, tool = Collector(), Tool()
    with ExitStack() as stack:
        mcp = stack.enter_context(running())
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "TOOL_WEBHOOK_ALLOWED_HOSTS": f"{tool.host},{mcp.host}",
            "ADMIN_API_KEY": ADMIN_KEY,
        }
        stack.callback(collector.close)
        stack.callback(tool.close)
        url = stack.enter_context(database(backend))
        logs = Path(stack.enter_context(TemporaryDirectory(prefix="agent-sessions-")))
        binary, llm = binary_from_env(), fake_llm.base_url
        replicas = [{**env, "RUN_WORKERS": "0"}, env] if backend == "postgres" else [env]
        urls = [
            stack.enter_context(start_on(binary, url, logs, llm, replica)).service.url
            for replica in replicas
        ]
        answer = httpx.post(
            f"{urls[0]}/v1/api_keys",
            headers={"authorization": f"Bearer {ADMIN_KEY}"},
            json={"tenant": "traced", "name": "traces"},
        )
        answer.raise_for_status()
        yield Traced(urls, collector, tool, answer.json()["key"], mcp)


def _run(traced: Traced, url: str, traceparent: str, background: bool) -> Dict[str, Any]:
    """A run that calls the webhook tool once, started with ``traceparent``; its input
    names the trace."""
    headers = {
        "authorization": f"Bearer {traced.key}",
        "traceparent": traceparent,
        "x-request-id": f"request-{CANARY}",
        "x-note": CANARY,
    }
    body = {
        "input": f"call get_weather for {CANARY} in {traceparent}",
        "background": background,
        "metadata": {"note": CANARY},
        "agent": {
            "instructions": f"Be brief, {CANARY}.",
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {}},
                    "webhook": {"url": traced.tool.url, "headers": {"x-secret": CANARY}},
                }
            ],
        },
    }
    sid = f"traced-{uuid.uuid4().hex}"
    with httpx.Client(headers=headers, timeout=30) as http:
        answer = http.post(f"{url}/v1/sessions/{sid}/runs", json=body)
        assert answer.status_code in (200, 201, 202), answer.text
        run: Dict[str, Any] = answer.json()
        deadline = time.monotonic() + 30
        while run["status"] not in ("completed", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            run = http.get(f"{url}/v1/sessions/{sid}/runs/{run['id']}").json()
    assert run["status"] == "completed", run
    return run


def _one(spans: List[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def _complete(spans: List[Span]) -> bool:
    names = [s.name for s in spans]
    return names.count("chat fake-model") == 2 and {"invoke_agent", RUN_CREATED} <= set(names)


@pytest.mark.parametrize("background", [False, True], ids=["waited", "queued"])
def test_one_run_is_one_trace_continuing_the_callers(
    traced: Traced, fake_llm: FakeLLM, background: bool
) -> None:
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    url = traced.urls[0]
    run = _run(traced, url, f"00-{trace_id}-{caller}-01", background)
    spans = traced.collector.trace(trace_id, _complete)

    request = _one(spans, RUN_CREATED)
    assert request.parent_span_id == caller
    assert request.kind == SpanProto.SPAN_KIND_SERVER
    assert request.attributes["http.request.method"] == "POST"
    assert request.attributes["http.route"] == "/v1/sessions/{session_id}/runs"
    assert request.attributes["http.response.status_code"] in (200, 201, 202)
    assert request.resource["service.name"] == "agent-sessions"

    # The run's execution is a child of the request that created it, on whichever
    # replica claimed it; a worker's claim too.
    agent = _one(spans, "invoke_agent")
    assert agent.parent_span_id == request.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.conversation.id"] == run["session_id"]
    assert agent.attributes["gen_ai.usage.input_tokens"] == 14
    assert agent.attributes["gen_ai.usage.output_tokens"] == 6
    assert agent.attributes["run_id"] == run["id"]
    if background:
        claim = _one(spans, "claim run")
        assert claim.parent_span_id == request.span_id
        assert claim.attributes["run_id"] == run["id"]
    if len(traced.urls) > 1:
        assert agent.resource["service.instance.id"] != request.resource["service.instance.id"]

    chats = [s for s in spans if s.name == "chat fake-model"]
    for chat in chats:
        assert chat.parent_span_id == agent.span_id
        assert chat.kind == SpanProto.SPAN_KIND_CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
        assert chat.attributes["gen_ai.response.model"] == "fake-model"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 7
        assert chat.attributes["gen_ai.usage.output_tokens"] == 3
    tool = _one(spans, "execute_tool get_weather")
    assert tool.parent_span_id == agent.span_id
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"
    assert tool.attributes["gen_ai.tool.call.id"]

    # The LLM and the webhook were each called inside their span, and told so.
    sent = [h for b, h in zip(fake_llm.requests, fake_llm.headers) if trace_id in str(b)]
    assert sorted(h["traceparent"] for h in sent) == sorted(
        f"00-{trace_id}-{chat.span_id}-01" for chat in chats
    )
    assert f"00-{trace_id}-{tool.span_id}-01" in [h.get("traceparent") for h in traced.tool.headers]


def test_no_span_carries_what_a_caller_said(traced: Traced) -> None:
    trace_id = secrets.token_hex(16)
    _run(traced, traced.urls[0], f"00-{trace_id}-{secrets.token_hex(8)}-01", True)
    assert _complete(traced.collector.trace(trace_id, _complete))
    # A path no route knows, and a tracestate, are the caller's words too.
    lost = secrets.token_hex(16)
    headers = {
        "traceparent": f"00-{lost}-{secrets.token_hex(8)}-01",
        "tracestate": f"vendor={CANARY}",
    }
    answer = httpx.get(f"{traced.urls[0]}/v1/{CANARY}", headers=headers)
    assert answer.status_code == 404
    spans = traced.collector.trace(lost, lambda spans: len(spans) > 0)
    assert [s.name for s in spans] == ["GET"]
    assert "url.path" not in spans[0].attributes
    exported = b"".join(traced.collector.exports)
    for secret in (CANARY, traced.key):
        assert secret.encode() not in exported


def test_a_paused_run_goes_on_in_the_trace_of_the_request_that_answered_it(
    traced: Traced,
) -> None:
    first, second = secrets.token_hex(16), secrets.token_hex(16)
    caller = secrets.token_hex(8)
    sid = f"traced-{uuid.uuid4().hex}"
    client_tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    body = {"input": f"call get_weather in {first}", "agent": {"tools": [client_tool]}}
    auth = {"authorization": f"Bearer {traced.key}"}
    with httpx.Client(headers=auth, timeout=30) as http:
        started = {**auth, "traceparent": f"00-{first}-{secrets.token_hex(8)}-01"}
        answer = http.post(f"{traced.urls[0]}/v1/sessions/{sid}/runs", json=body, headers=started)
        run = answer.json()
        assert run["status"] == "requires_action", run
        call = run["required_action"]["tool_calls"][0]["call_id"]
        outputs = {"outputs": [{"call_id": call, "output": "sunny"}]}
        answered = {**auth, "traceparent": f"00-{second}-{caller}-01"}
        path = f"/v1/sessions/{sid}/runs/{run['id']}/tool_outputs"
        http.post(f"{traced.urls[0]}{path}", json=outputs, headers=answered).raise_for_status()

    def resumed(spans: List[Span]) -> bool:
        names = [s.name for s in spans]
        return {"invoke_agent", f"POST {ANSWERED}", "chat fake-model"} <= set(names)

    spans = traced.collector.trace(second, resumed)
    request = _one(spans, f"POST {ANSWERED}")
    assert request.parent_span_id == caller
    agent = _one(spans, "invoke_agent")
    assert agent.parent_span_id == request.span_id
    assert agent.attributes["run_id"] == run["id"]
    assert agent.attributes["agent_sessions.run.status"] == "completed"
    # The execution that paused stays in the trace that started it.
    paused = _one(traced.collector.trace(first, lambda s: len(s) >= 3), "invoke_agent")
    assert paused.attributes["agent_sessions.run.status"] == "requires_action"


def test_an_mcp_call_is_a_span_and_the_server_is_told_its_context(traced: Traced) -> None:
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    sid = f"traced-{uuid.uuid4().hex}"
    server = {
        "type": "mcp",
        "server_label": "calc",
        "server_url": traced.mcp.url,
        "headers": {"Authorization": f"Bearer {CANARY}"},
    }
    body = {"input": f'use check_auth {{"expected": "x"}} {trace_id}', "agent": {"tools": [server]}}
    headers = {"authorization": f"Bearer {traced.key}", "traceparent": f"00-{trace_id}-{caller}-01"}
    answer = httpx.post(
        f"{traced.urls[0]}/v1/sessions/{sid}/runs", json=body, headers=headers, timeout=30
    )
    run = answer.json()
    assert run["status"] == "completed", run

    def called(spans: List[Span]) -> bool:
        return "execute_tool check_auth" in [s.name for s in spans] and _complete(spans)

    spans = traced.collector.trace(trace_id, called)
    tool = _one(spans, "execute_tool check_auth")
    assert tool.parent_span_id == _one(spans, "invoke_agent").span_id
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    [call] = [item for item in run["output"] if item["type"] == "mcp_call"]
    assert tool.attributes["gen_ai.tool.call.id"] == call["id"]
    # The server was told the call's own context.
    seen = [c for c in traced.mcp.admin("calls") if c["tool"] == "check_auth"]
    assert f"00-{trace_id}-{tool.span_id}-01" in [c["headers"].get("traceparent") for c in seen]
