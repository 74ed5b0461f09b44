"""The console's main screens at a laptop and a phone width, and its load time with a
large database. Runs after test_console.py (pytest's file order), so the screenshots show
the sessions those tests left behind, and the 1,000 sessions are added last."""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest
from playwright.sync_api import Browser

from conftest import REPORT, ROOT, Api

WIDTHS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
DEMO = "support-ticket-4711"
BIG = "load-5000-items"


@pytest.fixture(scope="module")
def shots(request: pytest.FixtureRequest) -> Iterator[Path]:
    if request.config.getoption("--screenshots"):
        target = ROOT / "docs/console"
        target.mkdir(parents=True, exist_ok=True)
        yield target
    else:
        with tempfile.TemporaryDirectory() as scratch:
            yield Path(scratch)


def seed_demo(api: Api) -> str:
    """A session that shows what the chat view does: markdown, a folded tool call, runs."""
    if api.call("GET", f"/v1/sessions/{DEMO}")[0] == 200:
        return DEMO
    api.ok("POST", "/v1/sessions", {"id": DEMO, "metadata": {"team": "support", "customer": "acme"}})
    api.ok("POST", f"/v1/sessions/{DEMO}/items", {"items": [
        {"role": "user", "content": "Our invoices from **March** are missing. Can you check the export?"},
        {"type": "function_call", "call_id": "call_1", "name": "find_invoices",
         "arguments": '{"month": "2026-03", "customer": "acme"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"found": 3, "exported": 0}'},
        {"role": "assistant", "content": (
            "I found **3 invoices** for March that were never exported:\n\n"
            "1. `INV-0301` (EUR 120.00)\n2. `INV-0317` (EUR 89.50)\n3. `INV-0329` (EUR 240.00)\n\n"
            "Re-run the export with:\n\n```\nexport --month 2026-03 --customer acme\n```")},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "export job skipped"}]},
    ]})
    api.ok("POST", f"/v1/sessions/{DEMO}/runs", {"input": "Thanks! Anything else?"})
    api.ok("POST", f"/v1/sessions/{DEMO}/runs", {"input": "please fail"})
    return DEMO


def test_screenshots_of_the_main_screens(browser: Browser, server: str, api: Api, shots: Path) -> None:
    seed_demo(api)
    for width, viewport in WIDTHS.items():
        context = browser.new_context(base_url=server, viewport=viewport)
        page = context.new_page()
        page.goto("/console#/sessions")
        page.wait_for_selector('body[data-view="sessions"]')
        page.screenshot(path=shots / f"sessions-{width}.png")

        page.goto(f"/console#/sessions/{DEMO}")
        page.wait_for_selector('body[data-view="session"]')
        page.locator("#log details.tool-call summary").click()
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=shots / f"session-{width}.png", full_page=width == "desktop")

        page.goto("/console#/agents/new")
        page.wait_for_selector('body[data-view="agents"]')
        page.screenshot(path=shots / f"agents-{width}.png")
        context.close()
    assert len(list(shots.glob("*.png"))) >= 6


#: What the page reports about one load, in ms from navigation start: the view rendered
#: with its data, the script ran (DOMContentLoaded), the last API answer arrived.
TIMINGS = """JSON.stringify({
  ready: performance.getEntriesByName('console-ready:' + document.body.dataset.view)[0].startTime,
  script: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
  api: Math.max(...performance.getEntriesByType('resource')
    .filter((r) => r.name.includes('/v1/')).map((r) => r.responseEnd)),
})"""


def load_times(browser: Browser, server: str, url: str, view: str, runs: int, fresh: bool) -> List[dict]:
    """Each load's timings; `fresh` loads in a new context (an empty cache) every time."""
    loads = []
    context = browser.new_context(base_url=server)
    page = context.new_page()
    for _ in range(runs):
        if fresh:
            context.close()
            context = browser.new_context(base_url=server)
            page = context.new_page()
        page.goto("about:blank")
        page.goto(url)
        page.wait_for_selector(f'body[data-view="{view}"]')
        loads.append(json.loads(page.evaluate(TIMINGS)))
    context.close()
    return loads


def summary(loads: List[dict]) -> str:
    median = {key: statistics.median(load[key] for load in loads) for key in loads[0]}
    return (f"median {median['ready']:.0f} ms (max {max(load['ready'] for load in loads):.0f}; "
            f"script ran at {median['script']:.0f}, API answered at {median['api']:.0f})")


def test_page_load_with_1000_sessions_and_a_5000_item_session(browser: Browser, server: str, api: Api) -> None:
    for n in range(1000):
        api.ok("POST", "/v1/sessions", {"id": f"load-{n:04}", "metadata": {"bench": "load"}})
    for batch in range(5):
        api.ok("POST", f"/v1/sessions/{BIG}/items", {"items": [
            {"role": "user" if i % 2 == 0 else "assistant",
             "content": f"message {batch * 1000 + i}: some **markdown**, `code` and a list\n- a\n- b"}
            for i in range(1000)]})
    assert api.ok("GET", f"/v1/sessions/{BIG}")["item_count"] == 5000

    REPORT.append("ms from navigation start to the view rendered with its data (loopback, headless chromium)")
    for label, url, view in [
        ("sessions list (1,000+ sessions, first page of 50)", "/console#/sessions", "sessions"),
        ("5,000-item session (newest 100 items, runs)", f"/console#/sessions/{BIG}", "session"),
    ]:
        cold = load_times(browser, server, url, view, runs=5, fresh=True)
        warm = load_times(browser, server, url, view, runs=5, fresh=False)
        REPORT.append(f"{label}:")
        REPORT.append(f"  empty cache: {summary(cold)}")
        REPORT.append(f"  revalidated (304s): {summary(warm)}")
