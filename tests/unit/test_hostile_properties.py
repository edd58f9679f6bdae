"""Properties of the readers and of id/model-name handling under any input (Hypothesis): every input
gives a row or a clear error, never an exception that stops the run, never a path outside its root."""

import json
import os
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from argus_dagster.infra.media import MediaError, s3_cache_path
from argus_dagster.infra.names import (
    file_name,
    folder_name,
    input_id_problem,
    is_single_component,
    json_text_problem,
    lookup_names,
    model_name_problem,
    shown,
    text_problem,
)
from argus_dagster.method.bench import bench_rubric_paths, find_candidate, find_candidates, read_task
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.schema import RubricError, load_rubric_file, parse_rubric
from argus_dagster.method.rubric.store import resolve_rubric

# No example database: a run leaves nothing behind in the working tree.
SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# Names an adversary would try, mixed with anything Hypothesis makes up.
NASTY = ["..", ".", "../../../escaped", "/etc/passwd", "a/b", "a\\b", "~x", "~~x", "CON", "a|b", "model[1]",
         "x...y", " lead", "trail ", "\x00", "猫 cat", "犬 cat", "good model", "good_model", "a" * 300, "",
         "%2e%2e%2fx", "~%2E%2E"]
names = st.one_of(st.sampled_from(NASTY), st.text(max_size=60), st.text(alphabet="./\\~%_- aA", max_size=12))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), names)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)
media_refs = st.one_of(st.sampled_from(["first.png", "text.png", "../outside.png", "/etc/hostname", "", "missing.png",
                                        ".", "..", "sub/../first.png"]), names, json_values)


def _inside(path: Path, root: Path) -> bool:
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    return path == root or root in path.parents


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


# ------------------------------------------------------------------------------------------ names

@SETTINGS
@given(a=names, b=names)
def test_file_name_is_injective_and_one_folder_entry(a, b):
    fa, fb = file_name(a), file_name(b)
    assert is_single_component(fa) and not fa.startswith(".") and len(fa.encode()) <= 200
    assert (fa == fb) == (a == b)


@SETTINGS
@given(a=st.one_of(names, st.sampled_from(["judge=Qwen/Qwen2.5-VL-72B-Instruct,vlm-only", "judge=a%3Db", "my bench"])),
       b=names)
def test_an_evaluation_folder_is_injective_and_never_percent_encoded(a, b):
    """A bench's or profile's folder holds a SQLite instance, whose URL a ``%`` in its path would break."""
    fa, fb = folder_name(a), folder_name(b)
    assert is_single_component(fa) and not fa.startswith((".", "-")) and "%" not in fa and len(fa) <= 120
    assert (fa == fb) == (a == b)
    assert folder_name("judge=qwen2.5-vl-72b,vlm-only") == "judge=qwen2.5-vl-72b,vlm-only"  # readable as it is


@SETTINGS
@given(input_id=names, model=names)
def test_no_id_or_model_name_leads_out_of_its_folder(input_id, model):
    root = Path("/srv/bench")
    for p in bench_rubric_paths_for(root, input_id):
        assert p.parent == root / "T2V" / "rubrics"
    cache = Path("/srv/cache")
    for uri in (f"s3://bkt/{input_id}", f"s3://{model}/{input_id}", f"s3://bkt/{model}/../{input_id}"):
        try:
            local = s3_cache_path(uri, cache)
        except MediaError as exc:  # a clear error naming the URI, never a path elsewhere
            assert uri in str(exc)
        else:
            assert _inside(local, cache / "s3") and local != cache / "s3"
    if model_name_problem(model) is None:
        assert is_single_component(model) and not any(c in model for c in "|,[]")


