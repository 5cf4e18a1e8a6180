"""Tests for the deterministic scorer :mod:`clinenv.scoring`."""

from __future__ import annotations

import json

import pytest

from clinenv.cases import Case, Target
from clinenv.scoring import (
    DIAGNOSIS_LINKS,
    HEDGES,
    Score,
    _bare_negation,
    _defines,
    is_abstention,
    normalize_answer,
    score_answer,
)
from clinenv.testing.data import skip_without_shared_data

NEJM_OPTIONS = (
    "Contact dermatitis",
    "Eczematous drug eruption",
    "Exogenous ochronosis",
    "Lichen planus pigmentosus",
    "Solar lentigenes",
)


def free_case(target: str) -> Case:
    return Case(case_id="t-1", dataset="test", objective="Diagnose.", target=Target(text=target))


def option_case(index: int = 2, options: tuple[str, ...] = NEJM_OPTIONS) -> Case:
    return Case(
        case_id="t-2",
        dataset="test",
        objective="Diagnose.",
        candidates=options,
        target=Target(text=options[index], option_index=index),
    )


def verdict(answer: str | None, target: str) -> str:
    return score_answer(answer, free_case(target)).verdict


# --- normalization ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("**Acute pancreatitis**", "acute pancreatitis"),
        ("*Acute pancreatitis*.", "acute pancreatitis"),
        ("### Diagnosis ready: acute pancreatitis", "acute pancreatitis"),
        ("**DIAGNOSIS READY:** **Acute pancreatitis**", "acute pancreatitis"),
        ("Final diagnosis: `Acute  pancreatitis`", "acute pancreatitis"),
        ('"The acute pancreatitis"', "acute pancreatitis"),
        ("Graves\u2019 disease", "graves disease"),
        ("Crohn's disease", "crohn disease"),
        ("Legg\u2013Calv\u00e9\u2013Perthes disease", "legg-calve-perthes disease"),
        ("An   abscess", "abscess"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


# --- free answers -------------------------------------------------------------------


def test_exact_and_case() -> None:
    score = score_answer("Myasthenia gravis", free_case("Myasthenia gravis"))
    assert score == Score("correct", 100.0, "myasthenia gravis", "myasthenia gravis", "exact")
    assert score.correct
    assert verdict("MYASTHENIA GRAVIS", "Myasthenia gravis") == "correct"


@pytest.mark.parametrize(
    "answer",
    [
        "**Acute pancreatitis**",
        "*Acute pancreatitis*.",
        "**DIAGNOSIS READY:** **Acute pancreatitis**",
        "### Diagnosis ready: acute pancreatitis",
        "_acute pancreatitis_",
    ],
)
def test_markdown_b05(answer: str) -> None:
    assert verdict(answer, "Acute pancreatitis") == "correct"


def test_possessives_and_apostrophes() -> None:
    assert verdict("Graves disease", "Graves' disease") == "correct"
    assert verdict("Crohn disease", "Crohn's disease") == "correct"
    assert verdict("Hirschsprung disease", "Hirschsprung\u2019s disease") == "correct"


def test_acronym_both_ways() -> None:
    assert verdict("COPD", "Chronic obstructive pulmonary disease") == "correct"
    assert verdict("chronic obstructive pulmonary disease", "COPD") == "correct"
    score = score_answer("**COPD**", free_case("chronic obstructive pulmonary disease"))
    assert score.method == "acronym"
    assert score.matched == "chronic obstructive pulmonary disease"
    # initials only for an all-caps 2-6 letter answer
    assert verdict("copd", "Chronic obstructive pulmonary disease") == "wrong"


def test_parenthetical_abbreviation() -> None:
    target = "Systemic lupus erythematosus (SLE)"
    for answer in ("SLE", "systemic lupus erythematosus", "Systemic Lupus Erythematosus (SLE)"):
        assert verdict(answer, target) == "correct", answer
    assert score_answer("SLE", free_case(target)).method == "acronym"
    assert verdict("Systemic lupus erythematosus (SLE)", "SLE") == "correct"
    assert verdict("Lupus", target) == "wrong"


def test_empty_and_none_are_unscored() -> None:
    for answer in (None, "", "   \n", "**", "DIAGNOSIS READY:"):
        score = score_answer(answer, free_case("Asthma"))
        assert score.verdict == "unscored", answer
        assert not score.correct
        assert score.method == "none"


def test_negation_is_wrong() -> None:
    assert verdict("not myasthenia gravis", "Myasthenia gravis") == "wrong"
    assert verdict("No evidence of myasthenia gravis", "Myasthenia gravis") == "wrong"
    assert verdict("Myasthenia gravis ruled out", "Myasthenia gravis") == "wrong"


@pytest.mark.parametrize(("answer", "target", "expected"), [
    # a negation outside the part that names the target: on the abbreviation path too
    ("No SLE (SLE)", "Systemic lupus erythematosus (SLE)", "wrong"),
    ("Ruled out (SLE)", "Systemic lupus erythematosus (SLE)", "wrong"),
    ("Not systemic lupus erythematosus (SLE)", "Systemic lupus erythematosus (SLE)", "wrong"),
    ("Not COPD", "Chronic obstructive pulmonary disease", "wrong"),
    ("No COPD (COPD)", "COPD", "wrong"),
    # an abbreviation is read as what it stands for, "non" included
    ("NHL", "Non-Hodgkin lymphoma (NHL)", "correct"),
    ("Non-Hodgkin lymphoma (NHL)", "NHL", "correct"),
    ("Non-Hodgkin lymphoma", "NHL", "correct"),
    ("NAFLD", "Non-alcoholic fatty liver disease", "correct"),
    ("Non-alcoholic fatty liver disease", "NAFLD", "correct"),
    ("No NHL", "Non-Hodgkin lymphoma (NHL)", "wrong"),
    # the cues must be the same, not only both present or both absent
    ("Not non-Hodgkin lymphoma", "Non-Hodgkin lymphoma", "wrong"),
    ("Small cell lung carcinoma", "Non-small cell lung carcinoma", "wrong"),
    ("Non-small cell lung carcinoma", "Small cell lung carcinoma", "wrong"),
    # the first listed diagnosis decides; a side segment with a content word is not read
    ("Chronic obstructive pulmonary disease, not asthma", "COPD", "correct"),
    # ... whatever the punctuation: a parenthetical is a side segment too
    ("SLE (not drug-induced)", "Systemic lupus erythematosus (SLE)", "correct"),
    ("SLE, not drug-induced", "Systemic lupus erythematosus (SLE)", "correct"),
    ("COPD (not asthma)", "Chronic obstructive pulmonary disease", "correct"),
    ("Myasthenia gravs (not Lambert-Eaton)", "Myasthenia gravis", "correct"),
    ("Non-Hodgkin lymphoma (not Hodgkin)", "NHL", "correct"),
    # a bare negation in a side segment negates the answer, on every path
    ("SLE (ruled out)", "Systemic lupus erythematosus (SLE)", "wrong"),
    ("SLE, unlikely", "Systemic lupus erythematosus (SLE)", "wrong"),
    ("COPD (ruled out)", "Chronic obstructive pulmonary disease", "wrong"),
    ("COPD, probably not", "Chronic obstructive pulmonary disease", "wrong"),
    ("Myasthenia gravs, unlikely", "Myasthenia gravis", "wrong"),  # fuzzy
    ("Myasthenia gravs (excluded)", "Myasthenia gravis", "wrong"),
    ("Systemic lupus erythematosus (SLE); not likely", "SLE", "wrong"),
    # a cue of the target in the answer's own parenthetical is the target's
    ("NHL (non-Hodgkin lymphoma)", "Non-Hodgkin lymphoma", "correct"),
    # ... but not in a later list item, another diagnosis
    ("Hodgkin lymphoma, non-Hodgkin lymphoma", "Non-Hodgkin lymphoma", "wrong"),
    # a separator that occurs in the target is not split on: the cue is main text
    ("Hand, foot and mouth disease, ruled out", "Hand, foot and mouth disease", "wrong"),
    ("Hand, foot and mouth disease (ruled out)", "Hand, foot and mouth disease", "wrong"),
    ("Hand, foot and mouth disease or measles", "Hand, foot and mouth disease", "correct"),
    ("Hand, foot and mouth disease (HFMD)", "HFMD", "correct"),
])
def test_one_negation_rule_on_every_path(answer: str, target: str, expected: str) -> None:
    assert verdict(answer, target) == expected


@pytest.mark.parametrize(("segment", "bare"), [
    ("ruled out", True), ("unlikely", True), ("not likely", True), ("probably not", True),
    ("excluded", True), ("negative", True), ("absent", True), ("(ruled out)", True),
    ("has been ruled out", True), ("is unlikely", True), ("diagnosis excluded", True),
    ("ruled out by MRI", True), ("unlikely given the CD4 count", True),
    ("not toxoplasmosis", False), ("no complications", False), ("not confirmed", False),
    ("no SCFE", False), ("toxoplasmosis ruled out", False), ("negative for JC virus", False),
    ("not consistent with toxoplasmosis", False), ("not on treatment", False),
    ("non-HIV", False), ("less likely", False), ("left posterior canal", False), ("", False),
])
def test_bare_negation(segment: str, bare: bool) -> None:
    assert _bare_negation(segment) is bare


@pytest.mark.parametrize(("short", "long", "defines"), [
    ("PML", "progressive multifocal leukoencephalopathy", True),
    ("BPPV", "benign paroxysmal positional vertigo", True),
    ("LCPD", "legg-calve-perthes disease", True),  # a hyphen splits words
    ("NRDS", "neonatal respiratory distress syndrome", True),
    ("HFMD", "hand, foot and mouth disease", True),  # content words
    ("T2DM", "type 2 diabetes mellitus", True),
    ("PML", "toxoplasmosis", False),
    ("PML", "primary cns lymphoma", False),  # letters in order are not enough
    ("PML", "paraneoplastic limbic encephalitis", False),
    ("NRDS", "neonatal sepsis with respiratory distress", False),
    ("PML", "no pml", False),
    ("", "progressive multifocal leukoencephalopathy", False),
])
def test_defines_needs_the_initials(short: str, long: str, defines: bool) -> None:
    assert _defines(short, long) is defines


def test_negation_rule_on_the_option_and_icd_paths() -> None:
    options = ("Toxoplasmosis", "Progressive multifocal leukoencephalopathy (PML)", "Lymphoma")
    case = option_case(1, options)
    assert score_answer("PML", case).verdict == "correct"
    assert score_answer("No PML (PML)", case).verdict == "wrong"

    class Codes:
        def code(self, text: str) -> str | None:
            return {"pml": "A81.2", "toxoplasmosis": "B58.9"}.get(normalize_answer(text))

    target = free_case("Progressive multifocal leukoencephalopathy (PML)")
    assert score_answer("PML", target, icd_map=Codes()).method == "icd"
    for negated in ("MRI shows no PML (PML)", "PML, excluded", "PML (ruled out)"):
        score = score_answer(negated, target, icd_map=Codes())
        assert (score.verdict, score.method) == ("wrong", "none"), negated
    score = score_answer("PML (not toxoplasmosis)", target, icd_map=Codes())
    assert (score.verdict, score.method) == ("correct", "icd")
    # the option path: a negated option, a letter included, is not chosen
    assert score_answer("PML, ruled out", case).verdict == "wrong"
    assert score_answer("B, ruled out", case).verdict == "wrong"
    assert score_answer("B, not toxoplasmosis", case).verdict == "correct"
    assert score_answer("PML (not toxoplasmosis)", case).verdict == "correct"


@pytest.mark.parametrize("hedge", HEDGES)
def test_every_hedge_is_dropped(hedge: str) -> None:
    assert verdict(f"{hedge.capitalize()} myasthenia gravis", "Myasthenia gravis") == "correct"
    assert verdict(f"{hedge} SLE", "Systemic lupus erythematosus (SLE)") == "correct"
    assert verdict(f"{hedge} Lambert-Eaton syndrome", "Myasthenia gravis") == "wrong"


@pytest.mark.parametrize("answer", [
    "Likely: myasthenia gravis", "Probable diagnosis: myasthenia gravis",
    "Findings consistent with myasthenia gravis", "Findings are consistent with MG",
    "The clinical picture is suggestive of myasthenia gravis",
    "Presentation most consistent with myasthenia gravis",
    "Clinical features highly suggestive of myasthenia gravis",
])
def test_hedge_colon_and_lead(answer: str) -> None:
    assert verdict(answer, "Myasthenia gravis") == "correct"


@pytest.mark.parametrize("answer", [
    "Findings not consistent with myasthenia gravis", "Unlikely: myasthenia gravis",
    "Findings: myasthenia gravis ruled out", "Findings myasthenia gravis",
])
def test_hedge_lead_keeps_negation(answer: str) -> None:
    assert verdict(answer, "Myasthenia gravis") == "wrong"


@pytest.mark.parametrize("link", DIAGNOSIS_LINKS)
def test_the_record_reader_reads_every_link_hedge(link: str) -> None:
    """One list: the scripted doctor names a diagnosis after each link hedge of the
    scorer (:data:`clinenv.scoring.DIAGNOSIS_LINKS`, part of :data:`HEDGES`)."""
    from clinenv.agents.evidence_reading import named_diagnosis

    assert link in HEDGES
    assert named_diagnosis(f"MRI: white matter lesions {link} PML. Biopsy pending") == "PML"


def test_numbers_and_laterality_do_not_fuzzy_match() -> None:
    assert verdict("Type 1 diabetes mellitus", "Type 2 diabetes mellitus") == "wrong"
    assert verdict("Type I diabetes mellitus", "Type 1 diabetes mellitus") == "correct"
    assert verdict("Left ovarian torsion", "Right ovarian torsion") == "wrong"
    assert verdict("Hemophilia B", "Hemophilia A") == "wrong"
    assert verdict("Hemophilia", "Hemophilia A") == "wrong"
    assert (
        verdict(
            "Rupture of a flexor digitorum profundus tendon",
            "Rupture of the flexor digitorum profundus tendon",
        )
        == "correct"
    )
    assert verdict("Chronic myelogenous leukemia", "Acute myelogenous leukemia") == "wrong"


def test_hedged_list_scores_first_item_only() -> None:
    target = "Myasthenia gravis"
    assert verdict("Myasthenia gravis or Lambert-Eaton syndrome", target) == "correct"
    assert verdict("Lambert-Eaton syndrome or myasthenia gravis", target) == "wrong"
    assert verdict("Myasthenia gravis vs. botulism", target) == "correct"
    assert verdict("Botulism, myasthenia gravis", target) == "wrong"
    assert verdict("Likely myasthenia gravis", target) == "correct"
    # a separator that is part of the target is not split on
    assert verdict("Hand, foot and mouth disease", "Hand, foot and mouth disease") == "correct"


def test_typo_and_unrelated() -> None:
    score = score_answer("Myasthenia gravs", free_case("Myasthenia gravis"))
    assert score.verdict == "correct"
    assert score.method == "fuzzy"
    assert 90 <= score.similarity < 100
    score = score_answer("Migraine", free_case("Myasthenia gravis"))
    assert score.verdict == "wrong"
    assert score.matched is None
    assert score.similarity < 90


def test_threshold_is_a_parameter() -> None:
    case = free_case("Myasthenia gravis")
    assert score_answer("Myasthenia gravs", case, threshold=99).verdict == "wrong"


# --- candidates K -------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    ["C", "c", "(C)", "C.", "C)", "Option C", "Answer: C", "**C**", "DIAGNOSIS READY: C"],
)
def test_option_letter_forms(answer: str) -> None:
    score = score_answer(answer, option_case(2))
    assert score.verdict == "correct", answer
    assert score.method == "option"
    assert score.matched == "Exogenous ochronosis"


