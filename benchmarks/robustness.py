"""Backbone robustness on the demo bench: the ``default`` profile against ``vlm-only``.

Starts the loopback OpenAI-compatible test server (no latency), builds the demo bench in a temporary
ARGUS_HOME, evaluates it with the VLM judge (``default``) and with every plan one ``vlm_qa``
(``vlm-only``), each stored apart, then prints ``argus robustness`` for the bench and the requests
each profile made. The server's answers are deterministic stand-ins, so the figures show the
machinery on real media, not how a real judge behaves.

    .venv/bin/python -m benchmarks.robustness [--models faithful frozen blurry]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=None, help="only these demo models (default: all)")
    args = ap.parse_args()

    from tests.servers.openai_server import FakeVlmServer, kind_of

    home = tempfile.mkdtemp(prefix="argus_robustness_bench_")
    os.environ["ARGUS_HOME"] = home
    for k in ("ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR", "ARGUS_BENCH", "ARGUS_PROFILE", "ARGUS_RUBRIC_BASE_URL"):
        os.environ.pop(k, None)
    with FakeVlmServer(latency_s=0.0) as srv:
        os.environ.update(ARGUS_VLM_BASE_URL=srv.base_url, ARGUS_VLM_MODEL="bench-judge")
        from argus_dagster.client.cli import main as argus
        from argus_dagster.client.demo import build_demo_bench
        from argus_dagster.client.evaluate import run_all
        from argus_dagster.infra.settings import evaluation_settings, record_evaluation

        bench, cands = build_demo_bench(home, progress=lambda m: None)
        for profile in ("default", "vlm-only"):
            settings = evaluation_settings(bench, cands, name="demo", profile=profile)
            record_evaluation(settings)
            n0, t0 = len(srv.requests), time.perf_counter()
            board = run_all(models=args.models, progress=lambda m: None, settings=settings)
            kinds = [kind_of(r["body"]) for r in srv.requests[n0:]]
            print(f"{profile}: {int(board['n_videos'].sum())} videos scored in {time.perf_counter() - t0:.1f} s; "
                  f"requests: {', '.join(f'{k} {kinds.count(k)}' for k in sorted(set(kinds)))}")
        print()
        argus(["robustness", "--bench", "demo"])


if __name__ == "__main__":
    main()
