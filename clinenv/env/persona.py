"""Seeded patient personas for the retrieval patient (issue 34, section 2).

A persona (:data:`PERSONAS`) changes how the facts of P are said, never what is true;
:func:`invert_reply` maps a reply back to P. Names and settings: docs/environments.md.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import model_validator

from clinenv.config_model import ConfigModel
from clinenv.env.retrieval_patient import (
    CAREGIVER_PREFIX,
    NOT_SURE,
    RetrievalPatient,
    _choose,
    _Fact,
    _Index,
    _same,
    _say,
)
from clinenv.protocol.views import FrozenFacts, PatientView
from clinenv.seeding import keyed_uniform

__all__ = ["DEFAULT_P", "FILLER", "FORGOT", "LAY_TERMS", "PERSONAS", "PersonaConfig",
           "PersonaPatient", "invert_reply", "lay", "vague"]

#: Persona names; the first is the default.
PERSONAS = ("cooperative", "reluctant", "vague", "lay", "forgetful", "tangential")
#: Default probability of ``forgetful`` (withhold a fact) and ``tangential`` (add filler).
DEFAULT_P = 0.3
#: Reply of a forgetful patient whose every fact for the question was withheld.
FORGOT = "I don't remember right now."
#: Non-medical filler of the tangential patient: no symptom, body part, time, number,
#: person of the family history, habit or treatment (checked by the tests).
FILLER = (
    "By the way, the parking here was hard to find.",
    "My neighbour just got a new puppy.",
    "I keep meaning to repaint the kitchen.",
    "The traffic on the way in was terrible.",
    "I've been reading a good mystery novel.",
    "My car needs new tires soon.",
    "I'm thinking of planting tomatoes in the garden.",
    "Sorry, I'm a bit chatty today.",
    "The magazines in the waiting room are very old.",
    "I hope the rain holds off this afternoon.",
)

#: ``(clinical term, lay words)``, hand-written for this project (no source: no
#: consumer-health vocabulary is reachable offline). Whole words, any case; one pass.
LAY_TERMS: tuple[tuple[str, str], ...] = (
    ("myocardial infarction", "heart attack"),
    ("cerebrovascular accident", "stroke"),
    ("gastroesophageal reflux disease", "acid reflux"),
    ("diabetes mellitus", "diabetes"),
    ("urinary frequency", "needing to urinate often"),
    ("hypercholesterolemia", "high cholesterol"),
    ("hyperlipidemia", "high cholesterol"),
    ("hypertension", "high blood pressure"),
    ("hypotension", "low blood pressure"),
    ("hyperglycemia", "high blood sugar"),
    ("hypoglycemia", "low blood sugar"),
    ("hypothyroidism", "an underactive thyroid"),
    ("hyperthyroidism", "an overactive thyroid"),
    ("dyspnea", "shortness of breath"),
    ("dyspnoea", "shortness of breath"),
    ("orthopnea", "trouble breathing lying flat"),
    ("tachycardia", "a racing heart"),
    ("palpitations", "a pounding heartbeat"),
    ("syncopal", "fainting"),
    ("syncope", "fainting"),
    ("vertigo", "a spinning feeling"),
    ("hematuria", "blood in the urine"),
    ("haematuria", "blood in the urine"),
    ("hematochezia", "blood in the stool"),
    ("melena", "black, tarry stools"),
    ("hemoptysis", "coughing up blood"),
    ("hematemesis", "vomiting blood"),
    ("dysuria", "pain when urinating"),
    ("polyuria", "passing a lot of urine"),
    ("polydipsia", "excessive thirst"),
    ("nocturia", "getting up at night to urinate"),
    ("emesis", "throwing up"),
    ("vomiting", "throwing up"),
    ("nausea", "queasiness"),
    ("diarrhea", "loose stools"),
    ("diarrhoea", "loose stools"),
    ("pruritic", "itchy"),
    ("pruritus", "itching"),
    ("erythematous", "red"),
    ("erythema", "redness"),
    ("edema", "swelling"),
    ("oedema", "swelling"),
    ("fatigue", "tiredness"),
    ("malaise", "feeling unwell"),
    ("lethargic", "sluggish"),
    ("lethargy", "sluggishness"),
    ("myalgias", "muscle aches"),
    ("myalgia", "muscle aches"),
    ("arthralgias", "joint pains"),
    ("arthralgia", "joint pain"),
    ("diaphoresis", "heavy sweating"),
    ("diaphoretic", "sweaty"),
    ("pyrexia", "fever"),
    ("afebrile", "without fever"),
    ("febrile", "feverish"),
    ("dysphagia", "trouble swallowing"),
    ("odynophagia", "painful swallowing"),
    ("rhinorrhea", "a runny nose"),
    ("paresthesias", "pins and needles"),
    ("paresthesia", "pins and needles"),
    ("diplopia", "double vision"),
    ("photophobia", "sensitivity to light"),
    ("dyspepsia", "indigestion"),
    ("insomnia", "trouble sleeping"),
    ("menorrhagia", "heavy periods"),
    ("amenorrhea", "missed periods"),
    ("dysmenorrhea", "painful periods"),
    ("tinnitus", "ringing in the ears"),
    ("otalgia", "earache"),
    ("anorexia", "loss of appetite"),
    ("abdominal", "belly"),
    ("abdomen", "belly"),
    ("epigastric", "upper belly"),
    ("renal", "kidney"),
    ("hepatic", "liver"),
    ("cardiac", "heart"),
    ("pulmonary", "lung"),
    ("gastric", "stomach"),
    ("intermittently", "on and off"),
    ("intermittent", "on-and-off"),
    ("analgesics", "painkillers"),
    ("ambulating", "walking"),
)
_LAY = dict(LAY_TERMS)
# "anorexia nervosa" is a name, not a symptom: kept
_LAY_PATTERN = re.compile(
    r"\b(?:" + "|".join(re.escape(t) for t, _ in sorted(LAY_TERMS, key=lambda x: -len(x[0])))
    + r")\b(?! nervosa)", re.IGNORECASE)

# "one" is left out: "one day I noticed" is no count
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                 "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
#: Units whose count :func:`vague` coarsens: singular -> plural.
VAGUE_UNITS = {
    "minute": "minutes", "hour": "hours", "day": "days", "night": "nights",
    "week": "weeks", "month": "months", "year": "years", "time": "times",
    "episode": "episodes", "drink": "drinks", "beer": "beers", "glass": "glasses",
    "cigarette": "cigarettes", "pack": "packs", "pound": "pounds", "kilogram": "kilograms",
    "kg": "kg", "lb": "lbs", "mile": "miles", "block": "blocks", "flight": "flights",
}
_PLURALS = {plural: single for single, plural in VAGUE_UNITS.items()}
_UNIT_WORDS = sorted({*VAGUE_UNITS, *VAGUE_UNITS.values()}, key=len, reverse=True)
_VAGUE_PATTERN = re.compile(
    r"(?:\b(?P<article>a|an)\s+)?(?<![\w.,/-])(?P<n>\d+|"
    + "|".join(_NUMBER_WORDS) + r")(?P<sep>[ -])(?P<unit>" + "|".join(_UNIT_WORDS)
    + r")\b(?![- ]old\b|-(?:year|month|week|day)s?\b| of age\b)", re.IGNORECASE)
#: Units of time: a count of 1 of them is coarsened ("1 week" -> "about a week"); a
#: count of 1 of anything else stays.
_DETERMINED = re.compile(r"\b(?:the|past|last|previous|next|first|these|those)\s+$")
_RANGE = re.compile(r"(?:\b(?:to|or|and)|-)\s*$")
_TIME_UNITS = frozenset({"minute", "hour", "day", "night", "week", "month", "year"})


def _coarse(n: int, single: str, plural: str, adjective: bool) -> str:
    """The coarse phrase for ``n`` units: 1 "about a", 2 "a couple of", 3-4 "a few",
    5-9 "several", 10+ "many" (years 20+: "decades"); ``adjective``: the hyphenated form
    ("a few-week history")."""
    if adjective:
        if n == 1:
            return f"roughly one-{single}"
        if single == "year" and n >= 20:
            return "decades-long"
        word = "few" if n <= 4 else "several" if n <= 9 else "many"
        return f"{word}-{single}"
    if n == 1:
        return f"about {'an' if single == 'hour' or single[0] in 'aeiou' else 'a'} {single}"
    if single == "year" and n >= 20:
        return "decades"
    word = "a couple of" if n == 2 else "a few" if n <= 4 else "several" if n <= 9 else "many"
    return f"{word} {plural}"


def _vague_match(match: re.Match[str]) -> str:
    raw = match.group("n").lower()
    n = int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]
    unit = match.group("unit")
    lower = unit.lower()
    single = lower if lower in VAGUE_UNITS else _PLURALS.get(lower, lower)
    plural = VAGUE_UNITS.get(single, lower)
    before = match.string[:match.start()].lower()
    if n == 0 or (n == 1 and single not in _TIME_UNITS) \
            or _RANGE.search(before):  # "2 to 3 days": a range
        return match.group(0)
    phrase = _coarse(n, single, plural, match.group("sep") == "-")
    article = match.group("article")
    if article:
        article = ("an" if phrase[0] in "aeiou" else "a")
        if match.group("article")[0].isupper():
            article = article.capitalize()
        return f"{article} {phrase}"
    if phrase.startswith("a ") and _DETERMINED.search(before):  # "the past a few weeks"
        phrase = phrase[2:]
    if match.start() == 0 or match.string[:match.start()].rstrip().endswith((".", "!", "?")):
        return phrase[0].upper() + phrase[1:]
    return phrase


@functools.lru_cache(maxsize=65_536)
def vague(sentence: str) -> str:
    """``sentence`` with its counts of time and amounts said coarsely (:func:`_coarse`):
    "for 3 weeks" -> "for a few weeks", "a 2-day history" -> "a few-day history",
    "20 years" -> "decades". Ages ("45-year-old") and decimals stay; every coarse
    phrase covers the number it replaces."""
    return _VAGUE_PATTERN.sub(_vague_match, sentence)


def _lay_match(match: re.Match[str]) -> str:
    term = match.group(0)
    words = _LAY[term.lower()]
    return words[0].upper() + words[1:] if term[0].isupper() else words


@functools.lru_cache(maxsize=65_536)
def lay(sentence: str) -> str:
    """``sentence`` with the clinical terms of :data:`LAY_TERMS` in lay words (first
    letter's case kept): "I have dyspnea." -> "I have shortness of breath."."""
    return _LAY_PATTERN.sub(_lay_match, sentence)


_TRANSFORMS = {"vague": vague, "lay": lay}


class PersonaConfig(ConfigModel):
    """A patient persona (frozen). A string ``"NAME"`` or ``"NAME:P"`` is accepted
    (``"forgetful:0.5"``), and a dict with these keys.

    Attributes:
        name: one of :data:`PERSONAS` (default ``"cooperative"``).
        p: probability in [0, 1] of ``forgetful`` (a fact withheld) and ``tangential``
            (filler added to a reply); unused by the other personas.

    Raises:
        pydantic.ValidationError: an unknown name (the names listed) or ``p`` outside
            [0, 1] (a ``ValueError`` naming ``patient_persona``).
    """

    name: str = PERSONAS[0]
    p: float = DEFAULT_P

    @model_validator(mode="before")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, str):
            name, _, p = value.partition(":")
            value = {"name": name.strip()} if not p else {"name": name.strip(), "p": p}
        if isinstance(value, Mapping):
            value = dict(value)
            if value.get("name", PERSONAS[0]) not in PERSONAS:
                raise ValueError(f"patient_persona must be one of {PERSONAS} (optionally "
                                 f"'NAME:P'), got {value.get('name')!r}")
            p = value.get("p", DEFAULT_P)
            try:
                p_value = float(p) if not isinstance(p, bool) else None
            except (TypeError, ValueError):
                p_value = None
            if p_value is None or not 0.0 <= p_value <= 1.0:
                raise ValueError(f"patient_persona p must be a probability in [0, 1], "
                                 f"got {p!r}")
            value["p"] = p_value
        return value

    @property
    def active(self) -> bool:
        """Not the default ``cooperative`` persona."""
        return self.name != PERSONAS[0]

    def to_value(self) -> str:
        """``"NAME"``, or ``"NAME:P"`` when ``p`` is not :data:`DEFAULT_P`."""
        return self.name if self.p == DEFAULT_P else f"{self.name}:{self.p:g}"


