"""The console in a real browser: what a person does with it, end to end."""

from __future__ import annotations

import json
import re
import uuid
from typing import Tuple

import pytest
from playwright.sync_api import Browser, Page, expect

from conftest import Api, messages, open_session
from fake_llm import FakeLLM


#: The shape of the request ids the service generates.
UUID_V7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_the_console_opens_with_a_strict_policy(page: Page) -> None:
    response = page.goto("/console")
    assert response is not None and response.status == 200
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "unsafe-inline" not in policy
    page.wait_for_selector('body[data-view="sessions"]')
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()


def test_a_session_is_created_and_listed_newest_first(page: Page, api: Api) -> None:
    session_id = unique("created")
    page.goto("/console")
    page.wait_for_selector('body[data-view="sessions"]')
    page.get_by_text("New session").click()
    page.fill("#new-session-id", session_id)
    page.fill("#new-session-metadata", "team=qa, case=create")
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#session-title")).to_have_text(session_id)
    assert api.ok("GET", f"/v1/sessions/{session_id}")["metadata"] == {"team": "qa", "case": "create"}

    page.goto("/console#/sessions?metadata=case%3Dcreate")
    page.wait_for_selector('body[data-view="sessions"]')
    expect(page.locator("#sessions .session-link").first).to_have_text(session_id)
    expect(page.locator("#filter")).to_have_value("case=create")


def test_a_streamed_turn_shows_the_tokens_as_they_arrive(page: Page, api: Api) -> None:
    session_id = unique("stream")
    open_session(page, session_id)
    page.fill("#composer-input", "go slow please")
    page.click("#send")
    streaming = page.locator("#streaming-text")
    expect(streaming).to_contain_text("slow")
    first = streaming.text_content() or ""
    # The fake LLM sends one word every 0.1 s: the bubble grows while the run is going.
    page.wait_for_function(
        "n => (document.querySelector('#streaming-text')?.textContent.length ?? 1e9) > n",
        arg=len(first) + 10,
    )
    expect(page.locator("#cancel-run")).to_be_visible()
    # When the run completes the turn is read back from the history.
    assistant = page.locator("#log .item.message.assistant .text")
    expect(assistant).to_have_text(" ".join(["slow"] * 30), timeout=15_000)
    expect(page.locator("#log .item.message.user .text")).to_have_text("go slow please")
    expect(page.locator("#runs .run").first).to_have_attribute("data-status", "completed")
    assert api.ok("GET", f"/v1/sessions/{session_id}")["item_count"] == 2


def test_a_client_tool_call_is_answered_in_a_form(page: Page, api: Api) -> None:
    agent = api.ok(
        "POST",
        "/v1/agents",
        {
            "name": unique("weather"),
            "tools": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "The weather in a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ],
        },
    )
    session_id = unique("tools")
    open_session(page, session_id)
    page.select_option("#composer-agent", agent["id"])
    page.fill("#composer-input", "please call get_weather")
    page.click("#send")
    form = page.locator("#tool-outputs")
    expect(form).to_contain_text("get_weather")
    expect(form).to_contain_text('"city": "Oslo"')
    expect(page.locator("#live")).to_contain_text("The run waits for your tools")
    page.fill("#tool-output-0", "sunny, 21 °C")
    page.click("#submit-tool-outputs")

    expect(page.locator("#log .item.message.assistant .text").last).to_have_text(
        "tool said: sunny, 21 °C", timeout=15_000
    )
    # The call and its output are one block, folded until opened.
    tool = page.locator("#log .item.tool details.tool-call")
    expect(tool).to_have_count(1)
    expect(tool.locator("summary")).to_contain_text("get_weather")
    expect(tool.locator(".output")).to_be_hidden()
    tool.locator("summary").click()
    expect(tool.locator(".output")).to_have_text("sunny, 21 °C")
    # The raw JSON of the block holds both stored items.
    block = page.locator("#log .item.tool")
    block.get_by_role("button", name="Raw JSON").click()
    raw = json.loads(block.locator("pre.raw").text_content() or "")
    assert [entry["item"]["type"] for entry in raw] == ["function_call", "function_call_output"]


