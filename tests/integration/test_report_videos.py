"""Report and comparison pages play the videos: each candidate and an edit's source video as a
`<video>` whose file the page reaches relatively (from `file://` and through `argus open` alike), in a
codec browsers decode; every still carries its time; a report opens with its score and scored criteria."""

import json
import re
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import cv2
import pytest

from argus_dagster.client import cli
from argus_dagster.infra.media import write_video
from argus_dagster.infra.settings import evaluations_root, load_settings, served_prefix
from argus_dagster.outputs.page_media import PLAYABLE, codec
from argus_dagster.outputs.serve import REPORTS_ONLY, serve_in_thread, url_of

from .helpers import pattern_clip

pytestmark = pytest.mark.integration


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.videos, self.captions, self._in_caption = [], [], False

    def handle_starttag(self, tag, attrs):
        if tag == "video":
            self.videos.append(dict(attrs)["src"])
        self._in_caption = tag == "figcaption"

    def handle_data(self, data):
        if self._in_caption:
            self.captions.append(data)
            self._in_caption = False


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text())
    return p


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    """A TV2V bench of one edit (its source video) and two editors, evaluated by `argus evaluate`."""
    root = tmp_path_factory.mktemp("videos")
    bench, cands = root / "bench", root / "cands"
    write_video(bench / "TV2V" / "src" / "e0.mp4", pattern_clip(0), 12)
    (bench / "TV2V" / "manifest.jsonl").write_text(json.dumps(
        {"id": "e0", "prompt": "Keep the pattern, make it slide faster.", "source_video": "src/e0.mp4"}) + "\n")
    for j, model in enumerate(("ed-a", "ed-b")):
        write_video(cands / "TV2V" / model / "e0.mp4", pattern_clip(5 + j, n=18 + 6 * j), 12)
    mp = pytest.MonkeyPatch()
    mp.setenv("ARGUS_HOME", str(root / "home"))
    for k in ("ARGUS_BENCH", "ARGUS_BENCH_DIR", "ARGUS_PROFILE"):
        mp.delenv(k, raising=False)
    try:
        assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
        yield load_settings().reports_dir
    finally:
        mp.undo()


def _frames(path: Path) -> int:
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


def _fetch_all(reports: Path, page_rel: str, srcs: list[str]) -> list[Path]:
    """Each ``src`` of the page fetched through the reports server (`argus open`): 200, a video type,
    the bytes of the file the relative link names; those files."""
    server = serve_in_thread(evaluations_root(reports), 0, REPORTS_ONLY)
    files = []
    try:
        url = url_of(server, served_prefix(reports) + page_rel)
        for src in srcs:
            with urllib.request.urlopen(urljoin(url, src), timeout=30) as resp:
                assert resp.status == 200 and resp.headers["Content-Type"] in ("video/webm", "video/mp4")
                body = resp.read()
            f = ((reports / page_rel).parent / src).resolve()
            assert body == f.read_bytes()
            files.append(f)
    finally:
        server.shutdown()
        server.server_close()
    return files


def test_the_report_plays_the_candidate_and_the_source(edited):
    page = edited / "TV2V" / "ed-b" / "e0.html"
    parsed = _parse(page)
    assert len(parsed.videos) == 2  # the candidate, then the edit's source
    media = (edited / "TV2V" / "_media").resolve()
    # the clips are mp4v, which browsers do not decode: kept as they are, their WebM made when first asked
    assert sorted(p.name.split(".", 1)[1] for p in media.iterdir()) == ["orig.mp4"] * 3
    files = _fetch_all(edited, "TV2V/ed-b/e0.html", parsed.videos)
    assert all(f.parent == media and codec(f) in PLAYABLE for f in files)
    assert [_frames(f) for f in files] == [24, 24]  # ed-b's 24 frames; the source's 24
    # every still of the output and of the source says its time
    times = [c for c in parsed.captions if re.fullmatch(r"\d+\.\ds", c)]
    assert len(times) >= 8 and "0.0s" in times
    text = page.read_text()
    assert text.index('class="summary"') < text.index("Scored criteria") < text.index("<video") < text.index(
        '<div class="prompt">')


