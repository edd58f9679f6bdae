"""argus_dagster.outputs.compare_pages: a pair's comparison page read element by element against
``compare()``'s numbers; hostile input ids shown as text; every link to a report resolving to the file
the reports asset writes (model names with ``/``, non-ASCII and 300 characters); the pairs written are
the win matrices' own; and the overview's matrix cells link to them, both ways round."""

import posixpath
import re
from html.parser import HTMLParser
from urllib.parse import unquote

import polars as pl
import pytest

from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.method.compare import GATE_LEVEL, OVERALL, compare, dimension_label, smallest_p
from argus_dagster.outputs.compare_pages import (
    matrix_pairs,
    pair_path,
    render_compare_page,
    write_compare_pages,
)
from argus_dagster.outputs.overview import WIN_MATRIX_MODELS, render_overview

EVIL = "<script>alert(1)</script>"
ODD_ID = "猫 é/../x"
A = "ckpt/1000 猫"  # sorts before B: the page shows B against A
B = "z" * 300
IDS = ["p0", "p1", "p2", "p3", "p4", "p5", EVIL, ODD_ID]
VOID = {"br", "meta", "img", "input", "hr", "link", "source"}


class Node:
    def __init__(self, tag: str, attrs: dict, parent=None):
        self.tag, self.attrs, self.parent, self.children, self.parts = tag, attrs, parent, [], []

    @property
    def text(self) -> str:
        return "".join(p if isinstance(p, str) else p.text for p in self.parts)

    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def all(self, tag: str, cls: str | None = None) -> list["Node"]:
        out = []
        for c in self.children:
            if c.tag == tag and (cls is None or cls in c.classes()):
                out.append(c)
            out += c.all(tag, cls)
        return out

    def one(self, tag: str, cls: str | None = None) -> "Node":
        found = self.all(tag, cls)
        assert len(found) == 1, (tag, cls, len(found))
        return found[0]


class Tree(HTMLParser):
    """The page as a tree of elements, each with its attributes and its text as a person reads it."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.root = self.at = Node("#root", {})
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.at)
        self.at.children.append(node)
        self.at.parts.append(node)
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag):
        node = self.at
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.at = node.parent

    def handle_data(self, data):
        self.at.parts.append(data)


def _scores(model: str, finals: dict[str, float], task: str = "T2V", sample: str = "") -> pl.DataFrame:
    return pl.DataFrame({"task": task, "model": model, "input_id": list(finals), "sample": sample,
                         "final_score": list(finals.values()), "judge": "evidence-only"})


CRITERIA_SCHEMA = {"task": pl.String, "model": pl.String, "input_id": pl.String, "sample": pl.String,
                   "criterion_id": pl.String, "dimension": pl.Int64, "type": pl.String, "hard_cap": pl.Int64,
                   "fail_threshold": pl.Float64, "score": pl.Float64, "rationale": pl.String, "judge": pl.String}


def _criteria(model: str, rows: list[tuple], task: str = "T2V") -> pl.DataFrame:
    """rows: (input_id, sample, criterion_id, dimension, type, hard_cap, score, rationale)."""
    return pl.DataFrame([{"task": task, "model": model, "input_id": i, "sample": s, "criterion_id": c, "dimension": d,
                          "type": t, "hard_cap": cap, "fail_threshold": 5.0, "score": sc, "rationale": r,
                          "judge": "evidence-only"} for i, s, c, d, t, cap, sc, r in rows], schema=CRITERIA_SCHEMA)


def _tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two models on T2V (8 inputs, B with two samples of p0) and I2V (3 inputs, too few for p < 0.05)."""
    fa = {i: 5.0 + (k % 4) for k, i in enumerate(IDS)}
    fb = {i: s - 1.0 + 0.3 * (k % 3) for k, (i, s) in enumerate(fa.items())}
    del fb["p0"]
    videos = pl.concat([_scores(A, fa), _scores(B, fb), _scores(B, {"p0": 9.0}, sample="0"),
                        _scores(B, {"p0": 8.0}, sample="1"), _scores(A, {"q0": 4.0, "q1": 6.0, "q2": 7.0}, "I2V"),
                        _scores(B, {"q0": 5.0, "q1": 6.0, "q2": 9.0}, "I2V")])
    rows_a, rows_b = [], []
    for k, i in enumerate(IDS):
        rows_a += [(i, "", "identity", 1, "hard", 2, 8.0 if k % 2 else 3.0, f'A sees <b>it</b> & "{i}"'),
                   (i, "", "motion", 9, "soft", None, 6.0 + k % 3, "moves")]
        for s in (("0", "1") if i == "p0" else ("",)):
            rows_b += [(i, s, "identity", 1, "hard", 2, 2.0 if k % 2 else 7.0, f"B does not see it on {i}"),
                       (i, s, "motion", 9, "soft", None, 5.5 + k % 2, "moves less")]
    criteria = pl.concat([_criteria(A, rows_a), _criteria(B, rows_b)])
    return videos, criteria