def bench_rubric_paths_for(root: Path, input_id: str) -> list[Path]:
    """The rubric paths of an id in a bench whose T2V folder exists (a real folder is needed)."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "T2V").mkdir()
        return [root / p.relative_to(d) for p in bench_rubric_paths(d, "T2V", input_id)]


# Model names and whether they may name a candidate folder, by the rules of argus_dagster.infra.names
# (written out here, not asked of the function under test).
MODEL_NAME_TABLE = [
    ("m", True), ("model-1", True), ("Qwen2.5-VL-7B", True), ("a.b", True), ("a..b", True), ("..x", True),
    ("x..", True), (".hidden", True), ("good model", True), ("猫 cat", True), ("~x", True), ("%2e%2e", True),
    ("a" * 100, True),
    (".", False), ("..", False), ("...", False), ("a...b", False), ("", False), (" ", False), ("a/b", False),
    ("../m", False), ("./m", False), ("a\\b", False), ("a|b", False), ("a,b", False), ("m[1]", False),
    ("a*", False), ("a?", False), (" lead", False), ("trail ", False), ("a" * 101, False), ("a\x00b", False),
    ("a\nb", False),
    # Not UTF-8: a folder's byte 0xff as Python reads the name (os.fsdecode), and a lone surrogate.
    ("\udcff", False), ("wan-\udcfe2", False), ("x\ud800", False), ("猫\U0001F600", True),
]


@pytest.mark.parametrize("model, ok", MODEL_NAME_TABLE, ids=[repr(m)[:24] for m, _ in MODEL_NAME_TABLE])
def test_which_model_names_are_accepted(model, ok):
    assert (model_name_problem(model) is None) == ok, model_name_problem(model)


def _plant(folder: Path, input_id: str) -> list[Path]:
    """A video under every name the store may hold ``input_id`` by (its own, its file name), in ``folder``."""
    out = []
    for stem in lookup_names(input_id):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{stem}.mp4").write_bytes(b"v")
        except (OSError, ValueError):  # a name too long for this file system, or a NUL
            continue
        out.append(folder / f"{stem}.mp4")
    return out


def _own_folder(cands: Path, model: str) -> Path | None:
    """``cands/T2V/<model>`` when that is one entry of ``cands/T2V`` by this file system's reading of the path
    (not ``.``, ``..`` or a deeper path); None otherwise."""
    try:
        folder = Path(os.path.abspath(cands / "T2V" / model))
    except ValueError:
        return None
    return folder if folder.parent == Path(os.path.abspath(cands / "T2V")) and folder.name == model else None


@pytest.mark.parametrize("model, ok", MODEL_NAME_TABLE, ids=[repr(m)[:24] for m, _ in MODEL_NAME_TABLE])
def test_a_candidate_is_found_only_in_an_acceptable_model_folder(tmp_path, model, ok):
    """The same video planted at every level around the store (beside the model folders, in the task
    folder, above the store): an acceptable name finds its own folder's, any other name nothing."""
    root = tmp_path / "root"
    cands = root / "cands"
    for level in (tmp_path, root, cands, cands / "T2V", cands / "T2V" / "m"):
        _plant(level, "x")
    own = _own_folder(cands, model)
    if own is not None:
        _plant(own, "x")
    found = find_candidates(cands, "T2V", model, ["x"])
    if ok:
        assert found == {"x": [("", cands / "T2V" / model / "x.mp4")]}
    else:
        assert found == {}


@SETTINGS
@example(input_id="x", model=".")
@example(input_id="x", model="..")
@example(input_id="../x", model="..")
@example(input_id="x", model="./.")
@example(input_id="x", model="m")
@example(input_id="猫 cat", model=".")
@example(input_id="~x", model="..")
@given(input_id=names, model=names)
def test_a_candidate_is_only_ever_found_inside_its_model_folder(input_id, model):
    """Whatever the names, a video of ``input_id`` is planted under every name it may be stored by, at
    every level around the store, and inside the model's folder when that is one folder entry: what is
    found lies in that folder, and a video there is found unless the name is refused."""
    with tempfile.TemporaryDirectory() as outer:
        root = Path(outer) / "root"
        cands = root / "cands"
        for level in (Path(outer), root, cands, cands / "T2V", cands / "T2V" / "m"):
            _plant(level, input_id)
        own = _own_folder(cands, model)
        planted = _plant(own, input_id) if own is not None else []
        found = find_candidate(cands, "T2V", model, input_id)
        if found is not None:
            assert own is not None and Path(os.path.abspath(found)).parent == own, (found, own)
        elif planted and input_id_problem(input_id) is None:
            assert model_name_problem(model) is not None  # a refused name, never a missed video


