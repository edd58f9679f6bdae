"""``web_search`` against a real HTTP server on loopback: a search endpoint and the images it points to."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import cv2
import numpy as np
import pytest

from argus_dagster.infra.media import JUDGE_POLICY
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools import UnavailableTool
from argus_dagster.method.evidence.tools.registry import model_suite
from argus_dagster.method.evidence.tools.web_search import WebSearch, image_urls
from argus_dagster.resources.tools import ToolsResource

PNG = cv2.imencode(".png", np.full((30, 40, 3), (0, 0, 255), np.uint8))[1].tobytes()  # red in BGR


@pytest.fixture(scope="module")
def server():
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            url = urlparse(self.path)
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if url.path == "/search":
                q = parse_qs(url.query)["q"][0]
                seen.append({"q": q, "token": self.headers.get("X-Subscription-Token")})
                results = {
                    "eiffel tower": [{"image_url": f"{base}/broken.png"}, {"properties": {"url": f"{base}/red.png"},
                                                                          "url": "https://example.org/page"}],
                    "nothing": [],
                }.get(q, [{"thumbnail": {"src": f"{base}/missing.png"}}])
                body, kind = json.dumps({"results": results}).encode(), "application/json"
            elif url.path == "/red.png":
                body, kind = PNG, "image/png"
            elif url.path == "/broken.png":
                body, kind = b"not an image", "image/png"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/search", seen
    httpd.shutdown()


def test_retrieves_the_first_decodable_image_as_reference(server):
    url, seen = server
    media = MediaStore({})
    rec = WebSearch(url, "secret").run({"query": "eiffel tower"}, media)
    assert rec["ok"] and rec["registered"] == "reference" and rec["n_results"] == 2
    assert rec["image_url"].endswith("/red.png") and rec["page_url"] == "https://example.org/page"
    assert rec["size"] == [40, 30]
    ref = media.frames("reference", JUDGE_POLICY).array[0]
    assert ref.shape == (30, 40, 3) and tuple(ref[0, 0]) == (255, 0, 0)  # registered as RGB
    assert seen[-1] == {"q": "eiffel tower", "token": "secret"}


def test_no_usable_result_is_a_clear_failure(server):
    url, _ = server
    empty = WebSearch(url, "k").run({"query": "nothing"}, MediaStore({}))
    assert not empty["ok"] and "no usable image among 0 results" in empty["error"]
    gone = WebSearch(url, "k").run({"query": "other"}, MediaStore({}))
    assert not gone["ok"] and "missing.png" in gone["error"] and "404" in gone["error"]
    assert not WebSearch(url, "k").run({"query": " "}, MediaStore({}))["ok"]


def test_result_formats_and_configuration(server):
    url, _ = server
    assert image_urls({"results": [{"image_url": "ftp://x"}, "junk", {"thumbnail": {"src": "https://a/b.jpg"}}]}) \
        == [("https://a/b.jpg", "")]
    with pytest.raises(ValueError, match="must start with http"):
        WebSearch("localhost:1234", "k")
    assert isinstance(model_suite(None).get("web_search"), UnavailableTool)
    assert isinstance(model_suite(None, web_search_url=url, web_search_key="k").get("web_search"), WebSearch)
    assert ToolsResource(web_search_url=url, web_search_key="k").web_search
    assert not ToolsResource(web_search_url=url).web_search
