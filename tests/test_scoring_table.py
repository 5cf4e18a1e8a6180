"""Hand-written verdicts on real AgentClinic cases (:func:`clinenv.scoring.score_answer`).

Each row is (case id, answer, verdict), worked out by hand from the rules of
:mod:`clinenv.scoring`, not read off the scorer:

- the negation rule holds on every match path: an answer that negates or rules out the
  target is wrong, however it names it (whole text, the target's bracketed
  abbreviation, its initials, a fuzzy spelling, an option, a list's first item);
- the rule has a scope. A cue in the main segment (the first listed diagnosis outside
  parentheses) always counts: ``"no PML (PML)"``. A side segment (a parenthetical, a
  list item after the first) counts only when it is a bare negation, a cue with no
  content word: ``"PML, ruled out"`` and ``"PML (ruled out)"`` are wrong, ``"PML, not
  toxoplasmosis"`` and ``"PML (not toxoplasmosis)"`` are right. Punctuation never
  decides;
- every hedge of :data:`clinenv.scoring.HEDGES` in front of the first diagnosis is
  dropped: ``"compatible with X"``, ``"Likely: X"`` and ``"Findings consistent with X"``
  score as ``"X"``;
- an abbreviation alone scores as the target when the target ends in it (``"PML"`` for
  ``"Progressive multifocal encephalopathy (PML)"``) or when it gives the target's
  initials (``"MG"`` for ``"Myasthenia gravis"``);
- a trailing ``"(ABBR)"`` names the whole answer only when the abbreviation is the
  initials of the text before it (of all its words or its content words, a hyphen
  splitting words), so ``"Toxoplasmosis (PML)"`` is toxoplasmosis and ``"Primary CNS
  lymphoma (PML)"`` is primary CNS lymphoma, both wrong;
- a different diagnosis is wrong, however close (no synonym table: synonyms such as
  "Perthes disease" are left to a judge, and wrong here).

The four MedQA targets that end in an abbreviation are medqa-0002 (PML), medqa-0054
(BPPV), medqa-0097 (NRDS) and medqa-0104 (LCPD). Skipped without the shared AgentClinic
files (clinenv.testing.data).
"""

from __future__ import annotations

import pytest

from clinenv.cases import Case
from clinenv.scoring import HEDGES, normalize_answer, score_answer
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, SHARED_DATA, skip_without_shared_data

PML, HIRSCHSPRUNG, BPPV, NRDS, LCPD = (
    "medqa-0002", "medqa-0003", "medqa-0054", "medqa-0097", "medqa-0104")
MG, PSC, CDIFF = "medqa-0001", "medqa-0026", "medqa-0017"
OCHRONOSIS = "nejm-0001"  # five options; the target is C, "Exogenous ochronosis"

#: The targets these rows were written against (checked, so a changed file shows here).
TARGETS = {
    PML: "Progressive multifocal encephalopathy (PML)",
    HIRSCHSPRUNG: "Hirschsprung disease",
    BPPV: "Benign Paroxysmal Positional Vertigo (BPPV)",
    NRDS: "Neonatal Respiratory Distress Syndrome (NRDS)",
    LCPD: "Legg-Calvé-Perthes disease (LCPD)",
    MG: "Myasthenia gravis",
    PSC: "Primary sclerosing cholangitis",
    CDIFF: "C. difficile colitis",
    OCHRONOSIS: "Exogenous ochronosis",
}

C, W = "correct", "wrong"

