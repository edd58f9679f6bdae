"""A partition's report pages find the playable copies of its videos with one listing of the task's
``_media`` folder, not a lookup per name and video (on S3 each lookup is a HEAD request): counted through
a Storage that counts the calls it serves."""

from pathlib import Path

from argus_dagster.infra.media import write_video
from argus_dagster.infra.storage import Storage
from argus_dagster.outputs.page_media import page_video

N_VIDEOS = 3


class CountingStorage(Storage):
    """The local Storage, counting the lookups and listings it serves."""

    def __init__(self):
        super().__init__()
        self.exists_calls: list[str] = []
        self.list_calls: list[str] = []

    def exists(self, uri):
        self.exists_calls.append(str(uri))
        return super().exists(uri)

    def list(self, prefix):
        self.list_calls.append(str(prefix))
        return super().list(prefix)


def _videos(root: Path) -> list[tuple[str, str]]:
    """``N_VIDEOS`` clips (mp4v, as OpenCV writes them) and made-up content hashes."""
    import numpy as np

    out = []
    for i in range(N_VIDEOS):
        frames = np.random.default_rng(i).integers(0, 255, (12, 32, 48, 3), dtype=np.uint8)
        path = root / "cands" / f"v{i}.mp4"
        write_video(path, frames, 12)
        out.append((str(path), f"{i:x}" * 64))
    return out


def test_a_video_is_looked_up_in_one_listing_not_by_name(tmp_path):
    store, reports = CountingStorage(), tmp_path / "reports"
    videos = _videos(tmp_path)
    # Each video's copy is put in place (not decodable by browsers: kept as .orig, its WebM made on demand).
    first = [page_video(uri, sha, reports, "T2V", store) for uri, sha in videos]
    assert first == [f"../_media/{sha[:24]}.webm" for _, sha in videos]
    assert all((reports / "T2V" / "_media" / f"{sha[:24]}.orig.mp4").is_file() for _, sha in videos)
    assert store.exists_calls == [], store.exists_calls  # 8 names per video were looked up one by one
    assert len(store.list_calls) == N_VIDEOS  # a video asked alone: one listing for it


def test_the_pages_of_a_partition_list_the_media_folder_once_whatever_their_number(tmp_path):
    from argus_dagster.outputs.page_media import MediaFolder

    store, reports = CountingStorage(), tmp_path / "reports"
    videos = _videos(tmp_path)
    first = [page_video(uri, sha, reports, "T2V", store) for uri, sha in videos]
    store.exists_calls.clear(), store.list_calls.clear()
    media = MediaFolder(reports, "T2V", store)  # as a partition's report step shares it over its pages
    again = [page_video(uri, sha, reports, "T2V", store, media) for uri, sha in videos]
    assert again == first  # the copies put before are found, nothing is put again
    assert store.list_calls == [str(reports / "T2V" / "_media")] and store.exists_calls == []
    # A video first seen by this partition is put once and then found in the folder as listed.
    new = tmp_path / "cands" / "new.mp4"
    new.write_bytes(Path(videos[0][0]).read_bytes())
    src = page_video(str(new), "e" * 64, reports, "T2V", store, media)
    assert src == f"../_media/{'e' * 24}.webm" and f"{'e' * 24}.orig.mp4" in media
    assert len(store.list_calls) == 1 and store.exists_calls == []