def test_option_letter_a_is_index_zero() -> None:
    assert score_answer("A", option_case(0)).correct
    assert score_answer("B", option_case(0)).verdict == "wrong"


def test_option_text() -> None:
    for answer in ("Exogenous ochronosis", "exogenus ochronosis", "C. Exogenous ochronosis"):
        score = score_answer(answer, option_case(2))
        assert score.verdict == "correct", answer
        assert score.method == "option"


def test_wrong_option() -> None:
    score = score_answer("Contact dermatitis", option_case(2))
    assert score.verdict == "wrong"
    assert score.method == "option"
    assert score.matched == "Contact dermatitis"
    assert score_answer("D", option_case(2)).verdict == "wrong"
    assert score_answer("C. Contact dermatitis", option_case(2)).verdict == "wrong"


def test_answer_matching_no_option_is_scored_as_free_text() -> None:
    score = score_answer("Migraine", option_case(2))
    assert score.verdict == "wrong"
    assert score.method == "none"
    assert score_answer("F", option_case(2)).verdict == "wrong"
    assert score_answer("not exogenous ochronosis", option_case(2)).verdict == "wrong"


def test_option_tie_is_not_a_choice() -> None:
    options = ("Constrictive pericarditis", "Effusive-constrictive pericarditis", "Tamponade")
    assert score_answer("Constrictive pericarditis", option_case(0, options)).correct
    assert score_answer("Effusive-constrictive pericarditis", option_case(0, options)).verdict == (
        "wrong"
    )
    # "Pericarditis" matches both pericarditis options equally well: no option is chosen
    assert score_answer("Pericarditis", option_case(0, options)).method == "none"


