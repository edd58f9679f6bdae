"""One chat-with-images interface for every vision-language backbone.

A message is ``{"role": ..., "content": [part, ...]}`` where a part is text (``str``) or an RGB frame
(``numpy`` array, H x W x 3, uint8, or a :class:`~argus_dagster.infra.media.FrameImage`, which carries its
JPEG so a frame sent in many requests is encoded once). Backends turn parts into what they speak:

- :class:`OpenAICompatibleClient`: any ``/v1/chat/completions`` server (vLLM, SGLang, Ollama, hosted
  APIs) over a pool of base URLs, with a concurrency bound per endpoint, retries with exponential
  backoff and jitter on 429 / 5xx / timeouts / connection errors, and exclusion of an endpoint that
  keeps failing to connect. Frames go as JPEG data URLs, longest side at most 768 px: at the quality
  used here a JPEG is several times smaller than the same frame as PNG, which keeps requests small.
- :class:`TransformersClient`: a vision-language model on local disk, loaded once per process.

:func:`chat_json` adds the bounded parse-retry (empty or unparseable answers are asked again, with
the parse error) and strips ``<think>…</think>`` blocks. Every call is counted in a
:class:`CallStats` (latency, tokens, retries, bytes, outcome) that the calling stage turns into
metadata. The API key is sent in a header and never appears in an error, a log or a record; an
endpoint is shown everywhere as :func:`redact_url` makes it (no userinfo, no query secrets).
"""

from __future__ import annotations

import base64
import contextvars
import functools
import hashlib
import heapq
import itertools
import json
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from argus_dagster.infra.media import JPEG_QUALITY, MAX_SIDE, FrameImage, MediaError, encode_jpeg, resize_longest
from argus_dagster.infra.redact import redact_text, redact_url

T = TypeVar("T")


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


class VlmError(RuntimeError):
    """A call that did not produce an answer (retries exhausted, a non-retryable status, no model)."""


class ParseError(ValueError):
    """An answer that is empty or does not contain what the caller asked for."""


# ----------------------------------------------------------------------------------- endpoints


def _route(base_url: str, route: str) -> str:
    """``route`` appended to the base URL's path (a query, e.g. ``?api-version=``, stays a query)."""
    p = urlsplit(base_url)
    return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + route, p.query, ""))


# ----------------------------------------------------------------------------------------- records


@dataclass
class Reply:
    text: str
    latency_s: float
    attempts: int
    endpoint: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cut: int | None = None  # the answer was longer than the client keeps: cut at this many characters
    cached_tokens: int | None = None  # prompt tokens the server took from its prefix cache, where it says


# Every CallStats a block opened with ``cost_ledger`` also receives what is recorded in it (one per thread
# and context: the criterion, judgment or rubric whose cost it is).
_LEDGERS: contextvars.ContextVar[tuple] = contextvars.ContextVar("argus_vlm_ledgers", default=())


@contextmanager
def cost_ledger() -> Iterator["CallStats"]:
    """A :class:`CallStats` that also counts every call recorded in this block (in this thread and
    context), whatever stage's stats it is recorded in: the cost of one row's work."""
    ledger = CallStats()
    token = _LEDGERS.set(_LEDGERS.get() + (ledger,))
    try:
        yield ledger
    finally:
        _LEDGERS.reset(token)


