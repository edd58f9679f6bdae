"""The proxy in front of `argus ui`'s Dagster webserver: a loopback ``Host`` (or the host it serves)
reaches the webserver, any other is refused before a byte is forwarded; every request on a
connection is checked; a websocket upgrade is carried both ways. The upstream is a real HTTP server
on loopback that records what reached it."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from argus_dagster.client.ui import HostProxy, answered_hosts, port_taken


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Host"), self.headers.get("Connection")))
        if self.headers.get("Upgrade") == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:  # an echo of whatever comes, until the other side closes
                data = self.connection.recv(4096)
                if not data:
                    return
                self.connection.sendall(data.upper())
        body = f"answered {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def proxied():
    _Upstream.seen = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = HostProxy("127.0.0.1", 0, upstream.server_address[1], answered_hosts("127.0.0.1")).serve_in_thread()
    yield proxy
    proxy.close()
    upstream.shutdown()
    upstream.server_close()


def _exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_a_loopback_host_reaches_the_webserver_and_a_foreign_one_does_not(proxied):
    port = proxied.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
        out = _exchange(port, f"GET /graphql?x HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"answered /graphql?x"), (host, out)
    for host in (f"rebound.example:{port}", "127.0.0.1.rebound.example", ""):
        out = _exchange(port, f"GET /graphql HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 403"), (host, out)
    assert _exchange(port, b"GET /graphql HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 403")  # no Host at all
    two = b"GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: rebound.example\r\n\r\n"
    assert _exchange(port, two).startswith(b"HTTP/1.1 403")
    assert [p for p, _, _ in _Upstream.seen] == ["/graphql?x"] * 4  # nothing refused reached it


def test_each_request_on_a_connection_is_checked(proxied):
    """A kept-alive connection is forwarded as one request (``Connection: close``): a second request
    on it, with a foreign Host, never reaches the webserver."""
    pipelined = (b"GET /first HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"
                 b"GET /second HTTP/1.1\r\nHost: rebound.example\r\n\r\n")
    out = _exchange(proxied.port, pipelined)
    assert out.count(b"HTTP/1.1 200") == 1 and b"answered /first" in out and b"/second" not in out
    assert _Upstream.seen == [("/first", "127.0.0.1", "close")]


def test_a_websocket_upgrade_is_carried_both_ways(proxied):
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=10) as s:
        s.sendall(b"GET /graphql HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        assert head.startswith(b"HTTP/1.1 101")
        for word in (b"subscribe", b"again"):
            s.sendall(word)
            assert s.recv(4096) == word.upper()
    assert _Upstream.seen[0][2] == "Upgrade"


def test_the_host_it_was_told_to_serve_is_answered():
    assert "ui.example.org" in answered_hosts("ui.example.org")
    assert answered_hosts("0.0.0.0") == answered_hosts("127.0.0.1") == frozenset({"127.0.0.1", "localhost", "::1"})


def test_a_taken_port_is_refused_at_once():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert port_taken("127.0.0.1", port)
        with pytest.raises(OSError):
            HostProxy("127.0.0.1", port, 1, answered_hosts("127.0.0.1"))
    assert port_taken("127.0.0.1", port) is None
