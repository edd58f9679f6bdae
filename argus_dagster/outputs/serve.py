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
when it lies outside the file), every file says ``Accept-Ranges: bytes``. Its bounds are a team's
(:class:`Bounds`): a listen backlog of :attr:`_Server.request_queue_size`, and what one client can hold
is bounded however it sends. One thread reads every connection (a selector) and hands a request to one
of at most ``workers`` threads only once all of it has arrived, so idle or trickling connections hold
no worker; the request head must have arrived ``head_s`` after the connection opened, a declared body
``body_s`` after (a byte now and then extends neither: 408, closed), and one address holds at most
``per_address`` connections (503 beyond). Every client here is 127.0.0.1, so that limit is well above
what browsers open (6 per host, 256 in all), and exists to keep the server's file descriptors.
"""

from __future__ import annotations

import functools
import heapq
import io
import itertools
import os
import posixpath
import re
import selectors
import socket
import stat
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

from argus_dagster.infra.environment import environment
from argus_dagster.outputs.page_media import WEBM_ASKED, serve_webm

HOST = "127.0.0.1"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
HEAD_LIMIT = 64 << 10  # a request head longer than this is refused (431)
BODY_LIMIT = 64 << 10  # a declared body longer than this is refused (413): the server reads none


@dataclass(frozen=True)
class Bounds:
    """What one client can hold of the reports server. Both deadlines are measured from the connection's
    start, so a client that trickles a byte now and then cannot extend them."""

    head_s: float = 20.0  # the whole request head has arrived (longer than Chrome keeps an unused socket: 10 s)
    body_s: float = 60.0  # and a declared body (``Content-Length``) too
    idle_s: float = 30.0  # an answer the client takes nothing of for this long is dropped
    per_address: int = 512  # connections open at once from one address (browsers: 6 per host, 256 in all)
    workers: int = 64  # requests answered at once; the others, all arrived, wait for a worker


BOUNDS = Bounds()


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
    timeout = BOUNDS.idle_s  # the socket's, while answering: a client that takes nothing is dropped
    _substitute: Path | None = None  # the file served for this request's path (a video's original)
    _remaining: int | None = None  # the bytes of a range still to send

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the stdlib's signature)
        pass

    def setup(self) -> None:
        """As the base class, the request read from what the server already received of it (all of it):
        a worker never waits on a client's sending."""
        super().setup()
        received = cast("_Server", self.server).received.pop(self.connection, None)  # the only server it serves
        if received is not None:
            self.rfile.close()
            self.rfile = io.BytesIO(received)

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


_HEAD_END = re.compile(rb"\r?\n\r?\n")
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?$")
_TRANSFER_ENCODING = re.compile(rb"(?im)^transfer-encoding[ \t]*:")


def declared_body(head: bytes) -> int | tuple[int, str]:
    """The bytes of body a request head declares (0 without ``Content-Length``), or why it is refused
    (status, reason): a body without its length, a malformed or conflicting length, one too long."""
    if _TRANSFER_ENCODING.search(head):
        return 411, "a request body needs a Content-Length"
    lengths = {m.group(1) for m in _CONTENT_LENGTH.finditer(head)}
    if not lengths:
        return 0
    if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
        return 400, "a malformed Content-Length"
    n = int(lengths.pop())
    return n if n <= BODY_LIMIT else (413, "the request body is too long")


@dataclass
class _Arriving:
    """A connection whose request has not all arrived."""

    address: tuple
    started: float
    deadline: float  # the head's, then the body's; both from the connection's start
    data: bytearray = field(default_factory=bytearray)
    need: int | None = None  # the request's length in bytes, once its head has arrived


