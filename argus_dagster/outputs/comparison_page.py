"""An input's comparison page, built from every model's card under ``<task>/_cards/<input>/``: the
partitions of one task write their cards, and each rebuilds the page of every input it touched."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path

from argus_dagster.infra.names import file_name
from argus_dagster.infra.storage import Storage, join
from argus_dagster.outputs.report import FrameRow, render_comparison

# Rebuilding an input's comparison page (list the cards, write the page) is one step at a time in a
# process: two partitions of a range each writing the page from its own listing could leave the one
# that missed the other's card last.
_COMPARISON_PAGES = threading.Lock()
CARDS = "_cards"  # <task_dir>/_cards/<input>/<model and sample>.json: one card per video


def write_card(store: Storage, task_dir: Path | str, input_id: str, name: str, card: dict,
               frames: list[bytes]) -> None:
    """One video's card for its input's comparison page: ``card`` (scores, links) with ``frames``
    (JPEG thumbnails), as :func:`write_comparison` reads it back; ``name``: the video's own file name."""
    store.write_bytes(join(task_dir, CARDS, file_name(input_id), f"{name}.json"),
                      json.dumps({**card, "thumbs": [base64.b64encode(f).decode("ascii") for f in frames]}))


def write_comparison(store: Storage, task_dir: Path | str, task: str, input_id: str, prompt: str,
                     conditions: list[FrameRow] | None = None, source_src: str | None = None) -> Path | str:
    """The comparison page of one input from every model's card: the input's conditions (and the
    source video, played) above the outputs (``task_dir``: a folder or an ``s3://`` prefix of ``store``).
    One page at a time in a process: each lists the cards after its own card is written."""
    with _COMPARISON_PAGES:
        cards = []
        for f in store.list(join(task_dir, CARDS, file_name(input_id))):
            if "/" in f.rel or not f.rel.endswith(".json"):
                continue
            try:
                card = json.loads(store.read_bytes(f.uri).decode("utf-8"))
                card["frames"] = [base64.b64decode(x) for x in card.pop("thumbs", [])]
            except (ValueError, OSError, AttributeError):  # a damaged or vanished card: left out until rewritten
                continue
            cards.append(card)
        path = join(task_dir, "compare", f"{file_name(input_id)}.html")
        return store.write_bytes(path, render_comparison(task=task, input_id=input_id, prompt=prompt, models=cards,
                                                         conditions=conditions, source_src=source_src))