# ------------------------------------------------------------------------------------------ manifest

@pytest.fixture(scope="module")
def bench_media(tmp_path_factory):
    """Media a manifest may point at: a real image, a text file named .png, a file outside the bench."""
    root = tmp_path_factory.mktemp("props")
    return root


# Mostly rows that get past the id and the prompt, so the condition fields are exercised too.
row_dicts = st.fixed_dictionaries(
    {"id": st.one_of(st.sampled_from(["v0", "v1", "猫 cat"]), names, json_values),
     "prompt": st.one_of(st.just("A ball rolls."), names, json_values)},
    optional={"first_frame": media_refs, "subject_images": st.one_of(media_refs, st.lists(media_refs, max_size=3)),
              "source_video": media_refs, "input_id": json_values})
lines = st.one_of(row_dicts.map(lambda r: json.dumps(r, ensure_ascii=False)),
                  row_dicts.map(json.dumps), st.text(max_size=40), json_values.map(json.dumps))


@SETTINGS
@given(rows=st.lists(lines, max_size=8), bom=st.booleans(), garbage=st.one_of(st.none(), st.binary(max_size=30)))
def test_any_manifest_gives_rows_or_clear_errors_and_nothing_outside_the_bench(rows, bom, garbage):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        bench = root / "bench"
        (bench / "T2V").mkdir(parents=True)
        cv2.imwrite(str(bench / "T2V" / "first.png"), np.zeros((8, 8, 3), np.uint8))
        (bench / "T2V" / "text.png").write_text("not an image")
        (root / "outside.png").write_bytes((bench / "T2V" / "first.png").read_bytes())
        data = ("\n".join(r.replace("\n", " ").replace("\r", " ") for r in rows)).encode("utf-8")
        if garbage is not None:
            data += b"\n" + garbage
        (bench / "T2V" / "manifest.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
        before = _files(root)
        out = read_task(bench, "T2V")  # never raises
        assert _files(root) == before
        ids = [r["input_id"] for r in out if r["error"] is None]
        assert len(ids) == len(set(ids))  # a duplicate id is never a second good row
        for r in out:
            assert isinstance(r["input_id"], str) and r["task"] == "T2V"
            if r["error"] is None:
                assert input_id_problem(r["input_id"]) is None and r["prompt"].strip()
                for p in [r["first_frame"], r["source_video"], *r["subject_images"]]:
                    if p is not None:
                        assert _inside(Path(p), bench / "T2V") and Path(p).name != "text.png"
            else:
                assert r["error"].strip() and len(r["error"]) < 2000


@SETTINGS
@given(input_id=st.one_of(names, st.integers()), prompt=st.text(min_size=1, max_size=30).filter(str.strip))
def test_any_acceptable_id_reads_back_as_itself(input_id, prompt):
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "T2V").mkdir()
        (Path(d) / "T2V" / "manifest.jsonl").write_text(json.dumps({"id": input_id, "prompt": prompt}) + "\n",
                                                       encoding="utf-8")
        rows = read_task(d, "T2V")
        expected = str(input_id)
        if input_id_problem(expected) is None:
            assert [(r["input_id"], r["error"]) for r in rows] == [(expected, None)]
        else:
            assert all(r["error"] for r in rows)


