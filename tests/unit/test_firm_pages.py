"""A video's FIRM-Video page as a person reads it: each checklist item's verdict in words, and an item
the verifier could not tell from the frames ("unverifiable") shown as that, never as an answer."""

from html.parser import HTMLParser

from argus_dagster.outputs.firm_pages import render_firm_video
from argus_dagster.protocols.firm.parsing import parse_verdicts
from argus_dagster.protocols.firm.tables import verdict_rows
from argus_dagster.protocols.firm.types import IF, WC, DimensionResult

SCORE = {"if_rating": 2, "if_score": 0.4, "if_rationale": "r1 met.", "wc_rating": 3, "wc_score": 0.5,
         "wc_rationale": "one violation.", "pq_rating": 4, "pq_rationale": "sharp."}
QUESTIONS = {"r1": "Does the video show a red kite?", "r2": "Is the kite over a beach?", "r3": "Does a dog run?",
             "q1": "Is the kite deformed?", "q2": "Does the sky flicker?", "q3": "Does the string float slack?"}


class _Items(HTMLParser):
    """Each checklist row of a page, by its section's dimension and its ``data-item``: the verdict cell's
    text and classes, as a person sees and a stylesheet colours them."""

    def __init__(self):
        super().__init__()
        self.items: dict[tuple[str, str], dict] = {}
        self.headings: dict[str, str] = {}
        self._dim = self._row = self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "dimension" in (a.get("class") or "").split():
            self._dim = a["data-dimension"]
        elif tag == "h2" and self._dim:
            self._in = ("h2", self._dim)
            self.headings[self._dim] = ""
        elif tag == "tr" and "data-item" in a:
            self._row = self.items[(self._dim, a["data-item"])] = {"verdict": "", "classes": set()}
        elif tag == "td" and self._row is not None and "verdict" in (a.get("class") or "").split():
            self._row["classes"] = set(a["class"].split()) - {"verdict"}
            self._in = ("verdict", None)

    def handle_endtag(self, tag):
        if tag in ("td", "h2"):
            self._in = None
        elif tag == "tr":
            self._row = None
        elif tag == "section":
            self._dim = None

    def handle_data(self, data):
        if self._in and self._in[0] == "verdict":
            self._row["verdict"] += data
        elif self._in:
            self.headings[self._in[1]] += data


def _stored_verdicts() -> list[dict]:
    """``firm_verdicts`` rows as the graph stores them, from the verifier's answers as it gives them:
    IF r1 yes, r2 no, r3 unverifiable; WC q1 yes (a violation), q2 no, q3 unverifiable."""
    results = {}
    for dim, answers in ((IF, (("r1", "yes"), ("r2", "no"), ("r3", "unverifiable"))),
                         (WC, (("q1", "yes"), ("q2", "no"), ("q3", "unverifiable")))):
        text = '{"answers": [' + ", ".join(f'{{"id": "{i}", "answer": "{a}", "evidence": "seen in frame 3"}}'
                                           for i, a in answers) + "]}"
        verdicts = parse_verdicts(text, [i for i, _ in answers], "yes means the requirement is met")
        results[dim] = DimensionResult(dimension=dim, score=None, rating=None, rationale="", verdicts=verdicts)
    rows = verdict_rows("p0", results)
    return [{**r, "question": QUESTIONS[r["item_id"]], "importance": 3} for r in rows]


def _page_items(verdicts: list[dict]) -> _Items:
    html = render_firm_video(task="T2V", model="m", input_id="p0", sample="", prompt="A red kite over a beach",
                             score=SCORE, verdicts=verdicts)
    parser = _Items()
    parser.feed(html)
    return parser


def test_an_item_the_verifier_could_not_tell_reads_cannot_tell():
    verdicts = _stored_verdicts()
    # as stored, "unverifiable" is a "no" that is not verifiable: the page must not read the "no" as an answer
    assert [(r["item_id"], r["verdict"], r["verifiable"]) for r in verdicts if r["item_id"] in ("r3", "q3")] == [
        ("r3", "no", False), ("q3", "no", False)]
    page = _page_items(verdicts)
    shown = {key: (item["verdict"], item["classes"]) for key, item in page.items.items()}
    assert shown == {("if", "r1"): ("met", {"met"}), ("if", "r2"): ("not met", {"not-met"}),
                     ("if", "r3"): ("cannot tell", {"cannot-tell"}),
                     ("wc", "q1"): ("violation", {"violation"}), ("wc", "q2"): ("no violation", {"no-violation"}),
                     ("wc", "q3"): ("cannot tell", {"cannot-tell"})}, shown
    # the section heads count the answers that are met or violated, and no item the verifier could not tell
    assert "(1 of 3 met)" in page.headings["if"] and "(1 violation in 3 questions)" in page.headings["wc"]