def test_mcp_calls_fold_like_function_calls(page: Page, api: Api) -> None:
    session_id = unique("mcp")
    api.ok("POST", f"/v1/sessions/{session_id}/items", {"items": [
        {"role": "user", "content": "What is 2 + 3, and how many rows?"},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "calc", "name": "add",
         "arguments": '{"a": 2, "b": 3}', "output": "5", "error": None, "status": "completed"},
        {"type": "mcp_call", "id": "mcp_2", "server_label": "db", "name": "count_rows",
         "arguments": "{}", "output": None, "error": "MCP server `db` cannot be reached", "status": "failed"},
    ]})
    open_session(page, session_id)
    calls = page.locator("#log .item.tool details.tool-call")
    expect(calls).to_have_count(2)
    expect(calls.nth(0).locator("summary")).to_contain_text('calc.add({"a": 2, "b": 3})')
    expect(calls.nth(0).locator(".output")).to_be_hidden()
    calls.nth(0).locator("summary").click()
    expect(calls.nth(0).locator(".output")).to_have_text("5")
    expect(calls.nth(1).locator("summary")).to_contain_text("failed")
    calls.nth(1).locator("summary").click()
    expect(calls.nth(1).locator(".output")).to_have_text("MCP server `db` cannot be reached")


def test_a_call_waiting_for_approval_is_approved_or_rejected(page: Page, api: Api, fake_llm: FakeLLM) -> None:
    webhook = {"url": f"http://{fake_llm.host}/tool"}
    agent = api.ok("POST", "/v1/agents", {
        "name": unique("careful"),
        "tools": [
            {"type": "function", "name": "send_note", "webhook": webhook, "require_approval": "always"},
            {"type": "function", "name": "wipe_disk", "webhook": webhook, "require_approval": "always"},
        ],
    })
    session_id = unique("approvals")
    open_session(page, session_id)
    page.select_option("#composer-agent", agent["id"])
    page.fill("#composer-input", "please call send_note")
    page.click("#send")
    form = page.locator("#approvals")
    expect(form).to_contain_text("The run waits for your approval")
    expect(form).to_contain_text("send_note")
    expect(page.locator("#submit-approvals")).to_be_disabled()
    page.click("#approve-0")
    page.click("#submit-approvals")
    expect(page.locator("#log .item.message.assistant .text").last).to_have_text(
        "tool said: webhook got {\"city\": \"Oslo\"}", timeout=15_000
    )

    # A rejection reaches the model with its reason, and nothing is called. The form is
    # there again for a run that waits when the session is opened.
    page.fill("#composer-input", "please call wipe_disk")
    page.click("#send")
    expect(page.locator("#approvals")).to_contain_text("wipe_disk")
    open_session(page, session_id)
    page.click("#reject-0")
    page.fill("#reject-reason-0", "never on Fridays")
    page.click("#submit-approvals")
    expect(page.locator("#log .item.message.assistant .text").last).to_have_text(
        'tool said: {"error":"rejected","reason":"never on Fridays"}', timeout=15_000
    )
    runs = api.ok("GET", f"/v1/sessions/{session_id}/runs")["data"]
    assert [run["status"] for run in runs] == ["completed", "completed"]


def test_branch_from_here_forks_at_the_item(page: Page, api: Api) -> None:
    source = unique("source")
    api.ok("POST", f"/v1/sessions/{source}/items",
           messages(("user", "one"), ("assistant", "two"), ("user", "three"), ("assistant", "four")))
    status, answer = api.call("POST", f"/v1/sessions/{source}/fork", {})
    if status == 405 or (status == 404 and (answer or {}).get("code") == "not_found"):
        pytest.skip("POST /v1/sessions/{id}/fork is not in this binary yet (Compaction and forks, built in parallel)")
    open_session(page, source)
    page.locator("#log .item").nth(1).get_by_role("button", name="Branch from here").click()
    expect(page).not_to_have_url(re.compile(f"#/sessions/{source}$"))
    page.wait_for_selector('body[data-view="session"]')
    expect(page.locator("#forked-from")).to_contain_text(source)
    expect(page.locator("#log .item .text")).to_have_text(["one", "two"])
    fork_id = page.locator("#session-title").text_content()
    assert fork_id and fork_id != source
    assert api.ok("GET", f"/v1/sessions/{source}")["item_count"] == 4


def test_the_session_shows_its_state_and_revision(page: Page, api: Api) -> None:
    session_id = unique("state")
    api.ok("POST", f"/v1/sessions/{session_id}/items", messages(("user", "one")))
    api.ok("PUT", f"/v1/sessions/{session_id}/state", {"state": {"step": "triage", "order": "<b>4711</b>"}})
    open_session(page, session_id)
    expect(page.locator("#session-state")).to_contain_text('"step": "triage"')
    # Shown as text, never as markup.
    expect(page.locator("#session-state")).to_contain_text('"order": "<b>4711</b>"')
    expect(page.locator(".session-head")).to_contain_text("revision 2")
    expect(page.locator("#checkpoints")).to_contain_text("None")