@functools.lru_cache(maxsize=1024)
def _case_key(facts: FrozenFacts) -> str:
    """A stable digest of P (the case in the draw keys; Python's ``hash`` is salted)."""
    text = json.dumps(dict(facts), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def _frozen(facts: Mapping[str, Any]) -> FrozenFacts:
    return facts if isinstance(facts, FrozenFacts) else FrozenFacts(facts)


class PersonaPatient(RetrievalPatient):
    """The retrieval patient under a persona (docs/environments.md); it answers only from P.

    Args:
        persona: a :class:`PersonaConfig` or its string / dict form (``cooperative``
            answers as the plain patient does).

    Raises:
        pydantic.ValidationError: a bad persona.
    """

    def __init__(self, persona: PersonaConfig | str | Mapping[str, Any] = "cooperative"
                 ) -> None:
        self.persona = (persona if isinstance(persona, PersonaConfig)
                        else PersonaConfig.model_validate(persona))
        self.seed = 0

    def reset(self, *, seed: int | None = None) -> None:
        """Set the draw seed of the next episode (``None``: 0)."""
        self.seed = 0 if seed is None else int(seed)

    def reply(self, view: PatientView) -> str:
        """Answer ``view.question`` from ``view.facts`` under the persona; the same view
        and seed always give the same reply."""
        facts = _frozen(view.facts)
        index = self._index(facts)
        name, p = self.persona.name, self.persona.p
        voice = 1 if view.caregiver_voice else 0
        said = " ".join([reply for _, reply in view.dialogue]).lower()
        said_last = view.dialogue[-1][1].lower() if view.dialogue else ""
        # the facts given so far, found by their persona form; the plain patient's
        # choice then runs on their plain needles
        given = [f for f in index.facts if _needle(f, name) in said]
        earlier = "\n".join(f.needle for f in given)
        last = "\n".join(f.needle for f in given if _needle(f, name) in said_last)
        chosen, opening = _choose(index, view, earlier, last)
        forgot = False
        if name == "reluctant" and chosen:
            fresh = [f for f in chosen if f not in given]
            chosen = [fresh[0] if fresh else chosen[0]]
        elif name == "forgetful" and chosen:
            question = view.question.strip()
            if not any(_same(q, question) for q, _ in view.dialogue):  # asked again: told
                case = _case_key(facts)
                kept = [f for f in chosen if (opening and f is index.primary)
                        or keyed_uniform(self.seed, case, f.spoken[0], "forget") >= p]
                forgot, chosen = len(kept) < len(chosen), kept
        transform = _TRANSFORMS.get(name)
        parts = [_say(index, f, voice, opening) for f in chosen]
        if transform is not None:
            parts = [transform(part) for part in parts]
        if not parts:
            parts = [FORGOT if forgot else NOT_SURE]
        if name == "tangential":
            case, at = _case_key(facts), len(view.dialogue)
            if keyed_uniform(self.seed, case, at, "filler") < p:
                pick = keyed_uniform(self.seed, case, at, "which")
                parts.append(FILLER[int(pick * len(FILLER))])
        text = " ".join(parts)
        return CAREGIVER_PREFIX + text if view.caregiver_voice else text


def _needle(fact: _Fact, name: str) -> str:
    """The lower-case core of the fact's patient-voice form under persona ``name``."""
    transform = _TRANSFORMS.get(name)
    if transform is None:
        return fact.needle
    return transform(fact.spoken[0]).rstrip(".!?").lower()


def invert_reply(reply: str, facts: Mapping[str, Any], persona: PersonaConfig | str,
                 *, caregiver_voice: bool = False) -> str:
    """The plain patient's text behind a persona's ``reply``: the filler of
    :data:`FILLER` dropped, and each transformed sentence replaced by its fact's plain
    form (looked up in P: every fact's sentence, opening form included, in both voices).

    What is left is checkable: every sentence is a spoken fact of P or a fixed phrase
    (``NOT_SURE``, :data:`FORGOT`, the caregiver prefix, the opening).
    """
    persona = (persona if isinstance(persona, PersonaConfig)
               else PersonaConfig.model_validate(persona))
    text = reply
    for filler in FILLER:
        text = text.replace(" " + filler, "").replace(filler, "")
    transform = _TRANSFORMS.get(persona.name)
    if transform is None:
        return text
    index: _Index = RetrievalPatient()._index(_frozen(facts))
    voice = 1 if caregiver_voice else 0
    pairs = {}
    for fact in index.facts:
        for opening in (False, True):
            plain = _say(index, fact, voice, opening)
            changed = transform(plain)
            if changed != plain:
                pairs[changed] = plain
    for changed in sorted(pairs, key=len, reverse=True):
        text = text.replace(changed, pairs[changed])
    return text
