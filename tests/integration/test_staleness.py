"""One rule for what is stale (assets/staleness.py), asked by argus evaluate: what changed is run
again, and nothing else; permanent row errors leave a partition up to date."""

import json

import pytest

from argus_dagster.client.evaluate import run_all
from argus_dagster.infra.media import write_video
from argus_dagster.infra.settings import load_settings

from .helpers import pattern_clip, said_runs, t2v_bench

pytestmark = pytest.mark.integration


def _status(lines: list[str]) -> dict[str, str]:
    """``{"T2V": "...", "T2V x m": "..."}`` from run_all's progress lines."""
    out = {}
    for line in lines:
        if line.startswith("["):
            where, _, what = line.split("] ", 1)[1].partition(": ")
            out[where] = what
    return out


def test_what_changed_runs_again_and_nothing_else(tmp_path, monkeypatch):
    bench, cands = t2v_bench(tmp_path, n_inputs=3)
    for i in range(3):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i)[:, :, ::-1], 12)
    (cands / "T2V" / "n" / "p2.mp4").write_bytes(b"")  # a permanent row error: an empty file
    manifest = bench / "T2V" / "manifest.jsonl"
    manifest.write_text(manifest.read_text() + '{"id": "broken", "prompt": \n')  # and an invalid line
    for k, v in {"ARGUS_HOME": str(tmp_path / "home"), "ARGUS_BENCH_DIR": str(bench),
                 "ARGUS_CANDIDATES_DIR": str(cands)}.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()

    def run() -> dict[str, str]:
        lines: list[str] = []
        run_all(progress=lines.append, settings=settings)
        return _status(lines)

    first = run()
    assert first["T2V x m"].startswith("scored") and first["T2V x n"].startswith("scored")
    again = run()  # row errors are permanent: nothing is stale
    assert {k: v for k, v in again.items() if k.startswith("T2V")} == {
        "T2V": "inputs and rubrics up to date", "T2V x m": "up to date", "T2V x n": "up to date"}, again
    assert "every partition up to date (--force re-materializes)" in again

    write_video(cands / "T2V" / "n" / "p0.mp4", pattern_clip(30), 12)  # one video replaced
    after_video = run()
    assert after_video["T2V"].endswith("up to date") and after_video["T2V x m"] == "up to date"
    assert after_video["T2V x n"].startswith("scored"), after_video

    rubric = next(bench.glob("T2V/rubrics/p1.json"))  # a frozen rubric edited by hand
    data = json.loads(rubric.read_text())
    data["criteria"] = data["criteria"][:-1]
    rubric.write_text(json.dumps(data))
    after_rubric = run()
    assert not after_rubric["T2V"].endswith("up to date")  # the rubrics are read again ...
    assert after_rubric["T2V x m"].startswith("scored") and after_rubric["T2V x n"].startswith("scored")  # ... and rescored

    rows = [json.loads(line) for line in manifest.read_text().splitlines()[:3]]
    rows[2]["prompt"] = "A textured pattern slides to the right."
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))  # the bench edited: the invalid line fixed too
    after_bench = run()
    assert not after_bench["T2V"].endswith("up to date")
    assert after_bench["T2V x m"].startswith("scored") and after_bench["T2V x n"].startswith("scored")
    assert all(v.endswith("up to date") for k, v in run().items() if k.startswith("T2V"))


def test_a_command_with_nothing_to_do_asks_dagster_once(tmp_path, monkeypatch):
    """A warm ``argus evaluate`` with nothing to do evaluates Dagster's conditions once: the pages are
    asked about with everything else, and not again, and nothing runs. Pages Dagster does request (their
    records wiped) are still written, by a run of their own, after a second question."""
    import dagster as dg

    from argus_dagster.client.instance import local_instance

    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    for k, v in {"ARGUS_HOME": str(tmp_path / "home"), "ARGUS_BENCH_DIR": str(bench),
                 "ARGUS_CANDIDATES_DIR": str(cands)}.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()
    run_all(progress=lambda _: None, settings=settings)
    instance = local_instance(settings)
    runs_before = len(instance.get_runs())
    asked: list[int] = []
    real = dg.evaluate_automation_conditions

    def counted(*args, **kwargs):  # Dagster's own evaluation, counted
        asked.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(dg, "evaluate_automation_conditions", counted)
    lines: list[str] = []
    run_all(progress=lines.append, settings=settings)
    assert len(asked) == 1 and len(instance.get_runs()) == runs_before, lines
    assert "every partition up to date (--force re-materializes)" in _status(lines)

    instance.wipe_assets([dg.AssetKey("site")])
    asked.clear()
    lines = []
    run_all(progress=lines.append, settings=settings)
    assert len(asked) == 2 and len(instance.get_runs()) == runs_before + 1, lines
    assert said_runs(lines) == {"pages: overview, sample browser, index of evaluations": None}, lines  # the site was new
    assert instance.fetch_materializations(dg.AssetKey("site"), limit=1).records
