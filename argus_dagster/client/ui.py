"""What `argus ui` puts in front of the Dagster UI, and what ends its children with it.

The Dagster webserver answers any ``Host``: a page of another site that rebinds its own DNS name to
127.0.0.1 could read its GraphQL, and GraphQL launches runs. So `argus ui` runs the webserver on an
internal loopback port and serves the user-facing port with :class:`HostProxy`: each request's ``Host``
is checked as the reports server checks it (a loopback name, or the host `argus ui` was told to serve)
before a byte reaches the webserver, 403 otherwise; an accepted request is forwarded with
``Connection: close`` (so every request on a connection is checked), a websocket upgrade (GraphQL
subscriptions) is forwarded both ways until either side closes.

The children `argus ui` starts behind it end with it: :mod:`argus_dagster.client.supervise`.
"""

from __future__ import annotations

import socket
import threading

from argus_dagster.outputs.serve import LOOPBACK_HOSTS, _host_name

HEAD_LIMIT = 64 << 10  # a request head longer than this is refused
IDLE_TIMEOUT_S = 30.0  # a connection that sends no request head for this long is closed
_HOP = (b"connection", b"keep-alive", b"proxy-connection")


def answered_hosts(host: str) -> frozenset[str]:
    """The ``Host`` names the proxy answers when `argus ui` serves on ``host``: loopback's, and ``host``
    itself unless it is a wildcard address."""
    named = host.strip().strip("[]").lower()
    return LOOPBACK_HOSTS | ({named} if named and named not in ("0.0.0.0", "::") else set())


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> str | None:
    """Why ``port`` on ``host`` cannot be served (it is taken), or None."""
    if port == 0:
        return None
    try:
        with socket.create_server((host, port)):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


class HostProxy:
    """A reverse proxy on ``host``:``port`` to ``127.0.0.1``:``upstream_port`` answering only ``hosts``.

    Raises ``OSError`` when the port is taken (at construction, before anything else starts)."""

    def __init__(self, host: str, port: int, upstream_port: int, hosts: frozenset[str]):
        self.upstream_port = upstream_port
        self.hosts = hosts
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host.strip("[]"), port), family=family, backlog=256)
        self.port = self.sock.getsockname()[1]
        self._closed = threading.Event()

    def serve_in_thread(self) -> "HostProxy":
        threading.Thread(target=self._accept, name="argus-ui-proxy", daemon=True).start()
        return self

    def close(self) -> None:
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        up = None
        try:
            conn.settimeout(IDLE_TIMEOUT_S)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
                if len(data) > HEAD_LIMIT:
                    _refuse(conn, 431, "Request Header Fields Too Large")
                    return
            head, rest = data.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            fields = []
            for line in lines[1:]:
                name, sep, value = line.partition(b":")
                if not sep:
                    _refuse(conn, 400, "Bad Request")
                    return
                fields.append((name.strip().lower(), value.strip()))
            hosts = [v for n, v in fields if n == b"host"]
            if len(hosts) != 1 or _host_name(hosts[0].decode("latin-1")) not in self.hosts:
                _refuse(conn, 403, "Forbidden", b"argus ui: not a loopback host\n")
                return
            connection = b",".join(v for n, v in fields if n == b"connection").lower()
            upgrade = b"upgrade" in [t.strip() for t in connection.split(b",")]
            if not upgrade:  # one request per connection: the next one is checked again
                kept = [line for line in lines[1:] if line.partition(b":")[0].strip().lower() not in _HOP]
                head = b"\r\n".join([lines[0], *kept, b"Connection: close"])
            try:
                up = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            except OSError:
                _refuse(conn, 502, "Bad Gateway", b"argus ui: the Dagster webserver is not answering yet\n")
                return
            up.settimeout(None)
            conn.settimeout(None)
            up.sendall(head + b"\r\n\r\n" + rest)
            threading.Thread(target=_pump, args=(conn, up), daemon=True).start()
            _pump(up, conn)
        except OSError:
            pass
        finally:
            for s in (conn, up):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """``src``'s bytes to ``dst`` until ``src`` ends, then end ``dst``'s writing."""
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            dst.sendall(chunk)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _refuse(conn: socket.socket, status: int, reason: str, body: bytes = b"") -> None:
    conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode() + body)
