"""The reports server's videos and bounds: a video is sought with a Range request, each page video's
WebM copy is checked before it is served (a copy cut short by a full disk is removed and the original
served), one long copy holds back no other video, a foreign Host costs no copy, many clients at once
are answered and an idle connection is closed."""

import http.client
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from argus_dagster.infra.media import write_video
from argus_dagster.outputs.page_media import serve_webm, webm_copy
from argus_dagster.outputs.serve import REPORTS_ONLY, Bounds, make_server, serve_in_thread
from tests.skips import machine_lacks

ROOT = Path(__file__).resolve().parents[2]
MEDIA = "/b/default/reports/T2V/_media/"


def _clip(n: int, h: int = 48, w: int = 64, seed: int = 0) -> np.ndarray:
    base = np.random.default_rng(seed).integers(0, 255, (h, 2 * w, 3), dtype=np.uint8)
    return np.stack([np.roll(base, 3 * i, axis=1)[:, :w] for i in range(n)])


def _frames(path: Path) -> int:
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


def _request(server, path: str, headers: dict | None = None, method: str = "GET", skip_host: bool = False):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)
    try:
        conn.putrequest(method, path, skip_host=skip_host)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.delenv("ARGUS_REPORTS_URL", raising=False)
    root = tmp_path / "benches"
    media = root / "b" / "default" / "reports" / "T2V" / "_media"
    media.mkdir(parents=True)
    (root / "b" / "default" / "reports" / "index.html").write_text("<p>overview</p>")
    return root, media


@pytest.fixture()
def served(home):
    server = serve_in_thread(home[0], 0, REPORTS_ONLY, Bounds(head_s=1.0))
    yield server, home[1]
    server.shutdown()
    server.server_close()


def test_a_range_request_gets_that_range(served):
    server, media = served
    body = os.urandom(100_000)
    (media / ("ab" * 12 + ".webm")).write_bytes(body)
    url = MEDIA + "ab" * 12 + ".webm"
    status, headers, got = _request(server, url, {"Range": "bytes=0-99"})
    assert (status, got, headers["Content-Range"], headers["Content-Length"]) == (206, body[:100], "bytes 0-99/100000", "100")
    assert headers["Accept-Ranges"] == "bytes" and headers["Content-Type"] == "video/webm"
    assert _request(server, url, {"Range": "bytes=99990-"})[2] == body[99990:]
    assert _request(server, url, {"Range": "bytes=-5"})[2] == body[-5:]
    assert _request(server, url, {"Range": "bytes=50000-200000"})[2] == body[50000:]  # cut at the end
    status, headers, got = _request(server, url, {"Range": "bytes=1000-1009"}, method="HEAD")
    assert (status, headers["Content-Length"], got) == (206, "10", b"")
    for bad in ("bytes=100000-", "bytes=500-400", "bytes=x-y", "items=0-1"):
        status, headers, _ = _request(server, url, {"Range": bad})
        assert (status, headers["Content-Range"]) == (416, "bytes */100000"), bad
    status, headers, got = _request(server, url)  # no Range: the whole file, saying ranges are answered
    assert (status, got, headers["Accept-Ranges"]) == (200, body, "bytes")
    assert _request(server, url, {"Range": "bytes=0-1,5-6"})[:3:2] == (200, body)  # several ranges: the whole


def test_a_foreign_host_is_refused_before_the_copy_is_made(served):
    server, media = served
    write_video(media / ("cd" * 12 + ".orig.mp4"), _clip(6), 12)
    port = server.server_address[1]
    status, _, _ = _request(server, MEDIA + "cd" * 12 + ".webm", {"Host": f"rebound.example:{port}"}, skip_host=True)
    assert status == 403
    assert sorted(p.name for p in media.iterdir()) == ["cd" * 12 + ".orig.mp4"]  # no copy, no part of one
    status, headers, body = _request(server, MEDIA + "cd" * 12 + ".webm")
    assert status == 200 and headers["Content-Type"] == "video/webm"
    assert _frames(media / ("cd" * 12 + ".webm")) == 6


def test_a_copy_that_fails_is_removed_and_the_original_served_its_reason_said_once(served, capsys):
    server, media = served
    original = media / ("ef" * 12 + ".orig.mp4")
    original.write_bytes(b"not a video at all" * 100)
    for _ in range(2):
        status, headers, body = _request(server, MEDIA + "ef" * 12 + ".webm")
        assert (status, headers["Content-Type"], body) == (200, "video/mp4", original.read_bytes())
    assert sorted(p.name for p in media.iterdir()) == [original.name]
    said = [line for line in capsys.readouterr().err.splitlines() if "no WebM copy" in line]
    assert len(said) == 1 and str(original) in said[0] and "cannot be decoded" in said[0], said


