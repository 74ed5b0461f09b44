"""Clients in a page on another origin than the service, in chromium: the ``openai``
package (with its ``x-stainless-*`` headers), the TypeScript client (resuming a run's
events with ``Last-Event-ID``) and its framework adapters (``PUT`` under an ``If-Match``
read from ``ETag``), pinned in tests/browser/cross_origin. Through CORS the browser lets
their requests and the headers they read (``x-request-id``, ``Location``, ``ETag``)
through; without it, it blocks them.

scripts/browser-tests.sh builds the page (``npm run build`` in tests/browser/cross_origin)
first.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
from playwright.sync_api import Browser, Error, Page

from conftest import ROOT, serve, static_site
from fake_llm import FakeLLM

DIST = ROOT / "tests/browser/cross_origin/dist"


@pytest.fixture(scope="module")
def page_origin() -> Iterator[str]:
    yield from static_site(DIST, "the page")


@pytest.fixture(scope="module")
def open_service(fake_llm: FakeLLM, page_origin: str) -> Iterator[str]:
    """The binary, answering the page's origin."""
    workdir = Path(tempfile.mkdtemp(prefix="cross-origin-tests-"))
    yield from serve(fake_llm, workdir, {"CORS_ALLOWED_ORIGINS": page_origin})


@pytest.fixture
def page(browser: Browser, page_origin: str) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(page_origin + "/")
    page.wait_for_function("window.ready === true")
    yield page
    context.close()


def test_the_openai_package_from_another_origin(page: Page, open_service: str) -> None:
    answer: Any = page.evaluate("base => window.withOpenai(base)", open_service)
    assert answer["models"] == ["fake-model"]
    assert answer["text"] == "echo: hello from a page"
    assert answer["requestId"], answer


def test_the_framework_adapters_from_another_origin(page: Page, open_service: str) -> None:
    answer: Any = page.evaluate("base => window.withAdapters(base, 'cross-origin-adapters')", open_service)
    assert answer["items"] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "three"},
    ], answer
    assert answer["values"] == {"topic": "bicycles"}, answer


def test_the_typescript_client_resumes_from_another_origin(page: Page, open_service: str) -> None:
    answer: Any = page.evaluate("base => window.withClient(base, 'cross-origin-1')", open_service)
    assert answer["first"] == ["run.created", "run.started"], answer
    assert answer["rest"][-1] == "run.completed", answer
    assert "run.created" not in answer["rest"], answer
    assert answer["location"].startswith("/v1/sessions/cross-origin-1/runs/"), answer
    assert answer["requestId"], answer


def test_without_cors_the_browser_blocks_them(page: Page, server: str) -> None:
    with pytest.raises(Error, match="Connection error|Failed to fetch"):
        page.evaluate("base => window.withOpenai(base)", server)
    with pytest.raises(Error, match="Failed to fetch"):
        page.evaluate("base => window.withClient(base, 'cross-origin-2')", server)