TABLE: list[tuple[str, str, str]] = [
    # --- another disease behind the target's abbreviation: a trailing "(ABBR)" names
    # the answer only when it is the initials of the text before it, else it names nothing
    (PML, "Toxoplasmosis (PML)", W),
    (PML, "Cerebral toxoplasmosis (PML)", W),
    (PML, "Primary CNS lymphoma (PML)", W),  # "pcl": letters in order are not enough
    (PML, "Paraneoplastic limbic encephalitis (PML)", W),  # "ple"
    (PML, "Progressive multifocal leukoencephalopathy (PML)", C),
    (BPPV, "Vestibular neuritis (BPPV)", W),
    (BPPV, "Meniere disease (BPPV)", W),
    (BPPV, "Benign paroxysmal positional vertigo (BPPV)", C),
    (NRDS, "Transient tachypnea of the newborn (NRDS)", W),
    (NRDS, "Neonatal sepsis with respiratory distress (NRDS)", W),  # "nswrd" / "nsrd"
    (NRDS, "Neonatal respiratory distress syndrome (NRDS)", C),
    (LCPD, "Perthes disease (LCPD)", W),  # a synonym: wrong without a judge
    (LCPD, "Slipped capital femoral epiphysis (LCPD)", W),
    (LCPD, "Legg-Calve-Perthes disease (LCPD)", C),  # the hyphens split the words
    # --- a bare negation after the first listed diagnosis or in brackets negates it,
    # whatever the punctuation (the four abbreviation targets and medqa-0003)
    (PML, "PML, unlikely", W),
    (PML, "PML, ruled out", W),
    (PML, "PML; excluded", W),
    (PML, "PML, not likely", W),
    (PML, "PML, probably not", W),
    (PML, "PML / negative", W),
    (PML, "PML (ruled out)", W),
    (PML, "PML (unlikely)", W),
    (PML, "PML (absent)", W),
    (PML, "PML, ruled out by MRI", W),  # the grounds after the cue name nothing negated
    (PML, "Progressive multifocal encephalopathy (PML), ruled out", W),
    (PML, "Progressive multifocal encephalopathy (PML) (ruled out)", W),
    (BPPV, "BPPV, ruled out", W),
    (BPPV, "BPPV (unlikely)", W),
    (BPPV, "Benign paroxysmal positional vertigo; excluded", W),
    (NRDS, "NRDS, unlikely", W),
    (NRDS, "NRDS (ruled out)", W),
    (NRDS, "Neonatal respiratory distress syndrome, probably not", W),
    (LCPD, "Legg-Calve-Perthes disease, ruled out", W),
    (LCPD, "LCPD (excluded)", W),
    (LCPD, "LCPD; not likely", W),
    (HIRSCHSPRUNG, "Hirschsprung disease, unlikely", W),
    (HIRSCHSPRUNG, "Hirschsprung disease (ruled out)", W),
    (HIRSCHSPRUNG, "Hirschsprung disease; excluded", W),
    (HIRSCHSPRUNG, "Hirschsprung disease or meconium ileus, unlikely", W),
    # --- a side segment with a content word negates that other thing, not the target
    (PML, "PML (not toxoplasmosis)", C),
    (PML, "PML (no toxoplasmosis)", C),
    (PML, "PML, not toxoplasmosis", C),
    (PML, "PML (no complications)", C),
    (PML, "PML, not confirmed", C),
    (PML, "PML (toxoplasmosis ruled out)", C),
    (PML, "Progressive multifocal leukoencephalopathy (not HIV encephalopathy)", C),
    (BPPV, "BPPV (not vestibular neuritis)", C),
    (BPPV, "BPPV, not Meniere disease", C),
    (NRDS, "NRDS (not transient tachypnea of the newborn)", C),
    (LCPD, "Legg-Calve-Perthes disease (no SCFE)", C),
    (LCPD, "LCPD, not septic arthritis", C),
    (HIRSCHSPRUNG, "Hirschsprung disease (no enterocolitis)", C),
    (HIRSCHSPRUNG, "Hirschsprung disease, meconium ileus ruled out", C),
    # --- medqa-0002, "Progressive multifocal encephalopathy (PML)" -----------------------
    # negated, the trailing "(PML)" must not carry them (wrong before the negation rule)
    (PML, "MRI shows no PML (PML)", W),
    (PML, "Findings: ruled out (PML)", W),
    (PML, "Not progressive multifocal encephalopathy (PML)", W),
    (PML, "No evidence of PML (PML)", W),
    # negated, in other words
    (PML, "no PML", W),
    (PML, "not PML", W),
    (PML, "ruled out PML", W),
    (PML, "PML excluded", W),
    (PML, "negative for PML", W),
    (PML, "without PML", W),
    (PML, "No progressive multifocal leukoencephalopathy", W),
    # right, plain or abbreviated (the target's trailing "(PML)" names it)
    (PML, "PML", C),
    (PML, "**PML**", C),
    (PML, "Progressive multifocal encephalopathy", C),
    (PML, "Progressive multifocal encephalopathy (PML)", C),
    (PML, "Progressive multifocal leukoencephalopathy", C),  # the usual spelling
    (PML, "PML (progressive multifocal leukoencephalopathy)", C),
    (PML, "Progressive multifocal leukoencephalopathy (PML)", C),
    (PML, "PML, not cerebral toxoplasmosis", C),  # the first listed diagnosis decides
    # hedged
    (PML, "consistent with PML", C),
    (PML, "compatible with PML", C),
    (PML, "suggestive of PML", C),
    (PML, "in keeping with PML", C),
    (PML, "Likely PML", C),
    (PML, "Probable progressive multifocal leukoencephalopathy", C),
    (PML, "Indicative of PML", C),
    (PML, "Diagnostic of PML", C),
    (PML, "Highly suggestive of PML", C),
    (PML, "Concerning for PML", C),
    (PML, "Most consistent with PML", C),
    (PML, "Findings consistent with PML", C),  # the lead "findings" goes with the hedge
    (PML, "Presumptive PML", C),
    (PML, "Likely: PML", C),  # a hedge followed by a colon
    (PML, "Presumptive diagnosis: PML", C),
    (PML, "Findings not consistent with PML", W),
    (PML, "Unlikely: PML", W),
    # near misses
    (PML, "HIV encephalopathy", W),
    (PML, "Cerebral toxoplasmosis", W),
    (PML, "Primary CNS lymphoma", W),
    (PML, "Cerebral toxoplasmosis or PML", W),  # first listed only
    # --- medqa-0003, "Hirschsprung disease" ----------------------------------------------
    (HIRSCHSPRUNG, "Hirschsprung disease", C),
    (HIRSCHSPRUNG, "Hirschsprung's disease", C),
    (HIRSCHSPRUNG, "consistent with Hirschsprung disease", C),
    (HIRSCHSPRUNG, "compatible with Hirschsprung disease", C),
    (HIRSCHSPRUNG, "suggestive of Hirschsprung disease", C),
    (HIRSCHSPRUNG, "in keeping with Hirschsprung disease", C),
    (HIRSCHSPRUNG, "Most likely Hirschsprung disease", C),
    (HIRSCHSPRUNG, "Suspected Hirschsprung's disease", C),
    (HIRSCHSPRUNG, "Probably compatible with Hirschsprung disease", C),  # two hedges
    (HIRSCHSPRUNG, "Compatible with Hirschsprung disease; meconium ileus less likely", C),
    (HIRSCHSPRUNG, "Picture suggestive of Hirschsprung disease", C),
    (HIRSCHSPRUNG, "The clinical picture is characteristic of Hirschsprung disease", C),
    (HIRSCHSPRUNG, "Not Hirschsprung disease", W),
    (HIRSCHSPRUNG, "No Hirschsprung disease", W),
    (HIRSCHSPRUNG, "Hirschsprung disease ruled out", W),
    (HIRSCHSPRUNG, "Hirschsprung disease excluded", W),
    (HIRSCHSPRUNG, "compatible with meconium ileus", W),
    (HIRSCHSPRUNG, "Meconium ileus", W),
    (HIRSCHSPRUNG, "Functional constipation", W),
    # --- medqa-0054, "Benign Paroxysmal Positional Vertigo (BPPV)" -----------------------
    (BPPV, "BPPV", C),
    (BPPV, "Benign paroxysmal positional vertigo", C),
    (BPPV, "benign paroxysmal positional vertigo (BPPV)", C),
    (BPPV, "Benign paroxysmal positional vertigo, left posterior canal", C),
    (BPPV, "suggestive of BPPV", C),
    (BPPV, "Suspicion of BPPV", C),
    (BPPV, "in keeping with benign paroxysmal positional vertigo", C),
    (BPPV, "Negative for BPPV (BPPV)", W),
    (BPPV, "No BPPV", W),
    (BPPV, "BPPV ruled out", W),
    (BPPV, "Vestibular neuritis", W),
    (BPPV, "Meniere disease", W),
    # --- medqa-0097, "Neonatal Respiratory Distress Syndrome (NRDS)" ---------------------
    (NRDS, "NRDS", C),
    (NRDS, "Neonatal respiratory distress syndrome", C),
    (NRDS, "in keeping with neonatal respiratory distress syndrome", C),
    (NRDS, "compatible with NRDS", C),
    (NRDS, "Without NRDS (NRDS)", W),
    (NRDS, "No NRDS", W),
    (NRDS, "Transient tachypnea of the newborn", W),
    (NRDS, "Meconium aspiration syndrome", W),
    (NRDS, "Acute respiratory distress syndrome", W),
    # --- medqa-0104, "Legg-Calvé-Perthes disease (LCPD)" ---------------------------------
    (LCPD, "LCPD", C),
    (LCPD, "Legg-Calve-Perthes disease", C),
    (LCPD, "Legg\u2013Calv\u00e9\u2013Perthes disease", C),
    (LCPD, "Legg-Calvé-Perthes disease (LCPD)", C),
    (LCPD, "compatible with Legg-Calve-Perthes disease", C),
    (LCPD, "suggestive of LCPD", C),
    (LCPD, "Probably LCPD", C),
    (LCPD, "Presentation most consistent with Legg-Calve-Perthes disease", C),
    (LCPD, "Findings excluded (LCPD)", W),
    (LCPD, "Ruled out LCPD (LCPD)", W),
    (LCPD, "negative for LCPD", W),
    (LCPD, "Slipped capital femoral epiphysis", W),
    (LCPD, "Transient synovitis of the hip", W),
    # --- other cases ----------------------------------------------------------------------
    (MG, "Myasthenia gravis", C),
    (MG, "MG", C),  # the target's initials
    (MG, "Myasthenia gravs", C),
    (MG, "compatible with myasthenia gravis", C),
    (MG, "Possible myasthenia gravis", C),
    (MG, "Possibly myasthenia gravis", C),
    (MG, "not myasthenia gravis", W),
    (MG, "Not MG", W),
    (MG, "Lambert-Eaton myasthenic syndrome", W),
    (PSC, "PSC", C),  # the target's initials
    (PSC, "suggestive of primary sclerosing cholangitis", C),
    (PSC, "Presumed primary sclerosing cholangitis", C),
    (PSC, "No primary sclerosing cholangitis", W),
    (PSC, "Primary biliary cholangitis", W),
    (PSC, "Secondary sclerosing cholangitis", W),
    (CDIFF, "C. difficile colitis", C),
    (CDIFF, "compatible with C. difficile colitis", C),
    (CDIFF, "No C. difficile colitis", W),
    (CDIFF, "Ischemic colitis", W),
    (OCHRONOSIS, "C", C),
    (OCHRONOSIS, "Exogenous ochronosis", C),
    (OCHRONOSIS, "compatible with exogenous ochronosis", C),
    (OCHRONOSIS, "not exogenous ochronosis", W),
    (OCHRONOSIS, "Exogenous ochronosis ruled out", W),
    (OCHRONOSIS, "C, ruled out", W),  # a negated option letter chooses nothing
    (OCHRONOSIS, "Exogenous ochronosis, ruled out", W),
    (OCHRONOSIS, "Exogenous ochronosis (ruled out)", W),
    (OCHRONOSIS, "Exogenous ochronosis (not contact dermatitis)", C),
    (OCHRONOSIS, "Exogenous ochronosis, not contact dermatitis", C),
    (OCHRONOSIS, "C, not contact dermatitis", C),
    (OCHRONOSIS, "Exogenous ochronsis (not contact dermatitis)", C),  # a typo: fuzzy
    (OCHRONOSIS, "Indicative of exogenous ochronosis", C),
    (OCHRONOSIS, "Contact dermatitis", W),
    (OCHRONOSIS, "consistent with contact dermatitis", W),
]