# Text from outside and what the policy says of it (names.text_problem): the character and code point of
# its first lone surrogate, counted by hand; None for text.
# Text from outside, what the policy says of it (names.text_problem: the character and code point of its
# first lone surrogate, counted by hand; None for text) and how a message shows it (names.shown).
TEXT_TABLE = [
    ("plain", None, "plain"), ("猫 cat \U0001F600", None, "猫 cat \U0001F600"),
    ("\udcff", (1, "DCFF"), "\\xff"),  # a name's byte 0xff, as os.fsdecode reads it
    ("wan-\udcfe2", (5, "DCFE"), "wan-\\xfe2"),
    ("ab\ud800", (3, "D800"), "ab\\ud800"),  # a "\ud800" escape that json.loads read
    ("a\udfff\ud800", (2, "DFFF"), "a\\udfff\\ud800"),
    ("\ud83d\ude00", (1, "D83D"), "\\ud83d\\ude00"),  # a pair left as two code points is not text either
]


@pytest.mark.parametrize("text, where, printed", TEXT_TABLE, ids=[ascii(t) for t, *_ in TEXT_TABLE])
def test_text_that_is_not_utf8_is_refused_by_its_first_lone_surrogate_and_shown_printably(text, where, printed):
    expected = None if where is None else f"not UTF-8 text (character {where[0]} is a lone surrogate, U+{where[1]})"
    assert text_problem(text) == expected
    assert input_id_problem(text) == (None if where is None else f"the id is {expected}")
    assert shown(text) == printed


def test_a_parsed_json_value_is_refused_by_the_field_that_holds_the_surrogate():
    line = json.loads(r'{"id": "a", "media": {"frames": ["ok", "b\udcff"]}, "prompt": "c"}')
    assert json_text_problem(line) == "field 'media.frames[1]': not UTF-8 text (character 2 is a lone surrogate, U+DCFF)"
    assert json_text_problem(json.loads(r'{"x\ud800": 1}')) == ("a field name: not UTF-8 text (character 2 is a lone "
                                                                "surrogate, U+D800)")
    assert json_text_problem(json.loads(r'{"a": "\ud83d\ude00", "b": [1, null, true]}')) is None  # a pair is text
    deep = json.loads("[" * 900 + r'"\ud800"' + "]" * 900)  # as deep as json.loads reads: walked without recursion
    assert json_text_problem(deep).endswith("...': not UTF-8 text (character 1 is a lone surrogate, U+D800)")


RUBRIC_TEXT = ('{"criteria": [{"id": "c1", "dimension": 1, "criterion": "A cat %s sits.", "type": "soft", '
               '"importance": "high", "scoring_rule": "0-10"}]}')


def test_a_rubric_file_with_a_lone_surrogate_is_a_rubric_error_and_one_with_a_pair_loads(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(RUBRIC_TEXT % r"\ud800", encoding="ascii")
    with pytest.raises(RubricError, match=r"r\.json: invalid rubric: field 'criteria\[0\]\.criterion': not UTF-8 text "
                                          r"\(character 7 is a lone surrogate, U\+D800\)"):
        load_rubric_file(str(path))
    path.write_text(RUBRIC_TEXT % r"\ud83d\ude00", encoding="ascii")
    assert load_rubric_file(str(path)).criteria[0].criterion == "A cat \U0001F600 sits."


# ------------------------------------------------------------------------------------------ rubrics

def _field(valid, *more):
    """Mostly a valid value, sometimes anything: rubrics that get past the first check too."""
    return st.one_of(valid, valid, valid, json_values, *more)


criteria = st.fixed_dictionaries({
    "id": _field(st.sampled_from(["c1", "c2", "猫"]), names), "dimension": _field(st.integers(1, 22), st.integers()),
    "criterion": _field(st.just("The ball rolls left.")), "type": _field(st.sampled_from(["hard", "soft", "HARD"])),
    "importance": _field(st.sampled_from(["high", "medium", "low", "High"])), "scoring_rule": _field(st.just("0-10")),
}, optional={
    "fail_threshold": _field(st.floats(0, 10), st.floats()), "hard_cap": _field(st.sampled_from([2, 4, 6, None])),
    "failure_modes": json_values, "derivable_from": _field(st.sampled_from(["prompt", "input_bundle"])),
    "evidence_plan": st.one_of(json_values, st.fixed_dictionaries({"tool_sequence": st.lists(
        st.fixed_dictionaries({"tool": names, "args": json_values}), max_size=3)}, optional={
        "target_entity": json_values, "reference_source": json_values}))})
rubrics = st.one_of(json_values, st.fixed_dictionaries({"criteria": st.one_of(st.lists(criteria, max_size=4), json_values)}),
                    st.fixed_dictionaries({"rubric": st.fixed_dictionaries({"criteria": st.lists(criteria, max_size=3)})}))


@SETTINGS
@given(data=rubrics)
def test_any_rubric_validates_or_is_a_rubric_error(data):
    try:
        rubric = parse_rubric(data, "r.json")
    except RubricError as exc:
        assert str(exc).startswith("r.json: invalid rubric: ")
    else:
        assert rubric.criteria and all(1 <= c.dimension <= 22 for c in rubric.criteria)
        assert len({c.id for c in rubric.criteria}) == len(rubric.criteria)
        rubric.content_hash()


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=200), rubrics.map(lambda r: json.dumps(r).encode()),
                     st.just(b"[" * 5000), st.just(b"\xef\xbb\xbf{}")))
