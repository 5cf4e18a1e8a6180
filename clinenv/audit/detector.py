"""The leak detector of the information-boundary audit (EGIP section 3.2, Eq. 2).

:class:`LeakDetector` finds Y, a distinctive word of Y, or a specific unrequested result
in a doctor input; what counts as known or as reported apart is in docs/audit.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from clinenv.cases import Case
from clinenv.datasets.availability import is_unavailable
from clinenv.datasets.flags import (
    fold,
    fold_accents,
    iter_leaf_texts,
    target_abbreviations,
    target_phrases,
)
from clinenv.protocol.catalog import Catalog, CatalogEntry
from clinenv.protocol.lookup import record_at

#: What was found: the target, one of its distinctive words, or an unrequested result.
LeakKind = Literal["target", "target_word", "unrequested_result"]
#: Where a finding belongs: a leak, or a data property reported apart.
Placement = Literal["leak", "menu", "patient_facts", "bias"]

#: Words that, alone or together, make a result value generic ("Normal", "Negative").
GENERIC_RESULT_WORDS = frozenset("""
normal normals abnormal negative positive none nil absent present unremarkable within
limits limit range elevated raised high low decreased increased mildly slightly
markedly reduced detected seen noted found observed reactive nonreactive clear intact
regular stable significant insignificant findings finding abnormalities abnormality
evidence result results test tests pending trace mild moderate severe bilateral left
right both appears appear showed shows show consistent signs sign symptoms level levels
count counts value values reference ratio units unit and the with without not for
""".split())
#: Words that do not single out a diagnosis (a target's other words are distinctive);
#: the result words of :data:`GENERIC_RESULT_WORDS` ("normal", "positive") are added.
GENERIC_TARGET_WORDS = frozenset("""
acute chronic subacute primary secondary probable possible likely suspected early late
severe mild moderate recurrent active benign malignant idiopathic congenital acquired
disease diseases disorder disorders syndrome syndromes infection infections condition
lesion lesions injury failure type stage grade left right bilateral upper lower with
without from into onto after before during induced related associated secondary
complicated uncomplicated partial complete total general generalized localized focal
diffuse multiple single simple common rare other unspecified medication drug therapy
treatment patient test tests finding findings deficiency excess high level levels
like system systems systemic reaction reactions serum
""".split()) | GENERIC_RESULT_WORDS


_WORD = re.compile(r"[^\W_]+")
#: An upper-case abbreviation as written ("HSV", "RPR", "HIV1").
_ACRONYM = re.compile(r"(?<![^\W_])[A-Z][A-Z0-9]+(?![^\W_])")


def _words(text: str) -> list[str]:
    return _WORD.findall(fold(text))


def distinctive_words(target: str) -> list[str]:
    """The words of Y that single it out: folded words of 4+ letters (digits excluded)
    not in :data:`GENERIC_TARGET_WORDS`, in order, without repeats.

    ``"Acute interstitial nephritis"`` -> ``["interstitial", "nephritis"]``.
    """
    out: list[str] = []
    for word in _words(target):
        if len(word) >= 4 and word.isalpha() and word not in GENERIC_TARGET_WORDS \
                and word not in out:
            out.append(word)
    return out


def is_specific(value: str) -> bool:
    """Whether a recorded leaf means something on its own
    (docs/audit.md, "What it does").

    Specific: two or more words with at least one word of 4+ letters outside
    :data:`GENERIC_RESULT_WORDS`, or an upper-case abbreviation of 2+ letters, as
    written ("Normal sinus rhythm", "Consolidation of the right lower lobe", "Positive
    for HSV"); one such word of 6+ letters ("Splenomegaly"); or a number with a unit,
    6+ characters ("9.2 g/dL"). Not specific: placeholders ("Pending"), bare numbers
    ("12", "120/80"), generic words ("Negative", "Within normal limits").
    """
    if is_unavailable(value):
        return False
    text = fold(value).strip(" .;:,")
    words = _WORD.findall(text)
    meaningful = [w for w in words
                  if w.isalpha() and len(w) >= 4 and w not in GENERIC_RESULT_WORDS]
    meaningful += [w for w in _ACRONYM.findall(fold_accents(value))
                   if w.lower() not in GENERIC_RESULT_WORDS]
    if len(words) >= 2 and meaningful:
        return True
    if len(words) == 1 and meaningful and len(meaningful[0]) >= 6:
        return True
    has_digit = any(ch.isdigit() for ch in text)
    has_letter = any(ch.isalpha() for ch in text)
    return has_digit and has_letter and len(text) >= 6


def specific_values(tree: JsonValue) -> list[str]:
    """The specific string leaves (:func:`is_specific`) of a record subtree, in order,
    without repeats."""
    return list(dict.fromkeys(v for v in iter_leaf_texts(tree) if is_specific(v)))


def _phrase_pattern(text: str) -> re.Pattern[str] | None:
    tokens = fold(text).strip(" .;:,").split()
    if not tokens:
        return None
    return re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, tokens)) + r"(?!\w)")


@dataclass(frozen=True, slots=True)
class Hit:
    """One thing found in a doctor-facing text.

    Attributes:
        kind: ``"target"``, ``"target_word"`` or ``"unrequested_result"``.
        item: what was found: the target phrase or abbreviation, the word, or the
            recorded value (as recorded).
        exam: for a result, the readable name of its examination (of each unrequested
            examination that records the same value, joined by ``"; "``); else ``None``.
        text: the line of the doctor's input it was found in (accents folded; a long
            line cut around the hit, :data:`SNIPPET_CONTEXT`).
        placement: ``"leak"``, ``"menu"``, ``"patient_facts"`` or ``"bias"`` (module
            docstring).
    """

    kind: LeakKind
    item: str
    exam: str | None
    text: str
    placement: Placement


class LeakDetector:
    """The leak rule for one case (docs/audit.md, "What it does").

    Args:
        case: the case (s0, K, P, M and Y are read; nothing is changed).
        objective: s0 as the environment shows it (the native loops start from another
            text, :func:`clinenv.protocol.native.native_objective`); default
            ``case.objective``.
        show_candidates: whether the doctor sees K (the native loops do not).
        bias: the patient's bias text (:func:`clinenv.protocol.biases.bias_text`);
            ``""``: none.
    """

    def __init__(self, case: Case, *, objective: str | None = None,
                 show_candidates: bool = True, bias: str = "") -> None:
        self.case = case
        self.catalog = Catalog(case.records)
        target = case.target.text
        self._target = [(p, pat) for p in target_phrases(target)
                        if (pat := _phrase_pattern(p)) is not None]
        self._abbreviations = [
            (a, re.compile(r"(?<![^\W_])" + re.escape(a) + r"(?![^\W_])"))
            for a in target_abbreviations(target)]
        self._words = [(w, re.compile(rf"(?<!\w){re.escape(w)}(?!\w)"))
                       for w in distinctive_words(target)]
        self._values: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
        for entry in self.catalog:
            pairs = []
            for value in specific_values(record_at(case.records, entry.source_path)):
                pattern = _phrase_pattern(value)
                if pattern is not None:
                    pairs.append((value, pattern))
            self._values[entry.exam_id] = pairs
        shown = [objective if objective is not None else case.objective]
        if show_candidates and case.candidates:
            shown += list(case.candidates)
        self._base_known = shown
        self._menu = "\n".join(fold(e.label) for e in self.catalog)
        self._menu_raw = "\n".join(fold_accents(e.label) for e in self.catalog)
        self._patient = "\n".join(fold(t) for t in iter_leaf_texts(case.patient))
        self._patient_raw = "\n".join(fold_accents(t) for t in iter_leaf_texts(case.patient))
        self._bias, self._bias_raw = fold(bias), fold_accents(bias)

    # ------------------------------------------------------------------ requests
    def named_entries(self, utterance: str) -> list[CatalogEntry]:
        """The catalog entries a doctor utterance names, independently of the
        environment's own matching: its public id as a whole token (``T3``), its name,
        or its group's name as whole words of the folded utterance."""
        folded = fold(utterance)
        tokens = {t.lower() for t in _WORD.findall(utterance)}
        found = []
        for entry in self.catalog:
            by_id = entry.exam_id.lower() in tokens
            by_name = any(
                (pat := _phrase_pattern(name)) is not None and pat.search(folded)
                for name in (entry.name, entry.group) if name)
            if by_id or by_name:
                found.append(entry)
        return found

    def requested_text(self, entries: Iterable[CatalogEntry]) -> list[str]:
        """The record texts the doctor holds once it requested ``entries``: their
        names, and every key and string leaf of their records."""
        texts = []
        for entry in entries:
            texts.append(entry.label)
            record = record_at(self.case.records, entry.source_path)
            texts += list(_keys(record))
            texts += list(iter_leaf_texts(record))
        return texts

    def mentions_target(self, text: str) -> bool:
        """Whether ``text`` holds the target, its bracketed abbreviation or one of its
        distinctive words, whoever said it (the audit leaves plan turns that do out of
        the case's plan, so that no doctor turn makes the target "known")."""
        folded, raw = fold(text), fold_accents(text)
        return (any(pat.search(folded) for _, pat in (*self._target, *self._words))
                or any(pat.search(raw) for _, pat in self._abbreviations))

    # ------------------------------------------------------------------ scanning
    def scan(self, text: str, *, requested: Sequence[str], known: Sequence[str]) -> list[Hit]:
        """Every finding in one doctor-facing ``text`` (docs/audit.md, "What it does").

        Args:
            text: the doctor's input (an observation's text, an ``info`` as JSON...).
            requested: exam ids of the entries the doctor requested so far (their
                results are not "unrequested").
            known: texts the doctor holds besides s0 and K: its own utterances and the
                records of its requests (:meth:`requested_text`).

        Returns:
            One :class:`Hit` per line and item (a line that holds an item twice gives
            one hit), in line order.
        """
        known_folded = "\n".join(fold(t) for t in [*self._base_known, *known])
        known_raw = "\n".join(fold_accents(t) for t in [*self._base_known, *known])
        done = set(requested)
        hits: list[Hit] = []
        for line in text.splitlines():
            folded = fold(line)
            if not folded:
                continue
            raw = fold_accents(line)
            target_found = False
            for phrase, pat in self._target:
                if (match := pat.search(folded)):
                    target_found = True
                    hits += self._target_hit(phrase, pat, known_folded,
                                             _snippet(raw, folded, match),
                                             self._menu, self._patient, self._bias)
            for abbreviation, pat in self._abbreviations:
                if (match := pat.search(raw)):
                    target_found = True
                    hits += self._target_hit(abbreviation, pat, known_raw,
                                             _snippet(raw, raw, match),
                                             self._menu_raw, self._patient_raw, self._bias_raw)
            if not target_found:
                for word, pat in self._words:
                    if (match := pat.search(folded)) and not pat.search(known_folded) \
                            and not pat.search(self._patient):
                        placement: Placement = (
                            "menu" if pat.search(self._menu)
                            else "bias" if pat.search(self._bias) else "leak")
                        hits.append(Hit("target_word", word, None, _snippet(raw, folded, match),
                                        placement))
            results: dict[str, tuple[list[str], str]] = {}  # value -> (exams, snippet)
            for entry in self.catalog:
                if entry.exam_id in done:
                    continue
                for value, pat in self._values[entry.exam_id]:
                    if (match := pat.search(folded)) and not pat.search(known_folded) \
                            and not pat.search(self._patient) and not pat.search(self._menu):
                        exams, _ = results.setdefault(
                            value, ([], _snippet(raw, folded, match)))
                        exams.append(entry.label)
            hits += [Hit("unrequested_result", value, "; ".join(exams), shown, "leak")
                     for value, (exams, shown) in results.items()]
        return hits

    @staticmethod
    def _target_hit(item: str, pat: re.Pattern[str], known: str, shown: str, menu: str,
                    patient: str, bias: str) -> list[Hit]:
        if pat.search(known):
            return []
        if pat.search(menu):
            return [Hit("target", item, None, shown, "menu")]
        if pat.search(patient):
            return [Hit("target", item, None, shown, "patient_facts")]
        if pat.search(bias):
            return [Hit("target", item, None, shown, "bias")]
        return [Hit("target", item, None, shown, "leak")]


