"""The deterministic evidence-atom extractor: offline rules, no model (CDEG "Candidate
Evidence Mining").

The fallback of the LLM extractor and the extractor of offline builds (docs/cdeg.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clinenv.wrappers.cdeg.atoms import EvidenceAtom, normalize_concept, strip_group

#: Availability values that carry no evidence (EGIP A.2: unknown is not evidence).
NO_EVIDENCE = frozenset({"unavailable", "not_recorded"})

#: Direction words and phrases (lower case) -> :data:`~clinenv.wrappers.cdeg.atoms.Direction`.
DIRECTION_WORDS: dict[str, str] = {
    "within normal limits": "normal", "within normal range": "normal",
    "within normal": "normal", "no abnormalities": "normal", "unremarkable": "normal",
    "normothermic": "normal", "afebrile": "normal", "normal": "normal",
    "abnormal": "abnormal", "elevated": "high", "increased": "high", "raised": "high",
    "high": "high", "↑": "high", "decreased": "low", "reduced": "low",
    "diminished": "low", "low": "low", "↓": "low",
}
#: Adult reference ranges of vital signs: name pattern -> (low bound, high bound, unit
#: note). Values below / at-or-above the bounds are low / high, else normal.
VITAL_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (35.0, 38.0),             # °C (°F converted)
    "heart rate|pulse": (60.0, 100.1),       # beats/min; > 100 is tachycardia
    "respiratory rate": (12.0, 20.1),        # breaths/min; > 20 is tachypnoea
    "oxygen saturation|spo2|o2 sat": (94.0, 101.0),  # %
    "blood pressure": (90.0, 140.0),         # systolic mmHg
}
#: Body parts recognized as anatomy (with optional laterality/level words before them).
ANATOMY = ("lobe", "lobes", "lung", "lungs", "zone", "quadrant", "chest", "abdomen",
           "flank", "back", "head", "neck", "eye", "eyes", "eyelid", "ear", "arm", "arms",
           "leg", "legs", "limb", "limbs", "extremity", "extremities", "hand", "hands",
           "foot", "feet", "knee", "hip", "shoulder", "heart", "liver", "spleen", "kidney",
           "kidneys", "brain", "skin", "throat", "pharynx", "calf", "thigh", "wrist",
           "ankle", "groin", "pelvis", "epigastrium", "thyroid", "breast", "face")

_NEGATION = re.compile(r"\b(?:no|not|denies|denied|deny|without|negative for|absent|"
                       r"free of|ruled out|none|never)\b")
_SCOPE_END = re.compile(r"\b(?:but|however|although|except)\b")
_DURATION_HISTORY = re.compile(r"\b(?:a|an|one|two|three|four|five|six|several|few|\d+)"
                               r"[- ](?:day|week|month|year)s?[- ](?:long )?history of\b")
_PAST = re.compile(r"\b(?:history of|previous(?:ly)?|prior|former|past(?! medical history)|h/o)\b")
_DIRECTION = re.compile("|".join(w if w in "↑↓" else rf"\b{re.escape(w)}\b"
                                 for w in DIRECTION_WORDS))
_SIDE = r"(?:right|left|bilateral|both)(?:\s+(?:upper|lower|middle))?|upper|lower|middle"
_PARTS = "|".join(ANATOMY)
# anatomy needs a laterality/level word or a preposition: "heart rate" has none
_ANATOMY = re.compile(rf"\b(?:(?:in|of|over|on|at|to)\s+(?:the\s+)?(?P<a>(?:(?:{_SIDE})\s+)?"
                      rf"(?:{_PARTS}))|(?P<b>(?:{_SIDE})\s+(?:{_PARTS})))\b")
#: Line breaks and list items inside a line (" - item", " 2. Item"): NEJM's inline lists.
_INLINE_ITEM = re.compile(r"\s*\n\s*|\s+[-•]\s+|\s+\(?\d{1,2}[.)]\s+(?=[A-Z])")
_BOILERPLATE = re.compile(r"^(?:the )?(?:information|details|data|results?) (?:extracted|"
                          r"provided|available|relevant)\b")
_BULLET = re.compile(r"^\s*(?:[-*•·]+|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
_NAMED = re.compile(r"^([A-Za-z][^:]{0,60}):\s*(.*)$")
_CLAUSE = re.compile(r"([.;!?](?:\s+|$)|,\s*|\s+(?:and|but|or)\s+|\s*\n\s*)")
_UNKNOWN = re.compile(r"\b(?:not sure|don'?t know|do not know|can'?t remember|no additional|"
                      r"not provided|not available|not recorded|not specified|unavailable|"
                      r"pending|unknown|no information|not applicable)\b")
_LEAD = re.compile(r"^(?:(?:i'?m here because of|i am here because of|i'?m here for|"
                   r"(?:the )?patient(?: reports| has)?|reports|"
                   r"i (?:have|had|developed|noticed|feel|felt|get|got|am|was|become|became)"
                   r"(?: been| had)?|"
                   r"i'?ve (?:had|been|noticed)|i'?m|my|also|then|followed by|"
                   r"(?:\S+ )?(?:days?|weeks?|months?|years?|hours?) ago|since \w+|"
                   r"there (?:is|are|was|were)|presence of|evidence of|signs? of|"
                   r"experiencing|including|showed|shows|revealed|reveals|any|some|a|an|the|with|and|"
                   r"or|of|obvious|significant|"
                   r"mild|moderate)\s+)+")
_TRAIL = re.compile(r"(?:\s+(?:noted|observed|seen|detected|present|found|throughout|"
                    r"identified|reported|in|of|on|at|over|the|and|or|was|is|are))+$")
_YES = re.compile(r"^(?:yes|yeah|yep|i do|i have)\b[\s.,!]*$")
_NO = re.compile(r"^(?:no|nope|not really|never|i don'?t|i do not|i haven'?t|none)\b"
                 r"[^.]{0,25}[.!]?$")
_QUESTION_LEAD = re.compile(r"^(?:do|does|did|have|has|are|is)\s+(?:you|there|your)\s+"
                            r"(?:have|had|ever|been|experienced?|noticed?|feel|get|any)?"
                            r"(?:\s+(?:had|any|been|experienced?|noticed?))*\s*")
_GENERIC_NAMES = frozenset({"findings", "finding", "result", "results", "comments",
                            "comment", "impression", "notes", "note", "interpretation",
                            "value", "report"})
_NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)\s*(°\s*[cf]|%)?")
#: Words a short value may hold besides numbers and direction words (units, results).
_VALUE_WORDS = frozenset("""positive negative present absent detected not none range limits
    within mmol mmhg bpm breaths beats min minute per room air cells hpf mcg µg μg iu meq
    units copies kg sec seconds hour hours ratio index titer trace""".split())


def has_evidence(observation: Mapping[str, Any]) -> bool:
    """Whether the observation can hold evidence: content present and availability not
    ``unavailable`` / ``not_recorded`` (EGIP A.2)."""
    content = observation.get("content")
    return (observation.get("availability") not in NO_EVIDENCE
            and isinstance(content, str) and bool(content.strip()))


def exam_name(observation: Mapping[str, Any]) -> str:
    """The observation's context without a trailing "(Group)": ``"Chest X-Ray
    (Imaging)"`` -> ``"Chest X-Ray"``."""
    return strip_group(str(observation.get("context") or ""))


