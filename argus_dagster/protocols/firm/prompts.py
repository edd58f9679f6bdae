"""FIRM-Video's prompts: each call's version (it enters every cache key), system text and token
budget, the PQ defect checklist and the seed's Appendix 4 evaluation instructions.
"""

from __future__ import annotations

from typing import NamedTuple

from argus_dagster.protocols.firm.types import IF, PQ, WC

IF_PLAN_VERSION = "firm-if-plan-2"
IF_VERIFY_VERSION = "firm-if-verify-1"
WC_GROUND_VERSION = "firm-wc-ground-1"
WC_QUESTIONS_VERSION = "firm-wc-questions-1"
WC_VERIFY_VERSION = "firm-wc-verify-2"
PQ_VERSION = "firm-pq-1"
RATIONALE_VERSION = "firm-rationale-1"
PROMPT_VERSIONS = {"if_plan": IF_PLAN_VERSION, "if_verify": IF_VERIFY_VERSION, "wc_ground": WC_GROUND_VERSION,
                   "wc_questions": WC_QUESTIONS_VERSION, "wc_verify": WC_VERIFY_VERSION, "pq": PQ_VERSION,
                   "rationale": RATIONALE_VERSION}

IF_PLAN_SYSTEM = (
    "You decompose a video-generation prompt into atomic requirements. List every visual element the "
    "prompt asks for (subjects, attributes, counts, actions, scene, style, camera or viewpoint, temporal "
    "order of events) as yes/no questions, one observable requirement per question, each with an "
    "importance from 1 (minor detail) to 5 (essential). The video is judged from its frames, without sound: "
    "leave out requirements about what is heard (a sound or noise, loudness or silence, a voice, the words "
    "spoken or their topic, music or a song as heard, a tune), and keep what is seen, also when it relates "
    "to sound (a musician or an instrument being played, a person speaking, singing or giving a speech, a "
    "dog barking, a loudspeaker, a sign whose text names a sound). Of an act qualified by how it sounds "
    "(\"barks loudly\"), ask only the act that is seen (\"Is the dog barking?\"). Answer with one JSON "
    "object and nothing else: "
    '{"requirements": [{"question": "<yes/no question>", "importance": <1-5>, "aspect": "<subject|attribute|'
    'action|scene|style|camera|temporal|count>"}]}'
)
IF_VERIFY_SYSTEM = (
    "You verify requirements of a video-generation prompt against the generated video, given as frames "
    "in temporal order. For each question answer \"yes\" only when the frames show the requirement is met, "
    "\"no\" when they show it is not, \"unverifiable\" when the frames cannot tell; give brief visual "
    "evidence (what you see, and in which frames). Answer with one JSON object and nothing else: "
    '{"answers": [{"id": "<question id>", "answer": "yes|no|unverifiable", "evidence": "<short>"}]}'
)
WC_GROUND_SYSTEM = (
    "You ground a generated video: describe what it shows, from its frames in temporal order, without "
    "judging it. Give a short scene summary, the entities (people, animals, objects, structures) and the "
    "actions or interactions, each with an importance from 1 (peripheral) to 5 (central to the video). "
    "Include peripheral entities and brief actions. Answer with one JSON object and nothing else: "
    '{"scene_summary": "<2-3 sentences>", "entities": [{"name": "<unique name>", "importance": <1-5>}], '
    '"actions": [{"name": "<unique name>", "importance": <1-5>}]}'
)
WC_QUESTIONS_SYSTEM = (
    "You write verification questions that detect violations of common sense and physics in a generated "
    "video. For each target write 2-4 yes/no questions where \"yes\" means a violation was observed. For "
    "an entity ask about temporal consistency (identity, shape, colour, count stay the same; no sudden "
    "appearance or disappearance) and structure (no deformed, fused or missing parts). For an action ask "
    "about motion quality (smooth, continuous, natural) and physical plausibility (contact, gravity, "
    "cause and effect). The generation prompt is given only so that intended fantasy, stylization or "
    "unusual motion it asks for is not phrased as a violation. Answer with one JSON object and nothing "
    'else: {"targets": [{"target": "<target name as given>", "questions": [{"question": "<yes = violation>", '
    '"aspect": "<temporal_consistency|structure|motion_quality|physical_plausibility>"}]}]}'
)
WC_VERIFY_SYSTEM = (
    "You inspect a video for violations of common sense and physics, from its frames in temporal order. "
    "For each question answer \"yes\" when the frames show the violation it asks about, \"no\" when the "
    "thing is seen and no violation is observed, and \"unverifiable\" when the frames cannot tell (the thing is not "
    "visible, or too small or brief to judge), with brief visual evidence. Answer with one JSON object and "
    'nothing else: {"answers": [{"id": "<question id>", "answer": "yes|no|unverifiable", "evidence": "<short>"}]}'
)
PQ_SYSTEM = (
    "You inspect a video for perceptual defects, from its frames in temporal order. Go through the "
    "checklist, say for each defect whether it is present, then write a rationale that follows the "
    "checklist and rate the perceptual quality from 1 (severe defects) to 5 (no visible defect). The "
    "generation prompt is context only: a look it asks for (stylized, dark, grainy, unusual camera) is "
    "not a defect, and how well the video follows it is not judged here. Answer with one JSON object and "
    'nothing else: {"defects": [{"id": "<defect id>", "present": "yes|no", "evidence": "<short>"}], '
    '"rationale": "<checklist-based rationale>", "score": <1-5>}'
)

