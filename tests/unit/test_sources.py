"""The sources' data versions: what counts as an input, and what does not stop an observation."""

import json
import os

from argus_dagster.assets.sources import bench_files_version, rubric_files_version
from argus_dagster.infra.storage import Storage
from argus_dagster.method.rubric.frozen import mark_frozen, written_as_generated

RUBRIC = {"criteria": [{"id": "c1", "criterion": "the dog runs"}],
          "generator": {"backend": "offline", "model": "rules", "input_hash": "abc"}}


def test_a_generated_rubric_untouched_is_output_and_an_edited_one_is_input():
    frozen = json.dumps(mark_frozen(RUBRIC)).encode()
    assert written_as_generated(frozen)
    edited = json.loads(frozen)
    edited["criteria"][0]["criterion"] = "the dog sits"
    assert not written_as_generated(json.dumps(edited).encode())
    assert not written_as_generated(json.dumps({**RUBRIC, "generator": {}}).encode())  # written by a person
    assert written_as_generated(json.dumps(RUBRIC).encode())  # frozen before the mark: taken as untouched
    assert not written_as_generated(b"{not json")


def test_the_rubric_version_moves_with_a_hand_edit_only(tmp_path):
    storage = Storage(lambda: None, cache_dir=tmp_path / "cache")
    rubrics = tmp_path / "bench" / "T2V" / "rubrics"
    rubrics.mkdir(parents=True)
    empty = rubric_files_version(tmp_path / "bench", tmp_path / "frozen", "T2V", storage)
    (rubrics / "a.json").write_text(json.dumps(mark_frozen(RUBRIC)))  # frozen by the rubrics asset
    assert rubric_files_version(tmp_path / "bench", tmp_path / "frozen", "T2V", storage) == empty
    edited = mark_frozen(RUBRIC)
    edited["criteria"] = []
    (rubrics / "a.json").write_text(json.dumps(edited))
    assert rubric_files_version(tmp_path / "bench", tmp_path / "frozen", "T2V", storage) != empty


def test_a_fifo_or_a_device_link_in_the_bench_is_observed_without_blocking(tmp_path):
    storage = Storage(lambda: None, cache_dir=tmp_path / "cache")
    task = tmp_path / "bench" / "T2V"
    task.mkdir(parents=True)
    (task / "manifest.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    before = bench_files_version(tmp_path / "bench", "T2V", storage)
    os.mkfifo(task / "first.png")
    os.symlink("/dev/zero", task / "zero.png")
    # Returns at once (nothing is opened for reading): neither is a file the bench holds, so the version
    # is the manifest's as before; the rows that name them say what they are.
    assert bench_files_version(tmp_path / "bench", "T2V", storage) == before
