"""Fixtures of the explorer's tests: the explorer served from a thread of the
test process, Debian's Chromium driven by Playwright (never a downloaded
browser), and screenshots kept as test artifacts."""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Screenshots are copied here too when set (CI keeps them as artifacts).
ARTIFACTS_ENV = "PROVPLUG_UI_ARTIFACTS"


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(store_path) -> base URL``: the explorer over that store until the test ends."""
    from contextlib import ExitStack

    import provplug
    from provplug.ui.server import running

    with ExitStack() as stack:
        yield lambda store: stack.enter_context(running(provplug.open(store)))


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """Status, body (JSON when it is JSON) and headers of a GET."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            status, body, head = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, body, head = exc.code, exc.read(), dict(exc.headers)
    text = body.decode()
    is_json = head.get("content-type", "").startswith("application/json")
    return status, json.loads(text) if is_json else text, head


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Debian's Chromium under Playwright (skipped, saying why, when either is missing)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the test extra has it)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    """A fresh page that fails the test on any script error or dialog (alert)."""
    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.problems = problems
    yield page
    page.close()
    assert problems == []


@pytest.fixture
def screenshot(tmp_path: Path) -> Any:
    """``screenshot(page, name)``: a full-page PNG in the test's tmp dir, copied
    to ``$PROVPLUG_UI_ARTIFACTS`` when set; returns its path."""

    def take(page: Any, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        target = os.environ.get(ARTIFACTS_ENV)
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(target) / path.name)
        return path

    return take


def wait_ready(page: Any) -> None:
    page.wait_for_selector("body[data-ready]", timeout=120_000)
