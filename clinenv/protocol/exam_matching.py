"""Resolving a requested examination name against the whole catalog A.

Requests are validated against the *whole* catalog, not only the displayed menu (EGIP
section 3.2). Resolution, in order:

1. a public id (``T3``, ``[PE1]``, ``t3``);
2. an exact normalized name, ``"group name"`` form, or a common abbreviation
   (``CBC``, ``CXR``, ``ECG`` ... from :data:`TEST_ABBREVIATIONS`);
3. an exact normalized component name inside a panel (``Hemoglobin`` -> the CBC entry);
4. fuzzy matching (rapidfuzz ``WRatio``): a unique best score >= ``accept`` matches;
   several entries tied at or above ``accept`` are *ambiguous* (feedback lists them);
5. otherwise a *miss*: the record lookup answers "not recorded" (never "normal"), and
   entries scoring >= ``suggest`` are offered as suggestions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz, process

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
_ID = re.compile(r"^\[?\s*((?:pe|t)\s*\d+)\s*\]?$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ExamMatch:
    """Outcome of resolving one request.

    Attributes:
        status: ``"matched"``, ``"ambiguous"`` (several entries fit equally well) or
            ``"miss"`` (no entry fits: the test is not recorded).
        entry: the matched entry when ``status == "matched"``.
        candidates: closest entries, best first: the tied entries when ambiguous,
            suggestions for a miss (possibly empty).
        score: best fuzzy score 0-100 (100 for ids and exact names).
    """

    status: Literal["matched", "ambiguous", "miss"]
    entry: CatalogEntry | None = None
    candidates: tuple[CatalogEntry, ...] = ()
    score: float = 0.0


def _expand(norm: str) -> str:
    words = [TEST_ABBREVIATIONS.get(w, w) for w in norm.split()]
    return " ".join(words)


def _leaf_keys(tree) -> list[str]:
    keys: list[str] = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            keys.append(key)
            keys.extend(_leaf_keys(value))
    return keys


class ExamMatcher:
    """Name index over one catalog; build once per case.

    Args:
        catalog: the case's action catalog A.
        components: ``{exam_id: [component keys]}``, the key names inside each entry's
            record (names only, never values), used for step 3.
        accept: fuzzy score (0-100) at or above which a unique best entry matches.
        suggest: fuzzy score at or above which closest entries are offered as feedback.
        margin: a second entry within this many points of the best makes it ambiguous.
    """

    def __init__(
        self,
        catalog: Catalog,
        components: dict[str, list[str]] | None = None,
        *,
        accept: float = 88.0,
        suggest: float = 60.0,
        margin: float = 4.0,
    ) -> None:
        self.catalog = catalog
        self.accept, self.suggest, self.margin = accept, suggest, margin
        self._exact: dict[str, list[CatalogEntry]] = {}
        self._component: dict[str, list[CatalogEntry]] = {}
        self._choices: list[str] = []
        self._choice_entry: list[CatalogEntry] = []
        for entry in catalog:
            forms = {_expand(normalize_name(entry.name))}
            if entry.group:
                forms.add(_expand(normalize_name(f"{entry.group} {entry.name}")))
                forms.add(_expand(normalize_name(f"{entry.name} {entry.group}")))
            for form in forms:
                self._exact.setdefault(form, []).append(entry)
                self._choices.append(form)
                self._choice_entry.append(entry)
        for exam_id, keys in (components or {}).items():
            entry = catalog.get(exam_id)
            for key in keys:
                norm = _expand(normalize_name(key))
                if entry is not None and norm and norm not in _GENERIC_COMPONENTS:
                    bucket = self._component.setdefault(norm, [])
                    if entry not in bucket:
                        bucket.append(entry)

    @classmethod
    def for_records(cls, catalog: Catalog, records, **kwargs) -> ExamMatcher:
        """Build a matcher whose component index comes from the records' key names."""
        components: dict[str, list[str]] = {}
        for entry in catalog:
            node = records.physical_exam if entry.kind == "physical_exam" else records.tests
            for key in entry.source_path[1:]:
                node = node[key]
            components[entry.exam_id] = _leaf_keys(node)
        return cls(catalog, components, **kwargs)

    def match(self, request: str) -> ExamMatch:
        """Resolve one requested name. Never raises; empty input is a miss."""
        text = request.strip().strip("*_`'\"").strip()
        id_match = _ID.match(text)
        if id_match:
            entry = self.catalog.get(id_match.group(1).replace(" ", ""))
            if entry is not None:
                return ExamMatch("matched", entry, (entry,), 100.0)
        norm = _expand(normalize_name(text))
        if not norm:
            return ExamMatch("miss")
        for index in (self._exact, self._component):
            hits = index.get(norm)
            if hits:
                if len(hits) == 1:
                    return ExamMatch("matched", hits[0], (hits[0],), 100.0)
                return ExamMatch("ambiguous", None, tuple(hits), 100.0)
        if not self._choices:
            return ExamMatch("miss")
        scored = process.extract(
            norm, self._choices, scorer=fuzz.WRatio, limit=12, score_cutoff=self.suggest
        )
        best: dict[CatalogEntry, float] = {}
        for _choice, score, idx in scored:
            entry = self._choice_entry[idx]
            best[entry] = max(best.get(entry, 0.0), score)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0].index))
        if not ranked:
            return ExamMatch("miss")
        top_entry, top_score = ranked[0]
        close = tuple(e for e, _ in ranked[:5])
        if top_score < self.accept:
            return ExamMatch("miss", None, close, top_score)
        tied = tuple(e for e, s in ranked if s >= top_score - self.margin)
        if len(tied) == 1:
            return ExamMatch("matched", top_entry, close, top_score)
        return ExamMatch("ambiguous", None, tied[:5], top_score)
