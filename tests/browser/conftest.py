"""The console's browser tests: the release binary on a fresh SQLite file, the fake LLM,
and Debian's chromium driven by Playwright (its own browser download cannot be reached
here, so ``CHROMIUM`` names the executable).

Run them with ``scripts/browser-tests.sh``; ``--screenshots`` also rewrites
``docs/console/*.png``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parents[2]

#: Lines for the report at the end of the run (page-load measurements).
REPORT: List[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--screenshots",
        action="store_true",
        help="write the screenshots to docs/console/ (otherwise to a temporary directory)",
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if REPORT:
        terminalreporter.section("console page load")
        for line in REPORT:
            terminalreporter.write_line(line)


class Api:
    """A few direct API calls, to set up what a test then looks at in the browser."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def call(self, method: str, path: str, body: Optional[Any] = None) -> Tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            request.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            text = error.read()
            return error.code, json.loads(text) if text else None

    def ok(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        status, answer = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path}: {status} {answer}"
        return answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def static_site(directory: Path, what: str) -> Iterator[str]:
    """A page's production build, served as static files from an origin of its own."""
    assert (directory / "index.html").exists(), f"build {what} first: npm run build in {directory}"

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


BINARY = os.environ.get("AGENT_SESSIONS_BIN", str(ROOT / "target/release/agent-sessions"))
ADMIN_KEY = "console-tests-admin-key-0123456789abcdef"


@pytest.fixture(scope="session")
def server(fake_llm: FakeLLM) -> Iterator[str]:
    """The binary under test at its base URL, on a database no one else uses."""
    workdir = Path(tempfile.mkdtemp(prefix="console-tests-"))
    yield from serve(fake_llm, workdir, {})


@pytest.fixture(scope="session")
def auth_server(fake_llm: FakeLLM) -> Iterator[Tuple[str, str]]:
    """The binary with authentication on, and a tenant's key made on the command line."""
    workdir = Path(tempfile.mkdtemp(prefix="console-auth-tests-"))
    made = subprocess.run(
        [BINARY, "keys", "create", "--tenant", "console", "--name", "browser tests"],
        env={**os.environ, "DATABASE_URL": f"sqlite://{workdir / 'console.db'}"},
        capture_output=True, text=True, check=True,
    )
    key = made.stdout.strip()
    for base_url in serve(fake_llm, workdir, {"ADMIN_API_KEY": ADMIN_KEY}):
        yield base_url, key


def serve(fake_llm: FakeLLM, workdir: Path, extra: Dict[str, str]) -> Iterator[str]:
    binary = BINARY
    port = free_port()
    env = {
        **os.environ,
        **extra,
        "LISTEN_ADDR": f"127.0.0.1:{port}",
        "DATABASE_URL": f"sqlite://{workdir / 'console.db'}",
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "fake",
        "LLM_MODEL": "fake-model",
        "LLM_MAX_RETRIES": "0",
        "TOOL_WEBHOOK_ALLOWED_HOSTS": fake_llm.host,
        "LOG_FORMAT": "json",
        "RUST_LOG": "warn",
    }
    log = open(workdir / "server.log", "wb")
    process = subprocess.Popen([binary], env=env, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base_url + "/healthz", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the service did not start; see {workdir / 'server.log'}")
                time.sleep(0.1)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def api(server: str) -> Api:
    return Api(server)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = os.environ.get("CHROMIUM") or shutil.which("chromium")
    assert executable, "chromium not found: apt-get install -y chromium, or set CHROMIUM"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    """A fresh tab at desktop width that fails the test on a script error or a CSP
    violation (failed fetches of 4xx answers are expected and not counted)."""
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    problems: List[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: problems.append(f"console: {message.text}")
        if message.type == "error" and "Content Security Policy" in message.text
        else None,
    )
    page.set_default_timeout(10_000)
    yield page
    context.close()
    assert not problems, problems


def open_session(page: Page, session_id: str) -> None:
    page.goto(f"/console#/sessions/{session_id}")
    page.wait_for_selector('body[data-view="session"]')


def messages(*texts: Tuple[str, str]) -> Dict[str, Any]:
    """An append body of messages given as (role, text) pairs."""
    return {"items": [{"role": role, "content": text} for role, text in texts]}
