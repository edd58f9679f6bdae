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
DNS name to 127.0.0.1 cannot read the reports. The ``Host`` is checked before any other work (a
page's video copy is made only for a request that is answered).

A video can be sought: a ``Range: bytes=`` request of one range is answered 206 with that range (416
when it lies outside the file), every file says ``Accept-Ranges: bytes``. Its bounds are a team's: a
listen backlog of :attr:`_Server.request_queue_size`, at most :attr:`_Server.max_threads` requests
answered at once (the next wait in the backlog), and a connection idle for :data:`IDLE_TIMEOUT_S` is
closed.
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
from argus_dagster.outputs.page_media import WEBM_ASKED, serve_webm
from argus_dagster.infra.environment import environment

HOST = "127.0.0.1"
IDLE_TIMEOUT_S = 30.0  # a connection that sends or takes nothing for this long is closed
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


REPORTS_ONLY = re.compile(r"(index\.html)?|[^/]+/[^/]+/reports(/.*)?")  # what a home's server shows


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def byte_range(header: str, size: int) -> tuple[int, int] | str | None:
    """The ``(first, last)`` bytes (inclusive) a ``Range`` header asks of a file of ``size`` bytes;
    ``"unsatisfiable"`` for a range outside the file or malformed; None for several ranges (answered
    with the whole file, as HTTP allows)."""
    spec = header.strip()
    if "," in spec:
        return None
    m = _RANGE.fullmatch(spec)
    if not m or not (m.group(1) or m.group(2)):
        return "unsatisfiable"
    if not m.group(1):  # the last N bytes
        n = int(m.group(2))
        return (max(0, size - n), size - 1) if n > 0 and size > 0 else "unsatisfiable"
    first = int(m.group(1))
    last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
    if first >= size or (m.group(2) and int(m.group(2)) < first):
        return "unsatisfiable"
    return first, last


def _host_name(header: str) -> str | None:
    """The host of a ``Host`` header (``127.0.0.1:3030``, ``[::1]:3030``), lower-case; None if malformed."""
    try:
        return urlsplit("//" + header.strip()).hostname
    except ValueError:
        return None


class _QuietHandler(SimpleHTTPRequestHandler):
    allowed: re.Pattern | None = None  # relative paths served (None: the whole folder)
    hosts: frozenset[str] = LOOPBACK_HOSTS  # the Host header values answered
    timeout = IDLE_TIMEOUT_S  # the socket's: an idle connection is closed
    _substitute: Path | None = None  # the file served for this request's path (a video's original)
    _remaining: int | None = None  # the bytes of a range still to send

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the stdlib's signature)
        pass

    def _allowed(self, rel: str) -> bool:
        return self.allowed is None or bool(self.allowed.fullmatch("" if rel == "." else rel))

    def _foreign_host(self) -> bool:
        host = self.headers.get("Host")
        return host is not None and _host_name(host) not in self.hosts

    def translate_path(self, path: str) -> str:
        return str(self._substitute) if self._substitute is not None else super().translate_path(path)

    def _refusal(self) -> tuple[int, str] | None:
        """Why this request gets no file (status, reason), or None."""
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

    def _media(self) -> Path | None:
        """A page's ``_media/<hash>.webm`` that is not there yet is encoded now, from the video kept
        beside it (:func:`argus_dagster.outputs.page_media.serve_webm`); inside the served folder only. The file
        to serve in its place (its original, when the copy failed), or None."""
        try:
            path = unquote(urlsplit(self.path).path, errors="strict")
        except (UnicodeDecodeError, ValueError):
            return None
        if not path.endswith(".webm") or "/_media/" not in path or _CONTROL.search(path):
            return None
        rel = posixpath.normpath(path).lstrip("/")
        if not self._allowed(rel):
            return None

        target = Path(self.translate_path(self.path))
        root = Path(self.directory).resolve()
        if WEBM_ASKED.fullmatch(rel) and root in target.parent.resolve().parents:
            served = serve_webm(target)
            return served if served is not None and served != target else None
        return None

    def _answer(self, head_only: bool) -> None:
        self._substitute, self._remaining = None, None
        if self._foreign_host():  # before any work: a rebound page costs no copy
            self.send_error(403, "not a loopback host")
            return
        self._substitute = self._media()
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

    def send_head(self):
        """As the base class, and a ``Range`` of one span of a file answered 206 (416 outside it)."""
        path = self.translate_path(self.path)
        ranged = self.headers.get("Range")
        if ranged is None or self.headers.get("If-Range") is not None or os.path.isdir(path):
            return super().send_head()
        try:
            f = open(path, "rb")
        except OSError:
            self.send_error(404, "not found")
            return None
        try:
            size = os.fstat(f.fileno()).st_size
            span = byte_range(ranged, size)
            if span is None:
                f.close()
                return super().send_head()
            if span == "unsatisfiable":
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                f.close()
                return None
            first, last = span
            self.send_response(206)
            self.send_header("Content-Type", self.guess_type(path))
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("Content-Length", str(last - first + 1))
            self.send_header("Last-Modified", self.date_time_string(int(os.fstat(f.fileno()).st_mtime)))
            self.end_headers()
            f.seek(first)
            self._remaining = last - first + 1
            return f
        except Exception:
            f.close()
            raise

    def copyfile(self, source, outputfile) -> None:
        if self._remaining is None:
            return super().copyfile(source, outputfile)
        while self._remaining > 0:
            chunk = source.read(min(1 << 16, self._remaining))
            if not chunk:
                break
            outputfile.write(chunk)
            self._remaining -= len(chunk)

    def list_directory(self, path):  # a folder is never listed
        self.send_error(404, "not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a re-materialized page shows on reload
        self.send_header("Accept-Ranges", "bytes")
        super().end_headers()


class _Server(ThreadingHTTPServer):
    """The reports server: a browser that goes away mid-answer (a closed tab, a page left before its
    video finished loading) is not an error to print; anything else is printed as the base class does.
    Sized for a team: a backlog of ``request_queue_size`` connections, at most ``max_threads`` answered
    at once (the accept loop waits for a free one)."""

    request_queue_size = 256
    max_threads = 64

    def __init__(self, *args, **kwargs):
        self._slots = threading.BoundedSemaphore(self.max_threads)
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


def make_server(root: str | Path, port: int = 0, allowed: re.Pattern | None = None,
                idle_s: float = IDLE_TIMEOUT_S) -> ThreadingHTTPServer:
    """A server of ``root`` on 127.0.0.1:``port`` (0: a free port), not yet serving; ``allowed``: the
    relative paths it serves (:data:`REPORTS_ONLY` for a home's ``benches`` folder), else all. It
    answers a loopback ``Host`` and the host of ``ARGUS_REPORTS_URL``.

    Raises ``OSError`` naming the port when it is taken."""

    configured = _host_name(urlsplit(environment().get("ARGUS_REPORTS_URL").strip()).netloc or "")
    hosts = LOOPBACK_HOSTS | ({configured} if configured else set())
    handler = functools.partial(type("_Handler", (_QuietHandler,), {"allowed": allowed, "hosts": frozenset(hosts),
                                                                    "timeout": idle_s}),
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


def serve_in_thread(root: str | Path, port: int = 0, allowed: re.Pattern | None = None,
                    idle_s: float = IDLE_TIMEOUT_S) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``server.shutdown()`` stops it."""
    server = make_server(root, port, allowed, idle_s)
    threading.Thread(target=server.serve_forever, name="argus-reports", daemon=True).start()
    return server