def test_the_session_shows_its_owners_state_and_checkpoints(page: Page, api: Api) -> None:
    session_id = unique("owned")
    api.ok("POST", "/v1/sessions", {"id": session_id, "app_id": "helpdesk", "user_id": "ada"})
    api.ok("PUT", "/v1/apps/helpdesk/state", {"state": {"greeting": "<i>Hello</i>"}})
    checkpoint = {"checkpoint": {"type": "json", "data": "e30="}, "metadata": {"step": 3},
                  "channel_versions": {"messages": "1"},
                  "blobs": [{"channel": "messages", "version": "1", "type": "json", "data": "W10="}]}
    api.ok("PUT", f"/v1/sessions/{session_id}/checkpoints/0001?namespace=", checkpoint)
    open_session(page, session_id)
    expect(page.locator(".session-head")).to_contain_text("app helpdesk")
    expect(page.locator("#app-state")).to_contain_text('"greeting": "<i>Hello</i>"')
    expect(page.locator("#user-state")).to_have_text("null")
    expect(page.locator("#checkpoints .checkpoint")).to_contain_text("0001")
    expect(page.locator("#checkpoints .checkpoint")).to_contain_text("1 channels")


def test_stored_markup_renders_as_text(page: Page, api: Api) -> None:
    session_id = unique("xss")
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> **bold**'
    api.ok("POST", f"/v1/sessions/{session_id}/items", {"items": [
        {"role": "user", "content": hostile},
        {"role": "assistant", "content": "[click](javascript:window.__pwned=3) and `<b>code</b>`"},
        {"type": "reasoning", "summary": "<img src=x onerror=alert(1)>"},
    ]})
    open_session(page, session_id)
    user = page.locator("#log .item.message.user .text")
    expect(user).to_contain_text('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">')
    expect(user.locator("strong")).to_have_text("bold")
    assert page.locator("#log script, #log img").count() == 0
    assistant = page.locator("#log .item.message.assistant .text")
    expect(assistant.locator("code")).to_have_text("<b>code</b>")
    assert assistant.locator("a").count() == 0, "only http(s) links become links"
    # An item the console does not know is shown as its JSON.
    expect(page.locator("#log .item.other pre:not(.raw)")).to_contain_text('"type": "reasoning"')
    assert page.evaluate("window.__pwned") is None


def test_a_failed_run_shows_its_error_code(page: Page, api: Api) -> None:
    session_id = unique("failing")
    open_session(page, session_id)
    page.fill("#composer-input", "please fail")
    page.click("#send")
    failure = page.locator("#live .run-error")
    expect(failure).to_be_visible(timeout=15_000)
    run = api.ok("GET", f"/v1/sessions/{session_id}/runs")["data"][0]
    assert run["status"] == "failed" and run["error"]["code"].startswith("llm_")
    expect(failure).to_have_attribute("data-code", run["error"]["code"])
    expect(failure).to_contain_text(run["error"]["code"])
    side = page.locator(f'#runs .run[data-run-id="{run["id"]}"]')
    expect(side).to_have_attribute("data-status", "failed")
    expect(side.locator(".run-error-code")).to_contain_text(run["error"]["code"])
    # The run's raw events end with the failure.
    side.get_by_role("button", name="Raw events").click()
    expect(side.locator("pre.events")).to_contain_text("event: run.failed")


def test_destructive_actions_ask_first(page: Page, api: Api) -> None:
    session_id = unique("destroy")
    api.ok("POST", f"/v1/sessions/{session_id}/items",
           messages(("user", "keep me"), ("assistant", "and me"), ("user", "delete me")))
    open_session(page, session_id)
    dialog = page.locator("#confirm")

    page.locator("#log .item").nth(2).get_by_role("button", name="Delete").click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("#3")
    page.click("#confirm-cancel")
    expect(dialog).to_be_hidden()
    assert api.ok("GET", f"/v1/sessions/{session_id}")["item_count"] == 3

    page.locator("#log .item").nth(2).get_by_role("button", name="Delete").click()
    page.click("#confirm-ok")
    expect(page.locator("#log .item")).to_have_count(2)
    assert api.ok("GET", f"/v1/sessions/{session_id}")["item_count"] == 2

    page.click("#clear-session")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert api.ok("GET", f"/v1/sessions/{session_id}")["item_count"] == 2

    page.click("#delete-session")
    expect(dialog).to_contain_text(session_id)
    page.click("#confirm-ok")
    page.wait_for_selector('body[data-view="sessions"]')
    assert api.call("GET", f"/v1/sessions/{session_id}")[0] == 404


