"""The order in which requests that wait for a VLM slot are served: stage, priority, group, arrival.

Context variables carry the three keys from the code that makes a request to the client that queues
it (:class:`~argus_dagster.vlm.openai_compatible.OpenAICompatibleClient`); :func:`request_pool` hands
them to a thread pool's threads.
"""

from __future__ import annotations

import contextvars
import itertools
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator

# When requests wait for a slot, the client serves them by (stage, priority, group, arrival), lowest
# first. Concurrent runs in one process share a client. The stage is the pipeline's: rubrics (0) before
# evidence (1) before judgments (2), because earlier stages unblock later ones, so no partition sits
# at the evidence/scoring boundary while others' judgments hold the VLM. The priority is the run's:
# the CLI gives each task's runs the task's order, so tasks finish one after another and one run's
# Dagster work overlaps the others' VLM waits. The group is the video's (:func:`video_group`): within
# a stage, the requests of a video that started earlier go first, so a video's requests reach the
# server close together, while its frames are still in a prefix-caching server's cache.
REQUEST_STAGE: contextvars.ContextVar[int] = contextvars.ContextVar("argus_vlm_request_stage", default=0)
REQUEST_PRIORITY: contextvars.ContextVar[int] = contextvars.ContextVar("argus_vlm_request_priority", default=0)
REQUEST_GROUP: contextvars.ContextVar[int] = contextvars.ContextVar("argus_vlm_request_group", default=0)
STAGE_RUBRICS, STAGE_EVIDENCE, STAGE_JUDGMENTS = 0, 1, 2
_GROUPS = itertools.count(1)


def video_group() -> int:
    """A new group number, larger than every one given before in this process (see ``request_priority``)."""
    return next(_GROUPS)


@contextmanager
def request_priority(priority: int | None = None, *, stage: int | None = None, group: int | None = None) -> Iterator[None]:
    """Requests made in this block (and by the threads of a :func:`request_pool` made in it) wait
    with this ``priority``, ``stage`` and/or ``group`` (``None`` keeps the current one)."""
    tokens = [(var, var.set(value)) for var, value in ((REQUEST_PRIORITY, priority), (REQUEST_STAGE, stage),
                                                       (REQUEST_GROUP, group))
              if value is not None]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def _carry(stage: int, priority: int) -> None:
    REQUEST_STAGE.set(stage)
    REQUEST_PRIORITY.set(priority)


def request_pool(max_workers: int) -> ThreadPoolExecutor:
    """A thread pool whose threads make their requests with the caller's stage and priority (a task
    that must keep its submitter's group is submitted as ``contextvars.copy_context().run``)."""
    return ThreadPoolExecutor(max_workers=max_workers, initializer=_carry,
                              initargs=(REQUEST_STAGE.get(), REQUEST_PRIORITY.get()))