RATIONALE_SYSTEM = (
    "You turn the verified decisions of a video evaluation into a concise rationale. For instruction "
    "following, first summarize the requirements that are met, then explain the unmet or incorrectly "
    "fulfilled ones. For world coherence, start with a brief scene summary, then the major violations "
    "organized by target and aspect. Use only the decisions given; add nothing, and do not state a score. "
    'Answer with one JSON object and nothing else: {"rationale": "<3-6 sentences>"}'
)

PQ_CHECKLIST: tuple[tuple[str, str], ...] = (
    ("low_resolution", "low resolution or upscaling softness"),
    ("blur", "global or local blur, lack of sharpness"),
    ("noise", "noise or grain that is not a style"),
    ("exposure", "over- or under-exposure, clipped highlights or crushed shadows"),
    ("brightness_instability", "brightness changing from frame to frame"),
    ("color_instability", "colour shifts or unstable white balance over time"),
    ("flicker", "flicker or temporal jitter"),
    ("compression", "compression artifacts: blocking, banding, ringing"),
    ("distortion", "local warping, smearing, ghosting or other low-level distortion"),
    ("frozen", "a frozen or nearly static video where motion is expected"),
)

# The evaluation instructions of the seed's Appendix 4, one per dimension (the export's "instruction").
_FRAMES_LINE = ("The video is given as {n} frames uniformly sampled in temporal order (frame 1 = earliest, frame "
                "{n} = latest). Judge only from these {n} frames.")
_OUTPUT = ("FIRST give a brief reasoning, THEN give the score.\nYour output must be a valid JSON object and nothing "
           "else, in exactly the following format:\n{{\n\"reasoning\": \"<reasoning>\",\n\"score\": <score>\n}}\n"
           "DO NOT include anything before or after the JSON object.")
INSTRUCTIONS = {
    IF: ("You are an expert for evaluating how well an AI-generated video follows its text prompt.\n" + _FRAMES_LINE +
         "\nWe evaluate the dimension 'instruction_following': how accurately and completely the video follows the "
         "text prompt, including requested subjects, attributes, actions, scene, style, camera/viewpoint, and "
         "temporal event order.\nText prompt:\n{prompt}\nBased on the video content, the text prompt, and the "
         "dimension definition, please evaluate the video's instruction_following and give the score. The score "
         "must be an integer in the range of 1 - 5. " + _OUTPUT),
    PQ: ("You are an expert for evaluating the perceptual quality of AI-generated videos.\n" + _FRAMES_LINE +
         "\nWe evaluate the dimension 'visual_quality': the perceptual and technical quality of the rendered video, "
         "including resolution, overall and local clarity, sharpness or blurriness, brightness and color stability, "
         "flicker, compression artifacts, and low-level visual distortions that affect the viewing experience.\n"
         "Text prompt (context only):\n{prompt}\nThe text prompt is provided so that you can recognize intentional "
         "creative choices it requests (e.g. a stylized look, a non-realistic scene, an unusual camera) and NOT "
         "penalize them on this dimension. DO NOT judge how faithfully the video follows the prompt here - that is "
         "covered by a separate dimension.\nBased on the video content and the dimension definition, please "
         "evaluate the video's visual_quality and give the score. The score must be an integer in the range of "
         "1 - 5. " + _OUTPUT),
    WC: ("You are an expert for evaluating whether an AI-generated video is coherent with the real world.\n" +
         _FRAMES_LINE + "\nWe evaluate the dimension 'world_consistency': whether the video contains any violations "
         "of everyday knowledge, common sense, or basic physical laws, including temporal inconsistencies, "
         "unnatural or incoherent motion, physically implausible interactions, and structural abnormalities or "
         "deformities in objects or characters.\nText prompt (context only):\n{prompt}\nThe text prompt is "
         "provided so that you can recognize intentional creative choices it requests (e.g. a non-realistic scene "
         "or a deliberately fantastical setup) and NOT penalize them on this dimension. DO NOT judge how "
         "faithfully the video follows the prompt here - that is covered by a separate dimension.\nBased on the "
         "video content and the dimension definition, please evaluate the video's world_consistency and give the "
         "score. The score must be an integer in the range of 1 - 5. " + _OUTPUT),
}


def instruction(dimension: str, prompt: str, n_frames: int) -> str:
    """The seed's Appendix 4 evaluation instruction for ``dimension``, filled in."""
    return INSTRUCTIONS[dimension].format(n=n_frames, prompt=prompt)


ASK_MAX_TOKENS = 1500
RATIONALE_MAX_TOKENS = 600


class FirmCall(NamedTuple):
    """What one FIRM-Video call sends: its prompt version, its system text and its token budget."""

    version: str
    system: str
    max_tokens: int


def firm_call(step: str) -> FirmCall:
    """The :class:`FirmCall` of one step (read when asked, so the module's constants are the truth)."""
    return {"if_plan": FirmCall(IF_PLAN_VERSION, IF_PLAN_SYSTEM, ASK_MAX_TOKENS),
            "if_verify": FirmCall(IF_VERIFY_VERSION, IF_VERIFY_SYSTEM, ASK_MAX_TOKENS),
            "wc_ground": FirmCall(WC_GROUND_VERSION, WC_GROUND_SYSTEM, ASK_MAX_TOKENS),
            "wc_questions": FirmCall(WC_QUESTIONS_VERSION, WC_QUESTIONS_SYSTEM, ASK_MAX_TOKENS),
            "wc_verify": FirmCall(WC_VERIFY_VERSION, WC_VERIFY_SYSTEM, ASK_MAX_TOKENS),
            "pq": FirmCall(PQ_VERSION, PQ_SYSTEM, ASK_MAX_TOKENS),
            "rationale": FirmCall(RATIONALE_VERSION, RATIONALE_SYSTEM, RATIONALE_MAX_TOKENS)}[step]
