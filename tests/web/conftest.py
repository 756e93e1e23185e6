"""Fixtures for the dashboard tests: a `hoplab serve` process on a free port of
127.0.0.1 over a temporary store of constructed runs (tests/helpers/web.py), and a
headless Chromium (Debian's, not a downloaded one)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hoplab.store import open_store
from tests.helpers.web import (
    CHROMIUM,
    Served,
    sample_runs,
    serving,
)


@pytest.fixture(scope="session")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[int]]]:
    path = tmp_path_factory.mktemp("web") / "runs.db"
    ids: dict[str, list[int]] = {}
    with open_store(str(path)) as store:
        for role, run in sample_runs():
            ids.setdefault(role, []).append(store.save_run(run))
    return path, ids


@pytest.fixture(scope="session")
def served(store_path: tuple[Path, dict[str, list[int]]]) -> Iterator[Served]:
    with serving(*store_path) as s:
        yield s


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (make setup installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-background-networking"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # A script, style or load the page's Content-Security-Policy refused: the page would
    # be missing something.
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error"
          and "Content Security Policy" in m.text else None)
    # Offline for real: any request that leaves the dashboard fails the test.
    outside: list[str] = []

    def refuse(route: Any) -> None:
        outside.append(route.request.url)
        route.abort()

    pg.route(re.compile(r"^(?!http://127\.0\.0\.1:).*"), refuse)
    try:
        yield pg
        assert not errors, errors
        assert not outside, outside
    finally:
        context.close()
