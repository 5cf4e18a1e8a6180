"""The patient's voice: record sentences rephrased as the patient (or a caregiver) says them.

Only pronouns, verb forms and reporting phrases change; no clinical word is added.
"""

from __future__ import annotations

import re

_IRREGULAR = {"has": "have", "is": "am", "does": "do", "doesn't": "don't", "isn't": "am not",
              "hasn't": "haven't", "goes": "go"}  # fmt: skip
_ADVERBS = r"(?:(?:also|still|often|never|occasionally|recently|now|always|sometimes|first)\s+)?"
_THIRD = re.compile(rf"^(?:the\s+patient|patient|she|he)\s+({_ADVERBS})([\w']+)", re.IGNORECASE)
_SUBJECT = r"^(?:(?:the\s+patient|patient|she|he)\s+)?(?:also\s+)?"
_REPORTS_THAT = re.compile(
    rf"{_SUBJECT}(?:reports|notes|states|mentions|says)\s+that\s+", re.IGNORECASE
)
_REPORTS = re.compile(
    rf"{_SUBJECT}(?:reports|complains\s+of|describes|endorses|notes)\s+"
    r"(?!(?:her|his|their|the|this|that|these|those|it|being|to|feeling|he|she)\b)",
    re.IGNORECASE,
)
_SUBJECTLESS = re.compile(
    r"^(smokes|drinks|works|lives|uses|takes|exercises|eats|travels|sleeps|has|had|is|was"
    r"|underwent|experiences|notes|describes)\b",
    re.IGNORECASE,
)
_GERUND = re.compile(
    r"(?:experienc|hav|feel|notic|develop|gett|suffer|los|gain|vomit|cough|sneez|bleed|sweat"
    r"|wak|see|hear|pass|drink|smok|us|tak|eat|sleep|urinat|wheez|itch)ing\b",
    re.IGNORECASE,
)
_DENIES = re.compile(rf"{_SUBJECT}denies\s+", re.IGNORECASE)
_INNER_THIRD = re.compile(rf"\b(?:she|he)\s+({_ADVERBS})([a-z']+)", re.IGNORECASE)
_POSSESSIVE_START = re.compile(r"^(?:the\s+patient's|her|his)\s+", re.IGNORECASE)
_HIS = re.compile(r"\bhis\b", re.IGNORECASE)
_HER = re.compile(
    r"\bher\b(?!\s+(?:to|and|or|with|that|for|at|in|on|a|an|the|about|from|by|as|but)\b)"
    r"(?=\s+[a-z])",
    re.IGNORECASE,
)
_SELF_PRONOUN = re.compile(r"\b(?:herself|himself)\b", re.IGNORECASE)
_YOU_FORMS = (
    (re.compile(r"\byou are\b", re.IGNORECASE), "I am"),
    (re.compile(r"\byou were\b", re.IGNORECASE), "I was"),
    (re.compile(r"\byou're\b", re.IGNORECASE), "I'm"),
    (re.compile(r"\byou've\b", re.IGNORECASE), "I've"),
    (re.compile(r"\byou'd\b", re.IGNORECASE), "I'd"),
    (re.compile(r"\byou'll\b", re.IGNORECASE), "I'll"),
    (re.compile(r"\byourself\b", re.IGNORECASE), "myself"),
    (re.compile(r"\byour\b", re.IGNORECASE), "my"),
    (
        re.compile(
            r"\b(to|for|with|at|about|from|by|of|told|tell|gave|give|given|asked|caused"
            r"|cause|bother|bothers|bothered|help|helped|make|makes|making|let) you\b",
            re.IGNORECASE,
        ),
        r"\1 me",
    ),
    (re.compile(r"\byou\b", re.IGNORECASE), "I"),
)
_CHILD_SUBJECT = re.compile(
    r"\bthe\s+(?:patient|child|infant|newborn|baby|toddler)('s)?\b", re.IGNORECASE
)


def _first_person_verb(verb: str) -> str:
    """Third- to first-person present: "has" -> "have", "drinks" -> "drink"."""
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower.endswith("ies") and len(lower) > 4:
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z|o)es$", lower):
        return verb[:-2]
    if lower.endswith("s") and not lower.endswith(("ss", "us", "is")):
        return verb[:-1]
    return verb


def _inner_first_person(match: re.Match[str]) -> str:
    return f"I {match.group(1)}{_first_person_verb(match.group(2))}"


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _second_to_first(sentence: str) -> str:
    if "you" not in sentence.lower():  # every pattern holds "you" (no other character
        return sentence  # folds to these letters)
    for pattern, replacement in _YOU_FORMS:
        sentence = pattern.sub(replacement, sentence)
    return sentence


def as_patient(sentence: str) -> str:
    """The patient's own voice for one fact sentence (best effort, words kept).

    ``"The patient reports a 1-month history of diplopia."`` ->
    ``"I have a 1-month history of diplopia."``; ``"You have noticed ..."`` ->
    ``"I have noticed ..."``; ``"Denies chest pain."`` -> ``"I don't have chest pain."``.
    """
    sentence = _second_to_first(sentence)
    match = _REPORTS_THAT.match(sentence)
    if match:
        sentence = _capitalize(sentence[match.end() :])
    if match := _DENIES.match(sentence):
        rest = sentence[match.end() :]
        lead = "I haven't been " if _GERUND.match(rest) else "I don't have "
        sentence = lead + rest
    elif match := _REPORTS.match(sentence):
        rest = sentence[match.end() :]
        sentence = ("I've been " if _GERUND.match(rest) else "I have ") + rest
    elif match := _THIRD.match(sentence):
        verb = _first_person_verb(match.group(2))
        sentence = f"I {match.group(1)}{verb}{sentence[match.end() :]}"
    elif match := _SUBJECTLESS.match(sentence):
        verb = _first_person_verb(match.group(1).lower())
        sentence = f"I {verb}{sentence[match.end() :]}"
    sentence = _INNER_THIRD.sub(_inner_first_person, sentence)
    sentence = _POSSESSIVE_START.sub("My ", sentence)
    sentence = _HIS.sub("my", sentence)
    sentence = _HER.sub("my", sentence)
    return _capitalize(_SELF_PRONOUN.sub("myself", sentence))


def as_caregiver(sentence: str) -> str:
    """The parent's voice: "The patient has..." -> "My child has..."."""
    sentence = _second_to_first(sentence)

    def child(match: re.Match[str]) -> str:
        return "my child" + (match.group(1) or "")

    return _capitalize(_CHILD_SUBJECT.sub(child, sentence))


def finish_sentence(sentence: str) -> str:
    """``sentence`` stripped, with a full stop added unless it ends in ``.``, ``!`` or ``?``."""
    sentence = sentence.strip()
    return sentence if sentence[-1:] in ".!?" else sentence + "."