class DeterministicExtractor:
    """The offline, rule-based extractor (docs/cdeg.md).

    Stateless and thread-safe; ``name`` is ``"deterministic"``.
    """

    name = "deterministic"

    def extract(self, observation: Mapping[str, Any]) -> list[EvidenceAtom]:
        """Atoms of ``observation`` (see :class:`AtomExtractor`)."""
        if not has_evidence(observation):
            return []
        content = str(observation["content"])
        atoms: list[EvidenceAtom] = []
        if observation.get("source") == "Patient":
            atoms = _yes_no_atoms(content, str(observation.get("context") or ""))
        if not atoms:
            default = exam_name(observation) if observation.get("source") != "Patient" else ""
            for raw in _INLINE_ITEM.split(content):
                atoms.extend(_line_atoms(_BULLET.sub("", raw).strip(), default))
        return list({a.key(): a for a in reversed(atoms)}.values())[::-1]


def _yes_no_atoms(reply: str, question: str) -> list[EvidenceAtom]:
    text = normalize_concept(reply)
    yes, no = _YES.match(text), _NO.match(text)
    if not (yes or no) or not question:
        return []
    subject = _QUESTION_LEAD.sub("", normalize_concept(question).rstrip("?")).strip()
    atom = _clause_atom(subject, "", negated=bool(no))
    return [atom] if atom else []


