"""examples/react-chat in chromium: the AI SDK's own ``useChat`` (pinned in the example's
package-lock.json) against the release binary's ``/v1/chat``, with no glue and no mock
server. The page is the example's production build (``npm run build``, which
scripts/browser-tests.sh runs first), served from an origin of its own, so the service
answers it through CORS as it would a real deployment.

``--screenshots`` writes docs/react-chat/*.png.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from conftest import ROOT, Api, serve, static_site
from fake_llm import SLOW_WORDS, FakeLLM

DIST = ROOT / "examples/react-chat/dist"


@pytest.fixture(scope="module")
def page_origin() -> Iterator[str]:
    yield from static_site(DIST, "the example")


@pytest.fixture(scope="module")
def chat_api(fake_llm: FakeLLM, page_origin: str) -> Iterator[Api]:
    """The binary on a database of its own, answering the example's origin."""
    workdir = Path(tempfile.mkdtemp(prefix="react-chat-tests-"))
    for base_url in serve(fake_llm, workdir, {"CORS_ALLOWED_ORIGINS": page_origin}):
        yield Api(base_url)


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Iterator[Path]:
    if request.config.getoption("--screenshots"):
        target = ROOT / "docs/react-chat"
        target.mkdir(parents=True, exist_ok=True)
        yield target
    else:
        with tempfile.TemporaryDirectory() as scratch:
            yield Path(scratch)


@pytest.fixture
def chat_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 900, "height": 760})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(15_000)
    yield page
    context.close()
    assert not errors, errors


def open_chat(page: Page, origin: str, api: Api, chat: str, agent: str | None = None) -> None:
    address = f"{origin}/?api={api.base_url}&chat={chat}" + (f"&agent={agent}" if agent else "")
    page.goto(address)
    expect(page.get_by_label("Message")).to_be_visible()


def say(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def assistant(page: Page):
    return page.locator('li[data-role="assistant"]').last


def test_a_turn_streams_and_a_reload_mid_answer_resumes_it(
    chat_page: Page, page_origin: str, chat_api: Api, shots: Path
) -> None:
    open_chat(chat_page, page_origin, chat_api, "react-resume")
    say(chat_page, "a slow answer, please")
    expect(chat_page.locator('p.status[data-status="streaming"]')).to_be_visible()
    expect(assistant(chat_page)).to_contain_text("slow slow slow")
    chat_page.screenshot(path=str(shots / "streaming.png"))
    words_before = assistant(chat_page).inner_text().split().count("slow")
    assert words_before < SLOW_WORDS, "the reload must come mid-answer"

    chat_page.reload()
    # The history comes from the service, the rest of the answer from the resumed stream.
    expect(chat_page.locator('li[data-role="user"]')).to_have_text(["a slow answer, please"])
    # Every word once: the resumed stream replays the message from its start.
    expect(assistant(chat_page)).to_have_text(" ".join(["slow"] * SLOW_WORDS))
    expect(chat_page.locator('p.status[data-status="ready"]')).to_be_visible()
    expect(chat_page.locator('li[data-role="assistant"]')).to_have_count(1)
    stored = chat_api.ok("GET", "/v1/sessions/react-resume/items")["data"]
    assert [item["item"].get("role") for item in stored] == ["user", "assistant"]

    # The turn is the session's: a fresh page shows it as it was.
    chat_page.reload()
    expect(assistant(chat_page)).to_have_text(" ".join(["slow"] * SLOW_WORDS))


def test_a_client_tool_call_is_shown_and_answered_by_the_page(
    chat_page: Page, page_origin: str, chat_api: Api, shots: Path
) -> None:
    tool = {"type": "function", "name": "get_local_time", "description": "The user's local time",
            "parameters": {"type": "object", "properties": {}}}
    agent = chat_api.ok("POST", "/v1/agents", {"name": "react-chat", "tools": [tool]})
    open_chat(chat_page, page_origin, chat_api, "react-tools", agent["id"])
    say(chat_page, "call get_local_time")
    call = chat_page.locator('details[data-tool="get_local_time"]')
    expect(call).to_have_attribute("data-state", "output-available")
    expect(assistant(chat_page)).to_contain_text("tool said:")
    call.locator("summary").click()
    chat_page.screenshot(path=str(shots / "tool-call.png"))

    stored = [item["item"] for item in chat_api.ok("GET", "/v1/sessions/react-tools/items")["data"]]
    assert [item.get("type", item.get("role")) for item in stored] == [
        "user", "function_call", "function_call_output", "message"]
    assert '"time"' in stored[2]["output"], stored[2]
    # One assistant message for the turn, before and after a reload.
    expect(chat_page.locator('li[data-role="assistant"]')).to_have_count(1)
    chat_page.reload()
    expect(chat_page.locator('details[data-tool="get_local_time"]')).to_have_attribute(
        "data-state", "output-available")
    expect(chat_page.locator('li[data-role="assistant"]')).to_have_count(1)


def test_a_server_tool_waits_for_approval_in_the_page(
    chat_page: Page, page_origin: str, chat_api: Api, fake_llm: FakeLLM
) -> None:
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object"},
            "webhook": {"url": f"http://{fake_llm.host}/tool"}, "require_approval": "always"}
    agent = chat_api.ok("POST", "/v1/agents", {"name": "react-approvals", "tools": [tool]})
    open_chat(chat_page, page_origin, chat_api, "react-approvals", agent["id"])
    say(chat_page, "call lookup")
    call = chat_page.locator('details[data-tool="lookup"]')
    expect(call).to_have_attribute("data-state", "approval-requested")
    call.locator("summary").click()
    call.get_by_role("button", name="Approve").click()
    expect(call).to_have_attribute("data-state", "output-available")
    expect(assistant(chat_page)).to_contain_text("tool said: webhook got")


def test_a_failed_turn_shows_its_error_and_leaves_the_history(
    chat_page: Page, page_origin: str, chat_api: Api
) -> None:
    open_chat(chat_page, page_origin, chat_api, "react-failure")
    say(chat_page, "please fail")
    expect(chat_page.get_by_role("alert")).to_contain_text("llm_bad_request")
    status, _ = chat_api.call("GET", "/v1/sessions/react-failure/items")
    items = chat_api.ok("GET", "/v1/sessions/react-failure/items")["data"] if status == 200 else []
    assert items == [], items
