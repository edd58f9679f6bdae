"""Every cached computation's key is the key of one identity record (argus_dagster.infra.identities).

Per computation, the record is built from real inputs (clips written here, their content hashes, a
real criterion, the evidence a real plan measured, the VLM clients the VLM resource builds from its
configuration, a tiny local model), and three things are checked, enumerating the record's fields
(nested records included) so that a field added later is covered or makes the test fail:

1. each field counts: changing its value alone gives a new key;
2. each field follows its input: changing the input it stands for (another model, prompt version,
   prompt text, token budget, clip, criterion, configuration...) changes that field and the key
   (a factory that forgets an input leaves the field as it was);
3. each configuration field the record's class declares ``IRRELEVANT`` (the endpoint URL, the key,
   timeouts, retries, concurrency; where a medium is stored) changes nothing.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from test_vlm_local import build_tiny_llava
from unit_helpers import FPS, make_criterion, moving_frames

import argus_dagster.method.evidence.executor as executor
import argus_dagster.method.judge as judge_mod
import argus_dagster.method.rubric.generate as generate
import argus_dagster.method.stages as pipeline
import argus_dagster.method.video_prompt as video_prompt
import argus_dagster.protocols.firm.evaluator as firm
import argus_dagster.protocols.firm.prompts as firm_prompts
import argus_dagster.protocols.vefx as vefx
from argus_dagster.infra.identities import RECORDS, VLM_IRRELEVANT, VlmCall, record_key
from argus_dagster.infra.media import file_digest, write_video
from argus_dagster.method.evidence.executor import run_plan, step_identity
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import NormalizedPlan
from argus_dagster.method.evidence.tools import vlm_qa as vlm_qa_mod
from argus_dagster.method.evidence.tools.detection import CropCompare, Localizer, SamTrack
from argus_dagster.method.evidence.tools.models import ModelStore
from argus_dagster.method.evidence.tools.random_models import BUILDERS, build_models
from argus_dagster.method.evidence.tools.registry import ToolSuite, embedded_suite
from argus_dagster.method.evidence.tools.vlm_qa import VlmQa
from argus_dagster.method.inputs import InputInstance, instance_hash
from argus_dagster.method.judge import EvidenceOnlyJudge, VlmJudge, judge_view, judgment_evidence
from argus_dagster.resources.judging import JudgeResource, RubricGeneratorResource
from argus_dagster.resources.vlm import VlmResource

MODEL = "judge-model"
URL = "http://127.0.0.1:9/v1"
# Another value for each configuration field of the VLM resource that must not matter.
OTHER_CONFIG = {"base_urls": "http://127.0.0.2:9/v1,http://127.0.0.3:9/v1", "api_key": "another-key",
                "concurrency": 3, "timeout_s": 7.5, "max_retries": 0, "parse_retries": 0, "slots_dir": "set per test"}
COVERED: dict[str, int] = {}  # computation -> fields checked (printed at the end of the module)


# -- the records' structure ---------------------------------------------------------------------------

def leaves(rec: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for f in dataclasses.fields(rec):
        v = getattr(rec, f.name)
        out += leaves(v, prefix + (f.name,)) if dataclasses.is_dataclass(v) else [prefix + (f.name,)]
    return out


def at(rec: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        rec = getattr(rec, p)
    return rec


def with_value(rec: Any, path: tuple[str, ...], value: Any) -> Any:
    if len(path) == 1:
        return dataclasses.replace(rec, **{path[0]: value})
    return dataclasses.replace(rec, **{path[0]: with_value(getattr(rec, path[0]), path[1:], value)})


def other(v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if v is None:
        return "set"
    if isinstance(v, (int, float)):
        return v + 1
    if isinstance(v, str):
        return v + "~"
    if isinstance(v, dict):
        return {**v, "~": 1}
    if isinstance(v, (list, tuple)):
        return type(v)([*v, "~"])
    raise AssertionError(f"no other value for {v!r}")


def changed(a: Any, b: Any) -> set[tuple[str, ...]]:
    """The leaf fields where two records of one kind differ."""
    if type(a) is not type(b):
        return set(leaves(a)) | set(leaves(b))
    return {p for p in leaves(a) if at(a, p) != at(b, p)}


Pair = Callable[[], tuple[Any, Any]]


def check(name: str, base: Any, varies: dict[tuple[str, ...], Pair], irrelevant: dict[str, Pair],
          fixed: tuple[tuple[str, ...], ...] = ()) -> None:
    """The three properties of the module docstring. ``fixed``: fields no input of this computation
    sets (a constant of the code), checked by (1) only."""
    paths = leaves(base)
    assert type(base) in RECORDS
    for p in paths:
        assert record_key(with_value(base, p, other(at(base, p)))) != record_key(base), f"{name}: field {p} is not in the key"
    assert set(varies) | set(fixed) == set(paths), f"{name}: fields without an input to vary: {set(paths) - set(varies) - set(fixed)}"
    for p, make in varies.items():
        a, b = make()
        assert p in changed(a, b), f"{name}: field {p} does not follow its input"
        assert record_key(a) != record_key(b), f"{name}: changing {p}'s input kept the key"
    assert set(irrelevant) == set(type(base).IRRELEVANT), f"{name}: irrelevant fields not exercised"
    for field, make in irrelevant.items():
        a, b = make()
        assert record_key(a) == record_key(b), f"{name}: {field} (irrelevant) changed the key"
    COVERED[name] = len(paths)


def under(target: Any, attr: str, value: Any, build: Callable[[], Any]) -> tuple[Any, Any]:
    """``build()`` as it is and with ``target.attr`` set to ``value``."""
    before = build()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(target, attr, value)
        return before, build()


# -- real inputs ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny_llava")
    build_tiny_llava(folder)
    return folder


@pytest.fixture(scope="module")
def retrained_vlm(tiny_vlm, tmp_path_factory) -> Path:
    """The same model under the same name with other weights (one parameter moved), saved as
    ``save_pretrained`` saves it."""
    import torch
    from transformers import LlavaForConditionalGeneration

    folder = tmp_path_factory.mktemp("tiny_llava_retrained")
    shutil.copytree(tiny_vlm, folder, dirs_exist_ok=True)
    net = LlavaForConditionalGeneration.from_pretrained(str(tiny_vlm), local_files_only=True)
    with torch.no_grad():
        next(net.parameters()).add_(0.01)
    net.save_pretrained(folder)
    return folder


class Clients:
    """The clients the VLM resource builds from a configuration (as the graph's resources do)."""

    def __init__(self, tiny_vlm: Path, slots: Path, retrained_vlm: Path | None = None):
        self.tiny_vlm = tiny_vlm
        self.retrained_vlm = retrained_vlm
        self.other = {**OTHER_CONFIG, "slots_dir": str(slots)}

    def config(self, **over: Any) -> dict[str, Any]:
        return {"backend": "openai", "base_urls": URL, "model": MODEL, "api_key": "key-1", **over}

    def openai(self, **over: Any):
        return VlmResource(**self.config(**over)).client()

    def local(self, **over: Any):
        return VlmResource(**{"backend": "transformers", "model_path": str(self.tiny_vlm), "model": MODEL, **over}).client()

    def irrelevant(self, build: Callable[[VlmResource], Any]) -> dict[str, Pair]:
        """Per irrelevant resource field, the record under the base configuration and under another value."""
        def pair(field: str) -> Pair:
            def make():
                a, b = VlmResource(**self.config()), VlmResource(**self.config(**{field: self.other[field]}))
                assert getattr(a, field) != getattr(b, field)
                return build(a), build(b)
            return make
        return {f: pair(f) for f in VLM_IRRELEVANT}

    def call_varies(self, prefix: tuple[str, ...], build: Callable[[Any], Any], module: Any, version: str,
                    prompt: str, max_tokens: str | None) -> dict[tuple[str, ...], Pair]:
        """How each field of a request's :class:`VlmCall` is set from outside: the client (backend, model,
        answer limits) and the module's prompt version, prompt text and token budget."""
        out: dict[tuple[str, ...], Pair] = {
            prefix + ("backend",): lambda: (build(self.openai()), build(self.local())),
            prefix + ("model",): lambda: (build(self.openai()), build(self.openai(model="other-model"))),
            prefix + ("max_answer_chars",): lambda: (build(self.openai()), build(self.openai(max_answer_chars=777))),
            prefix + ("max_new_tokens",): lambda: (build(self.local()), build(self.local(max_new_tokens=64))),
            prefix + ("weights",): lambda: (build(self.local()), build(self.local(model_path=str(self.retrained_vlm)))),
            prefix + ("prompt_version",): lambda: under(module, version, "changed-version", lambda: build(self.openai())),
            prefix + ("prompt_sha256",): lambda: under(module, prompt, "Changed instructions.", lambda: build(self.openai())),
        }
        if max_tokens:
            out[prefix + ("max_tokens",)] = lambda: under(module, max_tokens, 123, lambda: build(self.openai()))
        return out


@pytest.fixture(scope="module")
def clients(tiny_vlm, retrained_vlm, tmp_path_factory) -> Clients:
    return Clients(tiny_vlm, tmp_path_factory.mktemp("slots"), retrained_vlm)


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("clips")
    out = {}
    for name, seed in (("out", 0), ("other_out", 3), ("source", 7)):
        write_video(d / f"{name}.mp4", moving_frames(seed=seed), FPS)
        out[name] = str(d / f"{name}.mp4")
    moved = d / "elsewhere"
    moved.mkdir()
    shutil.copy(out["out"], moved / "out.mp4")
    out["out_copy"] = str(moved / "out.mp4")
    return out


def media(clips: dict[str, str], out: str = "out", source: str = "source") -> MediaStore:
    uris = {"output_video": clips[out], "source_video": clips[source]}
    return MediaStore(uris, {k: file_digest(v) for k, v in uris.items()})


# -- the criterion judgment -------------------------------------------------------------------------------

def _judgment_inputs(clips):
    plan = NormalizedPlan([{"tool": "flicker_probe", "args": {"on": "output_video"}},
                           {"tool": "motion_probe", "args": {"on": "output_video"}}])
    evidence = judgment_evidence(run_plan(plan, media(clips), embedded_suite()))
    other_evidence = judgment_evidence(run_plan(plan, media(clips, out="other_out"), embedded_suite()))
    view = judge_view(make_criterion("c1"))
    other_view = judge_view(make_criterion("c1", criterion="The kite stays in the sky for the whole clip."))
    assert evidence != other_evidence and view != other_view
    return view, other_view, evidence, other_evidence, file_digest(clips["out"]), file_digest(clips["other_out"])


def test_a_vlm_judgment_key_is_its_record(clients, clips):
    view, view2, ev, ev2, sha, sha2 = _judgment_inputs(clips)

    def build(client, view=view, ev=ev, sha=sha):
        return pipeline.judgment_identity(VlmJudge(client), view, ev, sha)

    varies = clients.call_varies(("judge",), build, judge_mod, "JUDGE_PROMPT_VERSION", "JUDGE_INSTRUCTIONS",
                                 "JUDGE_MAX_TOKENS")
    # The video's shared system text is part of the judge's instructions too.
    shared = under(video_prompt, "VIDEO_SYSTEM", "Another opening.", lambda: build(clients.openai()))
    assert record_key(shared[0]) != record_key(shared[1])
    varies.update({
        ("view",): lambda: (build(clients.openai()), build(clients.openai(), view=view2)),
        ("evidence",): lambda: (build(clients.openai()), build(clients.openai(), ev=ev2)),
        ("video",): lambda: (build(clients.openai()), build(clients.openai(), sha=sha2)),
        ("sampling",): lambda: under(pipeline, "SAMPLING_ID", "other-policy", lambda: build(clients.openai())),
    })
    irrelevant = clients.irrelevant(
        lambda res: pipeline.judgment_identity(VlmJudge(res.client(), parse_retries=res.parse_retries), view, ev, sha))
    check("judgment (VLM judge)", build(clients.openai()), varies, irrelevant, fixed=(("judge", "thinking"),))


def test_an_evidence_only_judgment_key_is_its_record(clients, clips):
    view, view2, ev, ev2, sha, sha2 = _judgment_inputs(clips)

    def build(view=view, ev=ev, sha=sha):
        return pipeline.judgment_identity(EvidenceOnlyJudge(), view, ev, sha)

    varies = {
        ("judge", "version"): lambda: under(EvidenceOnlyJudge, "version", "99", build),
        ("judge", "name"): lambda: under(EvidenceOnlyJudge, "name", "another-rule-judge", build),
        ("view",): lambda: (build(), build(view=view2)),
        ("evidence",): lambda: (build(), build(ev=ev2)),
    }
    # It never looks at the frames: the video and the sampling are not part of its judgments.
    assert record_key(build()) == record_key(build(sha=sha2))
    base = build()
    assert base.video is None and base.sampling is None
    # Whatever VLM the resources configure, the evidence-only judge does not use it.
    irrelevant = clients.irrelevant(lambda res: pipeline.judgment_identity(
        JudgeResource(backend="evidence-only").judge(res), view, ev, sha))
    check("judgment (evidence-only judge)", base, varies, irrelevant, fixed=(("video",), ("sampling",)))


# -- tool steps ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def detector_store(tmp_path_factory) -> ModelStore:
    return ModelStore(build_models(tmp_path_factory.mktemp("models"), which=("detector",)))


@pytest.fixture(scope="module")
def other_detector(tmp_path_factory) -> ModelStore:
    import torch

    root = tmp_path_factory.mktemp("retrained")
    torch.manual_seed(1)
    (root / "detector").mkdir()
    BUILDERS["detector"](root / "detector", "tiny")
    return ModelStore(root)


@pytest.fixture(scope="module")
def moved_detector(tmp_path_factory, detector_store) -> ModelStore:
    root = tmp_path_factory.mktemp("moved")
    shutil.copytree(detector_store.root / "detector", root / "detector")
    return ModelStore(root)


def _suite(**tools) -> ToolSuite:
    return ToolSuite({**embedded_suite().tools, **tools})


def _step_irrelevant(step, suite, clips) -> dict[str, Pair]:
    # The same bytes at another path: the same step.
    return {"uri": lambda: (step_identity(step, media(clips), suite(), []),
                            step_identity(step, media(clips, out="out_copy"), suite(), []))}


def _step_varies(step, suite, clips, other_args) -> dict[tuple[str, ...], Pair]:
    def build(**over):
        s = {**step, **over.get("step", {})}
        return step_identity(s, media(clips, **over.get("media", {})), suite(), over.get("after", []))

    tool = step["tool"]
    return {
        ("tool",): lambda: (build(), build(step={"tool": "motion_probe" if tool != "motion_probe" else "flicker_probe",
                                                 "args": {"on": "output_video"}})),
        ("args",): lambda: (build(), build(step={"args": other_args})),
        ("media",): lambda: (build(), build(media={"out": "other_out"})),
        ("after",): lambda: (build(after=["a" * 64]), build(after=["b" * 64])),
        ("sampling",): lambda: under(executor, "SAMPLING_ID", "other-policy", build),
        ("tool_version",): lambda: under(type(suite().get(tool)), "version", "changed", build)
        if isinstance(getattr(type(suite().get(tool)), "version", None), str)
        else (build(), _with_version(suite, step, clips)),
    }


def _with_version(suite, step, clips):
    s = suite()
    s.get(step["tool"]).version = "changed"
    return step_identity(step, media(clips), s, [])


def test_a_classical_tool_step_key_is_its_record(clips):
    step = {"tool": "flicker_probe", "args": {"on": "output_video"}}
    suite = _suite
    check("step flicker_probe", step_identity(step, media(clips), suite(), []),
          _step_varies(step, suite, clips, {"on": "source_video"}), _step_irrelevant(step, suite, clips),
          fixed=(("tool_config",),))  # a weight-free probe's settings are its version


def test_a_vlm_qa_step_key_is_its_record(clients, clips):
    step = {"tool": "vlm_qa", "args": {"question": "Is the source's subject still there?", "on": "source_video"}}

    def suite(client=None):
        return _suite(vlm_qa=VlmQa(client or clients.openai()))

    varies = _step_varies(step, suite, clips, {"question": "Does the camera move?", "on": "source_video"})
    # Asked about the source video, the request still opens with the output video's frames: the
    # output's content hash is part of the step ("media" above changes only the output video).
    assert "shown:output_video" in step_identity(step, media(clips), suite(), []).media

    def config_pair(client):
        return step_identity(step, media(clips), suite(), []), step_identity(step, media(clips), suite(client), [])

    varies[("tool_config",)] = lambda: config_pair(clients.openai(model="other-model"))
    # Each part of the request (model, answer limits, prompt version and text, budget) reaches the config.
    for make in clients.call_varies((), lambda c: step_identity(step, media(clips), suite(c), []), vlm_qa_mod,
                                    "QA_PROMPT_VERSION", "QA_INSTRUCTIONS", "QA_MAX_TOKENS").values():
        a, b = make()
        assert a.tool_config != b.tool_config and record_key(a) != record_key(b)
    irrelevant = _step_irrelevant(step, suite, clips)
    for field, make in clients.irrelevant(
            lambda res: step_identity(step, media(clips),
                                      _suite(vlm_qa=VlmQa(res.client(), parse_retries=res.parse_retries)), [])).items():
        a, b = make()
        assert record_key(a) == record_key(b), f"vlm_qa: {field} (irrelevant) changed the key"
    check("step vlm_qa", step_identity(step, media(clips), suite(), []), varies, irrelevant)


def test_vlm_qa_about_the_source_changes_with_the_output_it_opens_with(clients, clips):
    step = {"tool": "vlm_qa", "args": {"question": "Is the subject still there?", "on": "source_video"}}
    suite = _suite(vlm_qa=VlmQa(clients.openai()))
    a = step_identity(step, media(clips), suite, [])
    b = step_identity(step, media(clips, out="other_out"), suite, [])
    assert a.media["on"] == b.media["on"]  # the source video asked about is the same
    assert record_key(a) != record_key(b)


def test_a_model_tool_step_key_is_its_record(clips, detector_store, other_detector, moved_detector):
    step = {"tool": "sam_track", "args": {"query": "red square", "on": "output_video"}}

    def suite(**localizer):
        loc = Localizer(detector_store, **localizer)
        return _suite(sam_track=SamTrack(loc), crop_compare=CropCompare(loc))

    varies = _step_varies(step, suite, clips, {"query": "blue circle", "on": "output_video"})
    varies[("tool_config",)] = lambda: (step_identity(step, media(clips), suite(detect_every=4), []),
                                        step_identity(step, media(clips), suite(detect_every=2), []))
    threshold = (step_identity(step, media(clips), suite(threshold=0.1), []),
                 step_identity(step, media(clips), suite(threshold=0.3), []))
    assert record_key(threshold[0]) != record_key(threshold[1])
    # Another checkpoint of the same architecture (other weights) is another tool; the same
    # checkpoint in another folder is the same one.
    def on(store):
        loc = Localizer(store)
        return step_identity(step, media(clips), _suite(sam_track=SamTrack(loc), crop_compare=CropCompare(loc)), [])

    base, retrained, moved = on(detector_store), on(other_detector), on(moved_detector)
    assert base.tool_version == retrained.tool_version and record_key(base) != record_key(retrained)
    assert record_key(base) == record_key(moved)
    check("step sam_track", step_identity(step, media(clips), suite(), []), varies, _step_irrelevant(step, suite, clips))


# -- VEFX --------------------------------------------------------------------------------------------------

def test_a_vefx_judgment_key_is_its_record(clients, clips):
    def job(instruction="Make the square blue", out="out"):
        m = media(clips, out=out)
        return vefx.EditJob("e1", instruction, {}, {k: m.digest(k) for k in ("output_video", "source_video")})

    def build(client, j=None, dim=vefx.IF):
        return vefx.VefxJudge(client).judgment_identity(j or job(), dim)

    varies = clients.call_varies(("call",), build, vefx, "PROMPT_VERSION", "SYSTEM", "JUDGE_MAX_TOKENS")
    varies.update({
        ("dimension",): lambda: (build(clients.openai()), build(clients.openai(), dim=vefx.EE)),
        ("instruction",): lambda: (build(clients.openai()), build(clients.openai(), j=job("Remove the square"))),
        ("media",): lambda: (build(clients.openai()), build(clients.openai(), j=job(out="other_out"))),
        ("sampling",): lambda: under(vefx, "SAMPLING_ID", "other-policy", lambda: build(clients.openai())),
    })
    check("VEFX judgment", build(clients.openai()), varies, clients.irrelevant(lambda res: build(res.client())),
          fixed=(("call", "thinking"),))


# -- FIRM-Video ---------------------------------------------------------------------------------------------

FIRM_STEPS = {
    "if_plan": ("IF_PLAN_VERSION", "IF_PLAN_SYSTEM", "ASK_MAX_TOKENS"),
    "if_verify": ("IF_VERIFY_VERSION", "IF_VERIFY_SYSTEM", "ASK_MAX_TOKENS"),
    "wc_ground": ("WC_GROUND_VERSION", "WC_GROUND_SYSTEM", "ASK_MAX_TOKENS"),
    "wc_questions": ("WC_QUESTIONS_VERSION", "WC_QUESTIONS_SYSTEM", "ASK_MAX_TOKENS"),
    "wc_verify": ("WC_VERIFY_VERSION", "WC_VERIFY_SYSTEM", "ASK_MAX_TOKENS"),
    "pq": ("PQ_VERSION", "PQ_SYSTEM", "ASK_MAX_TOKENS"),
    "rationale": ("RATIONALE_VERSION", "RATIONALE_SYSTEM", "RATIONALE_MAX_TOKENS"),
}


@pytest.mark.parametrize("step", sorted(FIRM_STEPS))
def test_a_firm_call_key_is_its_record(clients, clips, step):
    version, system, max_tokens = FIRM_STEPS[step]
    inputs = {"prompt": "A red square slides to the right", "video": file_digest(clips["out"]),
              "sampling": firm.SAMPLING_ID}

    def build(client, **over):
        return firm.FirmEvaluator(client).call_identity(step, **{**inputs, **over})

    varies = clients.call_varies(("call",), build, firm_prompts, version, system, max_tokens)
    varies.update({
        ("step",): lambda: (build(clients.openai()),
                            firm.FirmEvaluator(clients.openai()).call_identity(
                                "pq" if step != "pq" else "wc_ground", **inputs)),
        ("inputs",): lambda: (build(clients.openai()), build(clients.openai(), video=file_digest(clips["other_out"]))),
    })
    check(f"FIRM {step}", build(clients.openai()), varies, clients.irrelevant(lambda res: build(res.client())),
          fixed=(("call", "thinking"),))


def test_firm_calls_key_what_each_step_is_given(clients, clips, monkeypatch):
    """The keys the protocol's steps use are their records' keys, with what each step reads."""
    seen: list[Any] = []
    real = firm.FirmEvaluator.call_identity

    class Seen(Exception):
        pass

    def spy(self, step, **inputs):
        seen.append(real(self, step, **inputs))
        raise Seen  # no request is sent

    monkeypatch.setattr(firm.FirmEvaluator, "call_identity", spy)
    ev = firm.FirmEvaluator(clients.openai())
    checklist = firm.Checklist(firm.IF, (firm.ChecklistItem("q1", "Is the square red?", 3),), {})
    with pytest.raises(Seen):
        ev.verify_if(checklist, "A red square", None, video_digest=file_digest(clips["out"]))
    assert seen and seen[-1].step == "if_verify"
    assert set(seen[-1].inputs) == {"checklist", "prompt", "video", "references", "sampling"}
    assert seen[-1].inputs["checklist"] == checklist.content_hash


# -- rubric generation ---------------------------------------------------------------------------------------

def _inst(prompt="A red square slides to the right") -> InputInstance:
    return InputInstance("i1", prompt, content_hash=instance_hash(prompt, {}))


def test_a_generated_rubric_identity_is_its_record(clients):
    def build(client, inst=None, max_tokens=generate.MAX_OUTPUT_TOKENS):
        return generate.rubric_identity(inst or _inst(), generate.rubric_request(client, max_tokens))

    varies = clients.call_varies(("call",), build, generate, "PROMPT_VERSION", "system_prompt", None)
    varies[("call", "prompt_sha256")] = lambda: under(generate, "system_prompt", lambda: "Other rules.",
                                                      lambda: build(clients.openai()))
    varies.update({
        ("call", "max_tokens"): lambda: (build(clients.openai()), build(clients.openai(), max_tokens=2048)),
        ("input_hash",): lambda: (build(clients.openai()), build(clients.openai(), inst=_inst("A blue circle"))),
        ("sampling",): lambda: under(generate, "SAMPLING_ID", "other-policy", lambda: build(clients.openai())),
    })
    check("rubric generation", build(clients.openai()), varies, clients.irrelevant(lambda res: build(res.client())),
          fixed=(("call", "thinking"),))


@pytest.mark.parametrize("backend", ["openai", "transformers"])
def test_the_rubric_generator_expects_the_request_its_client_makes(clients, backend):
    """The rubrics asset decides staleness from the resources' configuration (no client is built): it
    must expect exactly the request the client makes, or every rubric would be written again."""
    res = (VlmResource(**clients.config()) if backend == "openai"
           else VlmResource(backend="transformers", model_path=str(clients.tiny_vlm), model=MODEL))
    expected = RubricGeneratorResource(backend="vlm").identity(res)["call"]
    assert VlmCall(**expected) == generate.rubric_request(res.client())


def test_a_frozen_rubric_is_written_again_when_its_identity_changes(clients, tmp_path):
    from argus_dagster.method.rubric.offline import generate_offline
    from argus_dagster.method.rubric.store import resolve_rubric

    inst = _inst()

    def resolve(res: VlmResource):
        generator = RubricGeneratorResource(backend="vlm").identity(res)

        def make(i):
            rubric = generate_offline(i)
            request = generate.rubric_request(res.client())
            rubric.generator = {**generator, "input_hash": i.content_hash,
                                "identity": record_key(generate.rubric_identity(i, request))}
            return rubric

        return resolve_rubric(inst, "T2V", tmp_path / "bench", tmp_path / "frozen", generator, make)[1]

    assert resolve(VlmResource(**clients.config())) == "generated"
    assert resolve(VlmResource(**clients.config(api_key="another", base_urls="http://127.0.0.5:9/v1"))) == "loaded"
    assert resolve(VlmResource(**clients.config(max_answer_chars=999))) == "generated"


def test_a_local_checkpoint_is_known_by_its_content_not_its_folder(clients, tmp_path):
    """The same checkpoint copied to another folder (the same model name) keeps every key; the
    rubric generator's expected request (from the configuration) holds the same weights as the client's."""
    moved = tmp_path / "elsewhere"
    shutil.copytree(clients.tiny_vlm, moved)
    here, there = clients.local(), clients.local(model_path=str(moved))
    request = lambda client: generate.rubric_request(client)  # noqa: E731
    assert here.weights and here.weights == there.weights
    assert record_key(request(here)) == record_key(request(there))
    assert clients.local(model_path=str(clients.retrained_vlm)).weights != here.weights
    res = VlmResource(backend="transformers", model_path=str(clients.retrained_vlm), model=MODEL)
    assert RubricGeneratorResource(backend="vlm").identity(res)["call"]["weights"] == res.client().weights


def test_record_key_is_the_canonical_json_of_the_record():
    a = VlmCall("openai", "m", 10, None, "v", "p", 5, False)
    assert record_key(a) == record_key(VlmCall(**dataclasses.asdict(a)))
    with pytest.raises(TypeError):
        record_key(dataclasses.asdict(a))


def test_zz_report_coverage():
    """How many computations and fields the tests above covered (``-s`` prints it)."""
    print(f"\nidentity coverage: {len(COVERED)} computations, {sum(COVERED.values())} fields")
    for name, n in sorted(COVERED.items()):
        print(f"  {name}: {n}")


def test_a_protocol_registers_its_record_once_and_a_name_twice_is_refused():
    from dataclasses import dataclass as _dc
    from typing import ClassVar

    from argus_dagster.infra.identities import identity_record

    @_dc(frozen=True)
    class ProbeCallIdentity:
        step: str
        IRRELEVANT: ClassVar[tuple[str, ...]] = ()

    try:
        assert identity_record(ProbeCallIdentity) is ProbeCallIdentity and ProbeCallIdentity in RECORDS
        identity_record(ProbeCallIdentity)  # a module imported twice registers it once
        assert RECORDS.count(ProbeCallIdentity) == 1

        @_dc(frozen=True)
        class JudgmentIdentity:  # a name the method's record has: their keys could meet
            x: str
            IRRELEVANT: ClassVar[tuple[str, ...]] = ()

        with pytest.raises(TypeError, match="another identity record has that name"):
            identity_record(JudgmentIdentity)
        with pytest.raises(TypeError, match="declares IRRELEVANT"):
            identity_record(type("Plain", (), {}))
    finally:
        RECORDS.remove(ProbeCallIdentity)


def test_a_protocols_record_keeps_its_key_wherever_its_class_lives():
    """A key is sha256 of ``{"record": <class name>, **fields}`` as canonical JSON, written out here by
    hand: the module a record lives in is not in it, so FIRM-Video's and VEFX-Bench's records, defined
    in their protocols' modules, keep the keys of the entries the cache already holds."""
    import hashlib

    call = VlmCall(backend="openai", model="m", max_answer_chars=None, max_new_tokens=None, prompt_version="v1",
                   prompt_sha256="p", max_tokens=100, thinking=None)
    call_json = ('{"backend":"openai","max_answer_chars":null,"max_new_tokens":null,"max_tokens":100,"model":"m",'
                 '"prompt_sha256":"p","prompt_version":"v1","thinking":null,"weights":null}')
    firm_rec = firm.FirmCallIdentity(step="if_verify", call=call, inputs={"video": "v"})
    vefx_rec = vefx.VefxJudgmentIdentity(call=call, dimension="d", instruction="i", media={"output_video": "o"},
                                         sampling="s")
    by_hand = [
        (firm_rec, '{"call":' + call_json + ',"inputs":{"video":"v"},"record":"FirmCallIdentity","step":"if_verify"}'),
        (vefx_rec, '{"call":' + call_json + ',"dimension":"d","instruction":"i","media":{"output_video":"o"},'
                   '"record":"VefxJudgmentIdentity","sampling":"s"}'),
    ]
    for rec, text in by_hand:
        assert type(rec) in RECORDS and type(rec).__module__.startswith("argus_dagster.protocols.")
        assert record_key(rec) == hashlib.sha256(text.encode()).hexdigest(), type(rec).__name__
