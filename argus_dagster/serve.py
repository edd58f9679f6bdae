"""The reports server: an evaluation's ``reports`` over HTTP on loopback (`argus open`, `make ui`).

Pages link to each other by relative URLs and embed their images, so a plain static file server is
enough; it binds 127.0.0.1 only, serves nothing outside the folder (``http.server`` resolves paths
inside its directory) and logs requests nowhere, so the terminal stays quiet.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOST = "127.0.0.1"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the stdlib's signature)
        pass

    def do_GET(self) -> None:
        if self.path == "/favicon.ico":  # pages carry no icon; a 404 would be an error in the browser's console
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a re-materialized page shows on reload
        super().end_headers()


def make_server(root: str | Path, port: int = 0) -> ThreadingHTTPServer:
    """A server of ``root`` on 127.0.0.1:``port`` (0: a free port), not yet serving.

    Raises ``OSError`` naming the port when it is taken."""
    handler = functools.partial(_QuietHandler, directory=str(Path(root).resolve()))
    try:
        server = ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        raise OSError(exc.errno, f"port {port} on {HOST} is taken ({exc.strerror}): set ARGUS_REPORTS_PORT "
                                 "or pass --port (0 picks a free one)") from None
    server.daemon_threads = True
    return server


def url_of(server: ThreadingHTTPServer, page: str = "") -> str:
    return f"http://{HOST}:{server.server_address[1]}/{page}"


def serve_in_thread(root: str | Path, port: int = 0) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``server.shutdown()`` stops it."""
    server = make_server(root, port)
    threading.Thread(target=server.serve_forever, name="argus-reports", daemon=True).start()
    return server
