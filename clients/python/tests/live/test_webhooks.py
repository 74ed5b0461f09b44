"""Completion webhooks as a receiver sees them: each post verified by the Standard
Webhooks reference library (``standardwebhooks``), as a receiver would verify it."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from agent_sessions_client import AgentSessionsClient
from sessions_testkit.fake_llm import FakeLLM
from sessions_testkit.server import Service, binary_from_env, run_service

SECRET = "whsec_" + "c2VjcmV0IG9mIHRoZSB3ZWJob29rIHRlc3Rz"


class Receiver:
    """An HTTP server that keeps every post (its headers and body) and answers 204."""

    def __init__(self) -> None:
        self.posts: List[Tuple[Dict[str, str], bytes]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.append((dict(self.headers.items()), body))
                self.send_response(204)
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        host, port = self._server.server_address[:2]
        self.host = f"{host!s}:{port}"
        self.url = f"http://{self.host}/hook"

    def close(self) -> None:
        self._server.shutdown()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def signing_service(fake_llm: FakeLLM, receiver: Receiver) -> Iterator[Service]:
    backend = os.environ.get("AGENT_SESSIONS_BACKEND", "sqlite")
    env = {"WEBHOOK_SIGNING_SECRET": SECRET, "TOOL_WEBHOOK_ALLOWED_HOSTS": receiver.host}
    with run_service(binary_from_env(), backend, llm_base_url=fake_llm.base_url, env=env) as s:
        yield s


async def test_a_finished_run_is_posted_and_verifies(
    signing_service: Service, receiver: Receiver
) -> None:
    said = f"hello {uuid.uuid4().hex}"
    async with AgentSessionsClient(signing_service.url) as client:
        run = await client.runs.create(
            f"hooked-{uuid.uuid4().hex}", said, agent={"webhook": {"url": receiver.url}}
        )
    assert run["status"] == "completed"
    for _ in range(200):
        if any(said.encode() in body for _, body in receiver.posts):
            break
        await asyncio.sleep(0.05)
    headers, body = next((h, b) for h, b in receiver.posts if said.encode() in b)
    event = Webhook(SECRET).verify(body, headers)
    assert event["type"] == "run.completed"
    assert event["data"]["id"] == run["id"]
    assert event["data"]["output"] == run["output"]
    # A body changed on the way is refused.
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body.replace(b"hello", b"HELLO"), headers)
