"""The reports server: every evaluation's ``reports`` of a home over HTTP on loopback (`argus open`,
`make ui`).

Pages link to each other by relative URLs and embed their images, so a plain static file server is
enough; it binds 127.0.0.1 only and logs requests nowhere, so the terminal stays quiet. Its root is
``$ARGUS_HOME/benches``, of which it serves only the index of evaluations (``index.html``) and each
evaluation's ``<bench>/<profile>/reports/`` (never its instance, tables or cache); ``http.server``
resolves paths inside that folder.
"""

from __future__ import annotations

import functools
import posixpath
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

HOST = "127.0.0.1"


REPORTS_ONLY = re.compile(r"(index\.html)?|[^/]+/[^/]+/reports(/.*)?")  # what a home's server shows


class _QuietHandler(SimpleHTTPRequestHandler):
    allowed: re.Pattern | None = None  # relative paths served (None: the whole folder)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the stdlib's signature)
        pass

    def _refused(self) -> bool:
        rel = posixpath.normpath(unquote(urlsplit(self.path).path)).lstrip("/")
        return self.allowed is not None and not self.allowed.fullmatch("" if rel == "." else rel)

    def do_GET(self) -> None:
        if self.path == "/favicon.ico":  # pages carry no icon; a 404 would be an error in the browser's console
            self.send_response(204)
            self.end_headers()
            return
        if self._refused():
            self.send_error(404, "not a report")
            return
        super().do_GET()

    def do_HEAD(self) -> None:
        if self._refused():
            self.send_error(404, "not a report")
            return
        super().do_HEAD()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a re-materialized page shows on reload
        super().end_headers()


def make_server(root: str | Path, port: int = 0, allowed: re.Pattern | None = None) -> ThreadingHTTPServer:
    """A server of ``root`` on 127.0.0.1:``port`` (0: a free port), not yet serving; ``allowed``: the
    relative paths it serves (:data:`REPORTS_ONLY` for a home's ``benches`` folder), else all.

    Raises ``OSError`` naming the port when it is taken."""
    handler = functools.partial(type("_Handler", (_QuietHandler,), {"allowed": allowed}),
                                directory=str(Path(root).resolve()))
    try:
        server = ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        raise OSError(exc.errno, f"port {port} on {HOST} is taken ({exc.strerror}): set ARGUS_REPORTS_PORT "
                                 "or pass --port (0 picks a free one)") from None
    server.daemon_threads = True
    return server


def url_of(server: ThreadingHTTPServer, page: str = "") -> str:
    return f"http://{HOST}:{server.server_address[1]}/{page}"


def serve_in_thread(root: str | Path, port: int = 0, allowed: re.Pattern | None = None) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``server.shutdown()`` stops it."""
    server = make_server(root, port, allowed)
    threading.Thread(target=server.serve_forever, name="argus-reports", daemon=True).start()
    return server
