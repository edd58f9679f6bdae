"""The reports server against what a hostile page or a careless folder gives it: links out of the
reports, a FIFO, ``%00``, a DNS-rebound Host, folder listings."""

import http.client
import os

import pytest

from argus_dagster.outputs.serve import REPORTS_ONLY, serve_in_thread


def _get(server, path: str, host: str | None = None, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        conn.putrequest(method, path, skip_host=host is not None)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture()
def served(tmp_path, monkeypatch):
    monkeypatch.delenv("ARGUS_REPORTS_URL", raising=False)
    root = tmp_path / "benches"
    reports = root / "b" / "default" / "reports"
    (reports / "T2V").mkdir(parents=True)
    (reports / "index.html").write_text("<p>overview</p>")
    (reports / "T2V" / "page.html").write_text("<p>page</p>")
    (root / "b" / "default" / "evaluation.json").write_text("{}")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink("/etc", reports / "etc")
    os.symlink(tmp_path / "secret.txt", reports / "secret.html")
    os.symlink(root / "b" / "default" / "evaluation.json", reports / "record.html")
    os.mkfifo(reports / "fifo.html")
    (reports / "empty").mkdir()
    server = serve_in_thread(root, 0, REPORTS_ONLY)
    yield server
    server.shutdown()
    server.server_close()


def test_reports_are_served_and_links_out_of_them_are_not(served):
    assert _get(served, "/b/default/reports/index.html") == (200, b"<p>overview</p>")
    assert _get(served, "/b/default/reports/T2V/page.html")[0] == 200
    assert _get(served, "/b/default/reports/")[0] == 200
    for path in ("/b/default/reports/etc/passwd", "/b/default/reports/etc/hostname", "/b/default/reports/secret.html",
                 "/b/default/reports/record.html", "/b/default/reports/etc/", "/b/default/reports/empty/"):
        status, body = _get(served, path)
        assert status == 404 and b"root:" not in body and b"outside" not in body, path


def test_a_fifo_in_the_reports_is_not_opened(served):
    assert _get(served, "/b/default/reports/fifo.html")[0] == 404  # and the request did not block


def test_a_malformed_path_is_a_400_and_the_server_goes_on(served):
    for path in ("/b/default/reports/index.html%00", "/b/default/reports/%00/x", "/b/default/reports/%ff.html",
                 "/b/default/reports/a%0d%0aSet-Cookie:x"):
        assert _get(served, path)[0] == 400, path
    assert _get(served, "/b/default/reports/index.html")[0] == 200


def test_only_a_loopback_host_is_answered(served, monkeypatch):
    port = served.server_address[1]
    assert _get(served, "/b/default/reports/index.html", host=f"attacker.example:{port}")[0] == 403
    assert _get(served, "/b/default/reports/index.html", host="127.0.0.1.attacker.example", method="HEAD")[0] == 403
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert _get(served, "/b/default/reports/index.html", host=host)[0] == 200, host


def test_the_configured_reports_host_is_answered(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("x")
    monkeypatch.setenv("ARGUS_REPORTS_URL", "https://reports.example.org/argus/")
    server = serve_in_thread(tmp_path)
    try:
        assert _get(server, "/index.html", host="reports.example.org")[0] == 200
        assert _get(server, "/index.html", host="other.example.org")[0] == 403
    finally:
        server.shutdown()
        server.server_close()


def test_a_browser_that_goes_away_mid_answer_prints_no_traceback(served, capsys):
    """A client that resets its connection while a large page is sent (a closed tab) costs the server
    nothing and prints nothing; another error in a handler is still printed."""
    import socket
    import struct
    import threading

    big = served.RequestHandlerClass.keywords["directory"] + "/b/default/reports/T2V/big.html"
    with open(big, "wb") as fh:
        fh.write(b"<p>" + b"x" * (32 << 20) + b"</p>")
    seen = threading.Event()
    handle_error = served.handle_error

    def watched(request, client_address):
        try:
            handle_error(request, client_address)
        finally:
            seen.set()

    served.handle_error = watched
    sock = socket.create_connection(("127.0.0.1", served.server_address[1]), timeout=10)
    sock.sendall(b"GET /b/default/reports/T2V/big.html HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert sock.recv(4096).startswith(b"HTTP/1.0 200")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
    sock.close()
    assert seen.wait(20), "the server never noticed the reset"
    assert "Traceback" not in capsys.readouterr().err
    assert _get(served, "/b/default/reports/index.html") == (200, b"<p>overview</p>")

    try:
        raise ValueError("a handler's own bug")
    except ValueError:
        served.handle_error(None, ("127.0.0.1", 1))
    assert "ValueError: a handler's own bug" in capsys.readouterr().err
