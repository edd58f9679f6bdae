"""Decoding, sampling policies, resizing and hashing of media (method §1, §5).

Videos are decoded with decord, with OpenCV as the fallback; images with OpenCV. Every function takes
a URI: a local path or ``s3://bucket/key`` (fetched once into a local cache by the process's
:mod:`~argus_dagster.infra.storage`). Only regular files are opened, links resolved first
(:func:`regular_file`): a FIFO would block its reader forever and a link to ``/dev/zero`` never ends.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from argus_dagster.infra.native_stderr import captured_native_stderr, shared_native_stderr
from argus_dagster.infra.storage import LOCAL, StorageError
from argus_dagster.infra.storage import s3_cache_path as storage_cache_path

MAX_SIDE = 768
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"}


class MediaError(RuntimeError):
    """A medium that cannot be read: missing, corrupt or empty. The message names the URI."""


@dataclass(frozen=True)
class SamplingPolicy:
    """Which frames of a video a consumer sees.

    ``fps`` samples at that rate (None: uniformly over the whole clip); the result is then thinned
    uniformly to at most ``max_frames``. With ``windows``, frames are instead consecutive frames of the
    source rate in that many windows spread over the clip (``max_frames`` in all): what a temporal
    probe needs to see a per-frame alternation that any subsampling would hide. ``max_side`` bounds
    the decoded size (None: native resolution, for measures that a resize would falsify).
    """

    name: str
    fps: float | None
    max_frames: int
    windows: int = 0
    max_side: int | None = 768


RUBRIC_POLICY = SamplingPolicy("rubric", fps=2.0, max_frames=8)
JUDGE_POLICY = SamplingPolicy("judge", fps=None, max_frames=8)
DENSE_POLICY = SamplingPolicy("dense", fps=6.0, max_frames=48)
# Flicker, temporal coherence and motion smoothness: 3 windows of 32 consecutive frames at 256 px.
TEMPORAL_POLICY = SamplingPolicy("temporal", fps=None, max_frames=96, windows=3, max_side=256)
# Frame quality: 4 frames at the clip's own resolution (the measures read a few tiles of each).
NATIVE_POLICY = SamplingPolicy("native", fps=None, max_frames=4, max_side=None)
POLICIES = {p.name: p for p in (RUBRIC_POLICY, JUDGE_POLICY, DENSE_POLICY, TEMPORAL_POLICY, NATIVE_POLICY)}
JPEG_QUALITY = 85
# Which frames every consumer sees and how they are sized and encoded: part of every cache key, so a
# changed policy recomputes what was computed under the old one.
SAMPLING_ID = hashlib.sha256(repr((sorted(POLICIES.items()), MAX_SIDE, JPEG_QUALITY, "decoder-scaled")).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class VideoInfo:
    n_frames: int
    fps: float
    width: int
    height: int

    @property
    def duration(self) -> float:
        return self.n_frames / self.fps if self.fps > 0 else 0.0


class FrameImage:
    """One RGB frame with its JPEG encoding, made at most once however many requests carry it."""

    __slots__ = ("array", "_jpeg", "_lock")

    def __init__(self, array: np.ndarray):
        self.array = array
        self._jpeg: bytes | None = None
        self._lock = threading.Lock()

    def jpeg(self) -> bytes:
        with self._lock:
            if self._jpeg is None:
                self._jpeg = encode_jpeg(self.array)
            return self._jpeg


@dataclass(frozen=True)
class Frames:
    """Sampled RGB frames (T, H, W, 3) uint8 with their source indices and timestamps (s)."""

    array: np.ndarray
    indices: tuple[int, ...]
    timestamps: tuple[float, ...]
    _images: list = field(default_factory=list, compare=False, repr=False)

    def images(self) -> list[FrameImage]:
        """The frames as message parts for a VLM; each is JPEG-encoded once, on first use."""
        if not self._images:
            self._images.extend(FrameImage(f) for f in self.array)
        return list(self._images)

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)


def s3_cache_path(uri: str, cache_dir: str | Path) -> Path:
    """Where the local copy of ``s3://bucket/key`` lives under ``cache_dir``: always inside it
    (:func:`.storage.s3_cache_path`); a URI without a bucket or key is a :class:`MediaError`."""
    try:
        return storage_cache_path(uri, cache_dir)
    except StorageError as exc:
        raise MediaError(str(exc)) from None


def local_path(uri: str, cache_dir: str | None = None, storage=None) -> str:
    """A local file for ``uri``: a path as it is; an ``s3://`` object fetched once by ``storage`` (the
    storage resource's) into the media cache (``cache_dir``, else the storage's; see
    :meth:`.storage.Storage.fetch`)."""
    if not str(uri).startswith("s3://"):
        return uri
    try:
        return (storage or LOCAL).fetch(uri, cache_dir)
    except FileNotFoundError:
        raise MediaError(f"{uri}: file not found") from None
    except Exception as exc:  # no S3 storage configured, an unreachable endpoint, an unknown bucket
        raise MediaError(f"{uri}: cannot be fetched: {exc}") from None


# The largest candidate or condition file read (a 4K video of a few minutes is a few GB).
MAX_MEDIA_BYTES = 16 << 30
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def regular_file(uri: str, path: str | None = None, max_bytes: int = MAX_MEDIA_BYTES) -> str:
    """``uri``'s local file with its links resolved, once it is a regular file of at most ``max_bytes``;
    else a :class:`MediaError` that says what it is (stat never blocks, unlike opening a FIFO)."""
    path = str(path or uri)
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise MediaError(f"{uri}: file not found") from None
    except OSError as exc:
        raise MediaError(f"{uri}: cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        link = f", a link to {real}" if real != os.path.abspath(path) else ""
        raise MediaError(f"{uri}: not a regular file ({kind}{link}); only regular files are read as media")
    if st.st_size > max_bytes:
        raise MediaError(f"{uri}: {st.st_size} bytes, more than the {max_bytes} a medium may have")
    return real


def sha256_file(uri: str, storage=None) -> str:
    """The sha256 of a regular file's bytes, read up to the size it had when opened."""
    path = regular_file(uri, local_path(uri, storage=storage))
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a file swapped for a FIFO meanwhile does not block
    except FileNotFoundError as exc:
        raise MediaError(f"{uri}: file not found") from exc
    except OSError as exc:
        raise MediaError(f"{uri}: cannot be read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise MediaError(f"{uri}: not a regular file; only regular files are read as media")
        left = st.st_size
        while left > 0:
            chunk = fh.read(min(1 << 20, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


# The content hash of each local file by its stamp: a process cache, read by every run and stage that
# hashes the same files (a candidate's video, an input's conditions). Bound: 100,000 files, then emptied.
_DIGESTS: dict[tuple, str] = {}
_DIGESTS_LOCK = threading.Lock()
_KEPT_DIGESTS = 100_000

# A file's timestamps tick coarsely (a clock tick of a few milliseconds on Linux; a second or two on file
# systems that keep whole seconds), and a tool may set the modification time back: two edits of the same
# size can leave size and times as they were. A file's stamp identifies its content only once it has not
# changed for longer than a tick; until then it is read again every time (git's "racily clean" entries).
SETTLE_NS = 100_000_000
SETTLE_WHOLE_SECONDS_NS = 2_000_000_000


def file_stamp(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What moves when a file is written: its size, modification and change times (a modification
    time set back still moves the change time), inode and device (a file replaced by another)."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def settled(st: os.stat_result, now_ns: int | None = None) -> bool:
    """Whether the file last changed longer ago than its file system's timestamps tick
    (:data:`SETTLE_NS`, or :data:`SETTLE_WHOLE_SECONDS_NS` where they hold whole seconds): only then
    does its stamp say that its content is the one read before."""
    now = time.time_ns() if now_ns is None else now_ns
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    whole_seconds = st.st_mtime_ns % 1_000_000_000 == 0 and st.st_ctime_ns % 1_000_000_000 == 0
    return now - changed > (SETTLE_WHOLE_SECONDS_NS if whole_seconds else SETTLE_NS)


def change_token(st: os.stat_result) -> str:
    """A cheap token that differs whenever the file's content may differ from when the token was
    last taken: its :func:`file_stamp`, and for a file that has not :func:`settled` the time it was
    taken, so that the next look reads the file again."""
    token = ":".join(str(v) for v in file_stamp(st))
    return token if settled(st) else f"{token}:unsettled@{time.time_ns()}"


def file_digest(uri: str, storage=None) -> str:
    """The sha256 of a medium's bytes: a file's remembered per process by path and :func:`file_stamp`
    once it has :func:`settled`; an object's per key, ETag and size (:meth:`.storage.Storage.sha256` of ``storage``, the
    storage resource's)."""
    if str(uri).startswith("s3://"):
        try:
            return (storage or LOCAL).sha256(uri)
        except FileNotFoundError:
            raise MediaError(f"{uri}: file not found") from None
    path = regular_file(uri, local_path(uri))
    st = os.stat(path)
    key = (path, *file_stamp(st))
    with _DIGESTS_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    digest = sha256_file(path)
    if settled(st):  # a file changed just now may change again without its stamp moving: read it again
        with _DIGESTS_LOCK:
            if len(_DIGESTS) >= _KEPT_DIGESTS:
                _DIGESTS.clear()
            _DIGESTS[key] = digest
    return digest


def is_image(uri: str) -> bool:
    return Path(uri).suffix.lower() in IMAGE_SUFFIXES


def resize_longest(img: np.ndarray, max_side: int = MAX_SIDE) -> np.ndarray:
    """Keep the aspect ratio, longest side at most ``max_side`` (never upscales)."""
    h, w = img.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1.0:
        return img
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(img, size, interpolation=cv2.INTER_AREA)


def encode_jpeg(frame: np.ndarray, max_side: int = MAX_SIDE, quality: int = JPEG_QUALITY) -> bytes:
    """An RGB frame as JPEG bytes, longest side at most ``max_side`` (reports, VLM requests)."""
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(np.ascontiguousarray(resize_longest(frame, max_side)), cv2.COLOR_RGB2BGR),
                           [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise MediaError(f"could not encode a {frame.shape} frame as JPEG")
    return buf.tobytes()


def load_image(uri: str, max_side: int = MAX_SIDE, storage=None) -> np.ndarray:
    path = regular_file(uri, local_path(uri, storage=storage))
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    if bgr is None:
        raise MediaError(f"{uri}: not a readable image")
    return resize_longest(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), max_side)


# Digests of contents that decoded as images: a process cache (every run of the process checks the same
# conditions). Bound: 100,000 digests, then emptied.
_GOOD_IMAGES: dict[str, None] = {}


def check_image(uri: str, storage=None) -> None:
    """Raise :class:`MediaError` unless ``uri`` decodes as an image (a text file named ``.png`` does not).
    A content that decoded once in this process (by its hash: a subject image many prompts share, the
    same still in several manifests) is not decoded again."""
    path = regular_file(uri, local_path(uri, storage=storage))
    digest = file_digest(path)
    if digest in _GOOD_IMAGES:
        return
    img = cv2.imread(path, cv2.IMREAD_REDUCED_GRAYSCALE_8)
    if img is None or img.size == 0:
        raise MediaError(f"{uri}: not a readable image")
    if len(_GOOD_IMAGES) > 100_000:
        _GOOD_IMAGES.clear()
    _GOOD_IMAGES[digest] = None


def sample_indices(info: VideoInfo, policy: SamplingPolicy) -> list[int]:
    """Frame indices for ``policy``: rate-sampled, then uniformly thinned; first frame always kept."""
    n = info.n_frames
    if n <= 0:
        return []
    if policy.windows:
        return window_indices(n, policy.max_frames, policy.windows)
    if policy.fps and info.fps > 0:
        step = max(info.fps / policy.fps, 1.0)
        idx = [int(round(i * step)) for i in range(int(np.ceil(n / step)))]
        idx = sorted({i for i in idx if i < n})
    else:
        idx = list(range(n))
    if len(idx) > policy.max_frames:
        pick = np.linspace(0, len(idx) - 1, policy.max_frames).round().astype(int)
        idx = [idx[i] for i in pick]
    return idx


def window_indices(n: int, max_frames: int, windows: int) -> list[int]:
    """Consecutive frame indices: all ``n`` when they fit, else ``windows`` runs of equal length
    starting at evenly spaced points (the first at frame 0, the last ending at the last frame)."""
    if n <= max_frames:
        return list(range(n))
    length = max_frames // windows
    starts = np.linspace(0, n - length, windows).round().astype(int)
    return sorted({int(s) + k for s in starts for k in range(length)})


def runs(indices: list[int] | tuple[int, ...]) -> list[list[int]]:
    """``indices`` split where they are not consecutive: the windows a temporal probe may difference."""
    out: list[list[int]] = []
    for pos, i in enumerate(indices):
        if out and i == indices[pos - 1] + 1:
            out[-1].append(pos)
        else:
            out.append([pos])
    return out


def _scaled_size(w: int, h: int, max_side: int) -> tuple[int, int]:
    """``(w, h)`` with the longest side at most ``max_side``, as :func:`resize_longest` makes it."""
    scale = max_side / max(h, w)
    return (max(1, round(w * scale)), max(1, round(h * scale))) if scale < 1.0 else (w, h)


class VideoReader:
    """One opened video. decord first; OpenCV when decord cannot open the file.

    With ``max_side``, decord decodes straight to that size (the decoder scales; no full-size frame
    is materialized); ``info`` keeps the video's own geometry.
    """

    def __init__(self, uri: str, max_side: int | None = None, storage=None):
        self.uri = uri
        self._max_side = max_side
        path = regular_file(uri, local_path(uri, storage=storage))
        if Path(path).stat().st_size == 0:
            raise MediaError(f"{uri}: empty file (0 bytes)")
        self._decord: Any = None  # a decord.VideoReader (decord is imported when a video is first opened)
        self._cv_frames: np.ndarray | None = None
        self.closed = False
        with shared_native_stderr():  # opens in other threads go on meanwhile
            n, fps, w, h = self._open(path)
        said: list[str] = []
        if n is None:  # again, alone, to learn what the decoders say of this file
            with captured_native_stderr() as said:
                n, fps, w, h = self._open(path)
        if n is None:
            reason = f": {'; '.join(said)}" if said else ""
            raise MediaError(f"{uri}: cannot be decoded (not a video, or corrupt){reason}")
        if n == 0:
            raise MediaError(f"{uri}: the video has zero decodable frames")
        self.info = VideoInfo(n_frames=n, fps=fps if fps > 0 else 25.0, width=int(w), height=int(h))

    def _open(self, path: str) -> tuple:
        """``(n_frames, fps, width, height)``, all None when neither decoder can open the file."""
        max_side = self._max_side
        try:
            import decord  # deferred: start-up time (decord loads when a video is first opened)

            cap = cv2.VideoCapture(path)  # the geometry from the container, without decoding a frame
            w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH) or 0), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT) or 0)
            cap.release()
            size = {}
            if max_side and w and h and max(w, h) > max_side:
                sw, sh = _scaled_size(w, h, max_side)
                size = {"width": sw, "height": sh}
            self._decord = decord.VideoReader(path, num_threads=1, **size)
            n, fps = len(self._decord), float(self._decord.get_avg_fps())
            if not (w and h):
                h, w = self._decord[0].shape[:2] if n else (0, 0)
            self.backend = "decord"
        except Exception:  # decord raises its own DECORDError and RuntimeError types
            self._decord = None
            cap = cv2.VideoCapture(path)
            if not cap.isOpened():
                return None, None, None, None
            fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
            frames = []
            while True:
                ok, bgr = cap.read()
                if not ok:
                    break
                frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            cap.release()
            self._cv_frames = np.stack(frames) if frames else np.zeros((0, 0, 0, 3), np.uint8)
            n = len(frames)
            h, w = self._cv_frames.shape[1:3] if n else (0, 0)
            self.backend = "opencv"
        return n, fps, w, h

    def close(self) -> None:
        """Stop the decoder (decord's reads ahead on a thread of its own) and free its buffers now,
        not when the garbage collector finds the reader; a closed reader decodes nothing more."""
        self._decord = None
        self._cv_frames = np.zeros((0, 0, 0, 3), np.uint8) if self._cv_frames is not None else None
        self.closed = True

    def get(self, indices: list[int]) -> np.ndarray:
        if self.closed:
            raise MediaError(f"{self.uri}: the reader was closed")
        if self._decord is not None:
            try:
                return self._decord.get_batch(indices).asnumpy()
            except Exception as exc:
                raise MediaError(f"{self.uri}: decoding frames {indices[:3]}… failed: {exc}") from exc
        assert self._cv_frames is not None
        return self._cv_frames[indices]

    def sample(self, policy: SamplingPolicy, max_side: int | None = MAX_SIDE) -> Frames:
        idx = sample_indices(self.info, policy)
        arr = self.get(idx)
        if max_side and max(arr.shape[1:3]) > max_side:
            arr = np.stack([resize_longest(f, max_side) for f in arr])
        return Frames(arr, tuple(idx), tuple(i / self.info.fps for i in idx))


def probe_video(uri: str, storage=None) -> VideoInfo:
    return VideoReader(uri, storage=storage).info


def write_video(path: str | Path, frames: np.ndarray, fps: float) -> None:
    """Write RGB frames (T, H, W, 3) as an MP4 (mp4v). Used to build benches and fixtures."""
    frames = np.asarray(frames, dtype=np.uint8)
    t, h, w = frames.shape[:3]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), float(fps), (w, h))
    if not writer.isOpened():
        raise MediaError(f"{path}: cannot open a video writer")
    for f in frames:
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()