# --- the gold answer always scores full marks ---------------------------------------


def _records(name: str) -> list[dict]:
    path = skip_without_shared_data(name) / name
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_gold_medqa_targets_score_correct() -> None:
    records = _records("agentclinic_medqa.jsonl")
    assert len(records) == 107
    for number, record in enumerate(records):
        target = record["OSCE_Examination"]["Correct_Diagnosis"]
        case = Case(
            case_id=f"medqa-{number}", dataset="medqa", objective="", target=Target(text=target)
        )
        score = score_answer(case.target.text, case)
        assert score.verdict == "correct" and score.method == "exact", target


def test_gold_nejm_options_score_correct() -> None:
    records = _records("agentclinic_nejm.jsonl")
    assert len(records) == 15
    for number, record in enumerate(records):
        options = tuple(answer["text"] for answer in record["answers"])
        for index, option in enumerate(options):
            case = Case(
                case_id=f"nejm-{number}",
                dataset="nejm",
                objective="",
                candidates=options,
                target=Target(text=option, option_index=index),
            )
            assert score_answer(case.target.text, case).correct, option
            # every other option is a wrong choice
            for other_index, other in enumerate(options):
                if other_index != index:
                    assert score_answer(other, case).verdict == "wrong", (other, option)
            assert score_answer(option, free_case(option)).correct, option


@pytest.mark.parametrize(
    "answer",
    ["Undetermined", "I am not sure.", "**Unknown**", "I cannot determine the diagnosis",
     "Insufficient information to make a diagnosis", "Diagnosis unknown", "Need more tests"],
)
def test_abstentions_are_unscored(answer) -> None:
    score = score_answer(answer, free_case("Myasthenia gravis"))
    assert (score.verdict, score.abstained) == ("unscored", True)
    assert is_abstention(answer)


def test_diagnoses_with_abstention_words_are_not_abstentions() -> None:
    assert not is_abstention("Fever of unknown origin")
    assert score_answer("Fever of unknown origin",
                        free_case("Fever of unknown origin")).verdict == "correct"
    assert not score_answer("Gout", free_case("Gout")).abstained
