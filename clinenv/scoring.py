"""Deterministic answer scoring: is the doctor's terminal answer the reference target Y?

This is the offline default scorer. It needs no model and gives the same verdict on every
machine, so it is what tests, CI and quick benchmark runs use; an LLM judge (the
AgentClinic-style "are these the same diagnosis?" moderator) arrives later as an opt-in
alternative with the same :class:`Score` result.

Design
------
The scorer forgives *formatting*, never *medicine* (EGIP appendix B): it merges answers
that differ only by markdown, case, quotes, a leading answer marker, a trailing period,
dashes, apostrophes, a leading article, a possessive ``'s`` or accents, and answers that
name the target through its abbreviation (``"SLE"`` for ``"Systemic lupus erythematosus
(SLE)"``, ``"COPD"`` for ``"chronic obstructive pulmonary disease"``). It does *not*
hold a table of clinical synonyms: ``"Clostridioides difficile infection"`` is not
``"C. difficile colitis"`` here; that call is left to a judge.

Rules, in order (see :func:`score_answer`):

1. ``None``, empty, a template placeholder (:func:`clinenv.protocol.placeholders.
   is_placeholder`: ``<single diagnosis>``, ``[diagnosis]``, ``N/A``...), nothing left
   after normalization, or an abstention (:func:`is_abstention`): ``"unscored"`` (a
   non-answer stays in the accuracy denominator but is never silently merged into
   wrong). :attr:`Score.status` says which (``"no_answer"``, ``"placeholder"``,
   ``"abstained"``); a placeholder is never an abstention.
2. With candidate labels K: an option letter (``"C"``, ``"(C)"``, ``"C."``, ``"Option
   C"``, ``"Answer: C"``; ``A`` is index 0) or the option whose text the answer matches
   (exact, acronym, else the single best rapidfuzz ``WRatio`` at or above the threshold)
   is the chosen option; the verdict is correct iff its index is ``target.option_index``.
   In ``"C. Exogenous ochronosis"`` the text decides (so ``"C. difficile colitis"`` is
   never read as option C). An answer that matches no option, or ties between options,
   is scored against the target text as a free answer.
3. Free answer: exact normalized equality, then acronym forms, then rapidfuzz
   ``token_sort_ratio`` at or above the threshold. Fuzzy matching tolerates typos
   (``"Myasthenia gravs"``) but is refused when the two texts differ in a number or
   single-letter qualifier (``"type 1"``/``"type 2"``, ``"hepatitis B"``/``"hepatitis
   C"``) or a laterality, acuity or similar qualifier word (``left``/``right``,
   ``acute``/``chronic``...). The negation rule holds on every path (exact, acronym,
   fuzzy, option, ICD; :func:`_negated`): a match stands only when the answer holds the
   negation cues (``not``, ``no``, ``without``, ``ruled out``, ``excluded``, ``negative
   for``...) of the target and no other, the part that matched read as the target form
   (``"NHL"`` is ``"Non-Hodgkin lymphoma"``). So ``"no PML (PML)"``, ``"ruled out PML"``
   and ``"not X"`` are never correct, wherever the cue stands in the answer. A trailing
   ``"(ABBR)"`` names a whole answer only when the text before it can spell it
   (:func:`_defines`): ``"Toxoplasmosis (PML)"`` is not PML.
4. A hedged list (``"X or Y"``, ``"X vs Y"``, ``"X, Y"``, ``"X; Y"``, ``"X / Y"``) is
   scored on the FIRST listed diagnosis only, after the whole answer fails an exact or
   acronym match; a separator that occurs in the target itself is not split on. The
   hedges of :data:`HEDGES` (``"likely"``, ``"consistent with"``, ``"compatible
   with"``, ``"suggestive of"``, ``"in keeping with"``...) are dropped from the front of
   that first item.

Optional ICD normalization (off unless an ``icd_map`` is given; CDEG Eq. 3 maps
diagnoses "to the same ICD-aligned label space as the reference diagnosis"): before
rules 2-4, when the answer (its whole text, an abbreviation form, else the first item
of a hedged list) and the target both map to an ICD code, the codes decide: the same
code is ``"correct"``, different codes ``"wrong"`` (:attr:`Score.method` ``"icd"``,
:attr:`Score.matched` the answer's code). When either side is unknown to the map the
rules above apply unchanged. The map is any object with ``code(text) -> str | None``
(:class:`CodeMap`; the user-file reader is :class:`clinenv.icd_map.IcdMap`).

The gold answer always scores full marks: ``score_answer(case.target.text, case)`` is
correct for every case (tested on every MedQA target and NEJM option).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal, Protocol

from rapidfuzz import fuzz

from clinenv.cases import Case
from clinenv.protocol.placeholders import is_placeholder

#: Default similarity threshold (0-100) for fuzzy matches.
DEFAULT_THRESHOLD = 90.0

#: Version of the verdict rules, written in every run-log line (``scoring_version``;
#: a line without the field is version 1). Verdicts of two versions are not comparable
#: under the same ids, so ``clinenv eval`` and ``clinenv compare`` refuse to pool or pair
#: them unless told to (``--mixed-scoring``). Version 2: a template placeholder is
#: unscored and never judged, "N/A" is a placeholder rather than an abstention, a native
#: final utterance is scored on the diagnosis its moderator reads
#: (:func:`clinenv.protocol.native.moderator_answer`), the judge receives the answer
#: without its marker, and an output without an identifiable answer is unscored (U) in
#: every report, whatever the protocol's own verdict. Version 3: the negation rule holds
#: on every match path (``"no PML (PML)"`` is wrong), a trailing abbreviation names an
#: answer only when the text before it can spell it (``"Toxoplasmosis (PML)"`` is
#: wrong), and :data:`HEDGES` holds "compatible with", "suggestive of", "in keeping with".
SCORING_VERSION = 3

Verdict = Literal["correct", "wrong", "unscored"]
Method = Literal["exact", "acronym", "option", "fuzzy", "icd", "none"]
#: Whether a terminal output holds an identifiable answer (:attr:`Score.status`):
#: ``"answer"``, or why not: ``"no_answer"`` (none, empty, or only formatting),
#: ``"placeholder"`` (a template placeholder) or ``"abstained"`` (an explicit decline).
AnswerStatus = Literal["answer", "no_answer", "placeholder", "abstained"]

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00b4": "'"})
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"})
_QUOTES = "\"'\u201c\u201d"
_MARKDOWN = re.compile(r"[*_#`]+")
_SPACE = re.compile(r"\s+")
_MARKER = re.compile(
    r"^(?:final\s+diagnosis|diagnosis\s+ready|most\s+likely\s+diagnosis|diagnosis"
    r"|final\s+answer|answer)\s*[:\-]\s*",
    re.IGNORECASE,
)
_TRAILING = re.compile(r"[\s.;:!?,]+$")
_ARTICLE = re.compile(r"^(?:a|an|the)\s+")
_POSSESSIVE = re.compile(r"(?<=\w)'s\b|(?<=s)'(?=\s|$)")
_PARENTHETICAL = re.compile(r"\s*\(([^()]*)\)")
_ACRONYM = re.compile(r"[A-Z]{2,6}")
_WORD = re.compile(r"[a-z0-9]+")
_INITIALS_SKIP = frozenset({"of", "the", "and", "with", "in", "to", "due"})

_LETTER = re.compile(
    r"^(?:(?:option|choice|answer)\s*[:\-]?\s*)?\(?([a-z])\)?\s*[.):]?$", re.IGNORECASE
)
_LETTER_PREFIX = re.compile(r"^\(?([a-z])[.):]\s+(\S.*)$", re.IGNORECASE)
_HEDGE_SEPARATORS = (
    re.compile(r"\s+(?:and/)?or\s+", re.IGNORECASE),
    re.compile(r"\s+(?:vs\.?|versus)\s+", re.IGNORECASE),
    re.compile(r"\s*[,;]\s*"),
    re.compile(r"\s+/\s+"),
)
#: Hedges dropped, one after another, from the front of an answer's first diagnosis
#: (rule 4): ``"compatible with X"`` and ``"probably consistent with X"`` score as
#: ``"X"``. EGIP appendix B: a hedge is formatting, not a different diagnosis.
HEDGES = (
    "most likely", "likely", "probably", "probable", "possible", "possibly", "suspected",
    "presumed", "suspicion of", "consistent with", "compatible with", "suggestive of",
    "in keeping with",
)  # fmt: skip
_HEDGE_WORDS = re.compile(
    r"^(?:(?:"
    + "|".join(r"\s+".join(map(re.escape, h.split())) for h in sorted(HEDGES, key=len)[::-1])
    + r")\s+)+",
    re.IGNORECASE,
)
#: Negation cues of the negation rule (:func:`_negated`).
_NEGATION = re.compile(
    r"\b(?:not|no|non|without|never|unlikely|absent|excluded|ruled\s+out|rule\s+out"
    r"|negative\s+for|free\s+of|denies)\b"
)
_ROMAN = {"i": "1", "ii": "2", "iii": "3", "iv": "4", "v": "5", "vi": "6"}
_ROMAN_QUALIFIED = re.compile(r"\b(type|grade|stage|class|phase|factor)\s+(i{1,3}|iv|vi?)\b")
_QUALIFIER_WORDS = frozenset(
    {
        "left", "right", "bilateral", "unilateral",
        "acute", "subacute", "chronic",
        "anterior", "posterior", "upper", "lower",
        "benign", "malignant", "primary", "secondary",
    }
)  # fmt: skip


class CodeMap(Protocol):
    """What the ICD hook of :func:`score_answer` needs: a diagnosis text's code, or
    ``None`` when unknown (:class:`clinenv.icd_map.IcdMap`)."""

    def code(self, text: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Score:
    """The verdict on one terminal answer.

    Attributes:
        verdict: ``"correct"``, ``"wrong"``, or ``"unscored"`` (no answer to score).
        similarity: 0-100; 100 for exact, acronym and option-letter matches, the best
            fuzzy score otherwise, 0 when unscored.
        normalized_answer: the answer after :func:`normalize_answer` (``None`` when the
            answer was ``None``).
        matched: the form of the target that matched (a normalized target form, or the
            chosen option's text when the case has candidates, even a wrong one);
            ``None`` when nothing matched.
        method: how the verdict was reached: ``"exact"``, ``"acronym"`` (parenthetical
            abbreviation or initials), ``"option"`` (a candidate was chosen), ``"fuzzy"``,
            ``"icd"`` (answer and target both map to an ICD code, which decided), or
            ``"none"`` (nothing matched, or unscored).
        abstained: the answer declares that no diagnosis can be given ("Undetermined",
            "I am not sure", "insufficient information" ...); such an answer is
            ``"unscored"``: it is not an identifiable answer (EGIP 4.1, appendix A.2).
        placeholder: the answer is a template placeholder (``<single diagnosis>``,
            ``[diagnosis]``, ``N/A``...; :func:`clinenv.protocol.placeholders.
            is_placeholder`); such an answer is ``"unscored"`` and never an abstention.
    """

    verdict: Verdict
    similarity: float
    normalized_answer: str | None
    matched: str | None
    method: Method
    abstained: bool = False
    placeholder: bool = False

    @property
    def correct(self) -> bool:
        """Whether the verdict is ``"correct"``."""
        return self.verdict == "correct"

    @property
    def status(self) -> AnswerStatus:
        """:data:`AnswerStatus` of the scored answer: ``"placeholder"``,
        ``"abstained"``, ``"no_answer"`` (any other unscored answer) or ``"answer"``
        (an identifiable answer, scored correct or wrong)."""
        if self.placeholder:
            return "placeholder"
        if self.abstained:
            return "abstained"
        return "no_answer" if self.verdict == "unscored" else "answer"


def _clean(text: str) -> str:
    """Formatting cleanup that keeps case (needed to recognise all-caps acronyms)."""
    text = unicodedata.normalize("NFKD", text.translate(_APOSTROPHES).translate(_DASHES))
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = _SPACE.sub(" ", _MARKDOWN.sub(" ", text)).strip()
    previous = None
    while text != previous:
        previous = text
        text = _MARKER.sub("", text)
        text = _TRAILING.sub("", text).strip(_QUOTES + " ")
    return text


def _lower_form(cleaned: str) -> str:
    text = _POSSESSIVE.sub("", cleaned.lower()).replace("'", "")
    return _ARTICLE.sub("", _SPACE.sub(" ", text).strip())


def normalize_answer(text: str) -> str:
    """Normalize a diagnosis text for comparison (formatting only, never synonyms).

    Strips markdown (``*``, ``_``, ``#``, backticks), surrounding quotes, leading
    ``"Final diagnosis:"``/``"Diagnosis:"``/``"DIAGNOSIS READY:"``/``"Answer:"`` markers
    (any case), trailing punctuation; unifies dashes and apostrophes, folds accents,
    collapses whitespace, lower-cases, drops a leading article and possessives.

    Args:
        text: any answer or target text.

    Returns:
        The normalized text, possibly empty. ``"**Graves' Disease**."`` and
        ``"Graves disease"`` both give ``"graves disease"``.
    """
    return _lower_form(_clean(text))


def _words(text: str) -> list[str]:
    return _WORD.findall(text.replace("-", " "))


def _initials(normalized: str) -> set[str]:
    words = _words(normalized)
    if len(words) < 2:
        return set()
    kept = [w for w in words if w not in _INITIALS_SKIP]
    return {"".join(w[0] for w in words), "".join(w[0] for w in kept)}


def _defines(short: str, long: str) -> bool:
    """Whether ``long`` can be the long form of the abbreviation ``short`` (Schwartz &
    Hearst 2003, "A simple algorithm for identifying abbreviation definitions in
    biomedical text"): the letters and digits of ``short`` occur in ``long`` in order,
    the first one starting ``long``'s first word. ``"BPPV"`` / ``"benign paroxysmal
    positional vertigo"`` and ``"GERD"`` / ``"gastroesophageal reflux disease"`` do;
    ``"PML"`` / ``"toxoplasmosis"`` does not."""
    letters = [c for c in short.lower() if c.isalnum()]
    words = _words(long)
    if not letters or not words or words[0][0] != letters[0]:
        return False
    rest = iter(" ".join(words)[1:])
    return all(c in rest for c in letters[1:])  # in order: `in` advances the iterator


def _forms(cleaned: str, *, answer: bool = False) -> dict[str, tuple[Method, str]]:
    """Normalized forms of one text: itself ("exact") and its abbreviation forms, each
    with the normalized text outside it (read by the negation rule, :func:`_negated`).

    A trailing ``"(SLE)"`` names the whole text; in an ``answer`` only when the text
    before it can be its long form (:func:`_defines`), so ``"Toxoplasmosis (PML)"`` is
    not ``"PML"``. A target's own abbreviation is trusted as the dataset wrote it."""
    full = _lower_form(cleaned)
    forms: dict[str, tuple[Method, str]] = {full: ("exact", "")} if full else {}
    match = _PARENTHETICAL.search(cleaned)
    if match:
        bare = _lower_form(_PARENTHETICAL.sub("", cleaned))
        inside = " ".join(m.group(1) for m in _PARENTHETICAL.finditer(cleaned))
        forms.setdefault(bare, ("acronym", _lower_form(inside)))
        if not cleaned[match.end() :].strip() and (
                not answer or _defines(match.group(1), bare)):
            forms.setdefault(_lower_form(match.group(1)), ("acronym", bare))
    forms.pop("", None)
    return forms


def _negation_cues(text: str) -> frozenset[str]:
    """The negation cues (:data:`_NEGATION`) a text holds."""
    return frozenset(" ".join(cue.split()) for cue in _NEGATION.findall(text.lower()))


def _negated(reading: str, target_form: str) -> bool:
    """The negation rule, one check for every match path (rule 3 of the module docstring).

    A match between an answer and a target form stands only when both hold the same
    negation cues. ``reading`` is the answer as matched: on the exact, abbreviation and
    ICD paths the text outside the matched part followed by ``target_form`` (the part is
    read as the target form, so ``"NHL"`` keeps the "non" of ``"Non-Hodgkin lymphoma"``),
    on the fuzzy paths the whole answer. So ``"no PML (PML)"`` and ``"ruled out PML"``
    are never the target ``"Progressive multifocal encephalopathy (PML)"``: the scorer
    forgives formatting, never medicine (EGIP appendix B).
    """
    return _negation_cues(reading) != _negation_cues(target_form)


def _match_forms(answer: str, target: str) -> tuple[str, Method] | None:
    """Exact or acronym match between two cleaned texts that the negation rule lets
    stand; returns (target form, method)."""
    answer_forms, target_forms = _forms(answer, answer=True), _forms(target)
    pairs: list[tuple[str, str, Method]] = []  # (answer form, target form, method)
    for form, (kind, _) in target_forms.items():
        if form in answer_forms:
            exact = kind == answer_forms[form][0] == "exact"
            pairs.append((form, form, "exact" if exact else "acronym"))
    if _ACRONYM.fullmatch(answer):
        pairs += [
            (answer.lower(), form, "acronym")
            for form in target_forms
            if answer.lower() in _initials(form)
        ]
    if _ACRONYM.fullmatch(target):
        pairs += [
            (form, target.lower(), "acronym")
            for form in answer_forms
            if target.lower() in _initials(form)
        ]
    for answer_form, target_form, method in pairs:
        outside = answer_forms[answer_form][1]
        if not _negated(f"{outside} {target_form}", target_form):
            return target_form, method
    return None


def _qualifiers(normalized: str) -> frozenset[str]:
    """Numbers, single letters and qualifier words of a normalized text.

    A single letter counts ("hepatitis B", "hemophilia A") except the article "a" before
    another word.
    """
    text = _ROMAN_QUALIFIED.sub(lambda m: f"{m.group(1)} {_ROMAN[m.group(2)]}", normalized)
    words = _words(text)
    marks = {
        w
        for i, w in enumerate(words)
        if w in _QUALIFIER_WORDS or (len(w) == 1 and not (w == "a" and i < len(words) - 1))
    }
    marks.update(re.findall(r"\d+", text))
    return frozenset(marks)


def _compatible(a: str, b: str) -> bool:
    """Whether a fuzzy match between two normalized texts may stand (the negation rule,
    :func:`_negated`, and the same numbers, single-letter and qualifier words)."""
    return not _negated(a, b) and _qualifiers(a) == _qualifiers(b)


def _fuzzy_key(normalized: str) -> str:
    return " ".join(_words(normalized))


def _first_item(cleaned: str, protected: str) -> str:
    """The first diagnosis of a hedged list, without leading hedge words.

    A separator that occurs in ``protected`` (the target or option texts) is not split
    on, so a target such as ``"Hand, foot and mouth disease"`` survives.
    """
    for separator in _HEDGE_SEPARATORS:
        if not separator.search(protected):
            cleaned = separator.split(cleaned, maxsplit=1)[0]
    return _HEDGE_WORDS.sub("", cleaned)


def _score_free(answer: str, target: str, threshold: float, normalized: str) -> Score:
    """Score a cleaned answer against a cleaned target text (no candidates)."""
    hit = _match_forms(answer, target)
    if hit is None:
        answer = _clean(_first_item(answer, target.lower()))
        hit = _match_forms(answer, target) if answer else None
    if hit is not None:
        return Score("correct", 100.0, normalized, hit[0], hit[1])
    best, best_form = 0.0, None
    answer_norm = _lower_form(answer)
    for form, (kind, _) in _forms(target).items():
        if kind == "exact" or " " in form:  # fuzzy on texts, not on bare abbreviations
            similarity = fuzz.token_sort_ratio(_fuzzy_key(answer_norm), _fuzzy_key(form))
            if similarity > best:
                best, best_form = similarity, form
    if best >= threshold and best_form and _compatible(answer_norm, best_form):
        return Score("correct", best, normalized, best_form, "fuzzy")
    return Score("wrong", best, normalized, None, "none")


def _choose_option(
    answer: str, options: tuple[str, ...], threshold: float
) -> tuple[int, float] | None:
    """Index of the option a cleaned answer picks, with its similarity, or None."""
    letter = _LETTER.match(answer)
    if letter:
        index = ord(letter.group(1).lower()) - ord("a")
        return (index, 100.0) if index < len(options) else None
    cleaned_options = [_clean(o) for o in options]
    for index, option in enumerate(cleaned_options):
        if _match_forms(answer, option):
            return index, 100.0
    prefixed = _LETTER_PREFIX.match(answer)
    if prefixed:  # "C. Exogenous ochronosis": the text decides; a bare letter is above
        return _choose_option(prefixed.group(2), options, threshold)
    answer_norm = _lower_form(answer)
    scores = [
        fuzz.WRatio(_fuzzy_key(answer_norm), _fuzzy_key(_lower_form(o))) for o in cleaned_options
    ]
    best = max(scores)
    winners = [i for i, s in enumerate(scores) if s == best]
    if best < threshold or len(winners) > 1:
        return None
    if not _compatible(answer_norm, _lower_form(cleaned_options[winners[0]])):
        return None
    return winners[0], best


_ABSTENTION = re.compile(
    r"(?:i\s+)?(?:am\s+|m\s+)?(?:"
    r"unknown|undetermined|indeterminate|uncertain|unclear|unsure|not\s+sure|none"
    r"|(?:diagnosis|cause|etiology)\s+(?:is\s+)?(?:unknown|unclear|uncertain|undetermined)"
    r"|(?:i\s+)?(?:do\s+not|don't|dont)\s+know(?:\s+the\s+diagnosis)?"
    r"|(?:i\s+)?(?:cannot|can't|cant|am\s+unable\s+to|unable\s+to)\s+"
    r"(?:determine|diagnose|decide|tell|say|make\s+a\s+diagnosis)(?:\s+the\s+diagnosis)?"
    r"|cannot\s+be\s+determined|not\s+determined|no\s+(?:definitive\s+|clear\s+)?diagnosis"
    r"|(?:insufficient|not\s+enough)\s+(?:information|evidence|data)"
    r"(?:\s+to\s+(?:determine|make)\s+a\s+diagnosis)?"
    r"|(?:need|needs|require|requires)\s+more\s+(?:information|evidence|tests|data)"
    r")"
)


def is_abstention(answer: str | None) -> bool:
    """Whether a whole answer declares that no diagnosis can be given.

    Only the *whole* normalized answer is matched, so "Undetermined" and "I cannot
    determine the diagnosis" abstain while "Fever of unknown origin" does not. A
    template placeholder (``N/A``, ``<single diagnosis>``, ``...``;
    :func:`is_placeholder_answer`) is never an abstention: it declines nothing.
    """
    if answer is None or is_placeholder_answer(answer):
        return False
    return bool(_ABSTENTION.fullmatch(_lower_form(_clean(answer)).strip(" .!")))


def is_placeholder_answer(answer: str) -> bool:
    """Whether a non-empty answer (marker and markdown allowed) is a template placeholder:
    :func:`~clinenv.protocol.placeholders.is_placeholder` of the text as given or after
    the formatting cleanup (``"DIAGNOSIS READY: <single diagnosis>"``, ``"**N/A**"``).
    Empty answers and answers of only whitespace and markdown (``"**"``) are no answer,
    not placeholders, and an option
    letter (``"A"``, ``"(B)"``, ``"Option A"``, ``"Answer: C"``; any letter but the
    filler ``X``) is an answer, although template vocabulary holds ``a`` and
    ``option``."""
    if not answer.strip(" \t\r\n*_#`"):
        return False
    cleaned = _clean(answer)
    letter = _LETTER.match(cleaned)
    if letter and letter.group(1).lower() != "x":
        return False
    return is_placeholder(answer) or is_placeholder(cleaned)


def _answer_code(cleaned: str, target: str, target_form: str, icd_map: CodeMap) -> str | None:
    """The ICD code of a cleaned answer: its whole text or an abbreviation form, else the
    first item of a hedged list (separators found in ``target`` are not split on). A form
    that the negation rule (:func:`_negated`, read against ``target_form``, the target
    text that gave the target's code) refuses gives no code."""
    for text in (cleaned, _clean(_first_item(cleaned, target.lower()))):
        parts = [(text, ""), *((form, outside)
                                for form, (_, outside) in _forms(text, answer=True).items())]
        for form, outside in parts:
            code = icd_map.code(form) if form else None
            if code is not None and not _negated(f"{outside} {target_form}", target_form):
                return code
    return None


def icd_score(answer: str, target: str, icd_map: CodeMap) -> Score | None:
    """The verdict of the ICD codes when both the answer and the target text map to one
    (the module docstring's ICD rule), else ``None``. ``answer`` is an identifiable
    answer (not unscored)."""
    target = _clean(target)
    target_code, target_form = next(
        ((c, f) for f in (target, *_forms(target)) if (c := icd_map.code(f)) is not None),
        (None, ""),
    )
    if target_code is None:
        return None
    cleaned = _clean(answer)
    code = _answer_code(cleaned, target, target_form, icd_map)
    if code is None:
        return None
    normalized = _lower_form(cleaned)
    if code == target_code:
        return Score("correct", 100.0, normalized, code, "icd")
    similarity = fuzz.token_sort_ratio(_fuzzy_key(normalized), _fuzzy_key(_lower_form(target)))
    return Score("wrong", float(similarity), normalized, code, "icd")


def score_answer(answer: str | None, case: Case, *, threshold: float = DEFAULT_THRESHOLD,
                 use_candidates: bool = True, icd_map: CodeMap | None = None) -> Score:
    """Score a terminal answer against the case's reference target Y.

    Args:
        answer: the doctor's answer text (markers and markdown allowed), or ``None`` when
            the episode produced no answer.
        case: the case; only ``case.target`` and ``case.candidates`` are read.
        threshold: fuzzy similarity (0-100) needed for a fuzzy or option-text match.
        use_candidates: read the answer against the candidate labels K (rule 2, option
            letters included). ``False`` when the doctor never saw K -- the native
            protocols and the ``no_candidates`` replay ablation (EGIP Table 3B) -- so
            a bare ``"C"`` is a free answer scored against the target text (wrong), never
            option C.
        icd_map: optional ICD normalization (module docstring); ``None`` (default)
            leaves the rules unchanged. An option letter is never looked up.

    Returns:
        A :class:`Score`. ``verdict`` is ``"unscored"`` for ``None``, empty or
        whitespace-only answers (and answers that are only formatting), for template
        placeholders (``placeholder=True``; checked before abstention, so ``"N/A"`` is a
        placeholder) and for abstentions (:func:`is_abstention`, ``abstained=True``),
        otherwise ``"correct"`` or ``"wrong"``. See the module docstring for the rules.
    """
    if answer is None:
        return Score("unscored", 0.0, None, None, "none")
    cleaned = _clean(answer)
    normalized = _lower_form(cleaned)
    if is_placeholder_answer(answer):
        return Score("unscored", 0.0, normalized, None, "none", placeholder=True)
    if not normalized:
        return Score("unscored", 0.0, normalized, None, "none")
    if is_abstention(answer):
        return Score("unscored", 0.0, normalized, None, "none", abstained=True)
    options = case.candidates if use_candidates else None
    if icd_map is not None and not (options and _LETTER.match(cleaned)):
        by_code = icd_score(answer, case.target.text, icd_map)
        if by_code is not None:
            return by_code
    target = _clean(case.target.text)
    if options and case.target.option_index is not None:
        choice = _choose_option(cleaned, options, threshold)
        if choice is None:
            protected = " ".join(options).lower()
            first = _clean(_first_item(cleaned, protected))
            choice = _choose_option(first, options, threshold) if first else None
        if choice is not None:
            index, similarity = choice
            verdict: Verdict = "correct" if index == case.target.option_index else "wrong"
            return Score(verdict, similarity, normalized, options[index], "option")
    return _score_free(cleaned, target, threshold, normalized)
