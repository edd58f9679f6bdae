"""Headless Chromium for the tests that read pages in a browser: Debian's ``chromium`` package driven
by Playwright's Python package (which downloads no browser of its own). Without either the tests skip
with the advice to install it, and fail under ``CI=true``. The ``browser`` fixture is in conftest.py."""

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from tests.skips import unavailable

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update"]


missing = unavailable  # tests/skips.py: a skip with its advice, a failure under CI=true


def chromium_path() -> str:
    path = os.environ.get("ARGUS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).is_file():
        missing("headless Chromium not found: `apt-get install -y chromium` (Debian), or set ARGUS_CHROMIUM")
    return path


@contextmanager
def launched():
    """Headless Chromium, driven by Playwright's synchronous API (whose event loop runs while it is
    open: a test that runs an evaluation in between opens it after)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright's Python package is not installed: `pip install -e '.[dev]'`")
    executable = chromium_path()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


def open_file(browser, path: Path, width: int = 1400):
    """A new page with ``path`` opened from disk (``file://``); returns it and the console errors seen."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(path.as_uri(), wait_until="load")
    return page, errors


def unscored_items(section) -> list[tuple[str, int, list[str], str]]:
    """A page section's "unscored, and why" list as (dimension, videos, models, reason), read item by item."""
    return [(d, int(n), m.split(", ") if m else [], r) for d, n, m, r in section.locator("ul.unscored li").evaluate_all(
        "ls => ls.map(l => [l.dataset.dimension, l.dataset.videos, l.querySelector('.models').textContent,"
        " l.querySelector('.reason').textContent])")]


def controls_table(path: Path, task: str = "T2V") -> tuple[str, dict[str, tuple[str, str, str]]]:
    """The overview's controls sentence and table of ``task`` (control kind: n, caught, criteria), as Chromium
    shows them."""
    with launched() as browser:
        page, errors = open_file(browser, path)
        section = page.locator(f'section[data-task="{task}"] div.controls')
        sentence = section.locator("p.controls-sentence").inner_text()
        rows = {}
        for tr in section.locator("table.controls tbody tr").all():
            rows[tr.get_attribute("data-control")] = (tr.locator("td.n").inner_text(), tr.locator("td.caught").inner_text(),
                                                      tr.locator("td.criteria").inner_text())
        page.close()
    assert errors == [], errors
    return sentence, rows
