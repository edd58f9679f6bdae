"""How every VLM request about one candidate video begins: one system text, then its frames.

A prefix-caching server (vLLM, SGLang) prefills a prompt prefix once and reuses it for every later
request that starts with the same tokens. The ``vlm_qa`` questions and the criterion judgments of a
candidate therefore all open with :data:`VIDEO_SYSTEM` and the same frames of the output video (the
judge's sampling policy, each frame JPEG-encoded once), and put what differs after them: other media
a step looks at (a crop, the source video, a reference), the instructions of the request, the
criterion, the evidence and the answer format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VIDEO_SYSTEM = (
    "You examine one generated video for a video evaluation. Its frames come first, labelled with the "
    "medium they show and their times. One request about this video follows them: a question to answer "
    "about what is visible, or one criterion of a rubric to judge. Do what that request asks, from what "
    "you are given."
)


def frames_label(media_id: str, frames: Any, *, video: bool = True) -> str:
    """The line that introduces a medium's frames: its id, how many frames and their times."""
    if not video:
        return f"[{media_id}] image:"
    times = ", ".join(f"{t:.1f}s" for t in frames.timestamps)
    return f"[{media_id}] {len(frames.array)} frames (t = {times}):"


def video_messages(shared: Any, request: list[Any], *, extra: Sequence[Any] = ()) -> list[dict]:
    """The messages of one request about a candidate: the common system text, the output video's
    ``shared`` frames (None or empty: the video could not be decoded), then ``extra`` parts (other
    media) and the ``request`` itself."""
    parts: list[Any] = []
    if shared is not None and len(shared.array):
        parts.append(frames_label("output_video", shared))
        parts += shared.images()  # encoded once per frame, shared by every request about the video
    return [{"role": "system", "content": [VIDEO_SYSTEM]},
            {"role": "user", "content": [*parts, *extra, *request]}]