def _p(p) -> str:
    return "-" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001")


def _compared(videos, criteria):
    return compare(videos.filter(pl.col("model") == A), videos.filter(pl.col("model") == B),
                   criteria.filter(pl.col("model") == A), criteria.filter(pl.col("model") == B), a=A, b=B)


def _cells(tr: Node) -> dict[str, str]:
    return {sorted(td.classes() - {"num"})[0]: td.text for td in tr.all("td")}


def test_each_cell_of_a_row_is_compares_number_and_b_minus_a():
    videos, criteria = _tables()
    c = _compared(videos, criteria)
    tree = Tree(render_compare_page(c, A, B)).root
    assert tree.one("h1").text == f"{B} against {A}"
    shown = {(tr.attrs["data-task"], tr.attrs["data-dimension"]): _cells(tr) for tr in tree.all("tr")
             if "data-dimension" in tr.attrs}
    assert set(shown) == {("T2V", OVERALL), ("T2V", "1"), ("T2V", "9"), ("I2V", OVERALL)} and c.rows.height == 4
    for r in c.rows.iter_rows(named=True):
        cells = shown[(r["task"], r["dimension"])]
        assert cells == {"dimension": dimension_label(r["dimension"]), "n": str(r["n_inputs"]),
                         "mean-a": f"{r['mean_a']:.2f}", "mean-b": f"{r['mean_b']:.2f}", "diff": f"{r['diff']:+.2f}",
                         "interval": f"{r['ci_low']:+.2f} {r['ci_high']:+.2f}", "p": _p(r["p_value"]),
                         "wtl": f"{r['wins']}/{r['ties']}/{r['losses']}"}, (r["task"], r["dimension"])
    overall = c.rows.filter((pl.col("task") == "T2V") & (pl.col("dimension") == OVERALL)).row(0, named=True)
    assert overall["n_inputs"] == len(IDS) and overall["diff"] == pytest.approx(overall["mean_b"] - overall["mean_a"])
    assert overall["diff"] != 0
    # what the scores cover: each side's judges and scored criteria
    cover = tree.one("p", "cover")
    assert cover.one("span", "judges-a").text == cover.one("span", "judges-b").text == "evidence-only"
    assert (cover.one("span", "criteria-a").text, cover.one("span", "criteria-b").text) == (
        str(c.criteria["a"]), str(c.criteria["b"]))
    assert tree.all("p", "judged-differently") == []
    # the note where p cannot reach 0.05: I2V's 3 inputs, not T2V's 8
    sections = {s.attrs["data-task"]: s for s in tree.all("section")}
    assert set(sections) == {"T2V", "I2V"} and sections["T2V"].all("p", "small-n") == []
    assert smallest_p(3) >= GATE_LEVEL > smallest_p(8)
    assert sections["I2V"].one("p", "small-n").text.startswith(f"on 3 inputs p cannot go below {smallest_p(3):.3g};")


