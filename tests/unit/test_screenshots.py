"""The README's screenshots are of the pages the current code renders. ``docs/img/screenshots.json``
records, per image, the digest of its page's HTML rendered from a fixed fixture (``docs/screenshots.py``);
a change to what a page shows fails this until ``python -m docs.screenshots`` takes them again. Pixels
are never compared (fonts differ from one machine to the next)."""

import hashlib
import json

from argus_dagster.outputs import overview, report
from docs.screenshots import IMG, MAX_BYTES, RECORD, ROOT, page_digests


def test_the_screenshots_are_of_the_current_pages():
    recorded = json.loads(RECORD.read_text())["pages"]
    now = page_digests()
    stale = sorted(name for name in now if recorded.get(name) != now[name])
    assert not stale, (f"{', '.join(stale)}: the page changed since the screenshot was taken; take them again "
                       "with `python -m docs.screenshots` and commit docs/img")
    assert set(recorded) == set(now)


def test_the_digest_follows_what_each_page_shows(monkeypatch):
    before = page_digests()
    monkeypatch.setattr(overview, "OVERVIEW_STYLE", overview.OVERVIEW_STYLE + "h2{color:red}")
    after = page_digests()
    assert after["overview.png"] != before["overview.png"] and after["comparison.png"] == before["comparison.png"]
    monkeypatch.setattr(report, "STYLE", report.STYLE + "h1{color:red}")
    assert page_digests()["comparison.png"] != before["comparison.png"]
    assert page_digests() == page_digests()  # nothing of the day or the machine in it


def test_the_screenshots_are_the_recorded_small_pngs_the_readme_shows():
    images = json.loads(RECORD.read_text())["images"]
    readme = (ROOT / "README.md").read_text()
    assert set(images) == set(page_digests())
    for name, digest in images.items():
        data = (IMG / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < MAX_BYTES, (name, len(data))
        assert hashlib.sha256(data).hexdigest() == digest, f"{name} is not the image screenshots.json records"
        assert f"(docs/img/{name})" in readme, name
