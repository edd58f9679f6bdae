"""One HTTP POST under a whole-request deadline: a watchdog shuts the request's socket down when its
time is up, and at most a given number of body bytes are read.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError

# requests' timeout bounds each read, not the request: a server that drips a byte every 0.2 s never
# trips it. Each request therefore gets a watchdog that shuts its socket down when the request's time
# is up; the connection that a thread's request is using is found through this thread-local.
_CONNECTION = threading.local()


def _watched(base: type) -> type:
    class Watched(base):
        def request(self, *args, **kwargs):
            watch = getattr(_CONNECTION, "watch", None)
            if watch is not None:  # the watchdog of this thread's request may now shut this connection
                watch["conn"] = self
            return super().request(*args, **kwargs)
    Watched.__name__ = f"Watched{base.__name__}"
    return Watched


def _adapter() -> HTTPAdapter:
    """A requests adapter whose connections the deadline watchdog can reach."""
    class Pool(HTTPConnectionPool):
        ConnectionCls = _watched(HTTPConnection)

    class SPool(HTTPSConnectionPool):
        ConnectionCls = _watched(HTTPSConnection)

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": SPool}

    return Adapter()


class DeadlineExceeded(Exception):
    """The whole request (connecting, sending, the headers and the body) took longer than allowed."""


@dataclass
class HttpAnswer:
    status: int
    headers: Any  # requests' case-insensitive mapping
    body: bytes
    complete: bool  # False: the body was longer than the client reads, and only its head is here


def watched_session() -> requests.Session:
    """A session whose connections :func:`post_within_deadline` can shut down."""
    session = requests.Session()
    session.mount("http://", _adapter())
    session.mount("https://", _adapter())
    return session


def post_within_deadline(session: requests.Session, url: str, data: bytes, headers: dict[str, str], timeout_s: float,
                         max_bytes: int) -> HttpAnswer:
    """One POST whose whole exchange ends within ``timeout_s`` (else :class:`DeadlineExceeded`) and
    of whose body at most ``max_bytes`` are read."""
    watch: dict[str, Any] = {}
    fired, done = threading.Event(), threading.Event()

    def shut() -> None:
        fired.set()
        while not done.is_set():  # the connection may still be connecting: until it has a socket
            sock = getattr(watch.get("conn"), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # a blocked read returns at once
                except OSError:
                    pass
                return
            done.wait(0.05)

    timer = threading.Timer(timeout_s, shut)
    timer.daemon = True
    _CONNECTION.watch = watch
    timer.start()
    resp = None
    try:
        resp = session.post(url, data=data, headers=headers, stream=True, timeout=(min(10.0, timeout_s), timeout_s))
        chunks, size, complete = [], 0, True
        for chunk in resp.iter_content(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                complete = False
                break
            if fired.is_set():
                break
        if fired.is_set():
            raise DeadlineExceeded()
        return HttpAnswer(resp.status_code, resp.headers, b"".join(chunks)[:max_bytes], complete)
    except Exception:
        if fired.is_set():
            raise DeadlineExceeded() from None
        raise
    finally:
        done.set()
        timer.cancel()
        _CONNECTION.watch = None
        if resp is not None:
            resp.close()


def was_sent(exc: Exception) -> bool:
    """Whether a connection error came after the request was on its way (the server closed or reset
    the connection) rather than before it had one (refused, unresolvable, TLS or connect timeout)."""
    if isinstance(exc, (requests.exceptions.ConnectTimeout, requests.exceptions.SSLError,
                        requests.exceptions.ProxyError)):
        return False
    seen = exc.args[0] if exc.args else None
    return not isinstance(getattr(seen, "reason", seen), ConnectTimeoutError)