class CallStats:
    """Thread-safe counts of the calls one stage made; :meth:`as_metadata` summarizes them and
    :meth:`costs` gives the ledger a table row carries (its ``COSTS`` columns, :mod:`argus_dagster.infra.tables`).

    Tokens are each answer's ``usage`` (parse retries included: every answer was paid for); cached
    tokens are ``usage.prompt_tokens_details.cached_tokens`` where the server reports it (a
    prefix-caching server: the part of the prompt it did not prefill again). Images and bytes count
    what reached a server (every request that got an answer or timed out, retries included).

    ``requests`` counts what a server saw: every request that reached it (answered, refused with a
    status, timed out on this side, or cut by the server closing its connection), retries included,
    each outcome in ``errors``; an attempt that never connected (refused, unresolvable) is in
    ``errors`` and ``unsent``, not in ``requests``. ``request_seconds`` sums the requests' latencies.
    Token counts arrive clamped (:func:`usage_counts`) and sum in Python integers (no wrap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0            # logical calls (one answer wanted)
        self.requests = 0         # HTTP requests or generate() calls, retries included
        self.retries = 0          # transport retries
        self.parse_retries = 0    # answers asked again because they did not parse
        self.failures = 0         # logical calls that ended without a usable answer
        self.unsent = 0           # attempts that never reached a server (no connection)
        self.latencies: list[float] = []
        self.request_seconds = 0.0  # the requests' latencies summed
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.images = 0           # images sent
        self.image_bytes = 0      # their JPEG bytes
        self.bytes_sent = 0       # request bodies
        self.request_bytes: list[int] = []
        self.by_endpoint: dict[str, int] = {}
        self.errors: dict[str, int] = {}

    def _ledgers(self) -> list["CallStats"]:
        return [self] + [led for led in _LEDGERS.get() if led is not self]

    def add_request(self, endpoint: str, latency_s: float, nbytes: int, outcome: str, *, images: int = 0,
                    image_bytes: int = 0, reached: bool = True) -> None:
        from argus_dagster.infra.progress import PROGRESS

        PROGRESS.request_done()
        for stats in self._ledgers():
            with stats._lock:
                stats.by_endpoint[endpoint] = stats.by_endpoint.get(endpoint, 0) + 1
                if outcome != "ok":
                    stats.errors[outcome] = stats.errors.get(outcome, 0) + 1
                if not reached:  # no server saw it: no request, nothing sent
                    stats.unsent += 1
                    continue
                stats.requests += 1
                stats.latencies.append(latency_s)
                stats.request_seconds += max(0.0, latency_s)
                stats.request_bytes.append(nbytes)
                stats.bytes_sent += nbytes
                stats.images += images
                stats.image_bytes += image_bytes

    def add_call(self, reply: Reply | None, *, failed: bool = False) -> None:
        for stats in self._ledgers():
            with stats._lock:
                stats.calls += 1
                if reply is not None:
                    stats.retries += reply.attempts - 1
                    stats.prompt_tokens += reply.prompt_tokens or 0
                    stats.completion_tokens += reply.completion_tokens or 0
                    stats.cached_tokens += reply.cached_tokens or 0
                if failed:
                    stats.failures += 1

    def add_parse_retry(self) -> None:
        for stats in self._ledgers():
            with stats._lock:
                stats.parse_retries += 1

    def costs(self) -> dict[str, int]:
        """The ledger as a table row's ``COSTS`` columns."""
        with self._lock:
            return {"vlm_requests": self.requests, "vlm_retries": self.retries, "vlm_parse_retries": self.parse_retries,
                    "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                    "completion_tokens": self.completion_tokens, "images_sent": self.images,
                    "image_bytes_sent": self.image_bytes, "request_ms": int(round(self.request_seconds * 1000))}

    def as_metadata(self, prefix: str = "vlm") -> dict[str, Any]:
        with self._lock:
            lat = np.asarray(self.latencies) if self.latencies else np.zeros(0)
            sizes = np.asarray(self.request_bytes) if self.request_bytes else np.zeros(0)
            return {
                f"{prefix}_calls": self.calls,
                f"{prefix}_requests": self.requests,
                f"{prefix}_retries": self.retries,
                f"{prefix}_parse_retries": self.parse_retries,
                f"{prefix}_failures": self.failures,
                f"{prefix}_latency_mean_s": round(float(lat.mean()), 4) if lat.size else None,
                f"{prefix}_latency_p95_s": round(float(np.percentile(lat, 95)), 4) if lat.size else None,
                f"{prefix}_prompt_tokens": self.prompt_tokens,
                f"{prefix}_cached_tokens": self.cached_tokens,
                f"{prefix}_cached_share": cached_share(self.cached_tokens, self.prompt_tokens),
                f"{prefix}_request_seconds": round(self.request_seconds, 3),
                f"{prefix}_completion_tokens": self.completion_tokens,
                f"{prefix}_images_sent": self.images,
                f"{prefix}_image_mb_sent": round(self.image_bytes / 1e6, 3),
                f"{prefix}_mb_sent": round(self.bytes_sent / 1e6, 3),
                f"{prefix}_request_kb_mean": round(float(sizes.mean()) / 1024, 1) if sizes.size else None,
                f"{prefix}_requests_by_endpoint": dict(self.by_endpoint),
                f"{prefix}_request_errors": dict(self.errors),
            }


# ------------------------------------------------------------------------------------------- parts


