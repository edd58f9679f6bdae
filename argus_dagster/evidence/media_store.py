"""The media one candidate's evidence plans work on, decoded once per medium and sampling policy.

All criteria of a candidate share one store, so a video is decoded once per policy however many
criteria and tools read it; crops registered by ``crop_compare`` live here too.
"""

from __future__ import annotations

import numpy as np

from ..media import Frames, MediaError, SamplingPolicy, VideoReader, is_image, load_image


class MediaStore:
    def __init__(self, uris: dict[str, str]):
        self._uris = dict(uris)
        self._readers: dict[str, VideoReader] = {}
        self._frames: dict[tuple[str, str], Frames] = {}
        self._derived: dict[str, np.ndarray] = {}
        self.decode_count = 0

    def has(self, media_id: str) -> bool:
        return media_id in self._uris or media_id in self._derived

    def uri(self, media_id: str) -> str | None:
        return self._uris.get(media_id)

    def is_video(self, media_id: str) -> bool:
        if media_id in self._derived:
            return False
        uri = self._uris.get(media_id)
        if uri is None:
            raise MediaError(f"media id {media_id!r} does not exist for this candidate")
        return not is_image(uri)

    def reader(self, media_id: str) -> VideoReader:
        if media_id not in self._readers:
            uri = self._uris.get(media_id)
            if uri is None:
                raise MediaError(f"media id {media_id!r} does not exist for this candidate")
            self._readers[media_id] = VideoReader(uri)
        return self._readers[media_id]

    def frames(self, media_id: str, policy: SamplingPolicy) -> Frames:
        """Frames of ``media_id`` under ``policy``; an image or crop is a one-frame clip."""
        key = (media_id, policy.name)
        if key not in self._frames:
            if media_id in self._derived:
                arr = self._derived[media_id][None]
                self._frames[key] = Frames(arr, (0,), (0.0,))
            elif self.is_video(media_id):
                self._frames[key] = self.reader(media_id).sample(policy)
                self.decode_count += 1
            else:
                arr = load_image(self._uris[media_id])[None]
                self._frames[key] = Frames(arr, (0,), (0.0,))
        return self._frames[key]

    def register(self, media_id: str, image: np.ndarray) -> None:
        """Register a derived still (a crop, a retrieved reference) under ``media_id``."""
        self._derived[media_id] = image