@pytest.fixture(scope="module")
def cases() -> dict[str, Case]:
    from clinenv.datasets import load_cases

    skip_without_shared_data(MEDQA_FILE, NEJM_FILE)
    loaded = {}
    for name in (MEDQA_FILE, NEJM_FILE):
        loaded.update({c.case_id: c for c in load_cases(SHARED_DATA / name)})
    return loaded


def test_the_targets_are_those_the_table_was_written_for(cases) -> None:
    assert {case_id: cases[case_id].target.text for case_id in TARGETS} == TARGETS


@pytest.mark.parametrize(("case_id", "answer", "expected"), TABLE,
                         ids=[f"{c}:{a}" for c, a, _ in TABLE])
def test_verdict_table(cases, case_id: str, answer: str, expected: str) -> None:
    assert score_answer(answer, cases[case_id]).verdict == expected


class _Codes:
    """A small ICD map: the PML target and its spellings, and toxoplasmosis."""

    CODES = {"pml": "A81.2", "progressive multifocal encephalopathy": "A81.2",
             "progressive multifocal leukoencephalopathy": "A81.2", "toxoplasmosis": "B58.9"}

    def code(self, text: str) -> str | None:
        return self.CODES.get(normalize_answer(text))


ICD_TABLE: list[tuple[str, str, str]] = [  # (answer, verdict, method) on medqa-0002
    ("PML", C, "icd"),
    ("PML, toxoplasmosis", C, "icd"),
    ("PML (not toxoplasmosis)", C, "icd"),
    ("Toxoplasmosis, PML", W, "icd"),
    ("PML, excluded", W, "none"),  # the negated code is not read; the rules say wrong
    ("PML (ruled out)", W, "none"),
    ("No PML (PML)", W, "none"),
]


