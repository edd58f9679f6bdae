"""The reports server against clients that hold connections: idle sockets, requests trickled a byte at
a time (head or body), and more connections from one address than it allows. Each holds no worker,
ends at its deadline from the connection's start however often it sends, and a normal request is
answered meanwhile."""

import http.client
import selectors
import socket
import threading
import time

import pytest

from argus_dagster.outputs.serve import Bounds, serve_in_thread
from tests.waiting import wait_until

PAGE = b"<p>overview</p>"
HEAD = b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 4000 + b"\r\n\r\n"


@pytest.fixture()
def root(tmp_path, monkeypatch):
    monkeypatch.delenv("ARGUS_REPORTS_URL", raising=False)
    (tmp_path / "index.html").write_bytes(PAGE)
    return tmp_path


@pytest.fixture()
def serving(root):
    servers = []

    def start(bounds: Bounds):
        servers.append(serve_in_thread(root, 0, None, bounds))
        return servers[-1].server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _get(port: int, timeout_s: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", "/index.html")
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class _Trickle:
    """A thread that sends each socket its next byte of ``data`` every ``every_s`` seconds, for at most
    ``limit_s``, until stopped or the server has closed it."""

    def __init__(self, socks: list[socket.socket], data: bytes, every_s: float = 0.5, limit_s: float = 60.0):
        self.socks, self.data, self.every_s, self.limit_s = socks, data, every_s, limit_s
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "_Trickle":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        live = set(self.socks)
        for i in range(min(len(self.data), int(self.limit_s / self.every_s))):
            if self._stop.wait(self.every_s) or not live:
                return
            for s in list(live):
                try:
                    s.send(self.data[i:i + 1])
                except OSError:  # closed by the server
                    live.discard(s)
            self.rounds = i + 1


def _ends(socks: list[socket.socket], limit_s: float) -> dict[socket.socket, tuple[float, bytes | None]]:
    """When each socket was closed by the server, and what it was told first (None: a reset), waiting at
    most ``limit_s`` in all."""
    ended: dict[socket.socket, tuple[float, bytes | None]] = {}
    said = {s: b"" for s in socks}
    deadline = time.monotonic() + limit_s
    with selectors.DefaultSelector() as sel:
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        while len(ended) < len(socks) and time.monotonic() < deadline:
            for key, _ in sel.select(min(0.5, max(0.0, deadline - time.monotonic()))):
                s = key.fileobj
                try:
                    chunk = s.recv(4096)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    chunk, said[s] = b"", None
                if chunk:
                    said[s] += chunk
                    continue
                ended[s] = (time.monotonic(), said[s])
                sel.unregister(s)
    return ended


def _answered(port: int) -> tuple[int, bytes] | None:
    """:func:`_get`'s answer, or None for a connection refused before its request was read."""
    try:
        return _get(port)
    except (http.client.HTTPException, ConnectionError):
        return None


def _said_or_closed(socks: list[socket.socket]) -> list[socket.socket]:
    """The connections with something to read now (the server answered or closed them), without waiting."""
    with selectors.DefaultSelector() as sel:
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        return [key.fileobj for key, _ in sel.select(timeout=0)]  # type: ignore[misc]


def _connect(port: int, n: int) -> tuple[list[socket.socket], list[float]]:
    socks, opened = [], []
    for _ in range(n):
        opened.append(time.monotonic())
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    return socks, opened


def test_idle_and_trickling_connections_hold_no_worker_and_end_at_their_deadline(serving):
    """100 idle connections and 100 sending a request head a byte every half second (so a timeout
    between two bytes never fires): 200 connections, more than the 64 workers. A normal request is
    answered at once all the same, and each of the 200 is closed at its head deadline from its start,
    the trickling ones told 408."""
    head_s = 4.0
    port = serving(Bounds(head_s=head_s))
    idle, idle_opened = _connect(port, 100)
    slow, slow_opened = _connect(port, 100)
    try:
        with _Trickle(slow, HEAD, every_s=0.5) as trickle:
            wait_until(lambda: trickle.rounds >= 2, timeout_s=head_s - 1, what="two bytes sent on each slow connection")
            assert _get(port) == (200, PAGE)
            # Answered while the server still held all 200: none of them is closed or answered yet.
            assert _said_or_closed(idle + slow) == [], "a slow connection ended before the normal request"
            ended = _ends(idle + slow, limit_s=head_s + 10)
        assert len(ended) == 200, f"{200 - len(ended)} slow connections still open {head_s + 10:g} s on"
        for socks, opened in ((idle, idle_opened), (slow, slow_opened)):
            for s, t in zip(socks, opened):
                lasted = ended[s][0] - t
                assert head_s * 0.9 <= lasted <= head_s + 2.0, f"a connection lasted {lasted:.2f} s, not {head_s:g}"
        assert all(ended[s][1] == b"" for s in idle)  # nothing asked, nothing said
        told = [ended[s][1] for s in slow]
        assert all(t is None or t.startswith(b"HTTP/1.0 408 ") for t in told), {t[:40] for t in told if t}  # or a
        assert any(t is not None for t in told)  # reset, when the close crossed a trickled byte
        assert _get(port) == (200, PAGE)
    finally:
        for s in idle + slow:
            s.close()


def test_a_trickled_body_ends_at_its_deadline_and_a_slow_whole_request_is_answered(serving):
    """The body's deadline runs from the connection's start too; a request that arrives whole in time,
    however slowly, is answered; one that can never arrive whole is refused at once."""
    head_s, body_s = 2.0, 4.0
    port = serving(Bounds(head_s=head_s, body_s=body_s))
    head = b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    opened = time.monotonic()
    try:
        sock.sendall(head % 100)
        with _Trickle([sock], b"x" * 100, every_s=0.5):
            (closed, said), = _ends([sock], limit_s=body_s + 10).values()
        assert head_s < closed - opened <= body_s + 2.0, f"closed after {closed - opened:.2f} s, not {body_s:g}"
        assert said is None or said.startswith(b"HTTP/1.0 408 "), said
    finally:
        sock.close()

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # slow, but whole within the deadlines
        request = head % 5 + b"hello"
        for i in range(0, len(request), len(request) // 3 + 1):
            sock.sendall(request[i:i + len(request) // 3 + 1])
            time.sleep(0.3)
        answer = sock.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.0 200 ") and answer.endswith(PAGE), answer[:100]

    # Refused at once: on a server whose deadlines are far beyond the socket's 10 s timeout, so a refusal
    # that waited for a deadline would time the read out.
    port = serving(Bounds(head_s=60.0, body_s=60.0))
    for request, status in ((head % 10 ** 7, b"413"),
                            (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", b"411"),
                            (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * (70 << 10), b"431")):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            try:
                sock.sendall(request)
                answer = sock.makefile("rb").read()
            except ConnectionError:  # closed while the long head was still being sent
                answer = None
            assert answer is None or answer.startswith(b"HTTP/1.0 " + status + b" "), answer[:100]


def test_one_address_holds_at_most_its_limit_of_connections(serving):
    """Beyond ``per_address`` open connections, the next is told 503 and closed at once; a connection
    closed frees its place."""
    port = serving(Bounds(per_address=8, head_s=60.0))
    held, _ = _connect(port, 8)
    try:
        extra = socket.create_connection(("127.0.0.1", port), timeout=10)
        # Closed within 10 s: at once, not at its 60 s head deadline.
        (closed, said), = _ends([extra], limit_s=10).values()
        assert said is not None and said.startswith(b"HTTP/1.0 503 "), said
        extra.close()
        held.pop().close()
        assert wait_until(lambda: _answered(port) == (200, PAGE), timeout_s=10,
                          what="a place freed by a closed connection")
    finally:
        for s in held:
            s.close()
