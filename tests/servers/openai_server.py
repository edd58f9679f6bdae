"""A small OpenAI-compatible chat-completions server on loopback, with latency and faults the test sets.

It answers the kinds of request the project makes, told apart by their system prompt: rubric
generation (a valid rubric for the task named in the request, written here from a template, not by
the project's code), criterion judging (a score and a rationale), ``vlm_qa`` (a short answer) and
the six FIRM-Video requests (:func:`firm_answer`) and VEFX's rubric judgments (:func:`vefx_answer`).
A test can queue scripted replies (status, body, headers, delay) that are served first, and set a
fixed latency (the time from receiving a request to answering it) and random rates of 500s and
unparseable answers, and hold every request after the next N until released (to stop a client
midway). ``rejects`` names request fields the server refuses with a 400, as a server that does not
know ``chat_template_kwargs`` does. Hostile faults: ``fault`` picks a scripted reply from a request's
body, a scripted reply can drip (a byte at a time), be megabytes long, or echo the request's
``Authorization`` header in its body. Every request is recorded (path, headers, body); the peak number of requests in flight
(received and not yet answered) and the number answered are tracked, and a test waits for them with
:meth:`FakeVlmServer.wait_for` (woken by each arrival and each answer), not with a sleep.

Answers carry ``usage`` (prompt tokens: the request's bytes / 4; completion tokens: the answer's
characters / 4) with ``prompt_tokens_details.cached_tokens`` from a prefix cache kept as a
prefix-caching server keeps one: the messages, serialized, in blocks of :data:`CACHE_BLOCK` bytes,
each known by the hash of everything up to its end; the leading blocks seen in an earlier request are
cached. ``served`` sums the usage of every answer sent and the images of every request received, for
a test to compare with what the client recorded; ``served["requests"]`` counts every request received
(answered, refused, closed or abandoned). As vLLM does, a request whose client has gone (its timeout)
by the time the answer is ready is abandoned: no answer, no usage (its record's ``outcome`` says
``abandoned``). A scripted reply with ``close`` closes the connection instead of answering.
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
    drip_s: float = 0.0             # send the whole response (status line included) a byte at a time, this far apart
    close: bool = False             # read the request, then close the connection without an answer
    # ``{authorization}`` in ``raw`` becomes the request's Authorization header (a server that echoes it)


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


CACHE_BLOCK = 256  # bytes of serialized messages per cache block (64 of the server's "tokens")


def block_hashes(body: dict) -> list[bytes]:
    """The chained hashes of a request's whole blocks (the last, partial block is never cached)."""
    data = json.dumps(body.get("messages", []), sort_keys=True).encode()
    out, h = [], hashlib.sha256()
    for end in range(CACHE_BLOCK, len(data) + 1, CACHE_BLOCK):
        h.update(data[end - CACHE_BLOCK:end])
        out.append(h.copy().digest())
    return out


def n_images(body: dict) -> int:
    return sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
               for p in m["content"] if p.get("type") == "image_url")


def image_bytes(body: dict) -> int:
    """The decoded bytes of a request's data-URL images."""
    import base64

    return sum(len(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))
               for m in body.get("messages", []) if isinstance(m.get("content"), list)
               for p in m["content"] if p.get("type") == "image_url" and "," in p["image_url"].get("url", ""))


# FIRM-Video request kinds, told apart by the opening words of their system prompts.
FIRM_KINDS = {
    "You decompose a video-generation prompt": "firm_if_plan",
    "You verify requirements of a video-generation prompt": "firm_if_verify",
    "You ground a generated video": "firm_wc_ground",
    "You write verification questions": "firm_wc_questions",
    "You inspect a video for violations": "firm_wc_verify",
    "You inspect a video for perceptual defects": "firm_pq",
    "You turn the verified decisions of a video evaluation": "firm_rationale",
}


def kind_of(body: dict) -> str:
    text = request_text(body)
    for opening, kind in FIRM_KINDS.items():
        if opening in text:
            return kind
    if "You evaluate an instruction-guided video edit as VEFX-Bench" in text:
        return "vefx"
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


def _digest(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()[:4], "big")


