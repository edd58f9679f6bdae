"""Writes that never destroy what they did not make, exports a spreadsheet cannot run, bench names
that never take the home's own files, and page fields bounded: each against the real thing (device
nodes made with mknod, a FIFO, a socket, a person's files in the export folder)."""

import csv
import errno
import io
import json
import os
import socket
import stat
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest

from argus_dagster.infra.files import WriteError, write_atomic
from argus_dagster.outputs.export import encode
from argus_dagster.protocols.firm import export as fx
from tests.skips import machine_lacks


def _device(path, major, minor):
    """A real character device node at ``path`` (as root; elsewhere the test skips)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        machine_lacks("making a device node needs root (CAP_MKNOD)")
    return path


@pytest.mark.parametrize("major,minor,name", [(1, 7, "full"), (1, 3, "null")])
def test_a_device_node_is_refused_and_stays_a_device(tmp_path, major, minor, name):
    dev = _device(tmp_path / name, major, minor)
    with pytest.raises(WriteError) as err:
        write_atomic(dev, "task,model\nT2V,m\n")
    assert str(err.value) == (f"cannot write {dev}: a character device is there, not a regular file; give the "
                              "path of a file (it is created or replaced)")
    assert err.value.errno == errno.EEXIST
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == major and os.minor(st.st_rdev) == minor
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary file left


def test_a_link_to_a_device_is_refused_like_dev_stdout(tmp_path):
    """``/dev/stdout`` is a link (to /proc/self/fd/1): what it names decides, and the link stays."""
    dev = _device(tmp_path / "null", 1, 3)
    link = tmp_path / "stdout"
    link.symlink_to(dev)
    with pytest.raises(WriteError, match="a character device is there"):
        write_atomic(link, b"x")
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


def test_a_fifo_a_socket_and_a_folder_are_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match=r"a FIFO \(named pipe\) is there, not a regular file"):
        write_atomic(fifo, "x")  # never opened: a FIFO without a reader would block the write for good
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

    sock_path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(WriteError, match="a socket is there"):
            write_atomic(sock_path, "x")
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)

    folder = tmp_path / "dir"
    (folder / "keep").mkdir(parents=True)
    with pytest.raises(WriteError, match="a folder is there"):
        write_atomic(folder, "x")
    assert (folder / "keep").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "pipe", "sock"]


def test_a_regular_file_and_a_new_one_are_written(tmp_path):
    old = tmp_path / "a.csv"
    old.write_text("old")
    write_atomic(old, "new")
    write_atomic(tmp_path / "sub" / "b.csv", "b")
    assert old.read_text() == "new" and (tmp_path / "sub" / "b.csv").read_text() == "b"


# ---------------------------------------------------------------------------------------------------
# CSV cells a spreadsheet would run


def _cells(raw: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))


def test_csv_text_cells_that_start_a_formula_are_written_as_text():
    df = pl.DataFrame({"input_id": ["=HYPERLINK(\"http://x\",\"y\")", "+1+cmd", "-2+3", "@SUM(A1)", "plain", "\tx"],
                       "model": ["=1+1", "m", "m", "m", "m", "m"],
                       "rationale": ["ok", None, "-", "a=b", "-3", "+1.5e2"],
                       "score": [-1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                       "needs_vlm": [["=x"], [], ["a", "b"], ["-y"], [], []]})
    rows = _cells(encode(df, "csv"))
    assert [r["input_id"] for r in rows] == ["'=HYPERLINK(\"http://x\",\"y\")", "'+1+cmd", "'-2+3", "'@SUM(A1)",
                                             "plain", "'\tx"]
    assert rows[0]["model"] == "'=1+1" and rows[1]["model"] == "m"
    # a plain number stays a number; a lone "-" and text that only holds "=" later are left as they are
    assert [r["rationale"] for r in rows] == ["ok", "", "'-", "a=b", "-3", "+1.5e2"]
    assert [r["score"] for r in rows] == ["-1.0", "2.0", "3.0", "4.0", "5.0", "6.0"]
    assert [r["needs_vlm"] for r in rows] == ["'=x", "", "a; b", "'-y", "", ""]
    # JSON and parquet keep the values as stored
    assert json.loads(encode(df, "json"))[0]["input_id"] == "=HYPERLINK(\"http://x\",\"y\")"


# ---------------------------------------------------------------------------------------------------
# The FIRM export folder


def _row(iid):
    return {"task": "T2V", "model": "m", "input_id": iid, "sample": "", "frames": [f"{iid}.mp4#frame={k}&t=0"
                                                                                  for k in (0, 5)],
            "if_rating": 3, "wc_rating": 4, "pq_rating": 5, "wc_scene": "A street", "if_rationale": "x.",
            "wc_rationale": "y", "pq_rationale": "z.", "if_reason": "", "wc_reason": "", "pq_reason": ""}


def _frames(uri, indices):
    return [np.full((24, 32, 3), 10 * i, np.uint8) for i in indices]


def _export(out, ids, force=False):
    return fx.export_dataset(out, [_row(i) for i in ids], {}, {("T2V", i): {"prompt": f"A kite {i}"} for i in ids},
                             video_frames=_frames, condition_frames=lambda inp: [],
                             **({"force": True} if force else {}))


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_a_folder_of_a_persons_files_is_refused_and_left_as_it_is(tmp_path):
    out = tmp_path / "photos"
    (out / "images" / "holiday").mkdir(parents=True)
    (out / "images" / "holiday" / "beach.jpg").write_bytes(b"\xff\xd8 a photo")
    (out / "README.md").write_text("# My photos\n")
    before = {p: (out / p).read_bytes() for p in _files(out)}
    with pytest.raises(ValueError) as err:
        _export(out, ["t1"])
    msg = str(err.value)
    assert msg.startswith(f"--out {out}: the folder holds files no firm export wrote (README.md, images, "
                          "images/holiday")
    assert "--force" in msg
    assert {p: (out / p).read_bytes() for p in _files(out)} == before


def test_force_writes_beside_a_persons_files_and_deletes_none(tmp_path):
    out = tmp_path / "photos"
    (out / "images" / "holiday").mkdir(parents=True)
    (out / "images" / "holiday" / "beach.jpg").write_bytes(b"a photo")
    res = _export(out, ["t1"], force=True)
    assert res.n_videos == 1
    assert (out / "images" / "holiday" / "beach.jpg").read_bytes() == b"a photo"
    assert "images/T2V/m/t1/frame_00.jpg" in _files(out)


def test_a_second_export_replaces_its_own_files_and_only_those(tmp_path):
    out = tmp_path / "firm"
    _export(out, ["t1", "t2"])
    assert _files(out) == [".argus-export.json", "README.md", "images/T2V/m/t1/frame_00.jpg",
                           "images/T2V/m/t1/frame_01.jpg", "images/T2V/m/t2/frame_00.jpg",
                           "images/T2V/m/t2/frame_01.jpg", "train.jsonl"]
    res = _export(out, ["t1"])  # t2 no longer exported: its frames (and their folder) go
    assert res.n_videos == 1
    assert _files(out) == [".argus-export.json", "README.md", "images/T2V/m/t1/frame_00.jpg",
                           "images/T2V/m/t1/frame_01.jpg", "train.jsonl"]
    assert not (out / "images" / "T2V" / "m" / "t2").exists()
    # a file a person adds afterwards makes the folder theirs too: refused, then kept with --force
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds an earlier export and also files no firm export wrote \(notes.txt\)"):
        _export(out, ["t1"])
    _export(out, [], force=True)
    assert _files(out) == [".argus-export.json", "README.md", "notes.txt", "train.jsonl"]
    assert (out / "train.jsonl").read_text() == ""


def test_an_empty_folder_is_written(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert _export(out, ["t1"]).n_instances == 3


# ---------------------------------------------------------------------------------------------------
# Bench names and bench.json


def _bench(root, folder="bench", name=None):
    bench = root / folder
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text(json.dumps({"id": "p0", "prompt": "A kite"}) + "\n")
    if name:
        (bench / "bench.json").write_text(json.dumps({"name": name}))
    return bench


def test_index_html_is_no_benchs_name(tmp_path, monkeypatch):
    from argus_dagster.infra.environment import SettingError
    from argus_dagster.infra.settings import evaluation_settings

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    cands = tmp_path / "cands"
    # a folder's own name, --name, and bench.json's name (in any case)
    for bench, name, taken in ((_bench(tmp_path, "index.html"), None, "index.html"),
                               (_bench(tmp_path, "b2"), "index.html", "index.html"),
                               (_bench(tmp_path, "b3", "INDEX.HTML"), None, "INDEX.HTML")):
        with pytest.raises(SettingError) as err:
            evaluation_settings(bench, cands, name=name)
        assert str(err.value) == (f"the bench name {taken!r} is reserved ($ARGUS_HOME/benches/{taken} is the "
                                  "home's index of evaluations): name the bench with --name")
    assert evaluation_settings(tmp_path / "index.html", cands, name="kites").bench == "kites"


def test_a_renamed_bench_json_says_so(tmp_path, monkeypatch):
    from argus_dagster.infra.environment import SettingError
    from argus_dagster.infra.settings import evaluation_settings, record_evaluation

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    bench, cands = _bench(tmp_path, "b", "kites"), tmp_path / "cands"
    record_evaluation(evaluation_settings(bench, cands))
    assert evaluation_settings(bench, cands).bench == "kites"
    (bench / "bench.json").write_text(json.dumps({"name": "kites-v2"}))
    with pytest.raises(SettingError) as err:
        evaluation_settings(bench, cands)
    assert str(err.value) == (f"{bench / 'bench.json'} names the bench 'kites-v2', but this folder is recorded as "
                              "'kites': give --name kites-v2 (a new evaluation under that name) or --name kites "
                              "(the recorded one)")
    assert evaluation_settings(bench, cands, name="kites").bench == "kites"
    assert evaluation_settings(bench, cands, name="kites-v2").bench == "kites-v2"


# ---------------------------------------------------------------------------------------------------
# Page fields bounded


class _Cells(HTMLParser):
    """The text of each table cell of a page, by row."""

    def __init__(self):
        super().__init__()
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_a_huge_criterion_text_is_cut_on_its_page(tmp_path):
    from argus_dagster.outputs.report import MAX_FIELD, FrameRow, render_video_report

    huge = "The kite stays red " * 50_000  # 950,000 characters
    video = {"final_score": 5.0, "base_score": 5.0, "cap_alpha": 0.5, "caps_fired": [], "n_scored": 1,
             "n_criteria": 1, "weight_scored": 1.0, "judge": "evidence-only", "needs_vlm": [], "error": None}
    criteria = [{"criterion_id": "c1", "dimension": 1, "type": "soft", "importance": "high", "requirement": huge,
                 "scoring_rule": "10: met", "score": 5.0, "rationale": "half"}]
    page = render_video_report(task="T2V", model="m", input_id="p0", prompt="A kite", conditions=[],
                               output=FrameRow("output"), video=video, criteria=criteria)
    assert len(page) < 100_000
    parser = _Cells()
    parser.feed(page)
    row = next(r for r in parser.rows if r and r[0].startswith("c1"))
    requirement = row[1]
    assert requirement.startswith(huge[:MAX_FIELD])
    assert f"[{len(huge) - MAX_FIELD:,} more characters not shown]" in requirement


# ---------------------------------------------------------------------------------------------------
# Bad rubrics, prompts and manifests bounded where they are read


def test_a_rubric_nested_200000_levels_is_one_error_and_never_a_recursion(tmp_path):
    from argus_dagster.method.rubric.frozen import written_as_generated
    from argus_dagster.method.rubric.lenient import read_rubric_file
    from argus_dagster.method.rubric.schema import MAX_JSON_DEPTH, RubricError

    deep = '{"criteria": ' + "[" * 200_000 + "]" * 200_000 + "}"
    path = tmp_path / "p1.json"
    path.write_text(deep)
    with pytest.raises(RubricError) as err:
        read_rubric_file(str(path))
    assert str(err.value) == (f"{path}: invalid rubric: JSON nested deeper than {MAX_JSON_DEPTH} levels; a rubric "
                              "nests a few")
    assert written_as_generated(deep.encode()) is False  # the rubric_files source reads every file so
    # brackets inside strings do not count, and a rubric's own nesting is read
    shallow = {"criteria": [{"id": "c1", "text": "[[[[" * 40, "evidence_plan": {"tool_sequence": [{"args": {}}]}}],
               "generator": {"input_hash": "h"}}
    path.write_text(json.dumps(shallow))
    assert read_rubric_file(str(path))[0].criteria[0].criterion == "[[[[" * 40
    assert written_as_generated(json.dumps(shallow).encode()) is True


def test_a_prompt_over_the_bound_is_its_rows_error(tmp_path):
    from argus_dagster.method.bench import MAX_PROMPT, read_task

    (tmp_path / "T2V").mkdir()
    lines = [{"id": "ok", "prompt": "A kite"}, {"id": "big", "prompt": "a" * 1_040_000}]
    (tmp_path / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    rows = {r["input_id"]: r for r in read_task(tmp_path, "T2V")}
    assert rows["ok"]["error"] is None
    assert rows["big"]["error"] == (f"input 'big' field 'prompt': 1,040,000 characters (at most {MAX_PROMPT:,}: the "
                                    "rubric generator's parser and the judge read a prompt whole); shorten it")


def test_the_error_summary_groups_by_kind():
    from argus_dagster.outputs.history_words import error_summary

    errors = [("T2V", f"!line-{n}", f"line {n}: input 'p0' is listed again (first on line 1); ids must be unique: "
                                    "rename or remove this line") for n in range(2, 2002)]
    errors += [("T2V", "!line-2002", "line 2002: not UTF-8 text (byte 3 of the line); save the manifest as UTF-8")]
    lines = error_summary(errors).splitlines()
    assert lines[1] == "2001 rows with an error (they are not scored; the rest are):"
    assert lines[2] == "  2000 x input … is listed again (first on line N)"
    assert lines[6] == "      ... and 1997 more"
    assert lines[7] == "  1 x not UTF-8 text (byte N of the line)" and len(lines) == 9


def test_a_criterion_text_of_megabytes_is_rejected_and_the_others_stand(tmp_path):
    from argus_dagster.method.rubric.lenient import MAX_CRITERION_TEXT, read_rubric_file
    from argus_dagster.method.rubric.schema import RubricError

    def crit(cid, text):
        return {"id": cid, "dimension": 1, "criterion": text, "type": "soft", "importance": "high",
                "scoring_rule": "10: met"}

    path = tmp_path / "p0.json"
    path.write_text(json.dumps({"criteria": [crit("huge", "The kite is red. " * 500_000), crit("ok", "A red kite")]}))
    rubric, log = read_rubric_file(str(path))
    assert [c.id for c in rubric.criteria] == ["ok"]
    assert [line for line in log if line.startswith("rejected")] == [f"rejected criterion 'huge' field 'criterion': 8,500,000 characters (at most {MAX_CRITERION_TEXT:,}: "
                   "one requirement, said in a sentence or two)"]
    path.write_text(json.dumps({"criteria": [crit("huge", "x" * (MAX_CRITERION_TEXT + 1))]}))
    with pytest.raises(RubricError, match="no readable criterion: criterion 'huge' field 'criterion': 4,001 characters"):
        read_rubric_file(str(path))
