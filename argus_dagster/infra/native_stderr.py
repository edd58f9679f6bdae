"""What native decoders (FFmpeg inside decord and OpenCV) write straight to file descriptor 2: kept off
the terminal, or captured for the error of the one file it was said of."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import IO, Any, Iterator

# FFmpeg's log prefix ("[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55...] ") and decord's ("[21:22:01] /src/x.cc:83: ").
_NATIVE_PREFIX = re.compile(r"^(\[[^\]]* @ 0x[0-9a-f]+\]\s*|\[\d\d:\d\d:\d\d\]\s*\S+\.(cc|cpp|h):\d+:\s*)+")
# fd 2 is per process: who holds its redirection. Many opens may share one (``shared``); a capture
# that must attribute what is said to one file holds it alone (``alone``), and goes before new sharers.
_FD2 = threading.Condition()
_FD2_STATE: dict[str, Any] = {"shared": 0, "alone": False, "waiting_alone": 0, "saved": None, "tmp": None}


def native_messages(text: str) -> list[str]:
    """What FFmpeg and decord said, without their pointers, clock times and C++ source paths, each once."""
    out: list[str] = []
    for line in text.splitlines():
        msg = _NATIVE_PREFIX.sub("", line.strip()).strip()
        if msg.startswith("ERROR opening:"):  # decord's line repeats the path; keep FFmpeg's reason
            msg = msg.rsplit(",", 1)[-1].strip()
        if msg and msg not in out:
            out.append(msg)
    return out


@contextmanager
def captured_native_stderr() -> Iterator[list[str]]:
    """Collect what native decoders write to file descriptor 2 while the block runs.

    FFmpeg (inside decord and OpenCV) prints "moov atom not found" and decord a C++ source path for
    each file it cannot open, straight to fd 2, past Python's ``sys.stderr``: a person running a
    command sees that for every bad video. Here it goes into the yielded list (see
    :func:`native_messages`), which the caller puts in the video's error. fd 2 is per process, so
    such a capture holds it alone (:func:`shared_native_stderr` blocks wait meanwhile); lines that
    are not native log lines are written back.
    """
    lines: list[str] = []
    with _FD2:
        _FD2_STATE["waiting_alone"] += 1
        _FD2.wait_for(lambda: not _FD2_STATE["alone"] and not _FD2_STATE["shared"])
        _FD2_STATE["waiting_alone"] -= 1
        _FD2_STATE["alone"] = True
    try:
        saved, tmp = _redirect_fd2()
        try:
            yield lines
        finally:
            lines.extend(_restore_fd2(saved, tmp))
    finally:
        with _FD2:
            _FD2_STATE["alone"] = False
            _FD2.notify_all()


@contextmanager
def shared_native_stderr() -> Iterator[None]:
    """Keep what native decoders write to fd 2 off the terminal while the block runs, sharing one
    redirection with the other threads in such a block (so opening videos is not one at a time).
    What they say cannot be told apart here: a caller whose open failed opens again under
    :func:`captured_native_stderr` to learn what was said of its file. Lines that are not native
    log lines are written back."""
    with _FD2:
        _FD2.wait_for(lambda: not _FD2_STATE["alone"] and not _FD2_STATE["waiting_alone"])
        if not _FD2_STATE["shared"]:
            _FD2_STATE["saved"], _FD2_STATE["tmp"] = _redirect_fd2()
        _FD2_STATE["shared"] += 1
    try:
        yield
    finally:
        with _FD2:
            _FD2_STATE["shared"] -= 1
            if not _FD2_STATE["shared"]:
                _restore_fd2(_FD2_STATE["saved"], _FD2_STATE["tmp"])
                _FD2_STATE["saved"] = _FD2_STATE["tmp"] = None
                _FD2.notify_all()


def _redirect_fd2() -> tuple[int, IO[bytes]]:
    tmp = tempfile.TemporaryFile()
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(tmp.fileno(), 2)
    return saved, tmp


def _restore_fd2(saved: int, tmp) -> list[str]:
    """Put fd 2 back; the native messages said meanwhile (other lines are written back)."""
    try:
        os.dup2(saved, 2)
        os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", "replace")
    finally:
        tmp.close()
    pieces = re.split(r"(?<=\n)", text)  # lines with their ends: a redrawn progress line ("\r...") stays as written
    native = [ln for ln in pieces if _NATIVE_PREFIX.match(ln.strip())]
    other = "".join(ln for ln in pieces if ln.strip() and not _NATIVE_PREFIX.match(ln.strip()))
    if other:
        sys.stderr.write(other)
        sys.stderr.flush()
    return native_messages("".join(native))
