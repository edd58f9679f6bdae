"""The OpenAI-compatible HTTP client: ``POST {base_url}/chat/completions`` over a pool of endpoints.

Any such server (vLLM, SGLang, Ollama, hosted APIs) over a pool of base URLs, with a concurrency
bound per endpoint (optionally machine-wide: :mod:`argus_dagster.vlm.slots`), retries with
exponential backoff and jitter on 429 / 5xx / timeouts / connection errors, and exclusion of an
endpoint that keeps failing to connect. Frames go as JPEG data URLs (:mod:`argus_dagster.vlm.images`);
each request runs under a whole-request deadline (:mod:`argus_dagster.vlm.watchdog`). The API key is
sent in a header and never appears in an error, a log or a record; an endpoint is shown everywhere as
:func:`~argus_dagster.infra.redact.redact_url` makes it (no userinfo, no query secrets).

This module loads ``requests`` and ``urllib3``; :mod:`resources.vlm` imports it when it builds a client,
so loading the definitions does not.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import requests

from argus_dagster.infra.names import text_problem
from argus_dagster.infra.redact import redact_text, redact_url
from argus_dagster.vlm.images import frame_jpeg, is_image_part
from argus_dagster.vlm.ledger import CallStats, usage_counts
from argus_dagster.vlm.parsing import salvage_content
from argus_dagster.vlm.priorities import REQUEST_GROUP, REQUEST_PRIORITY, REQUEST_STAGE
from argus_dagster.vlm.reply import DEFAULT_MAX_ANSWER_CHARS, Reply, VlmError
from argus_dagster.vlm.slots import MachineSlots, slots_folder
from argus_dagster.vlm.watchdog import DeadlineExceeded, HttpAnswer, post_within_deadline, was_sent, watched_session


def _route(base_url: str, route: str) -> str:
    """``route`` appended to the base URL's path (a query, e.g. ``?api-version=``, stays a query)."""
    p = urlsplit(base_url)
    return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + route, p.query, ""))


class RequestBody(NamedTuple):
    """A chat completion request's body, and how many images it carries and their JPEG bytes."""
    body: dict
    images: int
    image_bytes: int


class ReplyText(NamedTuple):
    """The assistant's text of a completion, the completion (for its usage), and where the text was
    cut (None: whole)."""
    text: str
    completion: dict
    cut: int | None


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
        self.served_models: set[str] = set()  # the model ids the servers' answers named (a pass's fingerprint)
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
        assert waiter.endpoint is not None  # set before ready
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

    def _session(self, ep: _Endpoint) -> requests.Session:
        s = getattr(ep.local, "session", None)
        if s is None:
            s = ep.local.session = watched_session()
        return s

    def _redact(self, text: str) -> str:
        """``text`` from a server without the key, any endpoint's raw URL or anything that looks like a
        credential (:func:`redact_text`); a server may echo any of them."""
        for e in self.endpoints:
            if e.url != e.shown:
                text = text.replace(e.url, e.shown)
        return redact_text(text, (self._key,) if self._key else ())

    def _reply_text(self, answer: HttpAnswer) -> ReplyText:
        """The assistant's text, the completion (for its usage) and where the text was cut (None: whole).
        Raises ValueError-like errors for a body that is not a chat completion."""
        if answer.complete:
            data = json.loads(answer.body)
            text = data["choices"][0]["message"].get("content") or ""
            text = text if isinstance(text, str) else json.dumps(text)
        else:
            data, text = {}, salvage_content(answer.body)
            if text is None:
                raise ValueError("a body too long to read, with no answer in its head")
        text = self._redact(text)  # whole, before any cut
        if not answer.complete or len(text) > self.max_answer_chars:
            return ReplyText(text[:self.max_answer_chars], data, self.max_answer_chars)
        return ReplyText(text, data, None)

    # -- one call ---------------------------------------------------------------------------------
    def body(self, messages: list[dict], max_tokens: int, temperature: float, thinking: bool | None = None) -> dict:
        return self._body(messages, max_tokens, temperature, thinking).body

    def _body(self, messages: list[dict], max_tokens: int, temperature: float,
              thinking: bool | None = None) -> RequestBody:
        """The request body, and how many images it carries and their JPEG bytes."""
        out, images, image_bytes = [], 0, 0
        for m in messages:
            parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
            if all(isinstance(p, str) for p in parts):
                content: Any = "\n".join(parts)
            else:
                content = []
                for p in parts:
                    if is_image_part(p):
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
        return RequestBody(body, images, image_bytes)

    def chat(self, messages: list[dict], *, max_tokens: int = 1024, temperature: float = 0.0,
             stats: CallStats | None = None, thinking: bool | None = None) -> Reply:
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
                resp = post_within_deadline(self._session(ep), url, sent, headers, self.timeout_s, self.max_body_bytes)
                if resp.status == 400 and sent is not plain:
                    # Perhaps the switch itself was refused: the same request without it, at once.
                    if stats is not None:
                        stats.add_request(ep.shown, time.perf_counter() - t0, len(sent), "http_400_thinking_switch",
                                          images=n_images, image_bytes=n_image_bytes)
                    t0 = time.perf_counter()
                    sent = plain
                    resp = post_within_deadline(self._session(ep), url, sent, headers, self.timeout_s, self.max_body_bytes)
                    if resp.status != 400:
                        ep.rejects_thinking_switch = True
            except DeadlineExceeded:
                stale, ep.local.session = ep.local.session, None  # its connection was shut down
                if stale is not None:
                    stale.close()
                outcome, last_error = "timeout", f"{ep.shown}: no whole answer within {self.timeout_s:g}s"
            except requests.exceptions.ConnectionError as exc:
                connect_failed = True
                if was_sent(exc):  # the server had it and closed or reset the connection: a request it saw
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
                        not_text = text_problem(text)  # a "\ud800" escape in the body: no table could hold it
                        if not_text:
                            outcome, last_error = "not_text", f"{ep.shown}: 200 with an answer that is {not_text}"
                        else:
                            served = data.get("model")
                            if isinstance(served, str) and served and not text_problem(served):
                                self.served_models.add(served[:200])
                            reply = Reply(text=text, latency_s=time.perf_counter() - t_call, attempts=attempt,
                                          endpoint=ep.shown, prompt_tokens=prompt_n, completion_tokens=completion_n,
                                          cut=cut, cached_tokens=cached_n)
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
                assert ep.machine is not None  # held only comes from ep.machine
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


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, min(float(value), 120.0))
    except ValueError:
        return None
