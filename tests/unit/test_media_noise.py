"""Native decoder messages for a bad video end up in its error, never on the terminal."""

import subprocess
import sys
from pathlib import Path

from argus_dagster.infra.native_stderr import native_messages

ROOT = Path(__file__).resolve().parents[2]

OPEN_BAD = """
import sys
from argus_dagster.infra.media import MediaError, VideoReader, write_video
import numpy as np
try:
    VideoReader(sys.argv[1])
except MediaError as exc:
    print(exc)
write_video(sys.argv[2], np.zeros((4, 16, 16, 3), np.uint8), 4.0)
print(VideoReader(sys.argv[2]).info.n_frames)
"""


def test_bad_video_is_quiet_and_its_error_says_why(tmp_path):
    bad = tmp_path / "truncated.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(range(256)) * 8)  # an MP4 header and no moov atom
    good = tmp_path / "good.mp4"
    proc = subprocess.run([sys.executable, "-c", OPEN_BAD, str(bad), str(good)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # no "moov atom not found", no C++ source path
    error, frames = proc.stdout.strip().splitlines()
    assert error.startswith(f"{bad}: cannot be decoded") and "moov atom not found" in error
    assert ".cc:" not in error and "0x" not in error
    assert frames == "4"  # a good video still opens with the capture in place


def test_native_messages_drop_pointers_clock_and_source_paths():
    text = ("[mov,mp4,m4a,3gp,3g2,mj2 @ 0x559d41771940] moov atom not found\n"
            "[mov,mp4,m4a,3gp,3g2,mj2 @ 0x559d4177b300] moov atom not found\n"
            "[21:22:01] /github/workspace/src/video/video_reader.cc:83: ERROR opening: /x.mp4, Invalid data found\n")
    assert native_messages(text) == ["moov atom not found", "Invalid data found"]
    assert native_messages("") == []


OPEN_MANY = """
import sys, threading
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import argus_dagster.infra.media as media
from argus_dagster.infra.media import MediaError, VideoReader, write_video

bad, folder = sys.argv[1], sys.argv[2]
goods = [f"{folder}/g{i}.mp4" for i in range(24)]
for i, g in enumerate(goods):
    write_video(g, np.full((6, 32, 32, 3), i * 9, np.uint8), 6.0)
most = [0]
seen = threading.Lock()
opened = media.VideoReader._open

def counting_open(self, path):  # how many opens are under way at once
    with seen:
        counting_open.now += 1
        most[0] = max(most[0], counting_open.now)
    try:
        import time; time.sleep(0.02)
        return opened(self, path)
    finally:
        with seen:
            counting_open.now -= 1
counting_open.now = 0
media.VideoReader._open = counting_open

def one(uri):
    try:
        return VideoReader(uri).info.n_frames
    except MediaError as exc:
        return str(exc)

with ThreadPoolExecutor(8) as pool:
    out = list(pool.map(one, goods[:12] + [bad] + goods[12:]))
print(out[12])
print(sorted(set(out[:12] + out[13:])), most[0])
"""


def test_videos_open_at_once_and_a_bad_ones_error_is_still_its_own(tmp_path):
    """Opens in several threads share fd 2's redirection (they go on at once); one that fails opens
    again alone, so its error names what the decoders said of it, and nothing reaches the terminal."""
    bad = tmp_path / "truncated.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(range(256)) * 8)
    proc = subprocess.run([sys.executable, "-c", OPEN_MANY, str(bad), str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    error, rest = proc.stdout.strip().splitlines()
    assert error.startswith(f"{bad}: cannot be decoded") and "moov atom not found" in error
    frames, most = rest.rsplit(" ", 1)
    assert frames == "[6]"  # every good video opened whole
    assert int(most) > 1  # not one at a time


WRITE_BACK = """
import os, sys
from argus_dagster.infra.native_stderr import captured_native_stderr, shared_native_stderr
with captured_native_stderr() as said:
    os.write(2, b"[mov,mp4 @ 0x55d0] moov atom not found\\n")
    os.write(2, b"\\r\\x1b[2Kevidence 3/10 videos")
with shared_native_stderr():
    os.write(2, b"[mov,mp4 @ 0x55d1] moov atom not found\\n")
    os.write(2, b"\\r\\x1b[2Kevidence 4/10 videos")
print(said)
"""


def test_what_others_write_meanwhile_comes_back_as_written(tmp_path):
    """A terminal's progress line redrawn during a capture ("\\r" and no newline) is written back as it
    was, not cut into lines; the decoders' own lines stay out."""
    proc = subprocess.run([sys.executable, "-c", WRITE_BACK], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b"\r\x1b[2Kevidence 3/10 videos\r\x1b[2Kevidence 4/10 videos"
    assert proc.stdout.decode().strip() == "['moov atom not found']"