def encode_image(frame: np.ndarray, max_side: int = MAX_SIDE, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes of an RGB frame with its longest side at most ``max_side``."""
    try:
        return encode_jpeg(frame, max_side, quality)
    except MediaError as exc:
        raise VlmError(str(exc)) from None


def frame_jpeg(frame: np.ndarray | FrameImage) -> bytes:
    """A frame's JPEG bytes; a :class:`FrameImage` reuses its encoding."""
    if isinstance(frame, FrameImage):
        try:
            return frame.jpeg()
        except MediaError as exc:
            raise VlmError(str(exc)) from None
    return encode_image(frame)


def data_url(frame: np.ndarray | FrameImage) -> str:
    """A frame as a JPEG data URL; a :class:`FrameImage` reuses its encoding."""
    return "data:image/jpeg;base64," + base64.b64encode(frame_jpeg(frame)).decode("ascii")


def is_image(part: Any) -> bool:
    return isinstance(part, (np.ndarray, FrameImage))


def image_array(part: np.ndarray | FrameImage) -> np.ndarray:
    return part.array if isinstance(part, FrameImage) else part


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def strip_think(text: str) -> str:
    """Drop reasoning blocks; an unterminated ``<think>`` drops everything after it."""
    text = _THINK.sub("", text or "")
    open_at = text.lower().find("<think>")
    return (text[:open_at] if open_at >= 0 else text).strip()


def extract_json(text: str) -> Any:
    """The JSON value in an answer: a fenced block, the whole text, or the first balanced object."""
    text = strip_think(text)
    if not text:
        raise ParseError("empty answer")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)] + [text]
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError:
            pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text[i:])
                return value
            except json.JSONDecodeError:
                continue
    raise ParseError(f"no JSON object in the answer ({text[:80]!r}{'...' if len(text) > 80 else ''})")