def test_movers_and_flips_read_with_both_rationales_and_hostile_ids_shown_as_text():
    videos, criteria = _tables()
    c = _compared(videos, criteria)
    tree = Tree(render_compare_page(c, A, B)).root
    assert tree.all("script") == []  # the <script> input id is text, never an element
    [section] = [s for s in tree.all("section") if s.attrs["data-task"] == "T2V"]
    movers = [(tr.attrs["data-task"], tr.attrs["data-input"], _cells(tr)) for tr in section.one("table", "movers").all("tr")
              if "data-input" in tr.attrs]
    t2v = [m for m in c.movers if m["task"] == "T2V"]
    assert [(t, i) for t, i, _ in movers] == [("T2V", m["input_id"]) for m in t2v]
    for (_, _, cells), m in zip(movers, t2v):
        assert cells["input"] == m["input_id"] and cells["diff"] == f"{m['diff']:+.2f}"
        assert cells["scores"] == f"{m['score_a']:.2f} → {m['score_b']:.2f}"
    flips = {(tr.attrs["data-input"], tr.attrs["data-criterion"]): _cells(tr) for tr in tree.all("tr")
             if "data-criterion" in tr.attrs}
    assert len(flips) == len(c.flips) > 0 and (EVIL, "identity") in flips and (ODD_ID, "identity") in flips
    for f in c.flips:
        cells = flips[(f["input_id"], f["criterion_id"])]
        assert cells["input"] == f["input_id"] and cells["criterion"] == f["criterion_id"]
        assert cells["dimension"] == f["dimension"] and cells["type"] == f["type"]
        assert cells["hard-cap"] == ("-" if f["hard_cap"] is None else str(f["hard_cap"]))
        assert cells["verdict-a"] == f"{f['verdict_a']} {f['score_a']:.2f}"
        assert cells["verdict-b"] == f"{f['verdict_b']} {f['score_b']:.2f}"
        assert cells["threshold"] == f"{f['fail_threshold']:.2f}"
        assert (cells["rationale-a"], cells["rationale-b"]) == (f["rationale_a"], f["rationale_b"])
    assert flips[(EVIL, "identity")]["rationale-a"] == f'A sees <b>it</b> & "{EVIL}"'  # markup shown as written


def test_every_report_link_resolves_to_the_report_file(tmp_path):
    """Written to disk beside the reports the reports asset writes (the first sample's where an input
    has several): each link, joined with the page's folder, is that file; a report not written is
    named, not linked."""
    videos, criteria = _tables()
    reports = tmp_path / "reports"
    c = _compared(videos, criteria)
    missing = (c.flips[-1]["task"], B, c.flips[-1]["input_id"], c.flips[-1]["sample_b"])
    for v in videos.iter_rows(named=True):
        if (v["task"], v["model"], v["input_id"], v["sample"]) != missing:
            page = reports / v["task"] / file_name(v["model"]) / (sample_file_name(v["input_id"], v["sample"]) + ".html")
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text("report")
    [written] = write_compare_pages(reports, [(B, A)], videos, criteria)
    assert written == reports / "pairs" / file_name(A) / (file_name(B) + ".html") == reports / pair_path(A, B)
    assert file_name(B).startswith("~~") and file_name(A).startswith("~")  # hashed, and percent-encoded
    tree = Tree(written.read_text(encoding="utf-8")).root
    folder = written.parent.relative_to(tmp_path).as_posix()
    resolved = []
    for tr in tree.all("tr"):
        if "data-input" not in tr.attrs:
            continue
        for side, model in (("report-a", A), ("report-b", B)):
            links = tr.all("a", side)
            if not links:
                assert tr.one("span", side).text == f"{side[-1].upper()}: no report"
                assert (tr.attrs["data-task"], model, tr.attrs["data-input"]) == missing[:3]
                resolved.append(None)
                continue
            target = posixpath.normpath(posixpath.join(folder, unquote(links[0].attrs["href"])))
            iid = tr.attrs["data-input"]
            sample = ("0" if (model, iid) == (B, "p0") else "") if "data-criterion" not in tr.attrs else next(
                f[f"sample_{side[-1]}"] for f in c.flips if (f["input_id"], f["criterion_id"]) ==
                (iid, tr.attrs["data-criterion"]))
            assert target == f"reports/{tr.attrs['data-task']}/{file_name(model)}/{sample_file_name(iid, sample)}.html"
            assert (tmp_path / target).read_text() == "report"
            resolved.append(target)
    assert resolved.count(None) >= 1 and len(resolved) - resolved.count(None) > 10
    # the mover with two samples links its first sample's report
    assert f"reports/T2V/{file_name(B)}/{sample_file_name('p0', '0')}.html" in resolved
    back = tree.one("a", "overview").attrs["href"]
    assert posixpath.normpath(posixpath.join(folder, back)) == "reports/index.html"