def firm_answer(kind: str, body: dict) -> str:
    """Deterministic FIRM-Video answers written here from the request's own text: the planner splits the
    prompt at commas and "and"; verifiers answer every id listed in the request (yes or no from a hash
    of the id and the number of frames, so different videos get different verdicts)."""
    text = request_text(body)
    if kind == "firm_if_plan":
        m = re.search(r"^Prompt: (.*)$", text, re.M)
        clauses = [c.strip() for c in re.split(r",| and ", m.group(1) if m else "a video") if c.strip()]
        return json.dumps({"requirements": [
            {"question": f"Does the video show {c}?", "importance": 5 if i == 0 else 1 + _digest(c) % 5,
             "aspect": "subject" if i == 0 else "attribute"} for i, c in enumerate(clauses)]})
    # Ids and targets are read from the listing the request carries (after its label), not from the
    # format example of the system prompt.
    listing = re.split(r"^(?:Checklist|Questions|Targets|Defect checklist):$", text, flags=re.M)[-1]
    ids = re.findall(r'"id": "([^"]+)"', listing)
    if kind in ("firm_if_verify", "firm_wc_verify"):
        yes = "present" if kind == "firm_if_verify" else "violation seen"
        return json.dumps({"answers": [
            {"id": i, "answer": "yes" if _digest(i, n_images(body), kind) % 3 else "no",
             "evidence": f"{i}: {yes if _digest(i, n_images(body), kind) % 3 else 'not seen'} in frame 2"}
            for i in ids]})
    if kind == "firm_wc_ground":
        return json.dumps({"scene_summary": f"A scene shown in {n_images(body)} frames.",
                           "entities": [{"name": "main subject", "importance": 5}, {"name": "background", "importance": 2}],
                           "actions": [{"name": "main subject moves", "importance": 4}]})
    if kind == "firm_wc_questions":
        names = re.findall(r'"target": "([^"]+)"', listing)
        return json.dumps({"targets": [{"target": n, "questions": [
            {"question": f"Does {n} change shape or identity?", "aspect": "temporal_consistency"},
            {"question": f"Is {n} deformed?", "aspect": "structure"}]} for n in names]})
    if kind == "firm_rationale":
        decisions = text.split("Verified decisions:", 1)[-1].split("Write the rationale now.")[0].strip()
        return json.dumps({"rationale": f"In short: {decisions}"})
    if kind == "firm_pq":
        defect_ids = ids
        score = 1 + _digest(n_images(body), "pq") % 5
        return json.dumps({"defects": [{"id": d, "present": "no", "evidence": ""} for d in defect_ids],
                           "rationale": f"Checked {len(defect_ids)} defects in {n_images(body)} frames.",
                           "score": score})
    return "ok"


def vefx_answer(body: dict) -> str:
    """A VEFX rubric judgment written here: the dimension named in the request's last line, a 1-4 score
    from a hash of that dimension and the request's images, evidence that names what was compared."""
    text = request_text(body)
    m = re.search(r"Score (.+?) \((IF|RQ|EE)\) now", text)
    dim = m.group(2) if m else "?"
    instruction = re.search(r"^Editing instruction: (.*)$", text, re.M)
    images = [p["image_url"]["url"] for m in body.get("messages", []) if isinstance(m.get("content"), list)
              for p in m["content"] if p.get("type") == "image_url"]
    # the last image is an edited frame: two editors of one source get their own scores
    score = 1 + _digest(dim, instruction.group(1) if instruction else "", images[-1][-200:] if images else "") % 4
    return json.dumps({"evidence": f"{dim}: compared {n_images(body)} source and edited frames; "
                                   f"{'the change is clear' if score > 2 else 'the change is weak'}",
                       "score": score})


def default_answer(body: dict) -> str:
    kind = kind_of(body)
    if kind == "vefx":
        return vefx_answer(body)
    if kind.startswith("firm_"):
        return firm_answer(kind, body)
    if kind == "rubric":
        m = re.search(r"Task: (T2V|TI2V|TS2V|TV2V|TSV2V)\b", request_text(body))
        return json.dumps(rubric_for(m.group(1) if m else "T2V"))
    if kind == "judge":
        s = judge_score(body)
        return json.dumps({"score": s, "rationale": f"The evidence and {n_images(body)} frames support {s}/10."})
    if kind == "qa":
        return f"Yes: it is visible in {n_images(body)} frames."
    return "ok"


