"""A small OpenAI-compatible chat-completions server on loopback, with latency and faults the test sets.

It answers the three kinds of request the project makes, told apart by their system prompt: rubric
generation (a valid rubric for the task named in the request, written here from a template, not by
the project's code), criterion judging (a score and a rationale) and ``vlm_qa`` (a short answer).
A test can queue scripted replies (status, body, headers, delay) that are served first, and set a
fixed latency (the time from receiving a request to answering it) and random rates of 500s and
unparseable answers, and hold every request after the next N until released (to stop a client
midway). ``rejects`` names request fields the server refuses with a 400, as a server that does not
know ``chat_template_kwargs`` does. Every request is recorded (path, headers, body); the peak number of requests in flight
(received and not yet answered) and the number answered are tracked.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Scripted:
    status: int = 200
    content: str | None = None      # the assistant message content (wrapped in a chat completion)
    raw: bytes | None = None        # or a raw body, served as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def dead_url() -> str:
    """A loopback URL on which nothing listens (connections are refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def request_text(body: dict) -> str:
    """All text parts of a request's messages, joined (images left out)."""
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        else:
            out += [p.get("text", "") for p in c or [] if p.get("type") == "text"]
    return "\n".join(out)


def n_images(body: dict) -> int:
    return sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
               for p in m["content"] if p.get("type") == "image_url")


def kind_of(body: dict) -> str:
    text = request_text(body)
    if "You write evaluation rubrics" in text:
        return "rubric"
    if "criterion judge" in text:
        return "judge"
    if "You answer one question" in text:
        return "qa"
    return "other"


def _crit(cid: str, dim: int, text: str, importance: str, *, hard: bool = False, cap: int | None = None,
          tools: list[dict] | None = None, reference: str = "none") -> dict:
    return {"id": cid, "dimension": dim, "criterion": text, "type": "hard" if hard else "soft",
            "importance": importance, "scoring_rule": "10: fully satisfied; 5: partly; 0: not at all.",
            "hard_cap": cap, "fail_threshold": 5, "failure_modes": [f"{cid} violated"],
            "derivable_from": "prompt" if reference == "none" else "input_bundle",
            "evidence_plan": {"target_entity": "main subject", "detector_query": "main subject",
                              "tool_sequence": tools or [{"tool": "vlm_qa", "args": {"question": text, "on": "output_video"}}],
                              "reference_source": reference, "web_search_query": "",
                              "aggregation": "judge from the answer", "notes": ""}}


def rubric_for(task: str) -> dict:
    """A valid rubric for ``task`` (conditional dimensions only where their input exists)."""
    crits = [
        _crit("subject_present", 1, "The main subject of the prompt is present.", "high", hard=True, cap=4),
        _crit("action", 5, "The described action happens.", "high"),
        _crit("temporal_quality", 12, "No flicker or jitter.", "medium",
              tools=[{"tool": "flicker_probe", "args": {"on": "output_video"}}]),
        _crit("frame_quality", 13, "Frames are sharp and clean.", "medium",
              tools=[{"tool": "aesthetic", "args": {"on": "output_video"}}]),
        _crit("alignment", 15, "The video as a whole matches the prompt.", "high"),
    ]
    if task == "TI2V":
        crits.append(_crit("first_frame", 16, "The video starts from the given first frame.", "medium",
                           tools=[{"tool": "ssim_compare", "args": {"a": "first_frame", "b": "output_video"}}],
                           reference="first_frame"))
    if task in ("TS2V", "TSV2V"):
        crits.append(_crit("subject_identity", 17, "The subject keeps the identity of the reference image.", "high",
                           tools=[{"tool": "vlm_qa", "args": {"question": "Same subject as the reference?",
                                                              "on": "output_video"}}], reference="subject_image"))
    if task in ("TV2V", "TSV2V"):
        crits[0] = _crit("edit_following", 18, "The requested edit is performed.", "high")
        crits.append(_crit("degenerate_edit", 18, "The output is not a copy of the source.", "high", hard=True, cap=2,
                           tools=[{"tool": "change_probe", "args": {"a": "source_video", "b": "output_video"}}],
                           reference="source_video"))
        crits.append(_crit("preservation", 19, "Regions the edit does not touch are preserved.", "medium",
                           tools=[{"tool": "ssim_compare", "args": {"a": "source_video", "b": "output_video"}}],
                           reference="source_video"))
    return {"task_understanding": f"A {task} input.",
            "dimensions_considered": [{"dimension": d, "included": any(c["dimension"] == d for c in crits),
                                       "reason": "template"} for d in range(1, 23)],
            "criteria": crits}