def _board(models: list[str], task: str = "T2V") -> pl.DataFrame:
    n = len(models)
    return pl.DataFrame({"task": [task] * n, "model": models, "mean_final": [9.0 - 0.1 * k for k in range(n)],
                         "ci_low": [0.0] * n, "ci_high": [10.0] * n, "n_videos": [2] * n, "n_errors": [0] * n})


def test_the_pairs_are_the_win_matrices_own():
    """Of 23 models only the matrix's first 20 pair up (190 pairs at most); a model without a shared
    scored input pairs with none; a task's matrix adds its own pairs."""
    models = [f"m{k:02d}" for k in range(WIN_MATRIX_MODELS + 3)]
    videos = pl.concat([_scores(m, {"i0": 5.0, "i1": 6.0}) for m in models]
                       + [_scores("alone", {"i9": 5.0}), _scores("m21", {"j0": 1.0}, "I2V"),
                          _scores("m22", {"j0": 2.0}, "I2V"), _scores("m00", {"j1": 2.0}, "I2V")])
    lb = pl.concat([_board(models + ["alone"]), _board(["m21", "m22", "m00"], "I2V")])
    pairs = matrix_pairs(lb, videos)
    top = models[:WIN_MATRIX_MODELS]
    assert set(pairs) == {(x, y) for x in top for y in top if x < y} | {("m21", "m22")}
    assert len(pairs) == 190 + 1 and pairs == sorted(pairs)


def test_the_win_matrix_links_each_cell_to_its_pairs_page(tmp_path):
    videos = pl.concat([_scores(A, {"i0": 5.0, "i1": 7.0}), _scores(B, {"i0": 6.0, "i1": 4.0}),
                        _scores("c", {"i0": 1.0})])
    lb = _board([B, A, "c"])
    pages = {(x, y): pair_path(x, y) for x, y in matrix_pairs(lb, videos) if "c" not in (x, y)}
    tree = Tree(render_overview(tmp_path / "reports", lb, video_scores=videos, pair_pages=pages)).root
    matrix = tree.one("table", "winrate")
    cells = {(tr.attrs["data-model"], td.attrs["data-model"]): td for tr in matrix.all("tr") if "data-model" in tr.attrs
             for td in tr.all("td") if "data-model" in td.attrs}
    for row, column in ((A, B), (B, A)):
        [link] = cells[(row, column)].all("a", "compare-pair")
        assert unquote(link.attrs["href"]) == f"pairs/{file_name(A)}/{file_name(B)}.html"
        assert re.fullmatch(r"\d+%", link.text)
    assert cells[(A, "c")].all("a") == [] and cells[("c", B)].all("a") == []  # no page written for c's pairs
    plain = Tree(render_overview(tmp_path / "reports", lb, video_scores=videos)).root
    assert plain.one("table", "winrate").all("a") == []
