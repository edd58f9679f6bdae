"""Videos a page can play: each candidate (and an edit's source video) beside the reports.

A page's ``<video>`` needs a URL the browser may load from where the page is: a page served by
`argus open` cannot load a ``file://`` video, and the candidates lie outside the folder it serves. So
each video a page shows is put once under ``reports/<TASK>/_media/``, named by its content hash and
shared by every page and sample that shows it, hard-linked where the disk allows (else copied), and
the page refers to it relatively (``../_media/<hash>.<ext>``), which works from ``file://`` and from
the server alike.

Browsers decode H.264, VP8, VP9 and AV1, not the mp4v that OpenCV writes by default (the demo's
clips): such a video is kept as ``<hash>.orig.<ext>`` and the page asks for ``<hash>.webm``, a VP8
copy (:func:`webm_copy`, longer side at most :data:`MAX_SIDE`) that the reports server makes the
first time it is asked (:func:`serve_webm`), so runs never spend the encoding on pages nobody opens.
Reports on S3 refer to their videos by presigned URLs (:meth:`Storage.link`); there an mp4v video
is encoded when the page is written.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import cv2

from argus_dagster.infra.storage import LOCAL, Storage, is_remote, join

PLAYABLE = {"avc1", "h264", "x264", "vp08", "vp80", "vp09", "vp90", "av01"}  # what browsers decode (lower-case)
MAX_SIDE = 640


def codec(path: str | Path) -> str:
    """The video's codec tag (FourCC, lower-case), or ``""`` when it cannot be opened."""
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return ""
        tag = int(cap.get(cv2.CAP_PROP_FOURCC))
        return "".join(chr((tag >> 8 * i) & 0xFF) for i in range(4)).strip("\0 ").lower()
    finally:
        cap.release()