def judge_score(body: dict) -> int:
    """A deterministic score from the request's content (so reruns agree), 3-10."""
    digest = hashlib.sha256(json.dumps(body.get("messages", []), sort_keys=True).encode()).digest()
    return 3 + digest[0] % 8


def default_answer(body: dict) -> str:
    kind = kind_of(body)
    if kind == "rubric":
        m = re.search(r"Task: (T2V|TI2V|TS2V|TV2V|TSV2V)\b", request_text(body))
        return json.dumps(rubric_for(m.group(1) if m else "T2V"))
    if kind == "judge":
        s = judge_score(body)
        return json.dumps({"score": s, "rationale": f"The evidence and {n_images(body)} frames support {s}/10."})
    if kind == "qa":
        return f"Yes: it is visible in {n_images(body)} frames."
    return "ok"


class FakeVlmServer:
    """``with FakeVlmServer(latency_s=0.2) as srv: srv.base_url``; see the module doc."""

    def __init__(self, *, latency_s: float = 0.0, error_rate: float = 0.0, unparseable_rate: float = 0.0,
                 seed: int = 0, answer: Callable[[dict], str] = default_answer, usage: bool = True,
                 rejects: tuple[str, ...] = ()):
        self.latency_s = latency_s
        self.error_rate = error_rate
        self.unparseable_rate = unparseable_rate
        self.answer = answer
        self.usage = usage
        self.rejects = rejects
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.answered = 0  # requests whose answer was sent
        self._hold_after: int | None = None
        self._released = threading.Event()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> "FakeVlmServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "FakeVlmServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes: with Nagle's algorithm the body would wait
            # for the client's delayed ACK (about 40 ms on Linux), on top of the latency set here.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def hold_after(self, n: int) -> None:
        """Answer the next ``n`` requests, then hold every later one until :meth:`release`."""
        with self._lock:
            self._hold_after = len(self.requests) + n
            self._released.clear()

    def release(self) -> None:
        self._released.set()

    def queue(self, *items: Scripted) -> None:
        with self._lock:
            self.script.extend(items)

    def bodies(self, kind: str | None = None) -> list[dict]:
        return [r["body"] for r in self.requests if kind is None or kind_of(r["body"]) == kind]

    # -- one request ------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        t_received = time.monotonic()  # the latency runs from here: reading and answering are part of it
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = {}
        with self._lock:
            self.requests.append({"path": h.path, "headers": dict(h.headers), "body": body, "bytes": len(raw),
                                  "t": time.monotonic()})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            item = self.script.pop(0) if self.script else None
            roll_error, roll_garbage = self._rng.random(), self._rng.random()
            held = self._hold_after is not None and len(self.requests) > self._hold_after
        counted = [True]

        def answered() -> None:  # a request stops counting once its answer is on its way
            with self._lock:
                if counted[0]:
                    self.in_flight -= 1
                    counted[0] = False

        try:
            if item is None:
                if roll_error < self.error_rate:
                    item = Scripted(status=500, raw=b'{"error": "injected"}')
                elif roll_garbage < self.unparseable_rate:
                    item = Scripted(content="I would rather not say. {broken")
                else:
                    item = Scripted(content=self.answer(body))
            time.sleep(max(0.0, t_received + self.latency_s + item.delay_s - time.monotonic()))
            if held:
                self._released.wait()
            if not h.path.endswith("/chat/completions"):
                item = Scripted(status=404, raw=b'{"error": "not found"}')
            refused = [f for f in self.rejects if f in body]
            if refused:
                item = Scripted(status=400, raw=json.dumps({"error": f"unknown field {refused[0]}"}).encode())
            if item.raw is not None:
                payload = item.raw
            else:
                completion = {"id": "cmpl", "object": "chat.completion", "model": body.get("model", ""),
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": item.content}}]}
                if self.usage:
                    completion["usage"] = {"prompt_tokens": len(raw) // 4, "completion_tokens": len(item.content or "") // 4}
                payload = json.dumps(completion).encode()
            answered()
            if not held:
                with self._lock:
                    self.answered += 1
            try:
                h.send_response(item.status)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(payload)))
                for k, v in item.headers.items():
                    h.send_header(k, v)
                h.end_headers()
                h.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                pass
        finally:
            answered()
