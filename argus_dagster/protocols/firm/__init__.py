"""FIRM-Video's check-before-score protocol (seed ``001_a78e89d3e52e635c.txt``, §3.2, §3.3, Appendix 1).

Three dimensions, each rated 1-5 from verified checklist decisions rather than from an impression:

- **Instruction Following (IF).** A text planner turns the prompt into atomic yes/no requirements with
  importance ``m ∈ {1..5}``, requirements about what is heard left out (the planner is told, and
  :mod:`~argus_dagster.protocols.firm.audio` checks what it returns; ``firm_checklists`` keeps each one
  left out with its reason). The checklist is output-blind: made once per input,
  frozen with a content hash (like rubrics) and shared by every candidate of the input. A verifier
  answers every requirement from the video's ordered frames with short visual evidence; an
  unverifiable requirement counts as unsatisfied and keeps its weight (the seed's conservative
  reading). ``s_IF = Σ w_i z_i`` with ``w_i = m_i / Σ m``, rounded to 4 places, rated with the
  thresholds 0.35 / 0.70 / 0.85 / 1.00 (a 5 needs every requirement met). The weights are exact, and
  ``firm_checklists`` stores them as computed (float64), so ``if_score`` recomputes from the stored
  rows (:func:`~.scoring.if_score_from_weights`). The seed's two-decimal serialization
  (:func:`~.scoring.serialized_weights`) is not what scores: it moves ratings (``m = [1, 2, 5, 5]`` with the
  importance-2 item unmet is 11/13 = 0.8462, rating 3, but 0.85, rating 4, from two-decimal weights).
- **World Coherence (WC).** A grounding model describes the video *without the prompt* (scene
  summary, entities, actions, importance per target). A text planner writes verification questions
  per target (entities: temporal consistency and structure; actions: motion quality and physical
  plausibility), using the prompt only to tell intended fantasy or style from violations; targets
  left without questions are asked for again once. A verifier that sees neither the prompt nor the
  importance answers "yes" for a violation. ``c_t = 1 − violations / questions`` per target,
  ``α(m) = 1.0 / 1.5 / 2.5 / 3.5 / 5.0``, ``s_WC = Σ α c / Σ α`` rounded to 4 places, rated with
  0.20 / 0.58 / 0.78 / 0.89. Only verified decisions aggregate (the seed's abstract and §6): an
  "unverifiable" answer leaves its question out of its target's ``c_t``, a target without a verified
  question leaves the sum, and a video without any is unscored with the reason (:func:`~.scoring.score_wc`).
  ``firm_scores`` counts the unverifiable answers of both dimensions.
- **Perceptual Quality (PQ).** A generic defect checklist (:data:`~.prompts.PQ_CHECKLIST`); the VLM answers each
  defect, writes the rationale and the 1-5 rating itself (as the seed's evaluator does), the prompt
  only to tell intended style from defect. Without a VLM, :func:`~.offline.pq_offline` rates the defects the
  CPU tools measure (blur, noise, exposure, compression, flicker, colour instability, frozen video)
  and says which it could not; IF and WC then stay unscored with the reason
  (:func:`~.offline.unscored_offline`), as criteria without measurable evidence do in the VideoArgus path.

Rationales (:func:`~.rationales.if_rationale`, :func:`~.rationales.wc_rationale`) are written from the verified decisions after
the score is fixed: a template verbalizes them, so no rationale can move a score. With
``word_rationales=True`` the model rewords the decisions (the seed's LLM step,
:meth:`~.evaluator.FirmEvaluator.reword`): it never sees the score, a wording that states one is refused, and the
score and rating stay as computed. :func:`~.training_records.export_records` makes §3.3's instances of one video
as it is scored (frame references; the asset counts the videos it leaves out); the training data a
trainer loads (frames as image files, the condition media, prose reasoning) is written from the
stored tables by :mod:`~argus_dagster.protocols.firm.export`.

Every VLM call goes through :func:`~argus_dagster.vlm.protocol.chat_json` with a strict parser (a malformed
answer is shown back and asked again, at most ``parse_retries`` times) and every prompt carries a
version string that enters the cache keys, beside the client's backend and model, the video's digest,
the condition media's digests and the frame sampling (``media.SAMPLING_ID``). A failed call never
raises out of the per-video functions: the dimension is unscored and the row says why.

**Other tasks.** The definitions are the seed's for T2V. What carries over, and what is done here:
TI2V and TS2V: IF's planner and verifier also receive the condition images (first frame, subject
images) as labelled references (``references``), so requirements such as "starts from the given
frame" or "keeps the subject's identity" are planned and verified; TV2V and TSV2V: the prompt is an
edit instruction, the planner sees the source video's frames and plans the edit's requirements
(including preservation of what the instruction leaves alone), and the verifier sees source and
output frames, labelled. WC and PQ judge the output alone and carry over unchanged (grounding stays
prompt-blind and condition-blind). The thresholds and α are the seed's, calibrated on T2V; they are
used as they are for every task.

The modules, one concern each, in the order they import one another (each imports only those before it):
:mod:`.types` (dimensions, checklists, verdicts, results), :mod:`.rationales`, :mod:`.scoring`
(the formulas), :mod:`.prompts` (versions, system texts, instructions), :mod:`.parsing` (strict
answer parsers), :mod:`.evaluator` (the protocol on a VLM), :mod:`.offline` (PQ from the CPU tools),
:mod:`.tables` (the stored rows and what recomputes from them), :mod:`.training_records` (§3.3's
instances) and :mod:`.batch` (a task's inputs and a model's videos, what the assets call).
"""