def _line_atoms(line: str, default: str) -> list[EvidenceAtom]:
    if not line or _UNKNOWN.search(line.lower()) or _BOILERPLATE.match(line.lower()):
        return []
    named = _NAMED.match(line)
    if named and not named.group(2).strip():
        return []  # a header such as "Laboratory tests:"
    if named and _is_short(named.group(2)):
        name = named.group(1)
        if normalize_concept(name) in _GENERIC_NAMES:
            name = default or name
        atom = _clause_atom(f"{name} {named.group(2)}", name, negated=False,
                            value=named.group(2))
        return [atom] if atom else []
    text = named.group(2) if named else line
    if not named and _is_short(text) and default:
        atom = _clause_atom(f"{default} {text}", default, negated=False, value=text)
        return [atom] if atom else []
    fallback = ""
    if named and normalize_concept(named.group(1)) not in _GENERIC_NAMES:
        fallback = named.group(1)
    return _sentence_atoms(text, fallback or default)


def _is_short(value: str) -> bool:
    """A value that names no finding of its own: numbers, units, direction words,
    "positive"/"negative" (parentheses not counted)."""
    rest = _DIRECTION.sub(" ", re.sub(r"\([^)]*\)", " ", value.lower()))
    words = [w for w in re.findall(r"[a-zµμ]{3,}", rest) if w not in _VALUE_WORDS]
    return not words and len(value) <= 80


def _sentence_atoms(text: str, default: str) -> list[EvidenceAtom]:
    atoms = []
    for sentence in re.split(r"[.;!?](?:\s+|$)", text):
        negated = False
        pieces = _CLAUSE.split(sentence)  # clauses at even, separators at odd indexes
        for i, clause in enumerate(pieces):
            low = clause.lower()
            if i % 2 or not low.strip():
                if _SCOPE_END.search(low):
                    negated = False
                continue
            if _SCOPE_END.search(low):
                negated = False
            negated = negated or bool(_NEGATION.search(low))
            if _UNKNOWN.search(low):
                continue
            atom = _clause_atom(clause, default, negated=negated)
            if atom:
                atoms.append(atom)
    return atoms


def _clause_atom(clause: str, default: str, *, negated: bool,
                 value: str | None = None) -> EvidenceAtom | None:
    """One atom from one clause (rule 3), or ``None`` when nothing is left."""
    text = re.sub(r"\([^)]*\)", " ", clause.lower()) if value is None else clause.lower()
    negated = negated or bool(_NEGATION.search(text))
    past = bool(_PAST.search(text)) and not _DURATION_HISTORY.search(text)
    found = _DIRECTION.search(text)
    direction = DIRECTION_WORDS[found.group(0)] if found else None
    if value is None and re.fullmatch(r"\s*(?:positive|present|detected|reactive)\s*", text):
        value = text  # "Positive, titre 1:640": the bare result word names the test
    if value is not None:
        direction = direction or _vital_direction(default, value)
        negated = bool(re.search(r"\b(?:negative|absent|not detected|none)\b", value.lower()))
        text = default.lower()
    anatomy_match = _ANATOMY.search(text)
    anatomy = (anatomy_match.group("a") or anatomy_match.group("b")) if anatomy_match else None
    for pattern in (_DURATION_HISTORY, _PAST, _NEGATION, _DIRECTION, _ANATOMY):
        text = pattern.sub(" ", text)
    text = re.sub(r"\([^)]*\)|[^\w\s/'+-]", " ", text)
    concept = _TRAIL.sub("", _LEAD.sub("", normalize_concept(text))).strip()
    if not re.search(r"[a-z]{2}", concept):
        concept = ""  # numbers and units only
    if not concept and anatomy:
        concept, anatomy = anatomy, None
    if not concept:
        concept = _TRAIL.sub("", _LEAD.sub("", normalize_concept(
            re.sub(r"\([^)]*\)", " ", default.lower())))).strip()
    if not concept:
        return None
    return EvidenceAtom(concept=concept, polarity="absent" if negated else "present",
                        temporal="past" if past else "current", direction=direction,
                        anatomy=anatomy)


def _vital_direction(name: str, value: str) -> str | None:
    """Direction of a vital sign's value from :data:`VITAL_RANGES`, else ``None``."""
    low_name = name.lower()
    for pattern, (low, high) in VITAL_RANGES.items():
        if re.search(rf"\b(?:{pattern})\b", low_name):
            number = _NUMBER.search(value.lower())
            if number is None:
                return None
            x = float(number.group(1))
            if (number.group(2) or "").replace(" ", "") == "°f":
                x = (x - 32.0) * 5.0 / 9.0
            return "low" if x < low else "high" if x >= high else "normal"
    return None