def scored_object(text: str, top: int) -> tuple[dict, int]:
    """The JSON object of an answer and its ``"score"``, an integer 1..``top`` (a digit string counts);
    anything else raises :class:`ParseError`."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise ParseError("the answer is not a JSON object")
    raw = data.get("score")
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw != int(raw) or not 1 <= raw <= top:
        raise ParseError(f'"score" must be an integer 1-{top}, got {raw!r}')
    return data, int(raw)


# ------------------------------------------------------------------------------------------ client


class VlmClient(Protocol):
    backend: str
    model: str

    def chat(self, messages: list[dict], *, max_tokens: int = 1024, temperature: float = 0.0,
             stats: CallStats | None = None, thinking: bool | None = None) -> Reply: ...


def chat_json(client: VlmClient, messages: list[dict], parse: Callable[[str], T], *, parse_retries: int = 2,
              max_tokens: int = 1024, stats: CallStats | None = None,
              thinking: bool | None = None) -> tuple[T, Reply]:
    """Ask until ``parse`` accepts the answer, at most ``1 + parse_retries`` times.

    A rejected answer is shown back to the model with the reason, so a model that wrapped its JSON in
    prose or broke a field can fix it. ``thinking=False`` asks the server not to think aloud (method
    §7: judge and ``vlm_qa`` calls). Raises :class:`VlmError` (transport) or :class:`ParseError`
    (still unparseable after the retries).
    """
    if stats is None:  # still counted by any open cost_ledger block
        stats = CallStats()
    convo = list(messages)
    last: ParseError | None = None
    for attempt in range(parse_retries + 1):
        try:
            reply = client.chat(convo, max_tokens=max_tokens, stats=stats, thinking=thinking)
        except VlmError:
            if stats is not None:
                stats.add_call(None, failed=True)
            raise
        try:
            value = parse(reply.text)
        except Exception as exc:  # whatever a parser raises on an answer is that answer's fault, not the run's
            last = exc if isinstance(exc, ParseError) else ParseError(f"{type(exc).__name__}: {str(exc)[:200]}")
            if reply.cut is not None:
                last = ParseError(f"{last} (the answer was cut at {reply.cut} characters)")
            if stats is not None:
                stats.add_call(reply, failed=attempt == parse_retries)
                if attempt < parse_retries:
                    stats.add_parse_retry()
            answer = strip_think(reply.text)
            convo = list(messages)
            if answer:
                convo.append({"role": "assistant", "content": [answer[:4000]]})
            convo.append({"role": "user", "content": [
                f"Your answer could not be used: {last}. Reply again with only the JSON object asked for."]})
            continue
        if stats is not None:
            stats.add_call(reply)
        return value, reply
    raise ParseError(f"unusable answer after {parse_retries + 1} attempts: {last}")


class MachineSlots:
    """At most ``n`` requests in flight to one endpoint from every process on this machine: one lock
    file per slot under ``folder`` (``fcntl.flock``, released by the kernel when a process dies, so a
    killed run never keeps a slot). A process first takes one of its own slots (the client's bound),
    then one of these; while every file is held it polls every ``poll_s`` seconds."""

    def __init__(self, folder: str | Path, n: int, poll_s: float = 0.01):
        self.folder, self.n, self.poll_s = Path(folder), n, poll_s
        self.folder.mkdir(parents=True, exist_ok=True)

    def acquire(self) -> int:
        """An open file descriptor holding one slot (give it to :meth:`release`)."""
        import fcntl

        start = random.randrange(self.n)
        while True:
            for i in range(self.n):
                fd = os.open(self.folder / f"slot-{(start + i) % self.n}", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
                except BlockingIOError:
                    os.close(fd)
            time.sleep(self.poll_s)

    @staticmethod
    def release(fd: int) -> None:
        os.close(fd)  # closing the descriptor drops its lock

    # An endpoint one process found unreachable is left out by every process of the machine until
    # the time that process set: the modification time of the folder's ``excluded`` file (one stat
    # per request to read it, and nothing to parse).
    def excluded(self, now: float | None = None) -> bool:
        try:
            return os.stat(self.folder / "excluded").st_mtime > (time.time() if now is None else now)
        except OSError:
            return False

    def exclude(self, for_s: float) -> None:
        self._mark(time.time() + for_s)

    def include(self) -> None:
        if self.excluded():
            self._mark(0.0)

    def _mark(self, until: float) -> None:
        path = self.folder / "excluded"
        try:
            path.touch()
            os.utime(path, (until, until))
        except OSError:  # a read-only folder: the exclusion stays this process's own
            pass


def slots_folder(root: str | Path, url: str, model: str) -> Path:
    """The slot files of one endpoint and model under ``root`` (the folder name is a hash: no URL,
    credentials included, is written to disk)."""
    return Path(root) / hashlib.sha256(f"{url}\n{model}".encode()).hexdigest()[:20]


# -------------------------------------------------------------------------------- one HTTP request

# requests' timeout bounds each read, not the request: a server that drips a byte every 0.2 s never
# trips it. Each request therefore gets a watchdog that shuts its socket down when the request's time
# is up; the connection that a thread's request is using is found through this thread-local.
_CONNECTION = threading.local()
DEFAULT_MAX_ANSWER_CHARS = 200_000


def _watched(base: type) -> type:
    class Watched(base):  # type: ignore[misc, valid-type]
        def request(self, *args, **kwargs):
            watch = getattr(_CONNECTION, "watch", None)
            if watch is not None:  # the watchdog of this thread's request may now shut this connection
                watch["conn"] = self
            return super().request(*args, **kwargs)
    Watched.__name__ = f"Watched{base.__name__}"
    return Watched


def _adapter():
    """A requests adapter whose connections the deadline watchdog can reach."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class Pool(HTTPConnectionPool):
        ConnectionCls = _watched(HTTPConnection)

    class SPool(HTTPSConnectionPool):
        ConnectionCls = _watched(HTTPSConnection)

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": SPool}

    return Adapter()


class DeadlineExceeded(Exception):
    """The whole request (connecting, sending, the headers and the body) took longer than allowed."""


@dataclass
class _Answer:
    status: int
    headers: Any  # requests' case-insensitive mapping
    body: bytes
    complete: bool  # False: the body was longer than the client reads, and only its head is here


def _post(session, url: str, data: bytes, headers: dict[str, str], timeout_s: float, max_bytes: int) -> _Answer:
    """One POST whose whole exchange ends within ``timeout_s`` (else :class:`DeadlineExceeded`) and
    of whose body at most ``max_bytes`` are read."""
    import socket

    watch: dict[str, Any] = {}
    fired, done = threading.Event(), threading.Event()

    def shut() -> None:
        fired.set()
        while not done.is_set():  # the connection may still be connecting: until it has a socket
            sock = getattr(watch.get("conn"), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # a blocked read returns at once
                except OSError:
                    pass
                return
            done.wait(0.05)

    timer = threading.Timer(timeout_s, shut)
    timer.daemon = True
    _CONNECTION.watch = watch
    timer.start()
    resp = None
    try:
        resp = session.post(url, data=data, headers=headers, stream=True, timeout=(min(10.0, timeout_s), timeout_s))
        chunks, size, complete = [], 0, True
        for chunk in resp.iter_content(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                complete = False
                break
            if fired.is_set():
                break
        if fired.is_set():
            raise DeadlineExceeded()
        return _Answer(resp.status_code, resp.headers, b"".join(chunks)[:max_bytes], complete)
    except Exception:
        if fired.is_set():
            raise DeadlineExceeded() from None
        raise
    finally:
        done.set()
        timer.cancel()
        _CONNECTION.watch = None
        if resp is not None:
            resp.close()


def _salvage_content(head: bytes) -> str | None:
    """The assistant message's text from the head of a chat completion too long to read whole."""
    text = head.decode("utf-8", "ignore")
    m = re.search(r'"content"\s*:\s*"', text)
    if not m:
        return None
    rest = text[m.end():]
    try:
        return json.decoder.scanstring('"' + rest, 1)[0]  # the content ended inside the head
    except ValueError:
        pass
    for cut in range(len(rest), max(len(rest) - 12, -1), -1):  # drop an escape cut in half
        try:
            return json.loads('"' + rest[:cut] + '"')
        except ValueError:
            continue
    return None


@dataclass
class _Endpoint:
    url: str
    in_flight: int = 0
    shown: str = ""  # the URL as errors, stats and replies show it (redact_url)
    consecutive_failures: int = 0
    excluded_until: float = 0.0
    # The server answered 400 to ``chat_template_kwargs`` and accepted the request without it.
    rejects_thinking_switch: bool = False
    local: threading.local = field(default_factory=threading.local)
    machine: MachineSlots | None = None  # the bound shared with every process on this machine


@dataclass(order=True)
class _Waiter:
    stage: int
    priority: int
    group: int
    arrival: int
    ready: threading.Event = field(default_factory=threading.Event, compare=False)
    endpoint: _Endpoint | None = field(default=None, compare=False)
    gone: bool = field(default=False, compare=False)  # stopped waiting (interrupted): skipped


class OpenAICompatibleClient:
    """``POST {base_url}/chat/completions`` over a pool of endpoints.

    Each endpoint takes at most ``concurrency`` requests at once; a request goes to the healthy endpoint
    with the fewest in flight. An endpoint that fails to connect ``exclude_after`` times in a row is
    left out for ``exclude_for_s`` seconds (then tried again); with ``slots_dir``, by every process
    of the machine. Retryable outcomes: 429 (its
    ``Retry-After`` is honoured), 5xx, timeouts, connection errors and bodies that are not a chat
    completion; other 4xx statuses fail at once (a bad request does not get better by repeating).

    ``thinking=False`` sends ``chat_template_kwargs: {"enable_thinking": false}`` (vLLM and SGLang pass
    it to the chat template, so reasoning models answer without a thinking block). A server that
    answers 400 to the field is asked again at once without it; when that is accepted, the endpoint
    is remembered as one that rejects the switch and later requests to it go without.
    """

    backend = "openai"

    def __init__(self, base_urls: list[str] | str, model: str, api_key: str = "", *, concurrency: int = 8,
                 timeout_s: float = 120.0, max_retries: int = 5, backoff_s: float = 0.5, backoff_max_s: float = 20.0,
                 exclude_after: int = 2, exclude_for_s: float = 30.0, seed: int | None = None,
                 slots_dir: str | Path | None = None, max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS):
        urls = [u.strip().rstrip("/") for u in (base_urls.split(",") if isinstance(base_urls, str) else base_urls)]
        urls = [u for u in urls if u]
        if not urls:
            raise VlmError("no VLM endpoint configured: set ARGUS_VLM_BASE_URL (comma-separated for a pool)")
        if not model:
            raise VlmError("no VLM model name configured: set ARGUS_VLM_MODEL")
        if concurrency < 1:
            raise VlmError(f"VLM concurrency must be at least 1, got {concurrency}")
        self.model = model
        self._key = api_key
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        if max_answer_chars < 1:
            raise VlmError(f"the longest VLM answer kept must be at least 1 character, got {max_answer_chars}")
        self.max_answer_chars = max_answer_chars
        # JSON escapes a character in at most 6 bytes; the rest of a completion is small.
        self.max_body_bytes = 6 * max_answer_chars + 65536
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.exclude_after = exclude_after
        self.exclude_for_s = exclude_for_s
        # With ``slots_dir``, each endpoint's bound holds for every process on this machine (runs the
        # UI, the sensor or argus evaluate start at once), not only for this one.
        self.endpoints = [_Endpoint(u, shown=redact_url(u),
                                    machine=MachineSlots(slots_folder(slots_dir, u, model), concurrency)
                                    if slots_dir else None) for u in urls]
        self._lock = threading.Lock()
        self._waiting: list[_Waiter] = []  # a heap: (stage, priority, group, arrival)
        self._arrivals = itertools.count()
        self._rng = random.Random(seed)

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatibleClient(model={self.model!r}, endpoints={[e.shown for e in self.endpoints]})"

    # -- endpoint choice ------------------------------------------------------------------------
    def _pick(self) -> _Endpoint | None:
        """The endpoint the next request should use, or None when every usable one is full (under the lock)."""
        now = time.monotonic()
        healthy = [e for e in self.endpoints
                   if e.excluded_until <= now and not (e.machine is not None and e.machine.excluded())]
        pool = healthy or [min(self.endpoints, key=lambda e: e.excluded_until)]
        free = [e for e in pool if e.in_flight < self.concurrency]
        return min(free, key=lambda e: (e.in_flight, e.consecutive_failures)) if free else None

    def _dispatch(self) -> None:
        """Hand free slots to waiting requests, most urgent first (under the lock)."""
        while self._waiting:
            ep = self._pick()
            if ep is None:
                return
            waiter = heapq.heappop(self._waiting)
            if waiter.gone:
                continue
            ep.in_flight += 1
            waiter.endpoint = ep
            waiter.ready.set()

    def _acquire(self) -> _Endpoint:
        """A slot on an endpoint. Requests that wait are served by stage, then priority, then group
        (lower first; see ``request_priority``), then in arrival order."""
        with self._lock:
            waiter = _Waiter(REQUEST_STAGE.get(), REQUEST_PRIORITY.get(), REQUEST_GROUP.get(), next(self._arrivals))
            heapq.heappush(self._waiting, waiter)
            self._dispatch()
        # A release hands the slot over; the timeout only matters when an endpoint's exclusion ends
        # while every other one is full.
        try:
            while not waiter.ready.wait(timeout=0.25):
                with self._lock:
                    self._dispatch()
        except BaseException:  # interrupted while waiting: give back a slot handed over meanwhile
            with self._lock:
                waiter.gone = True
                if waiter.endpoint is not None:
                    waiter.endpoint.in_flight -= 1
                    self._dispatch()
            raise
        return waiter.endpoint

    def _release(self, ep: _Endpoint, connect_failed: bool) -> None:
        with self._lock:
            ep.in_flight -= 1
            if connect_failed:
                ep.consecutive_failures += 1
                if ep.consecutive_failures >= self.exclude_after:
                    ep.excluded_until = time.monotonic() + self.exclude_for_s
                    if ep.machine is not None:
                        ep.machine.exclude(self.exclude_for_s)
            else:
                if ep.machine is not None and (ep.consecutive_failures or ep.excluded_until):
                    ep.machine.include()
                ep.consecutive_failures = 0
                ep.excluded_until = 0.0
            self._dispatch()

    def _session(self, ep: _Endpoint):
        import requests

        s = getattr(ep.local, "session", None)
        if s is None:
            s = ep.local.session = requests.Session()
            s.mount("http://", _adapter())
            s.mount("https://", _adapter())
        return s

    def _redact(self, text: str) -> str:
        """``text`` from a server without the key, any endpoint's raw URL or anything that looks like a
        credential (:func:`redact_text`); a server may echo any of them."""
        for e in self.endpoints:
            if e.url != e.shown:
                text = text.replace(e.url, e.shown)
        return redact_text(text, (self._key,) if self._key else ())

    def _reply_text(self, answer: _Answer) -> tuple[str, dict, int | None]:
        """The assistant's text, the completion (for its usage) and where the text was cut (None: whole).
        Raises ValueError-like errors for a body that is not a chat completion."""
        if answer.complete:
            data = json.loads(answer.body)
            text = data["choices"][0]["message"].get("content") or ""
            text = text if isinstance(text, str) else json.dumps(text)
        else:
            data, text = {}, _salvage_content(answer.body)
            if text is None:
                raise ValueError("a body too long to read, with no answer in its head")
        text = self._redact(text)  # whole, before any cut
        if not answer.complete or len(text) > self.max_answer_chars:
            return text[:self.max_answer_chars], data, self.max_answer_chars
        return text, data, None

    # -- one call ---------------------------------------------------------------------------------
    def body(self, messages: list[dict], max_tokens: int, temperature: float, thinking: bool | None = None) -> dict:
        return self._body(messages, max_tokens, temperature, thinking)[0]

    def _body(self, messages: list[dict], max_tokens: int, temperature: float,
              thinking: bool | None = None) -> tuple[dict, int, int]:
        """The request body, and how many images it carries and their JPEG bytes."""
        out, images, image_bytes = [], 0, 0
        for m in messages:
            parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
            if all(isinstance(p, str) for p in parts):
                content: Any = "\n".join(parts)
            else:
                content = []
                for p in parts:
                    if is_image(p):
                        jpeg = frame_jpeg(p)
                        images, image_bytes = images + 1, image_bytes + len(jpeg)
                        url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
                        content.append({"type": "image_url", "image_url": {"url": url}})
                    else:
                        content.append({"type": "text", "text": str(p)})
            out.append({"role": m["role"], "content": content})
        body = {"model": self.model, "messages": out, "max_tokens": max_tokens, "temperature": temperature}
        if thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": thinking}
        return body, images, image_bytes

    def chat(self, messages: list[dict], *, max_tokens: int = 1024, temperature: float = 0.0,
             stats: CallStats | None = None, thinking: bool | None = None) -> Reply:
        import requests

        if stats is None:  # still counted by any open cost_ledger block
            stats = CallStats()
        body, n_images, n_image_bytes = self._body(messages, max_tokens, temperature, thinking)
        payload = json.dumps(body).encode()
        plain = payload
        if "chat_template_kwargs" in body:  # the same request without the switch, for endpoints that reject it
            plain = json.dumps({k: v for k, v in body.items() if k != "chat_template_kwargs"}).encode()
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        last_error = "no attempt made"
        t_call = time.perf_counter()
        for attempt in range(1, self.max_retries + 2):
            ep = self._acquire()
            try:
                held = ep.machine.acquire() if ep.machine else None
            except BaseException:
                self._release(ep, False)
                raise
            t0 = time.perf_counter()
            wait, fatal = None, ""
            connect_failed = False
            sent = plain if ep.rejects_thinking_switch else payload
            url = _route(ep.url, "/chat/completions")
            try:
                resp = _post(self._session(ep), url, sent, headers, self.timeout_s, self.max_body_bytes)
                if resp.status == 400 and sent is not plain:
                    # Perhaps the switch itself was refused: the same request without it, at once.
                    if stats is not None:
                        stats.add_request(ep.shown, time.perf_counter() - t0, len(sent), "http_400_thinking_switch",
                                          images=n_images, image_bytes=n_image_bytes)
                    t0 = time.perf_counter()
                    sent = plain
                    resp = _post(self._session(ep), url, sent, headers, self.timeout_s, self.max_body_bytes)
                    if resp.status != 400:
                        ep.rejects_thinking_switch = True
            except DeadlineExceeded:
                stale, ep.local.session = ep.local.session, None  # its connection was shut down
                if stale is not None:
                    stale.close()
                outcome, last_error = "timeout", f"{ep.shown}: no whole answer within {self.timeout_s:g}s"
            except requests.exceptions.ConnectionError as exc:
                connect_failed = True
                if _was_sent(exc):  # the server had it and closed or reset the connection: a request it saw
                    outcome, last_error = "connection_closed", f"{ep.shown}: the server closed the connection"
                else:
                    outcome, last_error = "connection_error", f"{ep.shown}: connection failed ({type(exc).__name__})"
            except requests.exceptions.Timeout:
                outcome, last_error = "timeout", f"{ep.shown}: no answer within {self.timeout_s:g}s"
            except requests.exceptions.RequestException as exc:
                outcome, last_error = "request_error", f"{ep.shown}: {type(exc).__name__}"
            else:
                status = resp.status
                if status == 200:
                    try:
                        text, data, cut = self._reply_text(resp)
                        prompt_n, completion_n, cached_n = usage_counts(data.get("usage"))
                        reply = Reply(text=text, latency_s=time.perf_counter() - t_call, attempts=attempt, endpoint=ep.shown,
                                      prompt_tokens=prompt_n, completion_tokens=completion_n, cut=cut,
                                      cached_tokens=cached_n)
                        outcome = "ok"
                    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
                        outcome, last_error = "bad_body", f"{ep.shown}: 200 with a body that is not a chat completion"
                elif status == 429:
                    outcome, last_error = "http_429", f"{ep.shown}: 429 rate limited"
                    wait = _retry_after(resp.headers.get("Retry-After"))
                elif status >= 500:
                    outcome, last_error = f"http_{status}", f"{ep.shown}: server error {status}"
                else:  # a bad request does not get better by repeating it
                    outcome = f"http_{status}"
                    # Redacted whole, then cut: a secret cut in half is no longer recognizable.
                    shown = self._redact(resp.body.decode("utf-8", "replace"))
                    fatal = f"{ep.shown}: HTTP {status} (not retried): {shown[:200]}"
            if held is not None:
                ep.machine.release(held)
            self._release(ep, connect_failed)
            # What never reached a server (no connection) was not sent and is no request of its.
            reached = outcome not in ("connection_error", "request_error")
            stats.add_request(ep.shown, time.perf_counter() - t0, len(sent) if reached else 0, outcome,
                              images=n_images if reached else 0, image_bytes=n_image_bytes if reached else 0,
                              reached=reached)
            if outcome == "ok":
                return reply
            if fatal:
                raise VlmError(fatal)
            if attempt > self.max_retries:
                break
            if wait is None:
                wait = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
                wait *= 0.5 + self._rng.random()  # jitter: retries of many threads do not line up
            if connect_failed and len(self.endpoints) > 1:
                wait = min(wait, self.backoff_s)  # another endpoint can take it straight away
            time.sleep(wait)
        raise VlmError(f"VLM call failed after {self.max_retries + 1} attempts: {self._redact(last_error)}")


# No context window holds more tokens than this: a larger count from a server is an error of its,
# read as this bound, so that no sum of counts can leave a 64-bit column.
MAX_TOKENS_PER_ANSWER = 100_000_000


def _count(usage: Any, name: str) -> int | None:
    """A token count from a completion's ``usage``, when it is a number (a server may send anything),
    clamped to ``0..MAX_TOKENS_PER_ANSWER``."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(min(max(value, 0), MAX_TOKENS_PER_ANSWER))


def usage_counts(usage: Any) -> tuple[int | None, int | None, int | None]:
    """Prompt, completion and cached-prompt tokens of a completion's ``usage``, each clamped to a sane
    range: non-negative, at most :data:`MAX_TOKENS_PER_ANSWER`, and the cached at most the prompt (a
    server that says it cached more than it was sent is read as having cached all of it; without a
    prompt count, no cached count is kept)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    cached = _count(usage.get("prompt_tokens_details"), "cached_tokens")
    if cached is not None:
        cached = None if prompt is None else min(cached, prompt)
    return prompt, completion, cached


def cached_share(cached: int | None, prompt: int | None) -> float | None:
    """The share of prompt tokens a server took from its cache, 0-1 (rounded to 4 places); None
    without prompt tokens. Counts from anywhere (a stored table) are clamped here too."""
    if not prompt or prompt <= 0:
        return None
    return round(min(max(cached or 0, 0), prompt) / prompt, 4)


def _was_sent(exc: Exception) -> bool:
    """Whether a connection error came after the request was on its way (the server closed or reset
    the connection) rather than before it had one (refused, unresolvable, TLS or connect timeout)."""
    import requests
    from urllib3.exceptions import ConnectTimeoutError

    if isinstance(exc, (requests.exceptions.ConnectTimeout, requests.exceptions.SSLError,
                        requests.exceptions.ProxyError)):
        return False
    seen = exc.args[0] if exc.args else None
    return not isinstance(getattr(seen, "reason", seen), ConnectTimeoutError)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, min(float(value), 120.0))
    except ValueError:
        return None


class TransformersClient:
    """A vision-language model on local disk (``AutoModelForImageTextToText`` + ``AutoProcessor``).

    Loaded once; generation is serialized with a lock, because one model on one device gains nothing
    from concurrent ``generate`` calls and would need the memory twice. Greedy decoding.
    """

    backend = "transformers"

    def __init__(self, path: str | Path, device: str = "cpu", max_new_tokens: int = 8192, name: str = ""):
        path = Path(path)
        if not (path / "config.json").is_file():
            raise VlmError(f"local VLM not found: {path / 'config.json'} is missing "
                           "(set ARGUS_VLM_PATH to a folder saved with save_pretrained)")
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.model = name or path.name
        self.path = path
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.processor = AutoProcessor.from_pretrained(str(path), local_files_only=True)
        self.net = AutoModelForImageTextToText.from_pretrained(str(path), local_files_only=True).to(device).eval()
        self._torch = torch
        self._lock = threading.Lock()

    @functools.cached_property
    def weights(self) -> str | None:
        """The checkpoint's content hash (:func:`~argus_dagster.infra.identities.checkpoint_sha256`): part of
        every cache identity this client's answers have, so new weights under the same name are asked again."""
        from argus_dagster.infra.identities import checkpoint_sha256

        return checkpoint_sha256(self.path)

    def chat(self, messages: list[dict], *, max_tokens: int = 1024, temperature: float = 0.0,
             stats: CallStats | None = None, thinking: bool | None = None) -> Reply:
        from PIL import Image

        if stats is None:  # still counted by any open cost_ledger block
            stats = CallStats()
        convo, images = [], []
        for m in messages:
            parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
            content = []
            for p in parts:
                if is_image(p):
                    images.append(Image.fromarray(np.ascontiguousarray(resize_longest(image_array(p), MAX_SIDE))))
                    content.append({"type": "image"})
                else:
                    content.append({"type": "text", "text": str(p)})
            convo.append({"role": m["role"], "content": content})
        t0 = time.perf_counter()
        try:
            # The same switch as on servers: a template that knows `enable_thinking` skips the thinking block.
            switch = {} if thinking is None else {"enable_thinking": thinking}
            prompt = self.processor.apply_chat_template(convo, add_generation_prompt=True, tokenize=False, **switch)
            inputs = self.processor(text=prompt, images=images or None, return_tensors="pt").to(self.device)
            with self._lock, self._torch.inference_mode():
                out = self.net.generate(**inputs, max_new_tokens=min(max_tokens, self.max_new_tokens), do_sample=False)
            n_in = inputs["input_ids"].shape[1]
            text = self.processor.decode(out[0, n_in:], skip_special_tokens=True)
        except Exception as exc:  # a model that cannot take this input: the caller records it
            if stats is not None:
                stats.add_request("local", time.perf_counter() - t0, 0, "error")
            raise VlmError(f"local VLM {self.path}: generation failed: {type(exc).__name__}: {exc}") from exc
        latency = time.perf_counter() - t0
        if stats is not None:
            stats.add_request("local", latency, 0, "ok", images=len(images))
        return Reply(text=text, latency_s=latency, attempts=1, endpoint="local", prompt_tokens=int(n_in),
                     completion_tokens=int(out.shape[1] - n_in))
