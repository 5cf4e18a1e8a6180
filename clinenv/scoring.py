"""Deterministic answer scoring: is the doctor's terminal answer the reference target Y?

The offline default scorer (EGIP appendix B), :func:`score_answer`: it forgives
formatting, never medicine. The rules, examples and known limits are in docs/evaluation.md.
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
#: every report, whatever the protocol's own verdict. Version 3: one negation rule with a
#: scope on every match path (a cue in the main segment always counts, a side segment
#: only when it is a bare negation: ``"no PML (PML)"``, ``"PML, ruled out"`` and ``"PML
#: (ruled out)"`` are wrong, ``"PML (not toxoplasmosis)"`` is right), a trailing
#: abbreviation names an answer only when it is the initials of the text before it
#: (``"Toxoplasmosis (PML)"``, ``"Primary CNS lymphoma (PML)"`` are wrong), a fuzzy match
#: also reads the answer without its parentheticals, and :data:`HEDGES` holds
#: "compatible with", "suggestive of", "in keeping with", "indicative of", "diagnostic
#: of", "concerning for", "characteristic of", "most consistent with", "highly
#: suggestive of", "presumptive", a colon after a hedge and a lead ("Findings") before one.
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
#: The hedges that link findings to the diagnosis they point at (``"consistent with
#: X"``). Part of :data:`HEDGES`, and the phrases after which
#: :func:`clinenv.agents.evidence_reading.named_diagnosis` reads a diagnosis in a record
#: (the one list both read; a record's "likely"/"possible" qualifies a finding, "likely
#: viral", so the reader takes only these).
DIAGNOSIS_LINKS = (
    "consistent with", "compatible with", "suggestive of", "in keeping with",
    "indicative of", "diagnostic of", "concerning for", "characteristic of",
    "most consistent with", "highly suggestive of",
)  # fmt: skip
#: Hedges dropped, one after another, from the front of an answer's first diagnosis
#: (rule 4): ``"compatible with X"``, ``"probably consistent with X"``, ``"Likely: X"``
#: and ``"Findings consistent with X"`` score as ``"X"``. EGIP appendix B: a hedge is
#: formatting, not a different diagnosis.
HEDGES = (
    "most likely", "likely", "probably", "probable", "possible", "possibly", "suspected",
    "presumed", "presumptive", "suspicion of", *DIAGNOSIS_LINKS,
)  # fmt: skip


def _alternation(phrases: tuple[str, ...]) -> str:
    return "|".join(r"\s+".join(map(re.escape, p.split())) for p in
                    sorted(phrases, key=len, reverse=True))


#: What may stand before a link hedge and goes with it: ``"Findings consistent with
#: X"``, ``"The clinical picture is suggestive of X"``.
_HEDGE_LEAD = (r"(?:(?:the|these)\s+)?(?:clinical\s+|overall\s+)?"
               r"(?:findings|picture|presentation|features)(?:\s+(?:is|are))?\s+")
_HEDGE_WORDS = re.compile(
    rf"^(?:{_HEDGE_LEAD}(?=(?:{_alternation(DIAGNOSIS_LINKS)})\s))?"
    rf"(?:(?:{_alternation(HEDGES)})(?:(?:\s+diagnosis)?\s*:\s*|\s+))+",
    re.IGNORECASE,
)
_CUES = (r"not|no|non|without|never|unlikely|absent|excluded|ruled\s+out|rule\s+out"
         r"|negative\s+for|free\s+of|denies")
#: Negation cues of the negation rule (:func:`_negated`).
_NEGATION = re.compile(rf"\b(?:{_CUES})\b")
#: The cues of a side segment (:func:`_bare_negation`): those of :data:`_NEGATION` and a
#: lone "negative" ("PML, negative").
_SIDE_NEGATION = re.compile(rf"\b(?:{_CUES}|negative)\b")
#: A cue that follows what it negates ("ruled out", "unlikely"), then the grounds for it
#: ("by MRI", "given the CD4 count"), which name nothing negated.
_GROUNDS = re.compile(
    r"^(.*?\b(?:ruled out|excluded|unlikely|absent|negative|not likely))\s+"
    r"(?:by|on|per|given|after|from|based|because|due|via|at|in|with|since|as|following)\b"
)
#: Words a side segment may hold besides its negation cues and still be a bare negation
#: (:func:`_bare_negation`): function words and the words of :data:`HEDGES`; any other
#: word is a content word ("not toxoplasmosis", "no complications").
_BARE_WORDS = frozenset(
    {
        "a", "an", "the", "is", "was", "are", "were", "be", "been", "being", "has", "have",
        "had", "it", "this", "that", "which", "so", "very", "quite", "now", "also", "all",
        "definitely", "clearly", "entirely", "completely", "considered", "felt", "thought",
        "deemed", "seems", "appears", "diagnosis",
    }
    | {word for hedge in HEDGES for word in hedge.split()}
)  # fmt: skip
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
        similarity: 0-100; 100 for exact, acronym and option-letter matches, the best fuzzy
            score otherwise, 0 when unscored.
        normalized_answer: the answer after :func:`normalize_answer` (``None`` for ``None``).
        matched: the target form that matched, or the chosen option's text (even a wrong
            one); ``None`` when nothing matched.
        method: ``"exact"``, ``"acronym"``, ``"option"``, ``"fuzzy"``, ``"icd"`` or ``"none"``.
        abstained: the answer declines to diagnose ("Undetermined"...); it is ``"unscored"``.
        placeholder: the answer is a template placeholder (``<single diagnosis>``, ``N/A``);
            it is ``"unscored"`` and never an abstention.
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
    """Whether ``long`` is the long form of the abbreviation ``short``: ``short`` (its
    letters and digits) is the initials of ``long``, of all its words or of its content
    words, a hyphen splitting words (:func:`_initials`). ``"BPPV"`` / ``"benign
    paroxysmal positional vertigo"``, ``"LCPD"`` / ``"Legg-Calve-Perthes disease"`` and
    ``"NHL"`` / ``"non-Hodgkin lymphoma"`` are; ``"PML"`` / ``"toxoplasmosis"`` and
    ``"PML"`` / ``"primary CNS lymphoma"`` are not, nor ``"GERD"`` / ``"gastroesophageal
    reflux disease"`` (a letter from inside a word: that answer is read by its text).
    Known limit: a text made to spell the abbreviation (``"Primary malignant lymphoma
    (PML)"``) passes; a judge can tell it apart."""
    letters = "".join(c for c in short.lower() if c.isalnum())
    return bool(letters) and letters in _initials(long)


def _mask_parentheses(text: str) -> str:
    """``text`` with every bracketed span (nested ones included) blanked out, offsets
    kept: the separators of a list are looked for outside parentheses only."""
    previous = None
    while text != previous:
        previous = text
        text = re.sub(r"\([^()]*\)", lambda m: "\0" * len(m.group()), text)
    return text


def _items(text: str, protected: str = "") -> list[str]:
    """The items of a list (``"X or Y"``, ``"X, Y"``...: :data:`_HEDGE_SEPARATORS`),
    split outside parentheses; a separator that occurs in ``protected`` (the target or
    option texts) is not split on, so ``"Hand, foot and mouth disease"`` is one item."""
    separators = [s.pattern for s in _HEDGE_SEPARATORS if not s.search(protected)]
    if not separators:
        return [text]
    split = re.compile("|".join(f"(?:{p})" for p in separators), re.IGNORECASE)
    items, start = [], 0
    for match in split.finditer(_mask_parentheses(text)):
        items.append(text[start:match.start()])
        start = match.end()
    return [*items, text[start:]]


def _outside(text: str) -> tuple[str, tuple[str, ...]]:
    """A text without its parentheticals (its main text), and the side segments they
    hold: each parenthetical's content, item by item (:func:`_items`)."""
    sides = tuple(item for m in _PARENTHETICAL.finditer(text) for item in _items(m.group(1)))
    return _PARENTHETICAL.sub("", text), sides


#: One normalized form of a text: (method, main text outside the matched part, side
#: segments outside it), :func:`_forms`.
_Form = tuple[Method, str, tuple[str, ...]]


def _forms(cleaned: str, *, answer: bool = False) -> dict[str, _Form]:
    """Normalized forms of one text: itself ("exact") and its abbreviation forms, each
    with what lies outside it, read by the negation rule (:func:`_negated`): the main
    text and the side segments.

    - the whole text: nothing outside;
    - the text without its parentheticals (``"SLE"`` of ``"SLE (lupus)"``): their
      contents are side segments;
    - a trailing ``"(SLE)"`` names the whole text: the text before it is main text. In
      an ``answer`` only when that text is its long form (:func:`_defines`), so
      ``"Toxoplasmosis (PML)"`` is not ``"PML"``. A target's own abbreviation is trusted
      as the dataset wrote it."""
    full = _lower_form(cleaned)
    forms: dict[str, _Form] = {full: ("exact", "", ())} if full else {}
    match = _PARENTHETICAL.search(cleaned)
    if match:
        main, sides = _outside(cleaned)
        bare = _lower_form(main)
        forms.setdefault(bare, ("acronym", "", tuple(_lower_form(s) for s in sides)))
        if not cleaned[match.end() :].strip() and (
                not answer or _defines(match.group(1), bare)):
            forms.setdefault(_lower_form(match.group(1)), ("acronym", bare, ()))
    forms.pop("", None)
    return forms


def _negation_cues(text: str) -> frozenset[str]:
    """The negation cues (:data:`_NEGATION`) a text holds."""
    return frozenset(" ".join(cue.split()) for cue in _NEGATION.findall(text.lower()))


def _bare_negation(segment: str) -> bool:
    """Whether a side segment negates the answer's diagnosis: it holds a negation cue
    and no content word (only cues and :data:`_BARE_WORDS`): ``"ruled out"``,
    ``"unlikely"``, ``"probably not"``, ``"not likely"``, ``"excluded"``, ``"negative"``,
    ``"absent"``, ``"(ruled out)"``. After a cue that follows what it negates, the grounds
    are not read (``"ruled out by MRI"``, ``"unlikely given the CD4 count"``). A segment
    with a content word negates that other thing: ``"not toxoplasmosis"``, ``"no
    complications"``, ``"not confirmed"``, ``"toxoplasmosis ruled out"``."""
    text = " ".join(_words(segment.lower()))
    if not _SIDE_NEGATION.search(text):
        return False
    grounds = _GROUNDS.match(text)
    if grounds:
        text = grounds.group(1)
    return all(word in _BARE_WORDS for word in _SIDE_NEGATION.sub(" ", text).split())


def _negated(reading: str, target_form: str, sides: tuple[str, ...] = ()) -> bool:
    """The negation rule, one check for every match path (docs/evaluation.md, "How
    answers are scored", *Negation*).

    The answer is read as its main segment (``reading``) and its side segments
    (``sides``). A match with ``target_form`` stands only when no side segment is a bare
    negation (:func:`_bare_negation`) and the main segment holds the negation cues of
    ``target_form`` and no other; any other cue of a side segment is ignored (``"PML
    (not toxoplasmosis)"``). On the exact, abbreviation and ICD paths ``reading`` is the
    main text outside the matched part followed by ``target_form`` (the part is read as
    the target form, so ``"NHL"`` keeps the "non" of ``"Non-Hodgkin lymphoma"``), on the
    fuzzy paths the answer's main text (:func:`_compatible`). So ``"no PML (PML)"``,
    ``"ruled out PML"``, ``"PML, ruled out"`` and ``"PML (unlikely)"`` are never the
    target ``"Progressive multifocal encephalopathy (PML)"``: the scorer forgives
    formatting, never medicine (EGIP appendix B).
    """
    if any(_bare_negation(side) for side in sides):
        return True
    return _negation_cues(reading) != _negation_cues(target_form)


def _match_forms(
    answer: str, target: str, sides: tuple[str, ...] = ()
) -> tuple[str, Method] | None:
    """Exact or acronym match between two cleaned texts that the negation rule lets
    stand (``sides``: the answer's side segments outside ``answer``, the list items after
    it); returns (target form, method)."""
    answer_forms, target_forms = _forms(answer, answer=True), _forms(target)
    pairs: list[tuple[str, str, Method]] = []  # (answer form, target form, method)
    for form, (kind, _, _) in target_forms.items():
        if form in answer_forms:
            exact = kind == answer_forms[form][0] == "exact"
            pairs.append((form, form, "exact" if exact else "acronym"))
    # an all-caps answer, or its text outside parentheticals ("COPD (not asthma)"), may
    # be the target's initials
    for cased in dict.fromkeys((answer, _SPACE.sub(" ", _outside(answer)[0]).strip())):
        if _ACRONYM.fullmatch(cased) and _lower_form(cased) in answer_forms:
            pairs += [
                (_lower_form(cased), form, "acronym")
                for form in target_forms
                if cased.lower() in _initials(form)
            ]
    if _ACRONYM.fullmatch(target):
        pairs += [
            (form, target.lower(), "acronym")
            for form in answer_forms
            if target.lower() in _initials(form)
        ]
    for answer_form, target_form, method in pairs:
        _, outside, form_sides = answer_forms[answer_form]
        if not _negated(f"{outside} {target_form}", target_form, (*form_sides, *sides)):
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


def _compatible(a: str, b: str, sides: tuple[str, ...] = ()) -> bool:
    """Whether a fuzzy match between two normalized texts may stand (the negation rule,
    :func:`_negated`, on ``a``'s main text and side segments, with ``sides`` after it;
    and the same numbers, single-letter and qualifier words). The fuzzy match read
    ``a`` whole, so a cue of ``b`` in ``a``'s own parentheticals counts as main text:
    ``"NHL (non-Hodgkin lymphoma)"`` holds the "non" of ``"Non-Hodgkin lymphoma"``."""
    main, inner = _outside(a)
    target_cues = _negation_cues(b)
    own = " ".join(cue for cue in _negation_cues(" ".join(inner)) if cue in target_cues)
    return (not _negated(f"{main} {own}", b, (*inner, *sides))
            and _qualifiers(a) == _qualifiers(b))


def _fuzzy_key(normalized: str) -> str:
    return " ".join(_words(normalized))


def _first_item(cleaned: str, protected: str) -> tuple[str, tuple[str, ...]]:
    """The first diagnosis of a hedged list, without leading hedge words, and the list
    items after it (side segments of the negation rule, :func:`_negated`).

    The list is split outside parentheses; a separator that occurs in ``protected``
    (the target or option texts) is not split on, so a target such as ``"Hand, foot and
    mouth disease"`` survives.
    """
    first, *rest = _items(cleaned, protected)
    return _HEDGE_WORDS.sub("", first), tuple(rest)


def _fuzzy_texts(answer_norm: str, sides: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """The texts a fuzzy match reads, each with its side segments: the normalized answer,
    then (when it has parentheticals) its main text, their contents being side segments,
    so ``"Progressive multifocal leukoencephalopathy (not toxoplasmosis)"`` is read as
    the exact path reads ``"PML (not toxoplasmosis)"``. The free path reads them in this
    order, the option path the main text first (:func:`_choose_option`)."""
    main, inner = _outside(answer_norm)
    main = _SPACE.sub(" ", main).strip()
    texts = [(answer_norm, sides)]
    if main and main != answer_norm:
        texts.append((main, (*inner, *sides)))
    return texts


def _score_free(answer: str, target: str, threshold: float, normalized: str) -> Score:
    """Score a cleaned answer against a cleaned target text (no candidates)."""
    hit, sides = _match_forms(answer, target), ()
    if hit is None:
        first, sides = _first_item(answer, target.lower())
        answer = _clean(first)
        hit = _match_forms(answer, target, sides) if answer else None
    if hit is not None:
        return Score("correct", 100.0, normalized, hit[0], hit[1])
    reported = None  # the similarity of the answer itself, for a wrong verdict
    for text, text_sides in _fuzzy_texts(_lower_form(answer), sides):
        best, best_form = 0.0, None
        for form, (kind, _, _) in _forms(target).items():
            if kind == "exact" or " " in form:  # fuzzy on texts, not on bare abbreviations
                similarity = fuzz.token_sort_ratio(_fuzzy_key(text), _fuzzy_key(form))
                if similarity > best:
                    best, best_form = similarity, form
        reported = best if reported is None else reported
        if best >= threshold and best_form and _compatible(text, best_form, text_sides):
            return Score("correct", best, normalized, best_form, "fuzzy")
    return Score("wrong", reported or 0.0, normalized, None, "none")


def _choose_option(
    answer: str, options: tuple[str, ...], threshold: float, sides: tuple[str, ...] = ()
) -> tuple[int, float] | None:
    """Index of the option a cleaned answer picks, with its similarity, or None
    (``sides``: the list items after ``answer``, read by the negation rule; a negated
    option is not picked, so ``"C, ruled out"`` picks none)."""
    letter = _LETTER.match(answer)
    if letter:
        index = ord(letter.group(1).lower()) - ord("a")
        negated = any(_bare_negation(side) for side in sides)
        return (index, 100.0) if index < len(options) and not negated else None
    cleaned_options = [_clean(o) for o in options]
    for index, option in enumerate(cleaned_options):
        if _match_forms(answer, option, sides):
            return index, 100.0
    prefixed = _LETTER_PREFIX.match(answer)
    if prefixed:  # "C. Exogenous ochronosis": the text decides; a bare letter is above
        return _choose_option(prefixed.group(2), options, threshold, sides)
    # the main text first: WRatio's partial match would find an option named in a side
    # segment ("Exogenous ochronsis (not contact dermatitis)" is not contact dermatitis)
    for text, text_sides in _fuzzy_texts(_lower_form(answer), sides)[::-1]:
        scores = [fuzz.WRatio(_fuzzy_key(text), _fuzzy_key(_lower_form(o)))
                  for o in cleaned_options]
        best = max(scores)
        winners = [i for i, s in enumerate(scores) if s == best]
        if (best >= threshold and len(winners) == 1
                and _compatible(text, _lower_form(cleaned_options[winners[0]]), text_sides)):
            return winners[0], best
    return None


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
    text that gave the target's code; the list items after the first are side segments)
    refuses gives no code."""
    first, rest = _first_item(cleaned, target.lower())
    for text, sides in ((cleaned, ()), (_clean(first), rest)):
        parts = [(text, "", ()), *((form, outside, form_sides) for form, (_, outside, form_sides)
                                   in _forms(text, answer=True).items())]
        for form, outside, form_sides in parts:
            code = icd_map.code(form) if form else None
            if code is not None and not _negated(f"{outside} {target_form}", target_form,
                                                 (*form_sides, *sides)):
                return code
    return None


def icd_score(answer: str, target: str, icd_map: CodeMap) -> Score | None:
    """The verdict of the ICD codes when both the answer and the target text map to one
    (docs/cdeg.md, "ICD mapping"), else ``None``. ``answer`` is an identifiable
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
    """Score a terminal answer against the case's reference target Y (rules: docs/evaluation.md).

    Args:
        answer: the doctor's answer text (markers and markdown allowed), or ``None``.
        case: the case; only ``case.target`` and ``case.candidates`` are read.
        threshold: fuzzy similarity (0-100) needed for a fuzzy or option-text match.
        use_candidates: read the answer against the candidate labels K; ``False`` where the
            doctor never saw K (native protocols, the ``no_candidates`` replay), so a bare
            ``"C"`` is a free answer.
        icd_map: optional ICD normalization; ``None`` leaves the rules unchanged.

    Returns:
        A :class:`Score`: ``"unscored"`` for no answer, formatting only, a placeholder or an
        abstention, otherwise ``"correct"`` or ``"wrong"``.
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
            first, sides = _first_item(cleaned, " ".join(options).lower())
            first = _clean(first)
            choice = _choose_option(first, options, threshold, sides) if first else None
        if choice is not None:
            index, similarity = choice
            verdict: Verdict = "correct" if index == case.target.option_index else "wrong"
            return Score(verdict, similarity, normalized, options[index], "option")
    return _score_free(cleaned, target, threshold, normalized)
