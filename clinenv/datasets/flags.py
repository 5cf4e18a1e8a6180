"""Per-case data-quality flags (``clinenv.cases.CaseFlags``).

Simple rules after the AgentClinic audit (weaknesses W4, W5, W12, W14), each listed in
docs/api/cases.md so analyses can cite them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

from pydantic import JsonValue
from rapidfuzz import fuzz, process
from rapidfuzz.utils import default_process

from clinenv.datasets.availability import is_unavailable

#: token_set_ratio threshold (0-100) for ``near_duplicate_of``.
NEAR_DUPLICATE_THRESHOLD = 95.0

#: Leading words dropped to get a target's main noun phrase.
_QUALIFIERS = frozenset(
    "acute chronic subacute primary secondary probable possible likely suspected early "
    "late severe mild moderate recurrent active benign malignant idiopathic "
    "congenital physiological physiologic".split()
)
_CLAUSE_CUT = re.compile(
    r"\s*(?:,|;|:|\bdue to\b|\bsecondary to\b|\bcaused by\b|\bassociated with\b|"
    r"\bwith\b|\bat its\b|\bin the setting of\b)",
    re.IGNORECASE,
)
_PARENS = re.compile(r"\s*[(\[][^)\]]*[)\]]")
_BRACKETED = re.compile(r"[(\[]\s*([^)\]]*?)\s*[)\]]")
#: A bracketed abbreviation: one word of letters and digits (inner hyphens allowed),
#: starting with a capital, with at least two capitals and no lower-case run longer than
#: one letter (BPPV, NSTEMI, IgA, COVID-19; not "Type 2", "right", "pH").
_ABBREVIATION = re.compile(
    r"(?=(?:[^A-Z]*[A-Z]){2})[A-Z](?:[A-Z0-9]|[a-z](?![a-z])|-(?=[A-Za-z0-9]))+")


def fold(text: str) -> str:
    """Lower-case, strip accents, read ``-``/``_``/dashes as spaces, collapse spaces."""
    text = fold_accents(text)
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"[-_\u2010-\u2015]+", " ", text.lower())
    return re.sub(r"\s+", " ", text).strip()


def main_noun_phrase(target: str) -> str:
    """The target without parentheses, trailing clauses and leading qualifiers.

    ``"Acute interstitial nephritis"`` → ``"interstitial nephritis"``;
    ``"Rupture of the flexor ... tendon at its point of insertion"`` →
    ``"rupture of the flexor ... tendon"``.
    """
    text = fold(_PARENS.sub("", target))
    text = _CLAUSE_CUT.split(text, maxsplit=1)[0]
    words = text.split()
    while len(words) > 1 and words[0] in _QUALIFIERS:
        words = words[1:]
    return " ".join(words).strip(" .")


def target_phrases(target: str) -> list[str]:
    """Phrases whose presence counts as naming the target (docs/api/cases.md)."""
    full = fold(target).strip(" .")
    phrases = [full] if full else []
    if len(full.split()) >= 2:
        head = main_noun_phrase(target)
        if len(head) >= 4 and head not in phrases:
            phrases.append(head)
    no_parens = fold(_PARENS.sub("", target)).strip(" .")
    if no_parens and no_parens not in phrases:
        phrases.append(no_parens)
    return phrases


def target_abbreviations(target: str) -> list[str]:
    """The abbreviations the target gives in brackets, capitals kept, accents folded.

    ``"Benign Paroxysmal Positional Vertigo (BPPV)"`` → ``["BPPV"]``;
    ``"Pneumonia (right lower lobe)"`` → ``[]``.
    """
    found = []
    for inner in _BRACKETED.findall(target):
        word = fold_accents(inner)
        if _ABBREVIATION.fullmatch(word) and word not in found:
            found.append(word)
    return found


def fold_accents(text: str) -> str:
    """``text`` with accents removed (NFKD, combining marks dropped); case kept."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def iter_leaf_texts(tree: JsonValue) -> Iterator[str]:
    """Every string leaf of a record tree (dict values and list items, depth first)."""
    if isinstance(tree, str):
        yield tree
    elif isinstance(tree, dict):
        for value in tree.values():
            yield from iter_leaf_texts(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from iter_leaf_texts(item)


def names_target(target: str, tree: JsonValue) -> bool:
    """Whether any string leaf of ``tree`` names ``target``: one of its
    :func:`target_phrases` as whole words of the folded leaf, or one of its
    :func:`target_abbreviations` as a whole word of the leaf with accents folded and
    capitals kept (``target_in_records``)."""
    phrases = [r"\s+".join(map(re.escape, p.split())) for p in target_phrases(target)]
    abbreviations = [re.escape(a) for a in target_abbreviations(target)]
    if not phrases and not abbreviations:
        return False
    # one text per tree, leaves apart by NUL: neither a word character nor a space, so
    # no phrase or word boundary reaches across two leaves
    leaves = list(iter_leaf_texts(tree))
    if phrases and re.search(r"(?<!\w)(?:" + "|".join(phrases) + r")(?!\w)",
                             "\0".join(map(fold, leaves))):
        return True
    return bool(abbreviations) and re.search(
        r"(?<![^\W_])(?:" + "|".join(abbreviations) + r")(?![^\W_])",
        fold_accents("\0".join(leaves))) is not None


_AGE = re.compile(
    r"\b(\d+(?:\.\d+)?)[\s-]*(day|week|month|year|yr)s?[\s-]*old\b|"
    r"\baged?\s+(\d+(?:\.\d+)?)\s*(day|week|month|year|yr)s?\b|"
    r"\b(\d+(?:\.\d+)?)\s*(day|week|month|year|yr)s?\s+of\s+age\b",
    re.IGNORECASE,
)
_BABY_WORDS = re.compile(r"\b(?:newborn|neonate|neonatal|infant)s?\b", re.IGNORECASE)

#: Age in years below which a caregiver speaks for the patient.
CAREGIVER_AGE_YEARS = 5


def caregiver_voice(demographics: str) -> bool:
    """Whether the patient is too young to self-report.

    The first stated age decides ("2-year-old" yes, "18-month-old" yes, "3-week-old"
    yes, "5-year-old" no; "38 weeks' gestation" is not an age); without one, the words
    newborn, neonate or infant decide.

    Args:
        demographics: the demographics text (OSCE ``Demographics``, or the first
            sentence of a NEJM vignette).
    """
    match = _AGE.search(demographics)
    if match:
        groups = [g for g in match.groups() if g is not None]
        value, unit = float(groups[0]), groups[1].lower()
        if unit in ("day", "week", "month"):
            return True
        return value < CAREGIVER_AGE_YEARS
    return bool(_BABY_WORDS.search(demographics))


_TEST_NOUN = re.compile(
    r"\b(?:exam(?:ination)?s?|tests?|testing|blood ?work|biops(?:y|ies)|scans?|ct|mri|"
    r"x-?rays?|radiographs?|ultrasound|microscopes?|microscopy|microscopic|cultures?|"
    r"laborator(?:y|ies)|labs?|urinalysis|ecg|ekg|echocardiogra\w*|endoscopy|imaging|"
    r"levels?|counts?)\b",
    re.IGNORECASE,
)
_RESULT_WORD = re.compile(
    r"\b(?:show(?:s|ed|n)?|revealed|found|noted|came back|demonstrated|detected|"
    r"confirmed|indicated|normal|abnormal|positive|negative|elevated)\b",
    re.IGNORECASE,
)
_NOT_KNOWN = re.compile(
    r"\b(?:not aware|unaware|(?:do|does|did)\s*n[o'’]t know|(?:do|does|did) not know|"
    r"(?:have|has)\s*n[o'’]t been (?:told|informed)|(?:have|has) not been (?:told|informed)|"
    r"(?:have|has)\s*n[o'’]t seen|(?:have|has) not seen|not been informed|not know)\b",
    re.IGNORECASE,
)
_CLAUSE_SPLIT = re.compile(
    r"(?<=[.!?])\s+|,?\s+\bbut\b\s+|,\s*(?:and|although|though|while)\s+|;\s*|:\s+|\s-\s+"
)


def patient_facts_contain_findings(text: str) -> bool:
    """Whether a NEJM ``patient_info`` role card states test or examination findings.

    Keyword rule: a clause with a test/examination noun and a result
    word, ignoring clauses about what the patient does not know.
    """
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        clauses = [c for c in _CLAUSE_SPLIT.split(sentence) if c and not _NOT_KNOWN.search(c)]
        kept = " ".join(clauses)
        if _TEST_NOUN.search(kept) and _RESULT_WORD.search(kept):
            return True
    return False


#: Words a target phrase may hold that a menu name need not repeat ("of", "the"...).
_NAME_STOPWORDS = frozenset("a an and the of in on to for or by from at".split())
_WORD = re.compile(r"[^\W_]+")


def _name_words(text: str) -> list[str]:
    """Folded words of a name or phrase: possessive ``'s`` dropped, a plural ``s`` cut
    from words of 4+ letters (not ``ss``), so "Kidney stones" meets "Kidney_Stone_Panel"
    and "Crohn's" meets "Crohns"."""
    words = []
    for word in _WORD.findall(fold(text).replace("'s ", " ").replace("'", "")):
        if len(word) >= 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.append(word)
    return words


def menu_names(physical_exam: JsonValue, tests: JsonValue) -> list[str]:
    """The source keys the menu's names come from, in record order, without repeats.

    Every top-level key of the physical examination and of the tests, and every key
    one level under a top-level test key whose value is an object. The catalog shows a
    top-level key as an entry or as the group of its children, and those children as
    entries (:class:`clinenv.protocol.catalog.Catalog`), so every name and group name of
    the menu is in this list; a child of a test the catalog keeps whole is listed too
    (it is shown with that test's result, not in the menu), which can only add a flag.
    The datasets layer sits below the protocol, so the catalog itself is not used.

    Args:
        physical_exam: the ``physical_exam`` tree of M (``{section: tree}``).
        tests: the ``tests`` tree of M.
    """
    names: dict[str, None] = {}
    for tree, nested in ((physical_exam, False), (tests, True)):
        if not isinstance(tree, dict):
            continue
        for key, value in tree.items():
            names[key] = None
            if nested and isinstance(value, dict):
                names.update(dict.fromkeys(value))
    return list(names)


def names_target_in_menu(target: str, names: Sequence[str]) -> list[str]:
    """The names, of ``names``, that name ``target`` (docs/api/cases.md,
    ``target_in_menu``), in input order.

    A name names the target when every content word (not "of", "the"...) of one of
    :func:`target_phrases` occurs among the name's words in any order, case, accents,
    ``_``/``-`` and a plural ``s`` ignored (``"Lupus_Erythematosus_Systemic"`` names
    "Systemic lupus erythematosus"; ``"Varicella_Specific_Tests"`` names "Varicella"),
    or when one of :func:`target_abbreviations` occurs in it as a whole word with its own
    capitals (``"BPPV_Provocation"``). An empty target or name names nothing.

    Args:
        target: the reference target Y.
        names: menu names or source keys (:func:`menu_names`).
    """
    phrases = []
    for phrase in target_phrases(target):
        words = frozenset(w for w in _name_words(phrase) if w not in _NAME_STOPWORDS)
        if words and words not in phrases:
            phrases.append(words)
    abbreviations = [re.compile(r"(?<![^\W_])" + re.escape(a) + r"(?![^\W_])")
                     for a in target_abbreviations(target)]
    found = []
    for name in names:
        words = set(_name_words(name))
        if any(phrase <= words for phrase in phrases) or any(
                pat.search(fold_accents(name)) for pat in abbreviations):
            found.append(name)
    return found


def target_in_menu(target: str, physical_exam: JsonValue, tests: JsonValue) -> bool:
    """Whether a name the menu can show names the target (``CaseFlags.target_in_menu``):
    :func:`names_target_in_menu` over :func:`menu_names`."""
    return bool(names_target_in_menu(target, menu_names(physical_exam, tests)))


#: A target that names a malignancy (``target_in_bias``), on
#: :func:`fold`-ed text.
MALIGNANCY_PATTERN = re.compile(
    r"(?<!\w)(?:cancers?|\w*(?:carcinoma|sarcoma|lymphoma|leuka?emia|melanoma|myeloma)s?|"
    r"(?:neuro|retino|nephro|medullo|glio|hepato|pleuropulmonary )blastomas?|"
    r"mesotheliomas?|seminomas?|macroglobulina?emia|thrombocytha?emia|"
    r"polycytha?emia vera|myelofibrosis|(?:bowen|hodgkin)(?:'?s)? disease|"
    r"(?:granulosa cell|pancoast|apical lung|malignant) tumou?rs?|malignant neoplasms?)(?!\w)")


def names_malignancy(target: str) -> bool:
    """Whether ``target`` names a malignancy (:data:`MALIGNANCY_PATTERN` on the
    :func:`fold`-ed text; ``target_in_bias``)."""
    return MALIGNANCY_PATTERN.search(fold(target)) is not None


def no_recorded_tests(tests: JsonValue) -> bool:
    """Whether a tests tree holds no result at all (empty, or only placeholders)."""
    return is_unavailable(tests)


def near_duplicates(ids: Sequence[str], texts: Sequence[str],
                    threshold: float = NEAR_DUPLICATE_THRESHOLD) -> list[str | None]:
    """For each case, the id of the earlier case it nearly duplicates, or ``None``.

    Each case is compared with every earlier case by rapidfuzz ``token_set_ratio`` on
    its processed identity text; the best match at or above ``threshold`` wins (ties:
    the earliest), and the answer is that match's own group root, so every member of a
    duplicate group points at the group's first case.

    Args:
        ids: case ids in file order.
        texts: identity texts (objective plus patient history), same order.
        threshold: minimum score, 0-100.
    """
    processed = [default_process(t) for t in texts]
    scores = process.cdist(processed, processed, scorer=fuzz.token_set_ratio,
                           score_cutoff=threshold, workers=-1)
    roots: list[str | None] = []
    for i, text in enumerate(processed):
        best = None
        if text and i:
            row = scores[i, :i]
            j = int(row.argmax())  # first index of the maximum
            if row[j] >= threshold:
                best = j
        roots.append(None if best is None else (roots[best] or ids[best]))
    return roots


def target_flags(target: str, physical_exam: JsonValue, tests: JsonValue,
                 patient: JsonValue) -> dict[str, bool]:
    """The flags every loader computes from Y and the record, as ``CaseFlags`` fields:
    ``target_in_records`` (:func:`names_target` over M), ``target_in_patient_facts``
    (over P), ``target_in_menu`` (:func:`target_in_menu`) and ``target_in_bias``
    (:func:`names_malignancy`)."""
    return {"target_in_records": names_target(target, [physical_exam, tests]),
            "target_in_patient_facts": names_target(target, patient),
            "target_in_menu": target_in_menu(target, physical_exam, tests),
            "target_in_bias": names_malignancy(target)}

