"""The media one candidate's evidence plans work on, decoded once per medium and sampling policy.

All criteria of a candidate share one store, so a video is decoded once per policy however many
criteria and tools read it, and the criteria may run on several threads at once. With content
digests (``digests``: media id -> hash), decoded frames live in the process's
:data:`~argus_dagster.infra.frame_pool.FRAME_POOL` under (digest, policy), so the judge stage reads the frames
the evidence stage decoded, and their JPEGs. Crops registered by ``crop_compare`` belong to one
criterion: :meth:`MediaStore.scope` gives each criterion its own, and so is ``reference`` when it
stands for one of the input's media (:meth:`MediaStore.use_reference`, method §6).
"""

from __future__ import annotations

import threading

import numpy as np

from argus_dagster.infra.frame_pool import FRAME_POOL, FramePool
from argus_dagster.infra.media import (
    MAX_SIDE,
    Frames,
    MediaError,
    SamplingPolicy,
    VideoReader,
    is_image,
    load_image,
    resize_longest,
)


class _Shared:
    """What every scope of one candidate's store shares: URIs, digests, readers, decoded frames."""

    def __init__(self, uris: dict[str, str], digests: dict[str, str], storage=None):
        self.uris = dict(uris)
        self.digests = dict(digests)
        self.storage = storage  # the storage resource's, for media at s3:// URIs
        self.readers: dict[tuple[str, int | None], VideoReader] = {}
        self.frames: dict[tuple[str, str], Frames] = {}
        self.own_pool = FramePool(budget_bytes=1 << 62)  # media without a digest: this candidate only
        self.lock = threading.RLock()
        self.decode_count = 0


class MediaStore:
    def __init__(self, uris: dict[str, str], digests: dict[str, str] | None = None, *, storage=None,
                 _shared: _Shared | None = None):
        self._shared = _shared or _Shared(uris, digests or {}, storage)
        self._derived: dict[str, Frames] = {}
        self._reference: str | None = None  # the input medium `reference` stands for, if any

    REFERENCE_MEDIA = ("first_frame", "subject_image", "source_video")

    def use_reference(self, source: str) -> None:
        """Make ``reference`` the input's ``source``: the first frame, the (first) subject image, or
        the source video's middle frame. A reference a search step registers later replaces it."""
        if source not in self.REFERENCE_MEDIA:
            raise MediaError(f"reference_source {source!r} is not one of the input's media {self.REFERENCE_MEDIA}")
        self._reference = source

    def stands_for(self, media_id: str) -> str | None:
        """The input medium ``media_id`` (``reference``) currently stands for, or None."""
        if media_id == "reference" and media_id not in self._derived and self._reference in self._shared.uris:
            return self._reference
        return None

    def close(self) -> None:
        """Close the candidate's opened videos and let go of its decoded frames (the process's frame
        pool keeps its own), for every scope of the store: called when the candidate's last criterion
        is done. An open decoder keeps decoding ahead into buffers of its own, so a reader left for
        the garbage collector holds tens of MB per video until it runs; a later use reopens."""
        with self._shared.lock:
            readers = list(self._shared.readers.values())
            self._shared.readers.clear()
            self._shared.frames.clear()
        for r in readers:
            r.close()

    def scope(self) -> "MediaStore":
        """A view for one criterion: the same decoded media, its own derived stills."""
        return MediaStore({}, _shared=self._shared)

    @property
    def decode_count(self) -> int:
        return self._shared.decode_count

    def has(self, media_id: str) -> bool:
        return media_id in self._shared.uris or media_id in self._derived or self.stands_for(media_id) is not None

    def uri(self, media_id: str) -> str | None:
        return self._shared.uris.get(media_id)

    def digest(self, media_id: str) -> str | None:
        """The content hash of an input medium (or of the one ``reference`` stands for), when known."""
        source = self.stands_for(media_id)
        if source is not None:
            d = self._shared.digests.get(source)
            return None if d is None else f"{d}:{'middle' if source == 'source_video' else 'image'}"
        return self._shared.digests.get(media_id)

    def is_video(self, media_id: str) -> bool:
        if media_id in self._derived or self.stands_for(media_id) is not None:
            return False
        uri = self._shared.uris.get(media_id)
        if uri is None:
            raise MediaError(f"media id {media_id!r} does not exist for this candidate")
        return not is_image(uri)

    def reader(self, media_id: str, max_side: int | None = MAX_SIDE) -> VideoReader:
        """The opened video, decoding to at most ``max_side`` (None: the native size)."""
        key = (media_id, max_side)
        with self._shared.lock:
            if key not in self._shared.readers:
                uri = self._shared.uris.get(media_id)
                if uri is None:
                    raise MediaError(f"media id {media_id!r} does not exist for this candidate")
                self._shared.readers[key] = VideoReader(uri, max_side=max_side, storage=self._shared.storage)
            return self._shared.readers[key]

    def _decode(self, media_id: str, policy: SamplingPolicy) -> Frames:
        if self.is_video(media_id):
            reader = self.reader(media_id, policy.max_side)
            with self._shared.lock:  # one decord reader is not safe to seek from two threads
                frames = reader.sample(policy, policy.max_side)
                self._shared.decode_count += 1
            return frames
        arr = load_image(self._shared.uris[media_id], policy.max_side or 1 << 16, self._shared.storage)[None]
        return Frames(arr, (0,), (0.0,))

    def frames(self, media_id: str, policy: SamplingPolicy) -> Frames:
        """Frames of ``media_id`` under ``policy``; an image or crop is a one-frame clip."""
        if media_id in self._derived:
            return self._derived[media_id]
        source = self.stands_for(media_id)
        if source == "source_video":
            return self._middle_frame(source)
        if source is not None:
            return self.frames(source, policy)
        key = (media_id, policy.name)
        with self._shared.lock:
            got = self._shared.frames.get(key)
        if got is not None:
            return got
        digest = self._shared.digests.get(media_id)
        pool, pool_key = (FRAME_POOL, (digest, policy.name)) if digest else (self._shared.own_pool, key)
        got = pool.get(pool_key, lambda: self._decode(media_id, policy))
        with self._shared.lock:  # held here as long as the candidate is, whatever the pool evicts
            return self._shared.frames.setdefault(key, got)

    def _middle_frame(self, media_id: str) -> Frames:
        """A representative still of a video: its middle frame, decoded once per candidate."""
        key = (media_id, "middle")
        with self._shared.lock:
            got = self._shared.frames.get(key)
            if got is None:
                reader = self.reader(media_id)
                mid = reader.info.n_frames // 2
                arr = reader.get([mid])
                if max(arr.shape[1:3]) > MAX_SIDE:
                    arr = resize_longest(arr[0], MAX_SIDE)[None]
                got = self._shared.frames[key] = Frames(arr, (mid,), (mid / reader.info.fps,))
                self._shared.decode_count += 1
            return got

    def register(self, media_id: str, image: np.ndarray) -> None:
        """Register a derived still (a crop, a retrieved reference) under ``media_id``."""
        self._derived[media_id] = Frames(image[None], (0,), (0.0,))