class _Intake:
    """The server's one intake thread: accepts connections, reads each until its whole request has
    arrived (then hands it to ``server``'s workers) or its deadline passes (then closes it)."""

    def __init__(self, server: "_Server"):
        self.server, self.bounds = server, server.bounds
        self.sel = selectors.DefaultSelector()
        self.arriving: dict[socket.socket, _Arriving] = {}
        self.deadlines: list[tuple[float, int, socket.socket]] = []  # a heap; an entry is stale once its deadline moved
        self._order = itertools.count()
        self.paused_until = 0.0  # accepting stops a moment when the process is out of file descriptors
        self.sel.register(server.socket, selectors.EVENT_READ)
        self.sel.register(server._wake_r, selectors.EVENT_READ)

    def step(self, poll_interval: float) -> None:
        now = time.monotonic()
        if self.paused_until and now >= self.paused_until:
            self.sel.register(self.server.socket, selectors.EVENT_READ)
            self.paused_until = 0.0
        wait = min(poll_interval, max(0.0, self.deadlines[0][0] - now)) if self.deadlines else poll_interval
        for key, _ in self.sel.select(wait):
            if key.fileobj is self.server.socket:
                self.accept()
            elif key.fileobj is self.server._wake_r:
                self.server._wake_r.recv(512)
            else:
                self.read(cast(socket.socket, key.fileobj))  # every other registered object is a connection
        now = time.monotonic()
        while self.deadlines and self.deadlines[0][0] <= now:
            deadline, _, conn = heapq.heappop(self.deadlines)
            a = self.arriving.get(conn)
            if a is not None and a.deadline == deadline:  # a connection that sent nothing is told nothing
                self.drop(conn, 408 if a.data else None, "the request did not arrive in time")

    def accept(self) -> None:
        for _ in range(64):  # a burst at a time: the connections already open are read too
            try:
                conn, address = self.server.socket.accept()
            except BlockingIOError:
                return
            except OSError:  # out of file descriptors and the like: the backlog holds them a moment
                self.sel.unregister(self.server.socket)
                self.paused_until = time.monotonic() + 0.1
                return
            if not self.server._admit(address):
                _refuse(conn, 503, "too many connections from this address")
                conn.close()
                continue
            conn.setblocking(False)
            now = time.monotonic()
            self.arriving[conn] = a = _Arriving(address, now, now + self.bounds.head_s)
            self._watch(conn, a.deadline)
            self.sel.register(conn, selectors.EVENT_READ)

    def read(self, conn: socket.socket) -> None:
        a = self.arriving[conn]
        try:
            chunk = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.drop(conn)
            return
        a.data += chunk
        if a.need is None:
            end = _HEAD_END.search(a.data, max(0, len(a.data) - len(chunk) - 3))
            if end is None or end.end() > HEAD_LIMIT:
                if end is not None or len(a.data) > HEAD_LIMIT:
                    self.drop(conn, 431, "the request head is too long")
                return
            body = declared_body(bytes(a.data[:end.start()]))
            if isinstance(body, tuple):
                self.drop(conn, *body)
                return
            a.need = end.end() + body
            if body:
                a.deadline = a.started + self.bounds.body_s
                self._watch(conn, a.deadline)
        if len(a.data) >= a.need:
            self.sel.unregister(conn)
            del self.arriving[conn]
            conn.setblocking(True)
            self.server.received[conn] = bytes(a.data)
            self.server._hand_over(conn, a.address)

    def drop(self, conn: socket.socket, status: int | None = None, reason: str = "") -> None:
        self.sel.unregister(conn)
        a = self.arriving.pop(conn)
        if status is not None:
            _refuse(conn, status, reason)
        conn.close()
        self.server._release(a.address)

    def close(self) -> None:
        for conn in list(self.arriving):
            self.drop(conn)
        self.sel.close()

    def _watch(self, conn: socket.socket, deadline: float) -> None:
        heapq.heappush(self.deadlines, (deadline, next(self._order), conn))


