"""The reports server: every evaluation's ``reports`` of a home over HTTP on loopback (`argus open`,
`argus ui`).

Pages link to each other by relative URLs and embed their images, so a plain static file server is
enough; it binds 127.0.0.1 only and logs requests nowhere, so the terminal stays quiet. Its root is
``$ARGUS_HOME/benches``, of which it serves only the index of evaluations (``index.html``) and each
evaluation's ``<bench>/<profile>/reports/`` (never its instance, tables or cache).

What it answers is bounded the way a page of another site would probe it: only regular files whose
path, links resolved, is inside the served folder and allowed (a link to ``/etc`` serves nothing; no
folder is listed); 400 to a path that does not decode or holds a control character (``%00``); 403 to
a ``Host`` other than loopback or the host of ``ARGUS_REPORTS_URL``, so a page that rebinds its own
DNS name to 127.0.0.1 cannot read the reports.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import stat
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

HOST = "127.0.0.1"


REPORTS_ONLY = re.compile(r"(index\.html)?|[^/]+/[^/]+/reports(/.*)?")  # what a home's server shows


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _host_name(header: str) -> str | None:
    """The host of a ``Host`` header (``127.0.0.1:3030``, ``[::1]:3030``), lower-case; None if malformed."""
    try:
        return urlsplit("//" + header.strip()).hostname
    except ValueError:
        return None


class _QuietHandler(SimpleHTTPRequestHandler):
    allowed: re.Pattern | None = None  # relative paths served (None: the whole folder)
    hosts: frozenset[str] = LOOPBACK_HOSTS  # the Host header values answered

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the stdlib's signature)
        pass

    def _allowed(self, rel: str) -> bool:
        return self.allowed is None or bool(self.allowed.fullmatch("" if rel == "." else rel))

    def _refusal(self) -> tuple[int, str] | None:
        """Why this request gets no file (status, reason), or None."""
        host = self.headers.get("Host")
        if host is not None and _host_name(host) not in self.hosts:
            return 403, "not a loopback host"
        try:
            path = unquote(urlsplit(self.path).path, errors="strict")
        except (UnicodeDecodeError, ValueError):
            return 400, "the path is not UTF-8"
        if _CONTROL.search(path):
            return 400, "a control character in the path"
        if not self._allowed(posixpath.normpath(path).lstrip("/")):
            return 404, "not a report"
        root = Path(self.directory).resolve()
        try:
            real = Path(self.translate_path(self.path)).resolve(strict=True)
            if real.is_dir() and path.endswith("/"):  # its index.html, never a listing
                real = (real / "index.html").resolve(strict=True)
            mode = os.stat(real).st_mode
        except (OSError, RuntimeError, ValueError):
            return 404, "not found"
        if real != root and root not in real.parents:
            return 404, "not a report"  # a link that leads out of the served folder
        if not self._allowed(real.relative_to(root).as_posix()):
            return 404, "not a report"
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # a folder without the slash is redirected
            return 404, "not a regular file"
        return None

    def _media(self) -> None:
        """A page's ``_media/<hash>.webm`` that is not there yet is encoded now, from the video kept
        beside it (:func:`argus_dagster.page_media.serve_webm`); inside the served folder only."""
        try:
            path = unquote(urlsplit(self.path).path, errors="strict")
        except (UnicodeDecodeError, ValueError):
            return
        if not path.endswith(".webm") or "/_media/" not in path or _CONTROL.search(path):
            return
        rel = posixpath.normpath(path).lstrip("/")
        if not self._allowed(rel):
            return
        from .page_media import WEBM_ASKED, serve_webm

        target = Path(self.translate_path(self.path))
        root = Path(self.directory).resolve()
        if WEBM_ASKED.fullmatch(rel) and root in target.parent.resolve().parents:
            serve_webm(target)

    def _answer(self, head_only: bool) -> None:
        self._media()
        refused = self._refusal()
        if refused is not None:
            self.send_error(*refused)
            return
        super().do_HEAD() if head_only else super().do_GET()

    def do_GET(self) -> None:
        if self.path == "/favicon.ico":  # pages carry no icon; a 404 would be an error in the browser's console
            self.send_response(204)
            self.end_headers()
            return
        self._answer(head_only=False)

    def do_HEAD(self) -> None:
        self._answer(head_only=True)

    def list_directory(self, path):  # a folder is never listed
        self.send_error(404, "not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a re-materialized page shows on reload
        super().end_headers()


class _Server(ThreadingHTTPServer):
    """The reports server: a browser that goes away mid-answer (a closed tab, a page left before its
    video finished loading) is not an error to print; anything else is printed as the base class does."""

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


def make_server(root: str | Path, port: int = 0, allowed: re.Pattern | None = None) -> ThreadingHTTPServer:
    """A server of ``root`` on 127.0.0.1:``port`` (0: a free port), not yet serving; ``allowed``: the
    relative paths it serves (:data:`REPORTS_ONLY` for a home's ``benches`` folder), else all. It
    answers a loopback ``Host`` and the host of ``ARGUS_REPORTS_URL``.

    Raises ``OSError`` naming the port when it is taken."""
    from .settings import environment

    configured = _host_name(urlsplit(environment().get("ARGUS_REPORTS_URL").strip()).netloc or "")
    hosts = LOOPBACK_HOSTS | ({configured} if configured else set())
    handler = functools.partial(type("_Handler", (_QuietHandler,), {"allowed": allowed, "hosts": frozenset(hosts)}),
                                directory=str(Path(root).resolve()))
    try:
        server = _Server((HOST, port), handler)
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