def test_older_items_are_paged_in(page: Page, api: Api) -> None:
    session_id = unique("long")
    api.ok("POST", f"/v1/sessions/{session_id}/items",
           {"items": [{"role": "user", "content": f"message {n}"} for n in range(1, 151)]})
    open_session(page, session_id)
    expect(page.locator("#log .item")).to_have_count(100)
    expect(page.locator("#log .item .text").first).to_have_text("message 51")
    page.click("#load-earlier")
    expect(page.locator("#log .item")).to_have_count(150)
    expect(page.locator("#log .item .text").first).to_have_text("message 1")
    expect(page.locator("#load-earlier")).to_be_hidden()


def test_agents_are_created_and_edited_with_the_api_errors_shown(page: Page, api: Api) -> None:
    page.goto("/console#/agents/new")
    page.wait_for_selector('body[data-view="agents"]')
    editor = page.locator("#agent-json")
    editor.fill(json.dumps({"name": "bad", "temperature": "hot"}))
    page.click("#save-agent")
    problem = page.locator("#agent-errors .problem")
    expect(problem).to_have_attribute("data-code", "invalid_request")
    expect(problem).to_contain_text("400 invalid_request")
    expect(problem).to_contain_text("temperature")
    expect(problem.locator(".request-id")).to_have_text(UUID_V7)

    name = unique("agent")
    editor.fill(json.dumps({"name": name, "instructions": "Be brief."}))
    page.click("#save-agent")
    expect(page).to_have_url(re.compile(r"#/agents/[0-9a-f]"))
    expect(page.locator("#agents")).to_contain_text(name)
    expect(page.locator("#agent-editor h2")).to_contain_text(f"Edit {name}")
    page.locator("#agent-json").fill(json.dumps({"instructions": "Be very brief."}))
    page.click("#save-agent")
    expect(page.locator("#agent-errors .note")).to_contain_text("Saved agent")
    agent_id = page.evaluate("decodeURIComponent(location.hash.split('/')[2])")
    assert api.ok("GET", f"/v1/agents/{agent_id}")["instructions"] == "Be very brief."


def test_with_auth_on_the_key_is_asked_for_and_sent(browser: Browser, auth_server: Tuple[str, str]) -> None:
    """Against the service with ADMIN_API_KEY: the page shows the 401, asks for a key,
    keeps it in sessionStorage only and sends it."""
    base_url, key = auth_server
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sent = []
    page.on("request", lambda request: sent.append(request.headers.get("authorization"))
            if "/v1/" in request.url else None)
    page.goto("/console")
    expect(page.locator("#key-dialog")).to_be_visible()
    expect(page.locator("#errors .problem")).to_contain_text("401 unauthorized")
    page.fill("#key-input", key)
    page.locator("#key-dialog").get_by_role("button", name="Use key").click()
    page.wait_for_selector('body[data-view="sessions"]')
    expect(page.locator("#errors .problem")).to_have_count(0)
    assert sent[-1] == f"Bearer {key}"
    assert page.evaluate("sessionStorage.getItem('agent-sessions.api-key')") == key
    assert page.evaluate("localStorage.length") == 0
    context.close()


def test_a_turn_and_a_confirmation_work_from_the_keyboard(page: Page, api: Api) -> None:
    session_id = unique("keyboard")
    open_session(page, session_id)
    page.focus("#composer-input")
    page.keyboard.type("hello from the keyboard")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#log .item.message.assistant .text")).to_have_text("echo: hello from the keyboard")

    page.locator("#log .item").first.get_by_role("button", name="Delete").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#confirm")).to_be_visible()
    # The safe answer has the focus: Enter on a destructive prompt keeps the data.
    assert page.evaluate("document.activeElement.id") == "confirm-cancel"
    page.keyboard.press("Enter")
    expect(page.locator("#confirm")).to_be_hidden()
    assert api.ok("GET", f"/v1/sessions/{session_id}")["item_count"] == 2