class _Server(HTTPServer):
    """The reports server. One thread reads every connection (:class:`_Intake`) until its whole request
    has arrived, then hands it to a worker (at most ``bounds.workers`` at once), which answers it and
    closes it: idle and trickling connections hold no worker, and a deadline from the connection's
    start ends them. A browser that goes away mid-answer (a closed tab, a page left before its video
    finished loading) is not an error to print; anything else is printed as the base class does."""

    request_queue_size = 256

    def __init__(self, address, handler, bounds: Bounds = BOUNDS):
        self.bounds = bounds
        self.received: dict[socket.socket, bytes] = {}  # each handed-over request's bytes, for its handler
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()  # connections open per client address
        self._ready: deque = deque()  # arrived requests waiting for a worker
        self._busy = 0  # workers running
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._wake_r, self._wake_w = socket.socketpair()  # wakes the intake to stop; closed by server_close
        super().__init__(address, handler)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stop.clear()
        self._stopped.clear()
        self.socket.setblocking(False)
        intake = _Intake(self)
        try:
            while not self._stop.is_set():
                intake.step(poll_interval)
                self.service_actions()
        finally:
            intake.close()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait for it; requests already with a worker are answered."""
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def _admit(self, address) -> bool:
        with self._lock:
            if self._open[address[0]] >= self.bounds.per_address:
                return False
            self._open[address[0]] += 1
            return True

    def _release(self, address) -> None:
        with self._lock:
            self._open[address[0]] -= 1
            if self._open[address[0]] <= 0:
                del self._open[address[0]]

    # -- the workers: each answers arrived requests until none is waiting --

    def _hand_over(self, conn: socket.socket, address) -> None:
        with self._lock:
            self._ready.append((conn, address))
            if self._busy >= self.bounds.workers:
                return
            self._busy += 1
        try:
            threading.Thread(target=self._work, name="argus-reports", daemon=True).start()
        except RuntimeError:  # no thread to be had: a running worker takes it
            with self._lock:
                self._busy -= 1

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._ready:
                    self._busy -= 1
                    return
                conn, address = self._ready.popleft()
            try:
                self.finish_request(conn, address)
            except Exception:
                self.handle_error(conn, address)
            finally:
                self.received.pop(conn, None)
                self.shutdown_request(conn)
                self._release(address)

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


def _refuse(conn: socket.socket, status: int, reason: str) -> None:
    """A short answer to a connection closed before its request is answered, if it can take it now."""
    body = f"{status}: {reason}\n".encode()
    try:
        conn.setblocking(False)
        conn.send(f"HTTP/1.0 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                  f"Connection: close\r\n\r\n".encode() + body)
    except OSError:
        pass


def make_server(root: str | Path, port: int = 0, allowed: re.Pattern | None = None,
                bounds: Bounds = BOUNDS) -> HTTPServer:
    """A server of ``root`` on 127.0.0.1:``port`` (0: a free port), not yet serving; ``allowed``: the
    relative paths it serves (:data:`REPORTS_ONLY` for a home's ``benches`` folder), else all; ``bounds``:
    what one client can hold of it. It answers a loopback ``Host`` and the host of ``ARGUS_REPORTS_URL``.

    Raises ``OSError`` naming the port when it is taken."""

    configured = _host_name(urlsplit(environment().get("ARGUS_REPORTS_URL").strip()).netloc or "")
    hosts = LOOPBACK_HOSTS | ({configured} if configured else set())
    handler = functools.partial(type("_Handler", (_QuietHandler,), {"allowed": allowed, "hosts": frozenset(hosts),
                                                                    "timeout": bounds.idle_s}),
                                directory=str(Path(root).resolve()))
    try:
        return _Server((HOST, port), handler, bounds)
    except OSError as exc:
        raise OSError(exc.errno, f"port {port} on {HOST} is taken ({exc.strerror}): set ARGUS_REPORTS_PORT "
                                 "or pass --port (0 picks a free one)") from None


def url_of(server: HTTPServer, page: str = "") -> str:
    return f"http://{HOST}:{server.server_address[1]}/{page}"


def serve_in_thread(root: str | Path, port: int = 0, allowed: re.Pattern | None = None,
                    bounds: Bounds = BOUNDS) -> HTTPServer:
    """Start serving in a daemon thread; ``server.shutdown()`` stops it."""
    server = make_server(root, port, allowed, bounds)
    threading.Thread(target=server.serve_forever, name="argus-reports", daemon=True).start()
    return server