def test_the_comparison_page_plays_every_model(edited):
    page = edited / "TV2V" / "compare" / "e0.html"
    parsed = _parse(page)
    srcs = parsed.videos
    assert len(srcs) == 3 and len(set(srcs)) == 3  # the source, ed-a, ed-b
    files = _fetch_all(edited, "TV2V/compare/e0.html", srcs)
    assert sorted(_frames(f) for f in files) == [18, 24, 24]
    assert len([c for c in parsed.captions if re.fullmatch(r"\d+\.\ds", c)]) >= 4  # thumbnails keep their times


def test_a_playable_video_is_linked_as_it_is(tmp_path):
    """An H.264/VP8 candidate needs no copy in another codec: the page plays the file itself."""
    from argus_dagster.outputs.page_media import page_video, webm_copy

    write_video(tmp_path / "a.mp4", pattern_clip(1), 12)
    webm_copy(tmp_path / "a.mp4", tmp_path / "a.webm")
    src = page_video(str(tmp_path / "a.webm"), "ab" * 32, tmp_path / "reports", "T2V")
    assert src == "../_media/" + "ab" * 12 + ".webm"
    linked = tmp_path / "reports" / "T2V" / "_media" / ("ab" * 12 + ".webm")
    assert linked.read_bytes() == (tmp_path / "a.webm").read_bytes() and linked.stat().st_nlink == 2
    assert page_video(str(tmp_path / "missing.mp4"), "cd" * 32, tmp_path / "reports", "T2V") is None


def test_pages_on_s3_find_their_videos_with_one_listing_not_a_head_request_per_name(tmp_path, moto_endpoint):
    """A partition's pages ask moto's S3 server for one listing of ``_media``, whatever their number of
    videos (eight HEAD requests per video looked the copies up one name at a time); counted at the client."""
    import boto3

    from argus_dagster.infra.storage import Storage
    from argus_dagster.outputs.page_media import page_video

    sent: list[tuple[str, str]] = []

    def client():
        c = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
        c.meta.events.register("before-parameter-build.s3.*", lambda model, params, **_: sent.append(
            (model.name, params.get("Key") or params.get("Prefix") or "")))
        return c

    store = Storage(client, cache_dir=tmp_path / "media")
    store.client.create_bucket(Bucket="reports-bucket")
    videos = []
    for i in range(3):
        write_video(tmp_path / f"v{i}.mp4", pattern_clip(i, 12), 12)
        store.write_bytes(f"s3://reports-bucket/cands/v{i}.mp4", (tmp_path / f"v{i}.mp4").read_bytes())
        videos.append((f"s3://reports-bucket/cands/v{i}.mp4", f"{i:x}" * 64))

    def media_requests(media=None) -> tuple[list[str], list[tuple[str, str]]]:
        sent.clear()
        kw = {"media": media} if media is not None else {}
        srcs = [page_video(uri, sha, "s3://reports-bucket/reports", "T2V", store, **kw) for uri, sha in videos]
        # Lookups and listings only (a presigned link is built through the same hook, and sent by no one).
        return srcs, [(op, key) for op, key in sent if "_media" in key and op in ("HeadObject", "ListObjectsV2")]

    first, asked = media_requests()  # the WebM copies are made and put beside the pages
    media_url = f"{moto_endpoint}/reports-bucket/reports/T2V/_media"
    assert all(s.startswith(f"{media_url}/{sha[:24]}.webm?") for s, (_, sha) in zip(first, videos))
    assert [op for op, _ in asked if op == "HeadObject"] == [], asked
    from argus_dagster.outputs.page_media import MediaFolder

    # A partition's pages, once more: the copies are found in one listing.
    again, asked = media_requests(MediaFolder("s3://reports-bucket/reports", "T2V", store))
    assert [s.split("?")[0] for s in again] == [s.split("?")[0] for s in first]
    assert [op for op, _ in asked] == ["ListObjectsV2"], asked
