"""Hand-written verdicts on real AgentClinic cases (:func:`clinenv.scoring.score_answer`).

Each row is (case id, answer, verdict), worked out by hand from the rules of
:mod:`clinenv.scoring`, not read off the scorer:

- the negation rule holds on every match path: an answer that negates or rules out the
  target is wrong, however it names it (whole text, the target's bracketed
  abbreviation, its initials, a fuzzy spelling, an option);
- every hedge of :data:`clinenv.scoring.HEDGES` in front of the first diagnosis is
  dropped: ``"compatible with X"`` scores as ``"X"``;
- an abbreviation alone scores as the target when the target ends in it (``"PML"`` for
  ``"Progressive multifocal encephalopathy (PML)"``) or when it gives the target's
  initials (``"MG"`` for ``"Myasthenia gravis"``);
- a trailing ``"(ABBR)"`` names the whole answer only when the text before it can
  spell the abbreviation (its letters in order, the first starting the text: Schwartz &
  Hearst 2003), so ``"Toxoplasmosis (PML)"`` is toxoplasmosis, wrong;
- a different diagnosis is wrong, however close (no synonym table: synonyms such as
  "Perthes disease" are left to a judge, and wrong here).

The four MedQA targets that end in an abbreviation are medqa-0002 (PML), medqa-0054
(BPPV), medqa-0097 (NRDS) and medqa-0104 (LCPD). Skipped without the shared AgentClinic
files (conftest).
"""

from __future__ import annotations

import pytest
from conftest import MEDQA_FILE, NEJM_FILE, SHARED_DATA, skip_without_shared_data

from clinenv.cases import Case
from clinenv.scoring import HEDGES, score_answer

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
    # --- another disease behind the target's abbreviation: the text before a trailing
    # "(ABBR)" must be able to spell it (Schwartz & Hearst), else "(ABBR)" names nothing
    (PML, "Toxoplasmosis (PML)", W),
    (PML, "Cerebral toxoplasmosis (PML)", W),
    (PML, "Progressive multifocal leukoencephalopathy (PML)", C),
    (BPPV, "Vestibular neuritis (BPPV)", W),
    (BPPV, "Meniere disease (BPPV)", W),
    (NRDS, "Transient tachypnea of the newborn (NRDS)", W),
    (NRDS, "Neonatal respiratory distress syndrome (NRDS)", C),
    (LCPD, "Perthes disease (LCPD)", W),
    (LCPD, "Slipped capital femoral epiphysis (LCPD)", W),
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


def test_the_table_covers_every_hedge() -> None:
    answers = " | ".join(a.lower() for _, a, v in TABLE if v == C)
    assert all(hedge in answers for hedge in HEDGES), [
        h for h in HEDGES if h not in answers]