@pytest.mark.parametrize(("answer", "expected", "method"), ICD_TABLE,
                         ids=[a for a, _, _ in ICD_TABLE])
def test_icd_table(cases, answer: str, expected: str, method: str) -> None:
    score = score_answer(answer, cases[PML], icd_map=_Codes())
    assert (score.verdict, score.method) == (expected, method)


#: Answers built on every MedQA and NEJM target T, and their verdicts.
WRONG_FORMS = ("{T}, unlikely", "{T}, ruled out", "{T} (ruled out)", "not {T}")
RIGHT_FORMS = ("{T}", "{T} (no complications)", "{T}, not toxoplasmosis",
               "Indicative of {T}", "Findings consistent with {T}")
#: (case id, use the candidates): the 107 MedQA cases, the 15 NEJM cases with and without
#: their options.
EVERY_TARGET = [(f"medqa-{n:04d}", False) for n in range(1, 108)] + [
    (f"nejm-{n:04d}", with_options) for n in range(1, 16) for with_options in (True, False)]


@pytest.mark.parametrize(("case_id", "use_candidates"), EVERY_TARGET,
                         ids=[f"{c}:{'K' if k else 'free'}" for c, k in EVERY_TARGET])
def test_every_target(cases, case_id: str, use_candidates: bool) -> None:
    case = cases[case_id]
    assert bool(case.candidates) == case_id.startswith("nejm")
    target = case.target.text
    verdicts = {form: score_answer(form.format(T=target), case,
                                   use_candidates=use_candidates).verdict
                for form in WRONG_FORMS + RIGHT_FORMS}
    expected = {**{form: W for form in WRONG_FORMS}, **{form: C for form in RIGHT_FORMS}}
    assert verdicts == expected, target


def test_every_case_is_covered(cases) -> None:
    assert {c for c, _ in EVERY_TARGET} == set(cases)


def test_the_table_covers_every_hedge() -> None:
    answers = " | ".join(a.lower() for _, a, v in TABLE if v == C)
    assert all(hedge in answers for hedge in HEDGES), [
        h for h in HEDGES if h not in answers]