def test_a_copy_over_its_time_limit_is_given_up(home, capsys):
    media = home[1]
    write_video(media / ("aa" * 12 + ".orig.mp4"), _clip(40), 12)
    target = media / ("aa" * 12 + ".webm")
    assert serve_webm(target, time_limit_s=0.0) == media / ("aa" * 12 + ".orig.mp4")
    assert not target.exists() and len(list(media.iterdir())) == 1
    assert "took longer than 0 s" in capsys.readouterr().err


def test_one_long_copy_holds_back_no_other_video(served):
    server, media = served
    write_video(media / ("11" * 12 + ".orig.mp4"), _clip(80, 240, 320, seed=1), 24)  # seconds of encoding
    write_video(media / ("22" * 12 + ".orig.mp4"), _clip(4, seed=2), 12)
    long = threading.Thread(target=_request, args=(server, MEDIA + "11" * 12 + ".webm"))
    long.start()
    try:
        assert _wait(lambda: any(p.name.startswith(".1111") for p in media.iterdir()), 60), "the long copy never began"
        status, _, _ = _request(server, MEDIA + "22" * 12 + ".webm")
        still_copying = any(p.name.startswith(".1111") for p in media.iterdir())
        assert status == 200 and still_copying  # answered while the long copy goes on
    finally:
        long.join(120)
    assert _frames(media / ("11" * 12 + ".webm")) == 80


def _wait(cond, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_three_hundred_clients_at_once_are_all_answered(served):
    server, _ = served
    answered: list[int] = []

    def one():
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)
        try:
            conn.request("GET", "/b/default/reports/index.html")
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"<p>overview</p>")
            answered.append(1)
        finally:
            conn.close()

    threads = [threading.Thread(target=one) for _ in range(300)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert len(answered) == 300


def test_the_listen_backlog_holds_a_team_s_connections(home):
    """A backlog of 5 drops the connections beyond it (their SYN is sent again a second later, the
    kernel's retransmission): with nobody accepting, the kernel completes the handshake of at most
    backlog + 1 connections. A team's backlog completes hundreds, however busy the machine."""
    import select

    server = make_server(home[0], 0, REPORTS_ONLY)  # listening, not accepting
    socks = []
    try:
        for _ in range(300):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(server.server_address)
            socks.append(s)
        poller = select.poll()
        for s in socks:
            poller.register(s, select.POLLOUT)
        by_fd = {s.fileno(): s for s in socks}
        connected: set[int] = set()
        deadline = time.monotonic() + 10
        while len(connected) < 200 and time.monotonic() < deadline:
            connected |= {fd for fd, ev in poller.poll(200)
                          if ev & select.POLLOUT and by_fd[fd].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0}
        assert len(connected) >= 200, f"{len(connected)} of 300 connections completed with nobody accepting"
    finally:
        for s in socks:
            s.close()
        server.server_close()


def test_an_idle_connection_is_closed(served):
    server, _ = served
    sock = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
    try:
        assert sock.recv(100) == b""  # closed by the server, having sent nothing (within the socket's 10 s)
    finally:
        sock.close()
    assert _request(server, "/b/default/reports/index.html")[0] == 200


_FILL = """
import sys
from pathlib import Path
from argus_dagster.outputs.page_media import serve_webm
media = Path(sys.argv[1])
served = serve_webm(media / ("ab" * 12 + ".webm"))
print("SERVED", getattr(served, "name", served))  # a path, or what an older serve_webm said
print("LEFT", sorted(p.name for p in media.iterdir()))
"""


def test_a_copy_cut_short_by_a_full_disk_is_not_served(tmp_path):
    """On a real tmpfs with room for the original and a third of its copy: OpenCV's failed writes are
    only warnings, so the copy's frames are counted before it is put in place."""
    if shutil.which("unshare") is None:
        machine_lacks("no unshare(1) on this machine")
    probe = subprocess.run(["unshare", "-r", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        machine_lacks(f"user namespaces are not available here: {probe.stderr.decode().strip()}")
    src = tmp_path / "src.mp4"
    write_video(src, _clip(300, 96, 128, seed=3), 24)
    webm_copy(src, tmp_path / "whole.webm")
    room = src.stat().st_size + (tmp_path / "whole.webm").stat().st_size // 3
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (f'mount -t tmpfs -o size={room // 4096 * 4096 + 8192} tmpfs "{disk}" && '
              f'mkdir "{disk}/_media" && cp "{src}" "{disk}/_media/{"ab" * 12}.orig.mp4" && '
              f'exec "{sys.executable}" -c "$0" "{disk}/_media"')
    out = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script, _FILL], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=180)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == f"SERVED {'ab' * 12}.orig.mp4", out.stdout + out.stderr
    assert lines[1] == f"LEFT ['{'ab' * 12}.orig.mp4']"
    said = [line for line in out.stderr.splitlines() if line.startswith("argus: no WebM copy")]
    assert len(said) == 1 and " of 300 frames" in said[0], out.stderr