def webm_copy(src: str | Path, dst: str | Path, max_side: int = MAX_SIDE, time_limit_s: float | None = None) -> None:
    """Re-encode ``src`` as VP8 WebM at ``dst`` (its frame rate; longer side at most ``max_side``), then
    check the copy (:func:`check_copy`): OpenCV reports a failed write (a full disk) only as a warning.
    ``time_limit_s``: raise ``ValueError`` when the encoding takes longer."""
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    cap = cv2.VideoCapture(str(src))
    if not cap.isOpened():
        raise ValueError(f"{src}: cannot be decoded")
    try:
        fps = cap.get(cv2.CAP_PROP_FPS) or 24.0
        writer = None
        written = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            h, w = frame.shape[:2]
            scale = min(1.0, max_side / max(h, w))
            size = (max(2, int(w * scale) // 2 * 2), max(2, int(h * scale) // 2 * 2))
            if writer is None:
                writer = cv2.VideoWriter(str(dst), cv2.VideoWriter.fourcc(*"VP80"), float(fps), size)
                if not writer.isOpened():
                    raise ValueError("this OpenCV cannot write VP8 WebM")
            writer.write(cv2.resize(frame, size, interpolation=cv2.INTER_AREA) if size != (w, h) else frame)
            written += 1
            if deadline is not None and time.monotonic() > deadline:
                writer.release()
                raise ValueError(f"the copy took longer than {time_limit_s:g} s (ARGUS_WEBM_TIME_LIMIT_S)")
        if writer is None:
            raise ValueError(f"{src}: no frame could be decoded")
        writer.release()
    finally:
        cap.release()
    check_copy(dst, written, size)


def check_copy(path: str | Path, frames: int, size: tuple[int, int]) -> None:
    """Raise ``ValueError`` saying why unless ``path`` is a VP8 video of ``frames`` decodable frames of
    ``size`` (width, height): a copy cut short by a full disk has fewer, or none."""
    try:
        nbytes = os.path.getsize(path)
    except OSError as exc:
        raise ValueError(f"the copy is missing ({exc.strerror})") from None
    if nbytes == 0:
        raise ValueError("the copy is empty (0 bytes; is the disk full?)")
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            raise ValueError(f"the copy ({nbytes} bytes) cannot be decoded (is the disk full?)")
        decoded = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            if (frame.shape[1], frame.shape[0]) != tuple(size):
                raise ValueError(f"the copy's frame {decoded} is {frame.shape[1]}x{frame.shape[0]}, not {size[0]}x{size[1]}")
            decoded += 1
    finally:
        cap.release()
    if decoded != frames:
        raise ValueError(f"the copy holds {decoded} of {frames} frames ({nbytes} bytes; is the disk full?)")


def _put_local(src: str, dst: Path) -> None:
    """``src``'s bytes at ``dst``: a hard link where the disk allows, else a copy (written whole)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident():x}.part")
    try:
        os.link(src, tmp)
    except OSError:
        LOCAL.write_bytes(dst, Path(src).read_bytes())
        return
    os.replace(tmp, dst)
    if tmp.exists():  # dst was already a link to the same file (another thread's): rename did nothing
        tmp.unlink()


class MediaFolder:
    """The names in a task's ``reports/<TASK>/_media`` folder, listed once when first asked (one
    listing, where asking for each name would be a request per name and video on S3), with the names
    put there since. A partition's pages share one; a name another process puts there after the
    listing is put again (the same bytes under the same name)."""

    def __init__(self, reports_dir: str | Path, task: str, store: Storage | None = None):
        self.store = store or LOCAL
        self.path = join(reports_dir, task, "_media")
        self._names: set[str] | None = None
        self._lock = threading.Lock()

    def __contains__(self, name: str) -> bool:
        with self._lock:
            if self._names is None:
                self._names = {f.rel for f in self.store.list(self.path) if "/" not in f.rel}
            return name in self._names

    def add(self, name: str) -> None:
        with self._lock:
            if self._names is not None:
                self._names.add(name)


def page_video(uri: str | None, sha256: str | None, reports_dir: str | Path, task: str,
               store: Storage | None = None, media: MediaFolder | None = None) -> str | None:
    """The ``src`` of a ``<video>`` on the pages of ``reports/<task>/<folder>/`` for the video at ``uri``
    (its content hash ``sha256``), putting the playable copy in place the first time; None when the
    video cannot be read (the page shows its stills and error instead). ``media``: the task's media
    folder as listed once for every page of a partition (default: listed for this video)."""
    if not uri or not sha256:
        return None
    store = store or LOCAL
    media_dir = join(reports_dir, task, "_media")
    media = media if media is not None else MediaFolder(reports_dir, task, store)
    stem = sha256[:24]
    for ext in ("mp4", "webm", "mov", "mkv"):
        if f"{stem}.{ext}" in media:
            return _src(store, join(media_dir, f"{stem}.{ext}"), reports_dir, f"{stem}.{ext}")
        if not is_remote(reports_dir) and f"{stem}.orig.{ext}" in media:
            return f"../_media/{stem}.webm"
    try:
        local = store.fetch(uri)
        tag = codec(local)
        if not tag:
            return None
        ext = Path(str(uri)).suffix.lower().lstrip(".") or "mp4"
        ext = ext if ext in ("mp4", "webm", "mov", "mkv") else "mp4"
        if tag in PLAYABLE:
            name = f"{stem}.{ext}"
            if is_remote(reports_dir):
                store.write_bytes(join(media_dir, name), Path(local).read_bytes())
            else:
                _put_local(local, Path(join(media_dir, name)))
        elif not is_remote(reports_dir):  # encoded by the reports server when a page first asks for it
            _put_local(local, Path(join(media_dir, f"{stem}.orig.{ext}")))
            media.add(f"{stem}.orig.{ext}")
            return f"../_media/{stem}.webm"
        else:
            name = f"{stem}.webm"
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / name
                webm_copy(local, out)
                store.write_bytes(join(media_dir, name), out.read_bytes())
        media.add(name)
    except (OSError, ValueError):
        return None
    return _src(store, join(media_dir, name), reports_dir, name)


def _src(store: Storage, path: str, reports_dir: str | Path, name: str) -> str:
    """Relative to a page two folders below the reports (``<TASK>/<model>/``); presigned on S3."""
    return store.link(path, reports_dir) if is_remote(reports_dir) else f"../_media/{name}"


WEBM_ASKED = re.compile(r"(?:.*/)?_media/([0-9a-f]{24})\.webm")
COPIES_AT_ONCE = 2  # WebM copies the reports server makes at the same time (each holds a CPU)
COPY_TIME_LIMIT_S = 120.0  # a copy that takes longer is given up: the original is served
_copies = threading.BoundedSemaphore(COPIES_AT_ONCE)
_per_video: dict[str, threading.Lock] = {}
_per_video_lock = threading.Lock()
_failed: dict[str, str] = {}  # a video whose copy failed: why (said once; its original is served)


def serve_webm(path: Path, time_limit_s: float | None = None) -> Path | None:
    """The file to serve for ``path`` (``.../_media/<hash>.webm``, asked of the reports server): the
    WebM copy, made now from the video kept beside it as ``<hash>.orig.<ext>`` when it is not there
    yet and checked (:func:`check_copy`) before it is put in place; the original itself when the copy
    failed (a full disk, an undecodable copy, longer than ``time_limit_s``, default
    :data:`COPY_TIME_LIMIT_S`), the reason printed once; None when there is no such video.

    Each video's copy is made once (a second request waits for it), at most :data:`COPIES_AT_ONCE` at a
    time, so one long copy holds back no other video's; a request that finds every slot taken for the
    whole time limit is served the original."""
    if path.is_file():
        return path
    match = WEBM_ASKED.fullmatch(path.as_posix())
    if not match:
        return None
    originals = sorted(path.parent.glob(f"{match.group(1)}.orig.*"))
    if not originals:
        return None
    key = str(path)
    if key in _failed:
        return originals[0]
    limit = COPY_TIME_LIMIT_S if time_limit_s is None else time_limit_s
    with _per_video_lock:
        lock = _per_video.setdefault(key, threading.Lock())
    with lock:
        if path.is_file():
            return path
        if key in _failed:
            return originals[0]
        if not _copies.acquire(timeout=limit):
            return originals[0]  # every slot busy: this request plays the original, a later one the copy
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident():x}.part.webm")
        try:
            webm_copy(originals[0], tmp, time_limit_s=limit)
            os.replace(tmp, path)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            _failed[key] = reason
            print(f"argus: no WebM copy of {originals[0]}: {reason}; its original is served instead",
                  file=sys.stderr, flush=True)
            return originals[0]
        finally:
            _copies.release()
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass
    return path