#: Characters of context a finding's text keeps on each side of the hit.
SNIPPET_CONTEXT = 120


def _snippet(raw: str, searched: str, match: re.Match[str]) -> str:
    """The line around ``match`` as written (accents folded, case kept): whole when it is
    short, else :data:`SNIPPET_CONTEXT` characters on each side, ``...`` marking the cuts.
    ``match`` is a match in ``searched`` (the line folded, or ``raw`` itself); it is found
    again in ``raw`` with any run of non-word characters between its words, and the
    window is taken from ``searched`` when it is not."""
    if len(raw) <= 2 * SNIPPET_CONTEXT + 60:
        return raw.strip()
    words = _WORD.findall(match.group(0))
    again = re.search(r"[\W_]+".join(map(re.escape, words)), raw, re.IGNORECASE) \
        if words else None
    line, start, end = (raw, again.start(), again.end()) if again else (
        searched, match.start(), match.end())
    start, end = max(0, start - SNIPPET_CONTEXT), min(len(line), end + SNIPPET_CONTEXT)
    return (("..." if start else "") + line[start:end].strip()
            + ("..." if end < len(line) else ""))


def _keys(tree: JsonValue) -> Iterable[str]:
    """Every key of a record tree, depth first."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield key
            yield from _keys(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from _keys(item)
