"""Cues: what makes a sentence worth keeping, read without a model.

Every decision the extractive summarizer makes — is this a fact, a line of the
timeline, or filler — and every trimming decision (what goes first when the
memory is over its share) comes from the cues read here: numbers, versions,
dates, proper names, decisions, causes, reversals, and the signs that a
sentence is *not* about the session's own state (questions, hypotheticals,
hearsay, requests, generic advice).

    >>> cues = read("We removed Redis because stale prices caused 3 outages.")
    >>> cues.causal, cues.reversal, cues.number, cues.first_person
    (True, True, True, True)
    >>> read("Should we use Kafka?").question
    True
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["Cues", "cause_of", "read", "salience", "sentences", "tidy"]

# A sentence ends at . ! ? followed by space and something that can start a
# sentence; "e.g. foo" and "v1.2" do not split.
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_NUMBER = re.compile(r"\d")
# Hostnames, paths, repository names: "stg-eu-12.internal", "acme/core".
_IDENTIFIER = re.compile(r"\b[A-Za-z0-9][\w-]*[./][\w-]+(?:[./][\w-]+)*\b")
_VERSION = re.compile(r"\bv?\d+(?:\.\d+)+\b")
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|"
    rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b|"
    rf"\b{_MONTH}\s+(?:19|20)\d{{2}}\b|\bQ[1-4](?:\s+(?:19|20)\d{{2}})?\b|\b(?:19|20)\d{{2}}\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
)
# A capitalized word that does not start the sentence, or an acronym.
_NAME = re.compile(r"(?<=[\s(\"'/,])[A-Z][a-zA-Z0-9]*[a-z0-9][a-zA-Z0-9]*|\b[A-Z]{2,}[0-9]*\b")
_CAUSAL = re.compile(
    r"\b(?:because|due to|caused|causing|so that|therefore|as a result|led to|leading to|"
    r"in order to|thanks to|owing to|hence|the reason|that's why|which is why|given that|"
    r"to avoid|to stop|to fix|to reduce|to cut|after (?:the|a|an|we|our|it|they)|"
    # "since" gives a cause unless a time follows it ("since March", "since then").
    rf"since(?!\s+(?:then|last|this|early|late|the (?:start|beginning)|\d|{_MONTH}\b|"
    r"monday|tuesday|wednesday|thursday|friday|yesterday|day one)))\b",
    re.I,
)
_TEMPORAL = re.compile(
    r"\b(?:then|after|before|later|until|afterwards|previously|initially|originally|finally|"
    r"at first|earlier|since|yesterday|today|tomorrow|last (?:week|month|year|sprint|quarter)|"
    r"next (?:week|month|year|sprint|quarter)|this (?:week|month|year|sprint|quarter))\b",
    re.I,
)
_REVERSAL = re.compile(
    r"\b(?:revert(?:ed|ing)?|went back|going back|moved back|"
    # "switched the public API to …", "migrated the database from …"
    r"(?:switch|migrat|mov|port|swapp|transition|convert)(?:ed|ing|e)?\s+(?:[\w-]+\s+){0,4}?"
    r"(?:back|to|from|off|onto|over to|away from)\b|"
    r"rolled back|roll back|no longer|not anymore|any ?more|instead|replac(?:ed|ing)|"
    r"abandon(?:ed)?|dropp(?:ed|ing)|undid|back to|back into|changed (?:our|my) minds?|"
    r"scrapped|ditched|"
    r"removed|got rid of|rewr(?:ote|itten)|retired|sunset|deprecated|stopped using|"
    r"changed (?:it|the|our|my) |slipped|postponed|pushed (?:back|out)|moved (?:the|our)|"
    r"consolidat(?:ed|ing)|ended up|in the end|settled on|took over|handed over|rebuil[dt]|"
    r"redesigned|reimplemented|redid|"
    r"(?:is|are) now|now (?:use|run|host|live)s?)",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:we (?:use|used|chose|picked|decided|agreed|settled|standardi[sz]ed|will|are using|"
    r"switched|migrated|moved|merged|removed|added|adopted|run|deploy|host|went|built|build|"
    r"rewrote|replaced|split|pinned|turned|enabled|disabled|launched|shipped|released|hired|"
    r"signed|bought|dropped|kept|rely|need)|i (?:prefer|like|love|hate|use|want|need|work|live|"
    r"chose|picked|decided)|my name is|i'm|i am|we're|we've|we are|we have|"
    r"(?:our|my) (?:[\w-]+ ){1,3}(?:is|are|was|were)|decided|decision|prefer(?:s|red)?|deadline|"
    r"budget|must|always|"
    r"never|committed to|going with|go with|call(?:ed)? (?:it|the))\b",
    re.I,
)
# Words that say a value is new ("we use Go now"), beyond the reversal verbs.
_CHANGE = re.compile(r"\b(?:now|these days|anymore|any more|from now on|no more)\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:we|we're|we've|we'll|we'd|our|ours|us|i|i'm|i've|my|me)\b", re.I)
# Statements about someone else's setup, or general knowledge.
_HEARSAY = re.compile(
    r"\b(?:(?:my|our) (?:\w+ )?\w+'s|a friend|friend of mine|someone|somebody|people|everyone|"
    r"everybody|many (?:teams|companies|people)|most (?:teams|companies|people)|other teams|"
    r"a lot of (?:teams|companies|people)|i (?:read|heard|saw|noticed|watched)|apparently|"
    r"reportedly|rumou?r|some teams|(?:my|our|at) (?:last|previous|old|former) (?:job|team|company|"
    r"employer|startup)|"
    r"(?:a|one) (?:blog|talk|article|book|podcast|video))\b",
    re.I,
)
_HYPOTHETICAL = re.compile(
    r"\b(?:if (?:we|i|you)|should we|could we|would we|shall we|maybe we|perhaps we|might|"
    r"what if|wonder|considering|thinking (?:about|of)|or not|whether|would it|could it|"
    r"would you|could you|can you|do you think|hypothetically|imagine|^\s*if|if the)\b",
    re.I,
)
_REQUEST = re.compile(
    r"^\s*(?:please|pls|could you|can you|would you|will you|help me|tell me|give me|show me|"
    r"explain|write|draft|list|summari[sz]e|walk me|let's (?:talk|discuss|look|think)|"
    r"any (?:thoughts|ideas|tips)|remind me|thanks|thank you|hi|hello|hey)\b",
    re.I,
)
_GENERIC = re.compile(
    r"\b(?:you (?:should|could|might|may|can|will want|want to|'ll want)|it's (?:a good|usually|"
    r"often|worth|best)|it is (?:a good|usually|often|worth|best)|a good (?:idea|rule|practice)|"
    r"best practice|consider|try to|make sure|keep in mind|in my experience|one option|"
    r"a common|the key is|in general|generally speaking)\b",
    re.I,
)
_CAUSE_START = re.compile(
    r"\b(?:because|due to|since|as a result of|thanks to|owing to|after|given that|"
    r"the reason|to avoid|to stop|to fix|so that|in order to)\b",
    re.I,
)


# Discourse markers that open a sentence without adding to it.
_OPENER = re.compile(
    r"^(?:quick context|context|by the way|btw|fyi|for the record|just so you know|note|update|"
    r"also|anyway|oh|ok|okay|so|and|well)\s*[:,\-—]?\s+(?=\S)",
    re.I,
)


def tidy(sentence: str) -> str:
    """A sentence without the discourse markers that open it ("Quick context: …")."""
    while True:
        stripped = _OPENER.sub("", sentence, count=1)
        if stripped == sentence:
            return sentence
        sentence = stripped[:1].upper() + stripped[1:]


def sentences(text: str) -> list[str]:
    """The sentences of a message, whitespace normalized; fragments dropped."""
    out = []
    for piece in _SENTENCE.split(text):
        piece = " ".join(piece.split()).lstrip("-*• ").strip()
        if len(piece) > 3:
            out.append(piece)
    return out


_TESTS: dict[str, Callable[[str], bool]] = {
    "number": lambda s: bool(_NUMBER.search(s) or _IDENTIFIER.search(s)),
    "version": lambda s: bool(_VERSION.search(s)),
    "date": lambda s: bool(_DATE.search(s)),
    "name": lambda s: bool(_NAME.search(s)),
    "decision": lambda s: bool(_DECISION.search(s)),
    "causal": lambda s: bool(_CAUSAL.search(s)),
    "temporal": lambda s: bool(_TEMPORAL.search(s)),
    "reversal": lambda s: bool(_REVERSAL.search(s)),
    "change": lambda s: bool(_REVERSAL.search(s) or _CHANGE.search(s)),
    "first_person": lambda s: bool(_FIRST_PERSON.search(s)),
    "question": lambda s: s.rstrip().endswith("?"),
    "hearsay": lambda s: bool(_HEARSAY.search(s)),
    "hypothetical": lambda s: bool(_HYPOTHETICAL.search(s)),
    "request": lambda s: bool(_REQUEST.search(s)),
    "generic": lambda s: bool(_GENERIC.search(s)),
}


class Cues:
    """What one sentence signals.

    Each cue is one regular-expression search, done the first time it is
    asked for: most sentences are settled by two or three of them (a question
    is not a fact), and the searches are the extractive summarizer's main cost.
    Cues read: ``number``, ``version``, ``date``, ``name``, ``decision``,
    ``causal``, ``temporal``, ``reversal``, ``change`` (a reversal cue, or a
    word saying the value is new, "now"), ``first_person``, ``question``,
    ``hearsay``, ``hypothetical``, ``request``, ``generic``.
    """

    __slots__ = ("_known", "sentence")

    def __init__(self, sentence: str) -> None:
        self.sentence = sentence
        self._known: dict[str, bool] = {}

    def __getattr__(self, cue: str) -> bool:
        test = _TESTS.get(cue)
        if test is None:
            raise AttributeError(cue)
        known = self._known.get(cue)
        if known is None:
            known = self._known[cue] = test(self.sentence)
        return known

    def __repr__(self) -> str:
        found = [cue for cue in _TESTS if getattr(self, cue)]
        return f"Cues({self.sentence!r}: {', '.join(found) or 'none'})"

    @property
    def about_us(self) -> bool:
        """A statement of the session's own state, not a question, wish or someone else's."""
        return (
            self.first_person
            and not (self.question or self.hearsay or self.hypothetical or self.request)
            and not self.generic
        )

    @property
    def concrete(self) -> bool:
        return self.number or self.version or self.date or self.name


def read(sentence: str) -> Cues:
    return Cues(sentence)


def salience(cues: Cues) -> int:
    """How much a sentence carries that a session must not lose; filler scores ≤ 0."""
    score = 0
    score += 2 if cues.version or cues.date else 1 if cues.number else 0
    score += 1 if cues.name else 0
    score += 2 if cues.decision else 0
    score += 2 if cues.causal else 0
    score += 2 if cues.reversal else 0
    score += 1 if cues.temporal else 0
    score += 2 if cues.about_us else 0
    score -= 3 if cues.question or cues.request else 0
    score -= 2 if cues.hearsay or cues.hypothetical or cues.generic else 0
    return score


def cause_of(sentence: str, limit: int = 200) -> str:
    """The causal clause of a sentence ("because stale prices …"), or ``""``."""
    match = _CAUSE_START.search(sentence)
    if match is None:
        return ""
    clause = sentence[match.start() :].rstrip(" .!")
    return clause if len(clause) <= limit else clause[: limit - 1].rstrip() + "…"