def _client_gone(h: BaseHTTPRequestHandler) -> bool:
    """Whether the client closed its end of the request's connection (it reads as end of file)."""
    import select

    try:
        if not select.select([h.connection], [], [], 0)[0]:
            return False
        return h.connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class FakeVlmServer:
    """``with FakeVlmServer(latency_s=0.2) as srv: srv.base_url``; see the module doc."""

    def __init__(self, *, latency_s: float = 0.0, error_rate: float = 0.0, unparseable_rate: float = 0.0,
                 stall_rate: float = 0.0, stall_s: float = 2.0,
                 seed: int = 0, answer: Callable[[dict], str] = default_answer, usage: bool = True,
                 rejects: tuple[str, ...] = (), fault: Callable[[dict], Scripted | None] | None = None,
                 served_model: str | None = None):
        self.latency_s = latency_s
        self.error_rate = error_rate
        self.unparseable_rate = unparseable_rate
        self.stall_rate = stall_rate  # a share of requests answered stall_s late (a slow replica)
        self.stall_s = stall_s
        self.answer = answer
        self.usage = usage
        self.rejects = rejects
        self.fault = fault  # a scripted reply chosen from the request's body (None: the usual answer)
        self.served_model = served_model  # the model id its answers name (None: the one asked for), as a server's alias
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.answered = 0  # requests whose answer was sent
        self._cache: set[bytes] = set()  # block hashes of every prefix seen (see the module doc)
        self.served = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "images": 0, "image_bytes": 0,
                       "usage_answers": 0, "requests": 0}
        self._hold_after: int | None = None
        self._released = threading.Event()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # notified when a request arrives or is answered
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

    def wait_for(self, predicate: Callable[["FakeVlmServer"], bool], timeout_s: float = 60.0, what: str = "") -> None:
        """Wait until ``predicate(server)`` holds, checked each time a request arrives or is answered
        (no polling); an AssertionError with the counters after ``timeout_s``."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self), timeout=timeout_s):
                raise AssertionError(f"waited {timeout_s:g} s for {what or predicate}: {len(self.requests)} received, "
                                     f"{self.answered} answered, {self.in_flight} in flight")

    def wait_received(self, n: int, timeout_s: float = 60.0) -> None:
        """Wait until ``n`` requests have arrived (with :meth:`hold_after`: the slots they hold are taken)."""
        self.wait_for(lambda s: len(s.requests) >= n, timeout_s, f"{n} requests")

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
            roll_error, roll_garbage, roll_stall = self._rng.random(), self._rng.random(), self._rng.random()
            record = self.requests[-1]
            held = self._hold_after is not None and len(self.requests) > self._hold_after
            blocks = block_hashes(body)
            record["cached_blocks"] = next((i for i, b in enumerate(blocks) if b not in self._cache), len(blocks))
            self._cache.update(blocks)
            self.served["images"] += n_images(body)
            self.served["image_bytes"] += image_bytes(body)
            self.served["requests"] += 1
            self._changed.notify_all()
        counted = [True]

        def answered() -> None:  # a request stops counting once its answer is on its way
            with self._lock:
                if counted[0]:
                    self.in_flight -= 1
                    counted[0] = False
                    self._changed.notify_all()

        try:
            if item is None and self.fault is not None:
                item = self.fault(body)
            if item is None:
                if roll_error < self.error_rate:
                    item = Scripted(status=500, raw=b'{"error": "injected"}')
                    record["outcome"] = "error"
                elif roll_garbage < self.unparseable_rate:
                    item = Scripted(content="I would rather not say. {broken")
                    record["outcome"] = "garbage"
                else:
                    item = Scripted(content=self.answer(body))
                    record["outcome"] = "ok"
                if roll_stall < self.stall_rate:
                    item = Scripted(status=item.status, content=item.content, raw=item.raw, headers=item.headers,
                                    delay_s=item.delay_s + self.stall_s)
            time.sleep(max(0.0, t_received + self.latency_s + item.delay_s - time.monotonic()))
            if held:
                self._released.wait()
            if item.close:
                record["outcome"] = "closed"
                h.close_connection = True
                try:
                    h.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if _client_gone(h):  # its client timed out meanwhile: abandoned, no usage (as vLLM aborts it)
                record["outcome"] = "abandoned"
                h.close_connection = True
                return
            record.setdefault("outcome", "ok" if item.status == 200 else f"http_{item.status}")
            if not h.path.endswith("/chat/completions"):
                item = Scripted(status=404, raw=b'{"error": "not found"}')
            refused = [f for f in self.rejects if f in body]
            if refused:
                item = Scripted(status=400, raw=json.dumps({"error": f"unknown field {refused[0]}"}).encode())
            if item.raw is not None:
                payload = item.raw.replace(b"{authorization}", h.headers.get("Authorization", "").encode())
            else:
                completion = {"id": "cmpl", "object": "chat.completion",
                              "model": self.served_model or body.get("model", ""),
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": item.content}}]}
                if self.usage:
                    prompt = len(raw) // 4
                    usage = {"prompt_tokens": prompt, "completion_tokens": len(item.content or "") // 4,
                             "prompt_tokens_details": {"cached_tokens": min(prompt, record["cached_blocks"] * CACHE_BLOCK // 4)}}
                    completion["usage"] = usage
                    with self._lock:
                        for k in ("prompt_tokens", "completion_tokens"):
                            self.served[k] += usage[k]
                        self.served["cached_tokens"] += usage["prompt_tokens_details"]["cached_tokens"]
                        self.served["usage_answers"] += 1
                payload = json.dumps(completion).encode()
            record["response_bytes"] = len(payload)
            record["t_answered"] = time.monotonic()  # when its answer went out (a benchmark's timeline)
            answered()
            if not held:
                with self._lock:
                    self.answered += 1
                    self._changed.notify_all()
            if item.drip_s:
                self._drip(h, item, payload, record)
                return
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

    @staticmethod
    def _drip(h: BaseHTTPRequestHandler, item: Scripted, payload: bytes, record: dict) -> None:
        """The response a byte at a time: every read the client makes gets something, none gets it all.
        ``record`` counts the bytes to send (``drip_bytes``) and those sent so far (``dripped``)."""
        head = (f"HTTP/1.1 {item.status} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        record["drip_bytes"], record["dripped"] = len(head + payload), 0
        try:
            for byte in head + payload:
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
                record["dripped"] += 1
                time.sleep(item.drip_s)
        except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up
            pass
        h.close_connection = True
