"""The overview is written by the leaderboard's materialization, and a page that cannot be written
is said in the metadata without failing it."""

import dagster as dg
import polars as pl

from argus_dagster.infra.storage import LOCAL, Storage
from assets.overview import overview_metadata
from resources.bench import BenchResource


def _bench(tmp_path) -> BenchResource:
    return BenchResource(bench="b", profile="default", reports_dir=str(tmp_path / "reports"),
                         storage_dir=str(tmp_path / "storage"), bench_dir=str(tmp_path / "bench"))

LB = pl.DataFrame({"task": ["T2V"], "model": ["m"], "mean_final": [7.0], "ci_low": [6.0], "ci_high": [8.0],
                   "n_videos": [3], "n_errors": [0]})


def test_written_and_linked_over_http(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    meta = overview_metadata(dg.build_asset_context(), _bench(tmp_path), Storage(reports_url="http://127.0.0.1:9/"),
                             leaderboard=LB)
    assert meta["overview_url"].value == "http://127.0.0.1:9/index.html"
    assert 'data-task="T2V"' in (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")


def test_a_page_that_cannot_be_written_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    (tmp_path / "reports" / "index.html").mkdir(parents=True)  # in the way of the page
    meta = overview_metadata(dg.build_asset_context(), _bench(tmp_path), LOCAL, leaderboard=LB)
    assert "overview_url" not in meta and "index.html" in meta["overview_error"]
