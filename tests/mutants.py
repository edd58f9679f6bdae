"""Breaks the tests must catch: each is applied to a scratch copy of the tree, and the tests that
claim to cover it must fail there.

    python -m tests.mutants              # every break, with the tests named for it
    python -m tests.mutants --list       # their names
    python -m tests.mutants --check      # every break's text still in its file (no tests run)
    python -m tests.mutants local-vlm-drops-frames spatial-swaps-left-right

First the tests run on an unbroken copy (exit 3 if they fail there). A break whose text is no longer
in its file is reported as stale (exit 2): the code moved, and the break must be written again
against it. A break the tests do not catch is reported as surviving (exit 1). The copy holds the working tree as it is (uncommitted changes included), less ``.git``,
virtual environments and caches; the tests run with the copy first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Break:
    name: str
    why: str
    edits: tuple[tuple[str, str, str], ...]  # (file, text as it is, text as broken)
    tests: tuple[str, ...]


BREAKS = (
    Break("local-vlm-drops-frames", "the local transformers client leaves every frame out of its prompt",
          (("argus_dagster/vlm/transformers_client.py",
            "                if is_image_part(p):\n                    images.append(",
            "                if is_image_part(p):\n                    continue\n                    images.append("),),
          ("tests/unit/test_vlm_local.py",)),
    Break("request-before-frames",
          "the question or criterion comes before the video's frames: no two requests share them as a prefix",
          (("argus_dagster/method/video_prompt.py", "[*parts, *extra, *request]", "[*request, *parts, *extra]"),),
          ("tests/integration/test_vlm_judge_rubric.py",)),
    Break("ledger-drops-cached-tokens", "the client never reads the cached prompt tokens a server reports",
          (("argus_dagster/vlm/ledger.py", 'usage.get("prompt_tokens_details"), "cached_tokens")',
            'usage.get("prompt_tokens_details"), "cached")'),),
          ("tests/integration/test_vlm_client.py",)),
    Break("model-name-accepts-dot", "`.` and `..` are acceptable model names",
          (("argus_dagster/infra/names.py",
            '    if value in (".", ".."):\n        return "the model name is a relative folder name"\n', ""),),
          ("tests/unit/test_hostile_properties.py",)),
    Break("find-candidates-skips-name-check", "find_candidates looks under any model name, `.` and `..` included",
          (("argus_dagster/method/bench.py",
            "    if model_name_problem(model):\n        return {}\n    ids = [i for i in input_ids",
            "    ids = [i for i in input_ids"),),
          ("tests/unit/test_hostile_properties.py",)),
    Break("spatial-swaps-left-right", "spatial_relation relates the second entity to the first (left/right)",
          (("argus_dagster/method/evidence/tools/spatial.py",
            "horizontal_relation(pair[0].box, pair[1].box, frame.shape[1])",
            "horizontal_relation(pair[1].box, pair[0].box, frame.shape[1])"),),
          ("tests/unit/test_spatial_relation.py",)),
    Break("spatial-swaps-front-behind", "spatial_relation calls the entity in front 'behind'",
          (("argus_dagster/method/evidence/tools/spatial.py",
            '{"a": "front", "b": "behind"}', '{"a": "behind", "b": "front"}'),),
          ("tests/unit/test_spatial_relation.py",)),
    Break("spatial-inverts-both", "spatial_relation's claim words inverted: left holds as right, front as behind",
          (("argus_dagster/method/evidence/tools/spatial.py",
            'holds = "left" if relation == "left_right" else "front"\n'
            '        reverse = "right" if relation == "left_right" else "behind"',
            'holds = "right" if relation == "left_right" else "behind"\n'
            '        reverse = "left" if relation == "left_right" else "front"'),),
          ("tests/unit/test_spatial_relation.py",)),
    Break("retry-ignores-back-off", "a partition that left work to retry is requested again on every evaluation",
          (("assets/automation.py",
            "return {p for p, due in retries_due(records, context.key).items() if due <= now}",
            "return {p for p, due in retries_due(records, context.key).items()}"),),
          ("tests/integration/test_retry_backoff.py",)),
    Break("report-media-looked-up-by-name", "a page looks each name of its video's copy up on its own (a HEAD on S3)",
          (("argus_dagster/outputs/page_media.py",
            'if f"{stem}.{ext}" in media:',
            'if store.exists(join(media_dir, f"{stem}.{ext}")):'),),
          ("tests/unit/test_page_media_listing.py",)),
    Break("judged-ahead-costs-nothing", "a judgment the evidence step made ahead reaches the scores as free reuse",
          (("argus_dagster/method/stages.py",
            'hit, ahead_made, costs = False, True, {k: int(res["paid"].get(k) or 0) for k in COSTS}',
            'ahead_made = True'),),
          ("tests/integration/test_vlm_judge_rubric.py", "tests/integration/test_judge_ahead.py")),
    Break("unscored-ahead-reused-later", "an unscored judgment made ahead is taken by later runs too",
          (("argus_dagster/method/stages.py",
            'usable=lambda r: r["score"] is not None or ours(r))',
            'usable=lambda r: True)'),),
          ("tests/integration/test_vlm_judge_rubric.py",)),
    Break("instance-log-merged-at-every-close", "no idle connection holds the instance's SQLite files open: each "
          "close merges and deletes the write-ahead log, with its disk syncs",
          (("argus_dagster/infra/sqlite.py", '    dbapi_connection.execute("PRAGMA synchronous=NORMAL")\n    _keep(path)',
            '    dbapi_connection.execute("PRAGMA synchronous=NORMAL")'),),
          ("tests/integration/test_sqlite_sync.py",)),
    Break("dead-run-judged-across-pid-namespaces", "a run of a container's process (another pid namespace, the "
          "host's name) is judged gone because this machine does not see its pid",
          (("argus_dagster/infra/processes.py", '    if namespace not in ("?", _pid_namespace()):\n        return True\n',
            ""),),
          ("tests/unit/test_dead_runs.py",)),
    Break("records-shared-across-instances", "the conditions' reading of the latest records is reused for any "
          "instance at the same latest storage id",
          (("argus_dagster/records/automation.py", "if held is None or held() is not instance or at != max_storage_id:",
            "if held is None or at != max_storage_id:"),),
          ("tests/integration/test_latest_records.py",)),
    # -- data versions --
    Break("version-drops-a-column", "a data version leaves one column of the table out (its last by name)",
          (("assets/versions.py", "cols = sorted(c for c in df.columns if c not in volatile)",
            "cols = sorted(c for c in df.columns if c not in volatile)[:-1]"),),
          ("tests/unit/test_versions.py",)),
    Break("video-version-hand-picked", "video_scores' data version hashes its ids, final score and error only: "
          "a rubric that gains criteria leaves the leaderboard's coverage and its \"needs a VLM\" list as they were",
          (("assets/candidates.py", "VIDEO_SCORES_VOLATILE = tuple(COSTS)",
            'VIDEO_SCORES_VOLATILE = tuple(c for c in VIDEO_SCORES if c not in ("input_id", "sample", "final_score", "error"))'),),
          ("tests/integration/test_data_versions.py",)),
    Break("version-rows-unsorted", "a data version hashes the rows in the order they were produced",
          (("assets/versions.py", "rows = sorted(_dump(list(r)) for r in", "rows = list(_dump(list(r)) for r in"),),
          ("tests/unit/test_versions.py",)),
    Break("source-misses-second-edit", "a file's digest is remembered by path, size and modification time alone, "
          "also just after it changed: a second edit of the same size and time is not seen",
          (("argus_dagster/infra/media.py", "    key = (path, *file_stamp(st))\n", "    key = (path, st.st_size, st.st_mtime_ns)\n"),
           ("argus_dagster/infra/media.py", "    if settled(st):  # a file changed just now", "    if True:  # a file changed just now")),
          ("tests/unit/test_versions.py",)),
    # -- cache identities --
    Break("vefx-identity-forgets-model", "a VEFX judgment's identity leaves the judge model out: another model's "
          "scores are taken from the cache",
          (("argus_dagster/protocols/vefx.py", "call=vlm_call(self.client, prompt_version=PROMPT_VERSION,",
            'call=vlm_call(type("C", (), {"backend": self.client.backend, "model": ""}), prompt_version=PROMPT_VERSION,'),),
          ("tests/unit/test_identities.py",)),
    Break("firm-identity-forgets-model", "a FIRM-Video call's identity (planner, verifiers) leaves the model out",
          (("argus_dagster/protocols/firm/evaluator.py", "call=vlm_call(self.client, prompt_version=request.version,",
            'call=vlm_call(type("C", (), {"backend": self.client.backend, "model": ""}), prompt_version=request.version,'),),
          ("tests/unit/test_identities.py",)),
    Break("judge-identity-forgets-prompt-version", "the criterion judge's identity leaves its prompt version out: "
          "judgments made under the old instructions are reused",
          (("argus_dagster/method/judge.py", "return vlm_call(self.client, prompt_version=JUDGE_PROMPT_VERSION,",
            'return vlm_call(self.client, prompt_version="",'),),
          ("tests/unit/test_identities.py",)),
    Break("tool-identity-forgets-config", "the detector-backed tools' identity leaves out how often the detector "
          "runs along a clip: tracks made with other settings are reused",
          (("argus_dagster/method/evidence/tools/detection.py", '"threshold": threshold, "detect_every": detect_every}',
            '"threshold": threshold}'),),
          ("tests/unit/test_identities.py",)),
    Break("tool-identity-forgets-weights", "the detector-backed tools' identity names the detector's architecture "
          "but not its checkpoint: another checkpoint's tracks are reused",
          (("argus_dagster/method/evidence/tools/detection.py", '"weights": store.weights(DETECTOR_FOLDER),', ""),),
          ("tests/unit/test_identities.py",)),
    Break("step-identity-forgets-tool-config", "a tool step's identity leaves the tool's configuration out "
          "(vlm_qa's model and prompt, the detector's settings)",
          (("argus_dagster/method/evidence/executor.py", "tool_config=tool_config(tool),", "tool_config={},"),),
          ("tests/unit/test_identities.py",)),
    Break("vlm-qa-forgets-output-frames", "a vlm_qa question about the source video leaves out the content hash "
          "of the output video whose frames open its request: another candidate's answer is reused",
          (("argus_dagster/method/evidence/tools/vlm_qa.py",
            'return ("output_video",) if on != "output_video" and media.has("output_video") else ()', "return ()"),),
          ("tests/unit/test_identities.py",)),
    Break("local-vlm-identity-forgets-weights", "a local model's requests are known by its name alone: new weights "
          "under the same name reuse the old answers",
          (("argus_dagster/infra/identities.py",
            'weights=getattr(client, "weights", None) if backend == "transformers" else None)',
            'weights=None)'),),
          ("tests/unit/test_identities.py",)),
    # -- evaluations and history --
    Break("table-version-overwritten", "the IO manager writes every materialization's kept table under one name: "
          "the next one overwrites the previous version",
          (("resources/storage.py",
            'name = f"{time.time_ns():020d}-{file_name(run_id[:8])}-{hashlib.sha256(data).hexdigest()[:12]}.parquet"',
            'name = "table.parquet"'),),
          ("tests/integration/test_table_versions.py",)),
    Break("table-retention-one-fewer", "retention keeps one table fewer than keep_versions",
          (("resources/storage.py", "kept[:max(0, len(kept) - self.keep_versions)]",
            "kept[:max(0, len(kept) - self.keep_versions + 1)]"),),
          ("tests/integration/test_table_versions.py",)),
    Break("plan-reason-without-evaluator", "a plan says the judge changed without naming the evaluators before and after",
          (("argus_dagster/client/reasons.py", 'return f"{EVALUATOR_PARTS[dep]}: {before} -> {after}"',
            'return f"{EVALUATOR_PARTS[dep]} changed"'),),
          ("tests/integration/test_history.py",)),
    # -- ledger --
    Break("ledger-misses-timed-out-request", "a request that timed out on the client's side is not counted, "
          "though the server received it",
          (("argus_dagster/vlm/openai_compatible.py", 'reached = outcome not in ("connection_error", "request_error")',
            'reached = outcome not in ("connection_error", "request_error", "timeout")'),),
          ("tests/integration/test_ledger_faults.py",)),
    Break("ledger-leaves-out-rubric-generation", "a rubric's row does not carry what generating it cost",
          (("assets/inputs.py", 'return {**base, **spent.costs(), "rubric_hash": rubric.content_hash(),',
            'return {**base, "rubric_hash": rubric.content_hash(),'),),
          ("tests/integration/test_ledger_faults.py",)),
    Break("ledger-groups-without-model", "the cost ledger sums every model of a stage and task into one row",
          (("argus_dagster/method/ledger.py",
            'return (table.with_columns(model.alias("model"), pl.lit(stage).alias("stage"))',
            'return (table.with_columns(pl.lit("").alias("model"), pl.lit(stage).alias("stage"))'),),
          ("tests/unit/test_cost_ledger.py",)),
    Break("ledger-groups-without-stage", "the cost ledger puts every stage's rows under one stage",
          (("argus_dagster/method/ledger.py",
            'return (table.with_columns(model.alias("model"), pl.lit(stage).alias("stage"))',
            'return (table.with_columns(model.alias("model"), pl.lit("videoargus").alias("stage"))'),),
          ("tests/unit/test_cost_ledger.py",)),
    Break("cached-tokens-not-clamped", "a server's cached count is taken as it is, more than the prompt included",
          (("argus_dagster/vlm/ledger.py", "cached = None if prompt is None else min(cached, prompt)",
            "cached = None if prompt is None else cached"),),
          ("tests/unit/test_cost_ledger.py",)),
    # -- ranks --
    Break("ranks-broken-alphabetically", "the overview numbers its leaderboard's rows, so tied models get ranks 1-5 by name",
          (("argus_dagster/outputs/overview.py", "for rank, r in zip(ranks, lb.iter_rows(named=True)):",
            "for rank, r in enumerate(lb.iter_rows(named=True), start=1):"),),
          ("tests/unit/test_ranks.py",)),
    Break("tied-means-rank-each-other-above", "a model counts an equal mean as above it: five tied models are all fifth",
          (("argus_dagster/method/leaderboard.py", "above = means[..., None, :] > means[..., :, None] + RANK_TIE",
            "above = means[..., None, :] >= means[..., :, None] - RANK_TIE"),),
          ("tests/unit/test_ranks.py",)),
    Break("first-of-the-top-named-leader", "the home page and the tables take the first of the models sharing the top as its leader",
          (("argus_dagster/method/leaderboard.py", 'return [str(r["model"]) for r in scored if r["shares_top"]]',
            'return [str(r["model"]) for r in scored if r["shares_top"]][:1]'),),
          ("tests/unit/test_ranks.py",)),
    Break("win-matrix-transposed", "the overview's win matrix shows in row A, column B how often B beats A",
          (("argus_dagster/outputs/overview.py", "r = rates.get((a, b))", "r = rates.get((b, a))"),),
          ("tests/unit/test_ranks.py",)),
    Break("interval-divides-by-inputs", "a resample's mean divides its videos' scores by the inputs drawn, not by the videos",
          (("argus_dagster/method/leaderboard.py", "return np.where(videos > 0, total / videos, np.nan)",
            "return np.where(videos > 0, total / sums.shape[1], np.nan)"),),
          ("tests/unit/test_ranks.py",)),
    Break("interval-mean-of-input-means", "a resample's mean is the mean of its inputs' means, not the mean over its videos",
          (("argus_dagster/method/leaderboard.py", "total, videos = times @ sums.T, times @ counts.T",
            "total, videos = times @ (sums / np.maximum(counts, 1)).T, times @ (counts > 0).T"),),
          ("tests/unit/test_ranks.py",)),
    Break("interval-resamples-videos", "the score interval resamples a model's videos on their own, not the task's inputs",
          (("argus_dagster/method/leaderboard.py", "        lo, hi = ((float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))) if len(vals) and ranks[k]\n",
            "        vals = g.filter((pl.col('model') == m) & pl.col('final_score').is_not_null())['final_score'].to_numpy()\n"
            "        lo, hi = (bootstrap_ci(vals) if len(vals) and ranks[k]\n"),),
          ("tests/unit/test_ranks.py",)),
    Break("rank-interval-interquartile", "the rank interval is read at the 25th and 75th percentiles of the resamples' ranks",
          (("argus_dagster/method/leaderboard.py", 'np.percentile(col, 2.5, method="lower")', 'np.percentile(col, 25, method="lower")'),
           ("argus_dagster/method/leaderboard.py", 'np.percentile(col, 97.5, method="higher")', 'np.percentile(col, 75, method="higher")')),
          ("tests/unit/test_ranks.py",)),
    # -- protocols and ratings --
    Break("vefx-overall-from-annotated", "an overall the ratings annotate replaces VEFX's human overall, the mean "
          "of IF, RQ and EE",
          (("argus_dagster/protocols/vefx.py", "    if not set(DIMENSIONS) <= dims:\n        return averaged\n",
            "    if not set(DIMENSIONS) <= dims or OVERALL_ANNOTATED in dims:\n"
            "        return averaged.with_columns(pl.col(\"dimension\").replace(OVERALL_ANNOTATED, OVERALL))\n"),),
          ("tests/unit/test_vefx.py",)),
    Break("audio-drops-visible-sources", "FIRM-Video's audio filter leaves out a narrator on screen and a sound "
          "engineer at the desk, sources of sound that are seen",
          (("argus_dagster/protocols/firm/audio.py",
            "        if seen and _SOURCE_PERSON.fullmatch(m.group(0)):\n"
            "            continue  # the narrator as a person in the picture\n", ""),
           ("argus_dagster/protocols/firm/audio.py",
            "        if not m.group(1) and _SOUND_SEEN_AFTER.match(q[m.end():]):\n"
            "            continue  # a sound engineer, a sound system: seen\n", "")),
          ("tests/unit/test_audio_requirements.py",)),
    Break("logistic-one-start", "the four-parameter logistic fit starts once, at the usual values, and keeps "
          "whatever optimum that start lands in",
          (("argus_dagster/protocols/alignment/metrics.py", "    for p0 in (logistic_starts(x, y) + grid if starts is None else starts):\n",
            "    for p0 in [(float(y.max()), float(y.min()), float(x.mean()), float(x.std()))]:\n"),
           ("argus_dagster/protocols/alignment/metrics.py", "        for _grid_sse, point in profile_grid(x, y):\n",
            "        for _grid_sse, point in profile_grid(x, y)[:0]:\n")),
          ("tests/unit/test_logistic_starts.py",)),
    Break("ratings-accept-off-scale", "human ratings outside their dimension's scale are used (a 9 on VEFX's 1-4)",
          (("argus_dagster/protocols/alignment/ratings.py",
            "        if scale is not None and not (scale[0] - 1e-9 <= row[\"score\"] <= scale[1] + 1e-9):\n",
            "        if False and scale is not None:\n"),),
          ("tests/unit/test_ratings_read.py",)),
    # -- writes, exports and bad input --
    Break("write-replaces-devices", "a write renames its file over whatever is at the path: a device node, a FIFO "
          "or a link to one becomes a regular file",
          (("argus_dagster/infra/files.py", "    kind = not_a_file(path)\n    if kind is not None:",
            "    kind = None\n    if kind is not None:"),),
          ("tests/unit/test_writes_and_exports.py",)),
    Break("firm-export-into-any-folder", "argus export firm writes into a folder of a person's files without a word",
          (("argus_dagster/protocols/firm/export.py", "    if foreign and not force:", "    if False:"),),
          ("tests/unit/test_writes_and_exports.py",)),
    Break("csv-cells-run-as-formulas", "CSV exports write text cells that start with = + - @ as they are",
          (("argus_dagster/outputs/export.py", "return spreadsheet_safe(flatten_for_csv(df)).write_csv()",
            "return flatten_for_csv(df).write_csv()"),),
          ("tests/unit/test_writes_and_exports.py",)),
    Break("rubric-depth-unbounded", "a rubric file is parsed however deep it nests (the rubric_files source "
          "recurses until Python's limit)",
          (("argus_dagster/method/rubric/schema.py", "    depth = 0\n    for piece in _JSON_STRING.split(text):",
            "    depth = 0\n    return False\n    for piece in _JSON_STRING.split(text):"),),
          ("tests/unit/test_writes_and_exports.py",)),
    Break("text-policy-passes-surrogates", "text that is not UTF-8 (a lone surrogate: a name's byte 0xff, a "
          "\"\\ud800\" escape) passes where it enters, and fails a whole run where it is written",
          (("argus_dagster/infra/names.py", '        text.encode("utf-8")\n', '        text.encode("utf-8", "surrogatepass")\n'),),
          ("tests/unit/test_hostile_properties.py", "tests/unit/test_settings.py")),
    Break("history-limit-unchecked", "argus history --limit takes any whole number: -1 drops the first row silently",
          (("argus_dagster/client/arguments.py", 'hi.add_argument("--limit", type=whole_number(1, 1_000_000),',
            'hi.add_argument("--limit", type=int,'),),
          ("tests/unit/test_cli_exit.py",)),
    # -- servers and argus ui --
    Break("quick-exit-under-a-profiler", "argus leaves at once under a profiler too: cProfile never writes "
          "the results it gathered",
          (("argus_dagster/client/quick_exit.py", "sys.getprofile() is not None or ", ""),),
          ("tests/unit/test_cli_exit.py",)),
    Break("align-help-without-legend", "argus align --help no longer ends with what each column of its table means",
          (("argus_dagster/client/arguments.py", "epilog=cast(Any, alignment_legend),", "epilog=None,"),),
          ("tests/unit/test_cli_start.py",)),
    Break("reports-backlog-of-five", "the reports server listens with the standard library's backlog of 5: "
          "connections beyond it are dropped and retried a second later",
          (("argus_dagster/outputs/serve.py", "    request_queue_size = 256\n", "    request_queue_size = 5\n"),),
          ("tests/unit/test_serve_media.py",)),
    Break("range-ignored", "the reports server answers a Range request with the whole video, so it cannot be sought",
          (("argus_dagster/outputs/serve.py", 'if ranged is None or self.headers.get("If-Range") is not None or os.path.isdir(path):',
            'if True:'),),
          ("tests/unit/test_serve_media.py",)),
    Break("reports-deadline-from-last-byte", "the reports server's head deadline runs from a connection's last byte: "
          "a client that trickles a byte now and then holds its connection for good",
          (("argus_dagster/outputs/serve.py", "        a.data += chunk\n",
            "        a.data += chunk\n        a.deadline = time.monotonic() + self.bounds.head_s\n"
            "        self._watch(conn, a.deadline)\n"),),
          ("tests/unit/test_serve_slow_clients.py",)),
    Break("webm-copy-unchecked", "a page video's WebM copy is put in place without counting its frames: a copy "
          "cut short by a full disk is served",
          (("argus_dagster/outputs/page_media.py", "    check_copy(dst, written, size)\n", ""),),
          ("tests/unit/test_serve_media.py",)),
    Break("ui-proxy-host-unchecked", "the proxy in front of argus ui's Dagster webserver forwards any Host: a page "
          "that rebinds its DNS name to 127.0.0.1 reads GraphQL and launches runs",
          (("argus_dagster/client/ui.py", 'if len(hosts) != 1 or _host_name(hosts[0].decode("latin-1")) not in self.hosts:',
            "if False:"),),
          ("tests/unit/test_ui_front.py",)),
    # -- resource configuration --
    Break("bench-field-unconfigured-silently", "a bench folder nobody configured is the working directory "
          "instead of an error that names the field",
          (("resources/bench.py", "        value = getattr(self, field)\n        if not value:",
            "        value = getattr(self, field)\n        if False:"),),
          ("tests/unit/test_resource_config.py",)),
    Break("frame-pool-budget-ignored", "the storage resource's frame_pool_mb never reaches the process's frame pool",
          (("resources/storage.py", "        FRAME_POOL.set_budget(int(self.frame_pool_mb * 2**20))\n",
            "        pass\n"),),
          ("tests/unit/test_resource_config.py",)),
    Break("tool-threads-ignored", "the tools resource's tool_threads never sizes the process's tool slots",
          (("resources/tools.py", "        set_tool_threads(self.tool_threads or None)\n", ""),),
          ("tests/unit/test_resource_config.py",)),
    Break("what-changed-swaps-evaluators", "the overview's What changed names the new evaluator as the old one",
          (("argus_dagster/outputs/changes.py", "before, after = evaluators(d.judges[0]), evaluators(d.judges[1])",
            "after, before = evaluators(d.judges[0]), evaluators(d.judges[1])"),),
          ("tests/integration/test_history.py",)),
    Break("people-places-reversed", "the sample browser ranks people's ratings highest first, the evaluator's lowest first",
          (("argus_dagster/outputs/samples.py", 'then((pl.col(col).rank("average").over("task") - 1)',
            'then((pl.col(col).rank("average", descending=col == "people").over("task") - 1)'),),
          ("tests/unit/test_samples_page.py",)),
    Break("wc-violation-read-as-met", "a WC question answered yes (a violation) reads as no violation on the FIRM page",
          (("argus_dagster/outputs/firm_pages.py", '"wc": {"yes": "violation", "no": "no violation"}',
            '"wc": {"yes": "no violation", "no": "violation"}'),),
          ("tests/integration/test_firm_graph.py",)),
    Break("covers-takes-the-rarest-count", "a model's coverage is the least common count of its videos",
          (("argus_dagster/method/leaderboard.py", "(scored, of), n = max(counts.items(),",
            "(scored, of), n = min(counts.items(),"),),
          ("tests/unit/test_overview.py",)),
    Break("bootstrap-krcc-is-srcc", "the KRCC interval resamples Spearman's correlation",
          (("argus_dagster/protocols/alignment/metrics.py", 'stats["krcc"].append(_kendall_fast(p[idx], h[idx]))',
            'stats["krcc"].append(spearman(p[idx], h[idx]))'),),
          ("tests/unit/test_alignment.py",)),
    Break("protocols-without-conditions", "the command line's definitions give the protocols no condition: nothing of them runs",
          (("argus_dagster/definitions.py", "    chosen = {id(a) for p in protocols for a in PROTOCOL_ASSETS[p]}\n",
            "    chosen = set()\n"),),
          ("tests/integration/test_firm_cli.py::test_protocol_firm_runs_only_firm_and_exports_from_the_stored_rows",)),
    Break("plan-counts-no-judgments", "the plan's reasons leave out the criterion judgments they make again",
          (("argus_dagster/outputs/history_words.py", "        c = sum(judgments.get(k, 0) for k in judged.get(text, set()))\n",
            "        c = 0\n"),),
          ("tests/unit/test_history_words.py",)),
    Break("embedded-json-keeps-lt", "embedded JSON keeps `<` as itself: a value holding `<!--<script>` swallows the page's script",
          (("argus_dagster/outputs/report.py", '{"<": "\\\\u003c", ">"', '{">"'),),
          ("tests/unit/test_report.py", "tests/integration/test_hostile_pages.py")),
    Break("disagreements-one-extreme-short", "the bounded disagreements keep `limit` extremes per input, one too few",
          (("argus_dagster/outputs/samples.py", "    ends = limit + 1\n", "    ends = limit\n"),),
          ("tests/unit/test_samples_page.py",)),
    Break("instance-made-without-lock", "a new evaluation's instance is made without the lock: commands started together "
          "make it at once", (("argus_dagster/client/instance.py", '    with _locked(home.parent / f".{home.name}.lock"):\n',
                               '    with __import__("contextlib").nullcontext():\n'),),
          ("tests/integration/test_writers.py::test_an_instance_is_made_once_by_processes_started_together",)),
    Break("site-version-ignores-errors", "the site's data version leaves out which pages failed",
          (("assets/overview.py", 'SITE_VOLATILE = ("bytes", "sha256")', 'SITE_VOLATILE = ("bytes", "sha256", "path", "error")'),),
          ("tests/integration/test_overview_asset.py::test_the_sites_version_moves_with_the_pages_written_not_with_their_bytes",)),
    Break("input-read-from-latest", "a step reads its input's latest materialization, not the one its own upstream step wrote",
          (("resources/storage.py", "        run_id = _producing_run(context)\n", "        run_id = None\n"),),
          ("tests/integration/test_writers.py::test_a_step_reads_what_its_upstream_step_wrote",)),
    Break("writers-never-waited-for", "a command never waits for the run in flight that materializes its partition",
          (("argus_dagster/client/runs.py", "        shared = wanted & planned\n",
            "        shared = set()\n"),),
          ("tests/integration/test_writers.py::test_a_command_waits_for_the_run_that_materializes_its_partition",)),
    Break("launch-without-gate", "two processes both find a partition free and both compute it: the check for runs in "
          "flight and the launch are not under the evaluation's gate",
          (("argus_dagster/client/runs.py", "        fcntl.flock(fd, fcntl.LOCK_EX)\n", ""),),
          ("tests/integration/test_pass_job.py::test_processes_started_together_never_compute_one_partition_at_once",)),
    Break("automation-ignores-the-pass", "the automation sensor requests runs while the evaluate job's pass is in flight",
          (("assets/automation.py", "        if a_pass_asks() or not passes_in_flight(records.instance):\n",
            "        if True:\n"),),
          ("tests/integration/test_pass_job.py::test_the_sensor_requests_one_pass_and_the_automation_sensor_holds_back",)),
    Break("ledger-without-a-stage", "the cost ledger asset leaves out FIRM-Video's scores though it declares them",
          (("assets/costs.py", '"firm_scores": firm_scores,', '"firm_scores": {},'),),
          ("tests/integration/test_cost_ledger.py::test_argus_export_costs_writes_the_whole_ledger_per_stage_task_and_model",)),
    Break("pages-without-their-site", "the leaderboard's partitions plan asks for the site too: the pages are written before "
          "what they show is done, and twice", (("argus_dagster/client/runs.py",
            'PROTOCOL_SELECTION = {"videoargus": tuple(a for a in ROLES.automated if a not in ROLES.site),',
            'PROTOCOL_SELECTION = {"videoargus": ROLES.automated,'),),
          ("tests/integration/test_overview_asset.py::test_only_the_site_writes_a_page",)),
    Break("firm-export-conditions-by-input-id", "argus export firm looks a row's condition media up by input id "
          "alone: two tasks with an input p0 show the first task's first frame or subject images for both",
          (("argus_dagster/protocols/firm/export.py", "        key = (task, iid)\n", "        key = iid\n"),),
          ("tests/unit/test_firm_export.py::test_tasks_sharing_an_input_id_each_show_their_own_condition_media",)),
    Break("firm-page-untold-as-answered", "a FIRM page shows an item the verifier could not tell (unverifiable, "
          "stored as a 'no' that is not verifiable) as answered: not met, or no violation",
          (("argus_dagster/outputs/firm_pages.py", "    if verifiable is False:\n", "    if verifiable is None:\n"),),
          ("tests/unit/test_firm_pages.py",)),
    Break("covers-counts-failed-videos", "the leaderboard's covers counts a video whose evaluation failed (an error, "
          "no final score) as covered: '7 of 9 criteria on most videos' where all 3 scored videos have 7 of 9",
          (("argus_dagster/method/leaderboard.py",
            '"covers": usual_coverage(ok["n_scored"].to_list(), ok["n_criteria"].to_list())',
            '"covers": usual_coverage(g["n_scored"].to_list(), g["n_criteria"].to_list())'),),
          ("tests/unit/test_overview.py::test_a_video_whose_evaluation_failed_is_not_covered",)),
    Break("samples-join-firm-without-model", "the sample browser joins FIRM-Video's ratings by task, input and sample "
          "without the model: every model's video of an input shows every model's ratings",
          (("argus_dagster/outputs/samples.py", '        v = v.join(firm, on=keys, how="left")',
            '        v = v.join(firm, on=["task", "input_id", "sample"], how="left")'),),
          ("tests/unit/test_samples_page.py::test_each_video_shows_its_own_models_firm_ratings",)),
    Break("partial-evidence-crowns-a-leader", "a task whose scored criteria cover less than half of the rubric weight "
          "names an overall leader as any other: no ranking per dimension leads, the rank is not marked",
          (("argus_dagster/method/leaderboard.py", "    return any(r.get(\"partial_evidence\") for r in rows)",
            "    return False"),),
          ("tests/unit/test_ranks.py",)),
    Break("pairwise-accuracy-denominator", "the pairwise accuracy's bootstrap interval divides a resample's credit "
          "by its videos, not by its pairs",
          (("argus_dagster/protocols/alignment/metrics.py", 'pairs = per["pairs"][pick].sum()', "pairs = len(idx)"),),
          ("tests/unit/test_alignment.py::test_pairwise_accuracy_interval_pools_credit_over_the_pairs_of_the_drawn_inputs",)),
    Break("diff-compares-first-pass", "argus diff compares the first pass with the latest, not the latest two",
          (("argus_dagster/records/history.py", "a, b = order[-2], order[-1]", "a, b = order[0], order[-1]"),),
          ("tests/integration/test_history.py::test_diff_reads_the_latest_two_of_three_passes_or_the_two_named",)),
    Break("fingerprint-forgets-served-model", "a pass's fingerprint never records the model id the judge's server "
          "answered with: an alias moved to another checkpoint looks like the same judge",
          (("argus_dagster/vlm/openai_compatible.py", "                                self.served_models.add(served[:200])\n",
            "                                pass\n"),),
          ("tests/integration/test_history.py::test_a_judge_switch_is_planned_recorded_and_diffed",)),
    Break("logistic-fit-without-grid", "the four-parameter logistic fit starts only from the usual few places "
          "and stops on a broad curve where a near step fits better",
          (("argus_dagster/protocols/alignment/metrics.py", "        for _grid_sse, point in profile_grid(x, y):\n",
            "        for _grid_sse, point in profile_grid(x, y)[:0]:\n"),),
          ("tests/unit/test_logistic_grid.py",)),
    Break("repeats-judged-once", "argus evaluate --repeat judges each sampled video once and copies the answer "
          "K times: a noisy judge measures as noiseless",
          (("argus_dagster/method/judge_noise.py", "    for k in range(repeats):\n        rows = judge_rows()\n",
            "    rows = judge_rows()\n    for k in range(repeats):\n"),),
          ("tests/integration/test_judge_noise.py",)),
    Break("intervals-ignore-judge-noise", "the leaderboard's intervals resample inputs only, not the judge's repeats",
          (("argus_dagster/method/leaderboard.py", "    if pools is not None:  # drawn after the inputs",
            "    if pools is None:  # drawn after the inputs"),),
          ("tests/unit/test_judge_noise.py",)),
    Break("compare-page-shows-a-minus-b", "a pair's comparison page shows A - B in its B - A column",
          (("argus_dagster/outputs/compare_pages.py", '{_num(r["diff"], True)}', '{_num(-r["diff"], True)}'),),
          ("tests/unit/test_compare_pages.py", "tests/integration/test_browser.py::test_a_win_matrix_cell_opens_the_pairs_comparison")),
    Break("reversed-control-is-the-original", "the control played backwards is the video as it is",
          (("argus_dagster/method/controls.py", "        return frames[::-1].copy()", "        return frames.copy()"),),
          ("tests/unit/test_controls.py", "tests/integration/test_controls.py")),
    Break("controls-page-caught-of-another-kind", "the overview's controls table shows each kind's caught share on "
          "the row of the kind before it",
          (("argus_dagster/outputs/overview.py",
            """<td class="num caught">{r["caught_share"]:.0%}</td>'""",
            """<td class="num caught">{rows["caught_share"][max(0, i - 1)]:.0%}</td>'"""),
           ("argus_dagster/outputs/overview.py", """or "–")}</td></tr>' for r in rows.iter_rows(named=True))""",
            """or "–")}</td></tr>' for i, r in enumerate(rows.iter_rows(named=True)))""")),
          ("tests/integration/test_controls.py",)),
    Break("new-judge-replaces-the-evaluation", "a new judge's scores replace the evaluation scored by another, "
          "with no profile named",
          (("argus_dagster/client/run_commands.py", "    if before is None or before == now:",
            "    if True:"),),
          ("tests/integration/test_judge_beside.py",)),
    Break("control-version-ignores-the-video", "control_scores' data version leaves out the content of the video "
          "scored: another control file under the same path keeps the version",
          (("assets/controls.py", 'CONTROL_SCORES_VOLATILE = ("uri",)', 'CONTROL_SCORES_VOLATILE = ("uri", "sha256")'),),
          ("tests/unit/test_versions.py",)),
    Break("noise-version-ignores-the-judge", "judge_noise's data version leaves out the judge that gave the repeats",
          (("assets/noise.py", "JUDGE_NOISE_VOLATILE: tuple[str, ...] = ()", 'JUDGE_NOISE_VOLATILE = ("judge",)'),),
          ("tests/unit/test_versions.py",)),
    Break("wiring-imports-a-top-level-assets", "the wiring imports the asset folder as a top-level `assets`, a name a "
          "user's Dagster project holds too",
          (("argus_dagster/definitions.py", "from argus_dagster.assets import (\n", "from assets import (\n"),),
          ("tests/integration/test_import_names.py",)),
    Break("gather-keeps-media-open", "the evidence loop never closes a video's media after its last criterion",
          (("argus_dagster/method/gather.py",
            "done = media.pop(video.key, None) if left[video.key] == 0 else None", "done = None"),),
          ("tests/unit/test_gather.py",)),
    Break("gather-error-stops-the-partition", "a criterion whose evidence raises stops the whole loop",
          (("argus_dagster/method/gather.py", "            return {**base, **evidence_failed(c.id, exc)}\n",
            "            raise\n"),),
          ("tests/unit/test_gather.py",)),
    Break("diff-misses-a-replaced-video", "argus diff reads only the input versions Dagster records, so a model's "
          "replaced video (a partitioned source, recorded by the record it read) is not an input that moved",
          (("argus_dagster/records/history.py", "            if not moved and ida is not None and idb is not None",
            "            if False and ida is not None and idb is not None"),),
          ("tests/integration/test_history.py::test_diff_reads_the_latest_two_of_three_passes_or_the_two_named",
           "tests/integration/test_many_writers.py::test_diff_names_a_replaced_video_while_a_third_pass_is_judging")),
    Break("key-holds-the-module", "a cache key names the record's module, so moving a record (a protocol's, into its "
          "folder) loses every entry the cache holds for it",
          (("argus_dagster/infra/identities.py", 'body = {"record": type(record).__name__, **dataclasses.asdict(record)}',
            'body = {"record": f"{type(record).__module__}.{type(record).__name__}", **dataclasses.asdict(record)}'),),
          ("tests/unit/test_identities.py::test_a_protocols_record_keeps_its_key_wherever_its_class_lives",)),
    Break("metadata-names-absolute-paths", "the IO manager records a table's absolute path, not one relative to the evaluation",
          (("resources/storage.py", '{"path": dg.MetadataValue.path(self._relative(path)),',
            '{"path": dg.MetadataValue.path(path),'),),
          ("tests/integration/test_pass_job.py::test_metadata_names_every_place_relative_to_the_evaluation",)),
    Break("relative-table-read-at-the-root", "a recorded table is read from the evaluation's parent folder",
          (("argus_dagster/infra/storage.py", "        return join(self.evaluation_dir, str(location))\n",
            "        return join(parent(self.evaluation_dir), str(location))\n"),),
          ("tests/integration/test_pass_job.py::test_metadata_names_every_place_relative_to_the_evaluation",
           "tests/integration/test_table_versions.py")),
    Break("range-partitions-share-a-context", "the partitions of a range run without a copy of the caller's context",
          (("argus_dagster/method/gather.py", "pool.submit(contextvars.copy_context().run, one, item)",
            "pool.submit(one, item)"),),
          ("tests/unit/test_gather.py",)),
    Break("pages-left-to-a-writer-in-flight", "a command that finds the pages being written by another run "
          "(which read before this command's runs) leaves them to it and never writes them again",
          (("argus_dagster/client/evaluate.py",
            '        if not wait_for_writers(ev.instance, RunSpec("site", [*asked, *_page_inputs(ev.defs)]), progress):\n',
            '        if True:\n'),),
          ("tests/integration/test_writers.py::test_the_pages_follow_a_command_that_finds_them_being_written",)),
    Break("leaderboard-left-to-a-writer-in-flight", "a command that scored partitions and finds the leaderboard being "
          "written by a run that read before them returns the leaderboard stored before",
          (("argus_dagster/client/evaluate.py", "    if ran_any and not board_due and wait_for_writers(",
            "    if False and wait_for_writers("),),
          ("tests/integration/test_writers.py::test_the_leaderboard_follows_a_command_that_finds_it_being_written",)),
    Break("pages-requested-but-not-run", "a command with nothing else to do leaves the pages Dagster requested "
          "when first asked",
          (("argus_dagster/client/evaluate.py", "        return board, site_last or not (pages_due or busy)\n",
            "        return board, site_last or not busy\n"),),
          ("tests/integration/test_staleness.py::test_a_command_with_nothing_to_do_asks_dagster_once",)),
)
SKIP = shutil.ignore_patterns(".git", ".venv*", ".argus", "__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info",
                              ".mypy_cache", ".ruff_cache")