def test_any_rubric_file_loads_or_is_a_rubric_error(raw):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "r.json"
        p.write_bytes(raw)
        try:
            load_rubric_file(str(p))
        except RubricError as exc:
            assert str(p) in str(exc)


@SETTINGS
@given(input_id=names.filter(lambda s: input_id_problem(s) is None))
def test_a_rubric_is_frozen_inside_the_bench_whatever_the_id(input_id):
    from argus_dagster.method.rubric.offline import generate_offline

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        bench, frozen = root / "a" / "b" / "bench", root / "a" / "b" / "home"
        (bench / "T2V").mkdir(parents=True)
        inst = InputInstance(input_id, "A red ball rolls left.", content_hash="h")
        before = _files(root)
        rubric, source, *_ = resolve_rubric(inst, "T2V", bench, frozen, {"backend": "offline"}, generate_offline)
        new = _files(root) - before
        assert source == "generated" and new and all(_inside(p, bench / "T2V" / "rubrics") for p in new)
        again, source2, *_ = resolve_rubric(inst, "T2V", bench, frozen, dict(rubric.generator), generate_offline)
        assert source2 == "loaded" and again.content_hash() == rubric.content_hash()


# ------------------------------------------------------------------------------------ model names

model_names = st.one_of(names, st.text(alphabet="ab*?[]{}|,. -_\\", min_size=1, max_size=8))


@SETTINGS
@given(model=model_names)
def test_an_acceptable_model_name_is_a_partition_key_and_a_literal_table_path(model):
    """What a model name must survive: Dagster's multi-partition key string, and polars reading the
    table stored under ``<asset>/<model>/<task>.parquet`` (a path it treats as a glob)."""
    import dagster as dg
    import polars as pl

    from argus_dagster.assets.partitions import task_model_partitions

    if model_name_problem(model) is not None:
        return
    key = dg.MultiPartitionKey({"task": "T2V", "model": model})
    assert task_model_partitions.get_partition_key_from_str(str(key)).keys_by_dimension == {"task": "T2V",
                                                                                            "model": model}
    with tempfile.TemporaryDirectory() as d:
        for i, folder in enumerate([model, model + "x", "ab", "a", "b", "x" + model]):
            if is_single_component(folder) and not (Path(d) / folder).exists():
                (Path(d) / folder).mkdir()
                pl.DataFrame({"model": [folder], "i": [i]}).write_parquet(Path(d) / folder / "T2V.parquet")
        got = pl.read_parquet(Path(d) / model / "T2V.parquet")
        assert got["model"].to_list() == [model]
