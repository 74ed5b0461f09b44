"""A fake OpenAI-compatible Chat Completions server, for the service's run worker and for
the Agents SDK's ``OpenAIChatCompletionsModel`` alike.

Replies are chosen from the request alone (no shared queue), so tests that run turns at
the same time never receive each other's answers:

- the last message is a tool result: ``tool said: <its content>``;
- the last user message contains ``call get_weather`` and the request offers tools:
  a call of ``get_weather`` with ``{"city": "Oslo"}``;
- it holds ``use <tool> {<arguments>}`` (once or more) and the request offers those
  tools: a call of each, with those arguments;
- it contains ``slow``: a long answer streamed one word every ``SLOW_DELAY`` seconds;
- it contains ``refuse with <status>``: that HTTP status and an OpenAI error body, whose
  code is ``context_length_exceeded`` for a 400;
- otherwise ``echo: <the last user message>``.

Every request body is recorded in ``requests``, and its headers at the same index in
``headers``, so tests can assert what a model was sent. ``before_reply``, when set, is
called with each request body before it is answered.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional

SLOW_DELAY = 0.1
SLOW_WORDS = 30


def _text(content: Any) -> str:
    """The text of a message's ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def reply_for(body: Dict[str, Any]) -> Dict[str, Any]:
    """The assistant message (Chat Completions shape) answering ``body``."""
    messages: List[Dict[str, Any]] = body.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"role": "assistant", "content": f"tool said: {_text(last.get('content'))}"}
    users = [m for m in messages if m.get("role") == "user"]
    said = _text(users[-1].get("content")) if users else ""
    offered = {tool["function"]["name"] for tool in body.get("tools") or []}
    uses = [(m.group(1), m.group(2)) for m in re.finditer(r"use (\S+) (\{[^}]*\})", said)]
    if uses and all(name in offered for name, _ in uses):
        calls = [
            {
                "id": f"call_{n}_{abs(hash(said)) % 10**8}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for n, (name, arguments) in enumerate(uses)
        ]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if "call get_weather" in said and body.get("tools"):
        call = {
            "id": f"call_{abs(hash(said)) % 10**8}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if "slow" in said:
        return {"role": "assistant", "content": " ".join(["slow"] * SLOW_WORDS)}
    return {"role": "assistant", "content": f"echo: {said}"}


class FakeLLM:
    """The server, on 127.0.0.1 and a free port, in a daemon thread."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.headers: List[Dict[str, str]] = []
        self.before_reply: Optional[Callable[[Dict[str, Any]], None]] = None
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                if fake.before_reply is not None:
                    fake.before_reply(body)
                refusal = re.search(r"refuse with (\d{3})", json.dumps(body.get("messages", [])))
                if refusal:
                    self._refuse(int(refusal.group(1)))
                    return
                message = reply_for(body)
                if body.get("stream"):
                    self._stream(body, message)
                else:
                    self._json(body, message)

            def _refuse(self, status: int) -> None:
                code = "context_length_exceeded" if status == 400 else "refused"
                error = {"message": f"refused with {status}", "type": "error", "code": code}
                data = json.dumps({"error": error}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _json(self, body: Dict[str, Any], message: Dict[str, Any]) -> None:
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                data = json.dumps(
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: Dict[str, Any], message: Dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                slow = "slow" in str(message.get("content") or "")

                def chunk(delta: Dict[str, Any], finish: Optional[str] = None) -> None:
                    choice = {"index": 0, "delta": delta, "finish_reason": finish}
                    payload = {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [choice],
                    }
                    self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                    self.wfile.flush()

                chunk({"role": "assistant", "content": ""})
                if message.get("tool_calls"):
                    for index, call in enumerate(message["tool_calls"]):
                        head = {**call, "index": index, "function": {**call["function"]}}
                        head["function"]["arguments"] = ""
                        chunk({"tool_calls": [head]})
                        args = call["function"]["arguments"]
                        chunk({"tool_calls": [{"index": index, "function": {"arguments": args}}]})
                    chunk({}, "tool_calls")
                else:
                    words = str(message["content"]).split(" ")
                    for n, word in enumerate(words):
                        if slow:
                            time.sleep(SLOW_DELAY)
                        chunk({"content": word if n == 0 else " " + word})
                    chunk({}, "stop")
                usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
                tail = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "usage": usage,
                }
                self.wfile.write(f"data: {json.dumps(tail)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The ``/v1`` base URL, as ``LLM_BASE_URL`` and ``AsyncOpenAI(base_url=…)`` want it."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def requests_mentioning(self, token: str) -> List[Dict[str, Any]]:
        """The recorded requests whose messages contain ``token`` anywhere."""
        with self._lock:
            return [r for r in self.requests if token in json.dumps(r.get("messages", []))]

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