def scratch_copy(dest: Path) -> Path:
    tree = dest / "tree"
    shutil.copytree(ROOT, tree, ignore=SKIP, symlinks=True)
    return tree


def apply(tree: Path, brk: Break) -> None:
    for rel, before, after in brk.edits:
        path = tree / rel
        text = path.read_text(encoding="utf-8")
        if text.count(before) != 1:
            raise LookupError(f"{rel}: the text to break is {'missing' if before not in text else 'not unique'}")
        path.write_text(text.replace(before, after), encoding="utf-8")


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[int, str]:
    # The copy lives in a temporary folder, so ``../shared/data`` beside it is not the bench's data: name
    # the data beside this checkout (tests/conftest.py reads ARGUS_SHARED_DATA first).
    data = os.environ.get("ARGUS_SHARED_DATA") or str(ROOT.parent / "shared" / "data")
    env = {**os.environ, "ARGUS_SHARED_DATA": data,
           "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
    return proc.returncode, (proc.stdout + proc.stderr)[-2000:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="breaks to apply (default: all)")
    ap.add_argument("--list", action="store_true", help="list the breaks and exit")
    ap.add_argument("--check", action="store_true",
                    help="only check that every break's text is still in its file, once (no tests run)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for one break's tests")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip running the tests on the unbroken copy first (a break is caught only if they pass there)")
    args = ap.parse_args(argv)
    if args.list:
        for b in BREAKS:
            print(f"{b.name}: {b.why} ({', '.join(b.tests)})")
        return 0
    if args.check:
        stale = []
        for b in BREAKS:
            for rel, before, _ in b.edits:
                text = (ROOT / rel).read_text(encoding="utf-8") if (ROOT / rel).exists() else ""
                if text.count(before) != 1:
                    stale.append(f"{b.name}: {rel}: the text to break is {'missing' if before not in text else 'not unique'}")
        print("\n".join(stale) if stale else f"all {len(BREAKS)} breaks apply")
        return 2 if stale else 0
    unknown = set(args.names) - {b.name for b in BREAKS}
    if unknown:
        ap.error(f"unknown breaks: {', '.join(sorted(unknown))}")
    chosen = [b for b in BREAKS if not args.names or b.name in args.names]
    surviving, stale = [], []
    if not args.no_baseline:
        tests = tuple(dict.fromkeys(t for b in chosen for t in b.tests))
        with tempfile.TemporaryDirectory(prefix="argus-mutant-") as d:
            rc, tail = run_tests(scratch_copy(Path(d)), tests, args.timeout)
        if rc != 0:
            print(f"the tests fail on the unbroken tree (pytest exit {rc}): no break can be judged\n{tail}")
            return 3
        print(f"baseline  {len(tests)} test files pass on the unbroken tree")
    for brk in chosen:
        with tempfile.TemporaryDirectory(prefix="argus-mutant-") as d:
            tree = scratch_copy(Path(d))
            try:
                apply(tree, brk)
            except LookupError as exc:
                print(f"STALE     {brk.name}: {exc}")
                stale.append(brk.name)
                continue
            t0 = time.monotonic()
            rc, tail = run_tests(tree, brk.tests, args.timeout)
            took = time.monotonic() - t0
            if rc == 1:  # tests ran and some failed: the break is caught
                print(f"caught    {brk.name} ({took:.0f} s)")
            else:
                surviving.append(brk.name)
                print(f"SURVIVED  {brk.name} (pytest exit {rc}, {took:.0f} s): {brk.why}\n{tail}")
    print(f"{len(chosen) - len(surviving) - len(stale)} of {len(chosen)} breaks caught"
          + (f"; surviving: {', '.join(surviving)}" if surviving else "")
          + (f"; stale: {', '.join(stale)}" if stale else ""))
    return 1 if surviving else 2 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
