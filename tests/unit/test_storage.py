"""The storage interface on local paths, and what it says about an s3:// URI it cannot reach."""

from pathlib import Path

import pytest

from argus_dagster.infra import storage as storage_lib
from argus_dagster.infra.media import MediaError, VideoReader, local_path
from argus_dagster.infra.storage import Storage, StorageError, join


def test_join_keeps_the_scheme_and_folds_nothing():
    assert join("s3://b/p/", "T2V", "/m/", "x.mp4") == "s3://b/p/T2V/m/x.mp4"
    assert join("/srv/reports", "T2V", "m") == str(Path("/srv/reports/T2V/m"))


def test_local_files_are_written_whole_listed_and_read(tmp_path):
    s = Storage()
    out = s.write_bytes(tmp_path / "r" / "T2V" / "a.html", "<p>a</p>")
    assert out == tmp_path / "r" / "T2V" / "a.html" and s.read_text(out) == "<p>a</p>"
    (tmp_path / "r" / "T2V" / ".b.html.1.part").write_text("half")  # a write in progress is no file yet
    s.write_bytes(str(tmp_path / "r" / "index.html"), b"<p>i</p>")
    assert [o.rel for o in s.list(tmp_path / "r")] == ["T2V/a.html", "index.html"]
    assert s.exists(tmp_path / "r" / "index.html") and not s.exists(tmp_path / "r" / "nope.html")
    assert s.fetch(str(out)) == str(out)
    with pytest.raises(FileNotFoundError):
        s.read_bytes(tmp_path / "r" / "nope.html")
    assert list(s.list(tmp_path / "absent")) == []


def test_a_local_link_is_the_reports_server_url(tmp_path, monkeypatch):
    """A storage links a page through the reports server it was made with; the environment is not
    read at run time (a storage made without a server's URL links the file)."""
    monkeypatch.setenv("ARGUS_REPORTS_URL", "http://127.0.0.1:8/")
    page = tmp_path / "reports" / "T2V" / "m" / "p 0.html"
    assert Storage(reports_url="http://127.0.0.1:9/").link(page, tmp_path / "reports") == "http://127.0.0.1:9/T2V/m/p%200.html"
    assert Storage().link(page, tmp_path / "reports") == page.resolve().as_uri()


def test_links_in_a_folder_are_each_files_link(tmp_path, monkeypatch):
    """The pages' links made from one resolution are the links made one by one: under the reports
    folder (the server's URL), outside it (``file://``), through a symlinked folder, odd names."""
    reports = tmp_path / "reports"
    (reports / "T2V" / "m x").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(reports / "T2V")
    names = ["p 0.html", "~%E7.html", "猫 cat#1?.html", "a%20b.html"]
    store = Storage(reports_url="http://127.0.0.1:9/")
    for folder in (reports / "T2V" / "m x", tmp_path / "elsewhere", tmp_path / "alias" / "m x"):
        assert store.links_in(folder, names, reports) == [store.link(folder / n, reports) for n in names]
    assert store.links_in(reports, [], reports) == []


def test_an_s3_uri_without_the_storage_resource_is_a_clear_error(monkeypatch):
    """Code handed no storage reads local paths only, and says what an ``s3://`` URI needs."""
    with pytest.raises(StorageError, match="storage resource"):
        storage_lib.LOCAL.read_bytes("s3://bkt/x.mp4")
    with pytest.raises(MediaError, match=r"s3://bkt/x\.mp4: cannot be fetched: .*storage resource"):
        local_path("s3://bkt/x.mp4")
    with pytest.raises(MediaError, match=r"s3://bkt/x\.mp4: cannot be fetched: .*storage resource"):
        VideoReader("s3://bkt/x.mp4")
