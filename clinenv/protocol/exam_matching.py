"""Resolving a requested examination name against the whole catalog A.

Ids, exact names, abbreviations, panel components, then rapidfuzz ``WRatio``; the order
and outcomes: docs/protocols.md, "EGIP's action grammar, step by step".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz, process

from clinenv.cases import Records
from clinenv.protocol.catalog import Catalog, CatalogEntry, normalize_name

#: Common abbreviations of test names, expanded before matching (normalized forms).
TEST_ABBREVIATIONS: dict[str, str] = {
    "cbc": "complete blood count",
    "fbc": "complete blood count",
    "bmp": "basic metabolic panel",
    "cmp": "comprehensive metabolic panel",
    "lft": "liver function tests",
    "lfts": "liver function tests",
    "tft": "thyroid function tests",
    "tfts": "thyroid function tests",
    "ua": "urinalysis",
    "cxr": "chest x ray",
    "ecg": "electrocardiogram",
    "ekg": "electrocardiogram",
    "eeg": "electroencephalogram",
    "emg": "electromyography",
    "abg": "arterial blood gas",
    "cr": "creatinine",
    "echo": "echocardiogram",
    "lp": "lumbar puncture",
    "csf": "cerebrospinal fluid analysis",
    "esr": "erythrocyte sedimentation rate",
    "crp": "c reactive protein",
    "pft": "pulmonary function tests",
    "pfts": "pulmonary function tests",
    "vitals": "vital signs",
    "xray": "x ray",
}

_GENERIC_COMPONENTS = frozenset(
    {"findings", "finding", "result", "results", "impression", "report", "description",
     "interpretation", "value", "values", "other", "notes", "comment", "comments"}
)
#: Normalized requests this short (characters) are fuzzy-matched only by names that hold
#: them as a whole word or (3+ characters) as the start of a word: a short request is a
#: word or an abbreviation cut from one, never a fragment from inside a word.
SHORT_REQUEST = 4
#: An id-shaped request: ``T3``, ``[PE1]``, ``pe 2``.
ID_PATTERN = re.compile(r"^\[?\s*((?:pe|t)\s*\d+)\s*\]?$", re.IGNORECASE)

Status = Literal["matched", "ambiguous", "unclear", "miss", "invalid_id"]


@dataclass(frozen=True, slots=True)
class ExamMatch:
    """Outcome of resolving one request.

    Attributes:
        status: ``"matched"``; ``"ambiguous"`` (several targets fit equally well);
            ``"unclear"`` (close to some names, not close enough to match);
            ``"miss"`` (nothing close: the test is not recorded); ``"invalid_id"`` (an
            id-shaped request naming no entry).
        entries: the matched tests: one entry, or every member of a requested group.
        group: the group's readable name when a whole group was requested, else ``None``.
        candidates: closest entries, best first (ambiguous or unclear), for feedback.
        score: best score 0-100 (100 for ids and exact names).
    """

    status: Status
    entries: tuple[CatalogEntry, ...] = ()
    group: str | None = None
    candidates: tuple[CatalogEntry, ...] = ()
    score: float = 0.0

    @property
    def entry(self) -> CatalogEntry | None:
        """The single matched entry (``None`` unless exactly one entry matched)."""
        return self.entries[0] if len(self.entries) == 1 else None


#: A resolution target: ``(group name or None, entries)``.
_Target = tuple[str | None, tuple[CatalogEntry, ...]]


def _expand(norm: str) -> str:
    return " ".join(TEST_ABBREVIATIONS.get(w, w) for w in norm.split())


def _keys(tree) -> list[str]:
    keys: list[str] = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            keys.append(key)
            keys.extend(_keys(value))
    return keys


class ExamMatcher:
    """Name index over one catalog; build once per case.

    Args:
        catalog: the case's action catalog A.
        components: ``{exam_id: [key names inside its record]}`` (names only, never
            values), used for step 3.
        accept: fuzzy score (0-100) at or above which a unique best target matches.
        suggest: fuzzy score (0-100) at or above which a non-match is ``unclear``.
        margin: targets within this many points of the best make it ambiguous.
    """

    def __init__(
        self,
        catalog: Catalog,
        components: dict[str, list[str]] | None = None,
        *,
        accept: float = 88.0,
        suggest: float = 75.0,
        margin: float = 4.0,
    ) -> None:
        self.catalog = catalog
        self.accept, self.suggest, self.margin = accept, suggest, margin
        self._exact: dict[str, list[_Target]] = {}
        self._component: dict[str, list[_Target]] = {}
        self._choices: list[str] = []
        self._choice_target: list[_Target] = []
        # the (immutable) match of each public id, built once
        self._by_id = {e.exam_id.lower(): ExamMatch("matched", (e,), None, (e,), 100.0)
                       for e in catalog}

        def add(form: str, target: _Target) -> None:
            bucket = self._exact.setdefault(form, [])
            if target not in bucket:
                bucket.append(target)
            self._choices.append(form)
            self._choice_target.append(target)

        for entry in catalog:
            target: _Target = (None, (entry,))
            add(_expand(normalize_name(entry.name)), target)
            if entry.group:
                add(_expand(normalize_name(f"{entry.group} {entry.name}")), target)
                add(_expand(normalize_name(f"{entry.name} {entry.group}")), target)
        for group, members in catalog.groups.items():
            add(_expand(normalize_name(group)), (group, members))
        for exam_id, keys in (components or {}).items():
            entry = catalog.get(exam_id)
            if entry is None:
                continue
            for key in keys:
                norm = _expand(normalize_name(key))
                if norm and norm not in _GENERIC_COMPONENTS:
                    bucket = self._component.setdefault(norm, [])
                    if (None, (entry,)) not in bucket:
                        bucket.append((None, (entry,)))

    @classmethod
    def for_records(cls, catalog: Catalog, records: Records, **kwargs) -> ExamMatcher:
        """Build a matcher whose component index holds the key names of each record."""
        from clinenv.protocol.lookup import record_at

        components = {e.exam_id: _keys(record_at(records, e.source_path)) for e in catalog}
        return cls(catalog, components, **kwargs)

    def match(self, request: str) -> ExamMatch:
        """Resolve one requested name. Never raises; empty input is a miss."""
        text = request.strip().strip("*_`'\"").strip()
        id_match = ID_PATTERN.match(text)
        if id_match:
            match = self._by_id.get(id_match.group(1).replace(" ", "").lower())
            return ExamMatch("invalid_id") if match is None else match
        norm = _expand(normalize_name(text))
        if not norm:
            return ExamMatch("miss")
        for index in (self._exact, self._component):
            hits = index.get(norm)
            if hits:
                return self._decide([(t, 100.0) for t in hits])
        if not self._choices:
            return ExamMatch("miss")
        scored = process.extract(norm, self._choices, scorer=fuzz.WRatio, limit=16,
                                 score_cutoff=self.suggest)
        if len(norm) <= SHORT_REQUEST:  # a fragment inside a word is at most unclear
            edge = f" {norm}" if len(norm) >= 3 else f" {norm} "
            cap = min(self.suggest, self.accept - self.margin - 0.5)
            scored = [s if edge in f" {s[0]} " else (s[0], min(s[1], cap), s[2])
                      for s in scored]
        best: dict[_Target, float] = {}
        for _choice, score, idx in scored:
            target = self._choice_target[idx]
            best[target] = max(best.get(target, 0.0), score)
        return self._decide(list(best.items()))

    def _decide(self, scored: list[tuple[_Target, float]]) -> ExamMatch:
        if not scored:
            return ExamMatch("miss")
        scored.sort(key=lambda ts: (-ts[1], ts[0][1][0].index, ts[0][0] is not None))
        (group, entries), top = scored[0]
        close = _flatten(t for t, _ in scored)[:5]
        if top < self.accept:
            return ExamMatch("unclear", (), None, close, top)
        tied = [t for t, s in scored if s >= top - self.margin]
        if len(tied) == 1:
            return ExamMatch("matched", entries, group, close, top)
        return ExamMatch("ambiguous", (), None, _flatten(tied)[:5], top)


def _flatten(targets) -> tuple[CatalogEntry, ...]:
    seen: dict[str, CatalogEntry] = {}
    for _group, entries in targets:
        for entry in entries:
            seen.setdefault(entry.exam_id, entry)
    return tuple(seen.values())
