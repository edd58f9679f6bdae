"""Files that are not videos in the shape of videos: a FIFO named ``<id>.mp4``, a link to ``/dev/zero``,
a socket, a folder. Nothing blocks on them; each is its row's error, and the other videos are scored."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from argus_dagster.infra.media import write_video

from .helpers import ROOT, pattern_clip

pytestmark = pytest.mark.integration


def _argus(args: list[str], home: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARGUS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for name in ("ARGUS_VLM_BASE_URL", "ARGUS_VLM_PATH", "ARGUS_RUBRIC_BASE_URL", "ARGUS_RUBRIC_PATH",
                 "ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR", "ARGUS_BENCH", "ARGUS_PROFILE", "DAGSTER_HOME"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "argus_dagster.client.cli", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
def test_fifos_device_links_sockets_and_folders_are_row_errors_and_the_run_finishes(tmp_path):
    bench, cands, home = tmp_path / "bench", tmp_path / "cands", tmp_path / "home"
    ids = ["good", "fifo", "zero", "sock", "folder", "cond_fifo", "cond_zero"]
    (bench / "TI2V").mkdir(parents=True)
    write_video(tmp_path / "frame_src.mp4", pattern_clip(9, 2), 12)
    import cv2

    cv2.imwrite(str(bench / "TI2V" / "first.png"), pattern_clip(9, 1)[0])
    os.mkfifo(bench / "TI2V" / "fifo.png")
    os.symlink("/dev/zero", bench / "TI2V" / "zero.png")
    rows = [{"id": i, "prompt": f"A pattern slides left, {i}.",
             "first_frame": {"cond_fifo": "fifo.png", "cond_zero": "zero.png"}.get(i, "first.png")} for i in ids]
    (bench / "TI2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = cands / "TI2V" / "m"
    model.mkdir(parents=True)
    for i in ("good", "cond_fifo", "cond_zero"):
        write_video(model / f"{i}.mp4", pattern_clip(1), 12)
    os.mkfifo(model / "fifo.mp4")
    os.symlink("/dev/zero", model / "zero.mp4")
    s = socket.socket(socket.AF_UNIX)
    here = os.getcwd()
    os.chdir(model)  # bound by a relative name: a deep temporary folder can exceed a socket address's 108 bytes
    try:
        s.bind("sock.mp4")
    finally:
        os.chdir(here)
    (model / "folder.mp4").mkdir()
    try:
        done = _argus(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "TI2V"], home)
    finally:
        s.close()
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    summary = out[out.index("rows with an error"):]
    assert "'fifo'" in summary and "not a regular file (a FIFO)" in summary
    assert "'zero'" in summary and "a link to /dev/zero" in summary
    assert "'sock'" in summary and "(a socket)" in summary
    assert "'cond_fifo'" in summary and "'cond_zero'" in summary
    assert "Traceback" not in out
    lb = _argus(["leaderboard"], home, timeout=120)
    assert lb.returncode == 0 and "m" in lb.stdout
