"""An evaluation never changes evaluator silently, and nothing it stored is overwritten: a judge switch
(no VLM, then the loopback VLM) is stated by `argus evaluate --plan` before it runs, recorded on its
runs, listed by `argus history` and readable afterwards through `argus diff`, each evaluator named
and every model's score before and after as stored."""

import io
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import polars as pl
import pytest

from argus_dagster.client import cli
from argus_dagster.infra.media import write_video
from tests.servers.openai_server import FakeVlmServer

from .chromium import launched, open_file
from .helpers import ROOT, pattern_clip, t2v_bench, without_argus_settings

pytestmark = pytest.mark.integration


class _Rows(HTMLParser):
    """The rows of a page's first table, each the text of its cells."""

    def __init__(self):
        super().__init__()
        self.rows, self._cell, self._done = [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and not self._done:
            self.rows.append([])
        elif tag in ("td", "th") and not self._done:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._done = True

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _cell(page: str, row: str, column: str) -> str:
    parser = _Rows()
    parser.feed(page)
    head, rows = parser.rows[0], parser.rows[1:]
    found = [r for r in rows if r[0] == row]
    assert len(found) == 1, parser.rows
    return found[0][head.index(column)]


def _where(stored) -> str:
    """Where a materialization's table lies: recorded relative to the evaluation's folder."""
    from argus_dagster.infra.settings import load_settings

    assert not stored.table.startswith("/"), stored.table
    return str(load_settings().evaluation_dir / stored.table)


def _rows_of(stored) -> int:
    return pl.read_parquet(io.BytesIO(open(_where(stored), "rb").read())).height


def _mean_of(stored) -> float:
    df = pl.read_parquet(io.BytesIO(open(_where(stored), "rb").read()))
    return float(df["final_score"].drop_nulls().mean())


def _what_changed(browser, path) -> tuple[dict, dict, list[str]]:
    """The overview's "What changed" section as a person reads it in Chromium: each part's text (the
    evaluator's before and after by their own elements), per model its before and after cells, and
    the console errors seen."""
    page, errors = open_file(browser, path)
    section = page.locator("section#changes")
    parts = dict(section.locator("ul.what-changed li").evaluate_all(
        "ls => ls.map(l => [l.dataset.part, l.textContent.split(': ').slice(1).join(': ')])"))
    parts["why"] = section.locator("ul.why-ran li.reason").evaluate_all("ls => ls.map(l => l.textContent)")
    parts["evaluator before"], parts["evaluator after"] = section.locator("li[data-part=evaluator]").evaluate(
        "l => [l.querySelector('.before') && l.querySelector('.before').textContent, l.querySelector('.after').textContent]")
    models = {r[0]: (float(r[1].split()[0]), float(r[2].split()[0]), r[3]) for r in section.locator(
        "table.changes-models tbody tr").evaluate_all(
        "rs => rs.map(r => [r.dataset.model].concat(['before', 'after', 'change'].map("
        "k => r.querySelector('td[data-key=' + k + ']').textContent)))")}
    links = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    page.close()
    return parts, models, errors + [h for h in links if h.startswith("file:") and not Path(unquote(urlsplit(h).path)).exists()]


def _passes_table(browser, path) -> list[tuple[str, str, float, float]]:
    """The sample browser's videos that moved between the two latest passes: (model, video, before, after)."""
    page, errors = open_file(browser, path)
    rows = page.locator("table.passes tbody tr").evaluate_all(
        "rs => rs.map(r => [r.dataset.model, r.children[2].textContent,"
        " r.querySelector('td[data-key=before]').textContent, r.querySelector('td[data-key=after]').textContent])")
    page.close()
    assert errors == [], errors
    return [(m, v, float(b), float(a)) for m, v, b, a in rows]


def test_a_judge_switch_is_planned_recorded_and_diffed(tmp_path, monkeypatch, capsys):
    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings
    from argus_dagster.records.history import materializations

    bench, cands = t2v_bench(tmp_path, n_inputs=2, model="m")
    for i in range(2):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i), 12)
    without_argus_settings(monkeypatch)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    where = ["--bench", str(bench), "--candidates", str(cands)]

    assert cli.main(["evaluate", *where]) == 0  # the evidence-only judge
    capsys.readouterr()
    with FakeVlmServer(served_model="judge-2026-11-q4") as srv:  # the id its answers name: an alias's checkpoint
        monkeypatch.setenv("ARGUS_VLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("ARGUS_VLM_MODEL", "judge")
        # the profile named: the new judge re-scores this evaluation in place (unnamed, it would be one of its own)
        where = [*where, "--profile", "default"]
        assert cli.main(["evaluate", "--plan", *where]) == 0
        plan = capsys.readouterr().out.splitlines()
        assert plan[0].startswith("evaluation bench/default: bench 'bench', profile 'default'"), plan
        judge = [line.strip() for line in plan if line.strip().startswith("judge: ")]
        stored = sum(_rows_of(s) for s in materializations(local_instance(load_settings()), "criterion_scores"))
        assert stored > 4  # every criterion of each of the four videos
        said_plan = f"judge: evidence-only -> openai:judge: 2 partitions, 4 videos, {stored} criterion judgments as stored now"
        assert judge == [said_plan], plan
        assert len(srv.requests) == 0  # the plan ran nothing
        # Another command beside it, on the same judge: the VLM-only ablation of the same bench
        other = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(bench),
                                  "--candidates", str(cands), "--profile", "vlm-only"],
                                 env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            srv.wait_for(lambda s: len(s.requests) > 0 or other.poll() is not None, timeout_s=180,
                         what="the other command's first request")
            assert cli.main(["evaluate", *where]) == 0
            out = capsys.readouterr().out
        finally:
            said_other, _ = other.communicate(timeout=300)
        assert other.returncode == 0 and said_other.splitlines()[0].startswith("evaluation bench/vlm-only: "), said_other
        assert cli.main(["evaluate", *where]) == 0  # nothing to do: bench/default the one evaluated last again
        capsys.readouterr()
        lines = [re.sub(r"^\[\s*[\d.]+s\]", "", line).strip() for line in out.splitlines()]  # less the elapsed time
        said = [line for line in lines if line.startswith("judge: ")]
        assert said == [said_plan], out

    settings = load_settings()
    history = materializations(local_instance(settings), "video_scores")
    assert len(history) == 4
    first, second = history[:2], history[2:]
    assert {h.partition for h in first} == {h.partition for h in second} == {"m|T2V", "n|T2V"}
    assert all(h.tags.get("argus/evaluator") == "evidence-only" for h in first)
    assert all(h.tags.get("argus/evaluator") == "openai:judge" for h in second)
    assert all("judge: evidence-only -> openai:judge" in h.reason for h in second), [h.reason for h in second]

    # argus history: a row per materialization, oldest first, each with its judge, table and reason
    assert cli.main(["history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [re.split(r"\s{2,}", line) for line in lines[2:]]
    assert len(rows) == 4, lines
    header = re.split(r"\s{2,}", lines[1])
    col = {name: i for i, name in enumerate(header)}
    assert [r[col["judge"]] for r in rows] == ["evidence-only"] * 2 + ["openai:judge"] * 2, rows
    assert [r[col["table"]] for r in rows] == ["kept"] * 4, rows
    assert [r[col["data version"]] for r in rows] == [h.data_version[:16] for h in history]
    assert [r[col["run"]] for r in rows] == [h.run_id[:8] for h in history]
    assert all("judge: evidence-only -> openai:judge" in r[col["reason"]] for r in rows[2:]), rows
    assert cli.main(["history", "--limit", "3"]) == 0  # the latest three, oldest first
    lines = capsys.readouterr().out.splitlines()
    assert [re.split(r"\s{2,}", line)[col["run"]] for line in lines[2:]] == [h.run_id[:8] for h in history[1:]]

    # argus diff: both evaluators named; every model's mean before and after, as the kept tables hold them
    assert cli.main(["diff"]) == 0
    text = capsys.readouterr().out
    said = dict(line.split(": ", 1) for line in text.splitlines() if line.startswith(("judge before", "judge after")))
    assert said["judge before"].startswith("evidence-only (evidence-only/"), text
    assert said["judge after"].startswith("openai:judge (vlm/openai/judge/"), text
    per_model = {}
    for line in text.splitlines():
        m = re.match(r"\s+T2V\s+(\S+)\s+([\d.]+) \[([\d.]+), ([\d.]+)\] -> \s*([\d.]+) \[([\d.]+), ([\d.]+)\]", line)
        if m:
            per_model[m.group(1)] = [float(x) for x in m.groups()[1:]]
    assert set(per_model) == {"m", "n"}, text
    for h_before, h_after in zip(sorted(first, key=lambda h: h.partition), sorted(second, key=lambda h: h.partition)):
        model = h_before.partition.split("|")[0]
        before, lo_b, hi_b, after, lo_a, hi_a = per_model[model]
        assert before == pytest.approx(_mean_of(h_before), abs=0.006)
        assert after == pytest.approx(_mean_of(h_after), abs=0.006)
        assert lo_b <= before <= hi_b and lo_a <= after <= hi_a
    assert before != after  # the judges score differently: a diff that says nothing moved reads nothing
    inputs = next(line.strip() for line in text.splitlines() if line.strip().startswith("inputs: "))
    moved = dict(re.fullmatch(r"(\S+) \((\d+) partitions?\)", item).groups() for item in inputs[len("inputs: "):].split(", "))
    assert moved["judge_config"] == "2", text
    why = text.split("why the later pass ran (as its runs recorded it):\n", 1)[1].splitlines()
    assert "  judge: evidence-only -> openai:judge" in why, text

    # The passes' fingerprints: argus diff names every field that differs (the judge's), none that does not
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  fingerprint: "))
    changed = {}
    for line in lines[at + 1:]:
        if not line.startswith("    "):
            break
        field_name, change = line.strip().split(": ", 1)
        changed[field_name] = change
    assert set(changed) == {"judge.backend", "judge.model", "judge.served_model", "judge.identity", "judge.endpoints"}, text
    assert changed["judge.served_model"] == "None -> judge-2026-11-q4" and changed["judge.backend"] == "evidence-only -> openai"
    assert re.fullmatch(r"  fingerprint: [0-9a-f]{12} -> [0-9a-f]{12}, 5 fields differ:", lines[at]), lines[at]
    # argus history --format json: each materialization with its pass's fingerprint, as installed and run here
    from importlib import metadata

    from argus_dagster.method.evidence.tools.registry import TOOL_SPECS

    assert cli.main(["history", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in rows] == [h.run_id for h in history]
    fps = [r["fingerprint"] for r in rows]
    assert [fp["judge"]["backend"] for fp in fps] == ["evidence-only"] * 2 + ["openai"] * 2
    assert [fp["judge"]["served_model"] for fp in fps] == [None, None, "judge-2026-11-q4", "judge-2026-11-q4"]
    for fp in fps:
        assert fp["packages"]["dagster"] == metadata.version("dagster") and fp["packages"]["polars"] == metadata.version("polars")
        assert set(fp["tools"]) == set(TOOL_SPECS) and fp["device"]["cpus"] == os.cpu_count()
        assert fp["prompts"]["judge"] and fp["judge"]["temperature"] == 0.0
    # the runs carry the fingerprint's id as a tag (what the UI's run page shows)
    from argus_dagster.records.fingerprints import fingerprint_id

    instance = local_instance(settings)
    crit = materializations(instance, "criterion_scores")
    assert len(crit) == 4 and all(h.fingerprint for h in crit)
    for h in crit:
        assert instance.get_run_by_id(h.run_id).tags["argus/fingerprint"] == fingerprint_id(h.fingerprint)
    assert {r["fingerprint_id"] for r in rows} == {fingerprint_id(h.fingerprint) for h in crit}

    # the home page and the overview name the evaluator of the latest materialization
    home = (tmp_path / "home" / "benches" / "index.html").read_text()
    assert _cell(home, "bench / default", "evaluator") == "openai:judge"
    overview = (settings.reports_dir / "index.html").read_text()
    facts = re.search(r'<div class="facts">(.*?)</div>', overview).group(1)
    assert dict(re.findall(r"(\w+) <b>([^<]*)</b>", facts))["evaluator"] == "openai:judge", facts

    # the overview's "What changed", read in Chromium: both evaluators named, each model's mean before and
    # after as the kept tables hold them, no console error and no link to a page that is not there
    with launched() as browser:
        parts, models, problems = _what_changed(browser, settings.reports_dir / "index.html")
        moved = _passes_table(browser, settings.reports_dir / "samples.html")
    assert problems == [], problems
    assert (parts["evaluator before"], parts["evaluator after"]) == ("evidence-only", "openai:judge"), parts
    # why the latest pass ran, in the words its runs recorded (those argus evaluate printed)
    assert "judge: evidence-only -> openai:judge" in parts["why"], parts["why"]
    assert set(parts["why"]) <= {r.strip() for h in second for r in h.reason.split("; ")} | {
        r.strip() for h in materializations(local_instance(settings), "criterion_scores") for r in h.reason.split("; ")}
    # the rest as argus diff says it (the VLM writes the rubrics too: both inputs got another one)
    said = {line.strip().split(": ", 1)[0]: line.strip().split(": ", 1)[1] for line in text.splitlines()
            if line.startswith(("  rubrics: ", "  inputs: ", "  code: "))}
    assert parts["rubrics"] == said["rubrics"] == "2 inputs got another rubric (T2V/p0, T2V/p1)", parts
    assert parts["code"] == said["code"] == "the same", parts
    words = {"judge_config": "judge", "rubric_generator_config": "rubric generator", "rubrics": "rubrics",
             "tool_suite_config": "tools", "bench_files": "bench files (prompts, conditions)"}
    assert parts["inputs"] == ", ".join(sorted(re.sub(r"^(\S+)", lambda m: words[m.group(1)], item)
                                               for item in said["inputs"].split(", "))), (parts, said)
    assert set(models) == {"m", "n"}, models
    for h_before, h_after in zip(sorted(first, key=lambda h: h.partition), sorted(second, key=lambda h: h.partition)):
        b, a, change = models[h_before.partition.split("|")[0]]
        assert b == pytest.approx(_mean_of(h_before), abs=0.006)
        assert a == pytest.approx(_mean_of(h_after), abs=0.006)
        assert float(change) == pytest.approx(a - b, abs=0.011)
    # the sample browser's videos that moved most between the passes, each as its kept tables hold it
    kept = {}
    for h, when in [(h, 0) for h in first] + [(h, 1) for h in second]:
        df = pl.read_parquet(io.BytesIO(open(_where(h), "rb").read()))
        for r in df.iter_rows(named=True):
            kept.setdefault((h.partition.split("|")[0], r["input_id"]), [None, None])[when] = r["final_score"]
    assert moved, "no video moved"
    for model, video, b, a in moved:
        assert (b, a) == pytest.approx(tuple(kept[(model, video)]), abs=0.006), (model, video)
    assert {(m, v) for m, v, _, _ in moved} == {k for k, (b, a) in kept.items() if abs(a - b) > 1e-9}
    changes = [abs(a - b) for _, _, b, a in moved]
    assert changes == sorted(changes, reverse=True)

    # an edited prompt: the plan names the input, and counts its videos (one per model)
    manifest = bench / "T2V" / "manifest.jsonl"
    manifest.write_text(manifest.read_text().replace("take 0.", "take zero."))
    assert cli.main(["evaluate", "--plan", *where]) == 0
    plan = [line.strip() for line in capsys.readouterr().out.splitlines()]
    latest = {h.partition: h for h in materializations(local_instance(settings), "criterion_scores")}
    now = sorted({c for h in latest.values() for i, c in pl.read_parquet(io.BytesIO(open(_where(h), "rb").read()))
                  .select("input_id", "criterion_id").iter_rows() if i == "p0"})
    named = ", ".join(c.replace("_", " ") for c in now[:6]) + (f" and {len(now) - 6} more" if len(now) > 6 else "")
    assert f"prompt of T2V/p0 changed: 1 input, 2 videos; its rubric (now: {named}) is written again" in plan, plan


def test_diff_reads_the_latest_two_of_three_passes_or_the_two_named(tmp_path, monkeypatch, capsys):
    """Three passes, the candidate replaced before each later one (a sliding pattern, a still frame,
    noise: three different scores): `argus diff` compares pass 2 with pass 3, `argus diff A B` the two
    passes named, each score as the kept tables hold it."""
    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings
    from argus_dagster.records.history import materializations

    bench, cands = t2v_bench(tmp_path, n_inputs=1, model="m")
    without_argus_settings(monkeypatch)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    where = ["--bench", str(bench), "--candidates", str(cands)]
    still = np.repeat(pattern_clip(0)[:1], 24, axis=0)
    noise = np.random.default_rng(3).integers(0, 255, (24, 64, 96, 3), dtype=np.uint8)
    for clip in (None, still, noise):
        if clip is not None:
            write_video(cands / "T2V" / "m" / "p0.mp4", clip, 12)
        assert cli.main(["evaluate", *where]) == 0
    history = materializations(local_instance(load_settings()), "video_scores")
    scores = [_mean_of(h) for h in history]
    assert len(history) == 3 and len({round(s, 2) for s in scores}) == 3, scores
    capsys.readouterr()
    assert cli.main(["history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    col = re.split(r"\s{2,}", lines[1]).index("pass")
    ids = [re.split(r"\s{2,}", line)[col] for line in lines[2:]]
    assert ids == [h.command for h in history], lines

    def diff(*passes) -> tuple[tuple[str, str], tuple[float, float], tuple[float, float]]:
        """The passes `argus diff` names, its model's mean before and after, and its video's."""
        assert cli.main(["diff", *passes]) == 0
        text = capsys.readouterr().out
        named = re.match(r"video_scores: before = pass (\S+) \(.*\), after = pass (\S+) \(", text)
        model = re.search(r"^\s+T2V\s+m\s+([\d.]+) \[[\d.]+, [\d.]+\] -> \s*([\d.]+) \[", text, re.M)
        video = re.search(r"^  T2V x m p0: ([\d.]+) -> ([\d.]+) \([+-][\d.]+\)$", text, re.M)
        assert named and model and video, text
        # Only the model's video changed between any two of the passes: that is the input that moved.
        changed = text.split("\nwhat changed between them:\n", 1)[1].split("\nwhy the later pass ran", 1)[0]
        parts = dict(line.strip().split(": ", 1) for line in changed.splitlines() if line.startswith("  ")
                     and not line.startswith("    "))
        assert parts["inputs"] == "candidate_files (1 partition)", text
        assert parts["rubrics"] == "0 inputs got another rubric" and parts["code"] == "the same", text
        return named.groups(), (float(model[1]), float(model[2])), (float(video[1]), float(video[2]))

    for passes, (a, b) in (((), (1, 2)), ((ids[0], ids[1]), (0, 1)), ((ids[0],), (0, 2))):
        named, model, video = diff(*passes)
        assert named == (ids[a], ids[b]), passes
        assert model == video == pytest.approx((scores[a], scores[b]), abs=0.006), passes
