"""The user-supplied ICD mapping (clinenv.icd_map) and the scorer's hook.

Expected verdicts are read off the hand-written map below: a synonym pair the plain
scorer calls wrong becomes correct only through a shared code, two terms under different
codes are wrong (ICD-10 J18.9 and ICD-9 486 are different codes), and anything
the map does not know is scored exactly as without the map.
"""

from __future__ import annotations

import pytest

from clinenv.cases import Case
from clinenv.icd_map import IcdMap, IcdMapError, load_icd_map, normalize_code
from clinenv.scoring import score_answer

MAP_TEXT = (
    "# clinenv.icd_map/1: code<TAB>term<TAB>term...\n"
    "\n"
    "A04.72\tClostridioides difficile infection\tC. difficile colitis\tCDI\n"
    "I26.99\tPulmonary embolism\n"
    "I26.99\tPE\tAcute pulmonary embolism\n"          # a code on two lines: merged
    "E11.9\tType 2 diabetes mellitus\n"
    "E10.9\tType 1 diabetes mellitus\n"
    "J18.9\tPneumonia\n"
    "486\tPneumonia, organism unspecified\n"        # an ICD-9 code
)


def case(target: str, candidates=None, index=None) -> Case:
    return Case(case_id="c1", dataset="synthetic", objective="o",
                target={"text": target, "option_index": index}, candidates=candidates)


@pytest.fixture
def icd(tmp_path) -> IcdMap:
    path = tmp_path / "icd.tsv"
    path.write_text(MAP_TEXT, encoding="utf-8")
    return load_icd_map(path)


def test_the_file_maps_each_term_and_code_to_one_canonical_code(icd):
    assert icd.codes == {"A0472", "I2699", "E119", "E109", "J189", "486"}
    assert icd.code("**C. difficile colitis.**") == "A0472"
    assert icd.code("the Acute Pulmonary Embolism") == "I2699"
    assert icd.code("i26.99") == icd.code("I2699") == "I2699"
    assert icd.code("Sepsis") is None
    # 10 terms; 5 codes written with a dot (two spellings each) and "486" (one): 10 + 11
    assert len(icd) == 21


@pytest.mark.parametrize(("raw", "code"), [("i26.99", "I2699"), ("V45.81", "V4581"),
                                           ("486", "486"), (" J 18.9 ", "J189"),
                                           ("PE", None), ("12", None), ("I26.99.12345", None)])
def test_normalize_code(raw, code):
    assert normalize_code(raw) == code


@pytest.mark.parametrize(("answer", "target", "plain", "with_map", "method"), [
    # synonyms: wrong for the plain scorer, one code with the map
    ("C. difficile colitis", "Clostridioides difficile infection", "wrong", "correct", "icd"),
    ("CDI", "Clostridioides difficile infection", "correct", "correct", "icd"),  # initials
    ("A04.72", "Clostridioides difficile infection", "wrong", "correct", "icd"),
    ("Acute pulmonary embolism", "Pulmonary embolism", "wrong", "correct", "icd"),
    # first item of a hedged list
    ("Acute pulmonary embolism or pneumonia", "PE", "wrong", "correct", "icd"),
    # different codes decide
    ("Pneumonia", "Pulmonary embolism", "wrong", "wrong", "icd"),
    ("Pneumonia", "Pneumonia, organism unspecified", "wrong", "wrong", "icd"),
    ("Type 1 diabetes mellitus", "Type 2 diabetes mellitus", "wrong", "wrong", "icd"),
    # unknown to the map on one side: the plain rules, unchanged
    ("Sepsis", "Pulmonary embolism", "wrong", "wrong", "none"),
    ("Pulmonary embolsm", "Pulmonary embolism", "correct", "correct", "fuzzy"),
    ("Pulmonary embolism", "Septic shock", "wrong", "wrong", "none"),
])
def test_the_hook_decides_on_codes_only_when_both_sides_map(icd, answer, target, plain,
                                                            with_map, method):
    assert score_answer(answer, case(target)).verdict == plain
    score = score_answer(answer, case(target), icd_map=icd)
    assert (score.verdict, score.method) == (with_map, method)
    if method == "icd":
        assert score.matched == icd.code(answer.split(" or ")[0])


def test_non_answers_stay_unscored_and_the_gold_answer_scores_full_marks(icd):
    for answer in (None, "", "Undetermined", "<single diagnosis>"):
        assert score_answer(answer, case("Pulmonary embolism"), icd_map=icd).verdict \
            == "unscored"
    for term in ("Pulmonary embolism", "Clostridioides difficile infection", "Pneumonia"):
        score = score_answer(term, case(term), icd_map=icd)
        assert (score.verdict, score.similarity) == ("correct", 100.0)


def test_an_option_letter_is_read_as_the_option_never_looked_up(icd):
    options = ("Pneumonia", "Pulmonary embolism", "Asthma")
    c = case("Pulmonary embolism", options, 1)
    assert score_answer("B", c, icd_map=icd).method == "option"
    assert score_answer("B", c, icd_map=icd).verdict == "correct"
    assert score_answer("PE", c, icd_map=icd).verdict == "correct"  # the code decides
    assert score_answer("A", c, icd_map=icd).verdict == "wrong"


@pytest.mark.parametrize(("text", "where"), [
    ("I26.99 Pulmonary embolism\n", "line 1, field 'code'"),         # spaces, not TAB
    ("# c\nI26.99\t\n", "line 2, field 'term 1'"),
    ("I26.99\tPE\nJ18.9\tPneumonia\tpe\n", "line 2, field 'term 2'"),  # PE twice
    ("\n# only comments\n", ": no mapping in the file"),
    ("I26.99\t**\n", "line 1, field 'term 1'"),
    # a code already given as a term of another code
    ("I10\tHypertension\tJ18\nJ18\tPneumonia\n", "line 2, field 'code'"),
])
def test_a_bad_file_names_file_line_and_column(tmp_path, text, where):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(IcdMapError) as err:
        load_icd_map(path)
    assert str(err.value).startswith(str(path))
    assert where in str(err.value)


def test_invalid_utf8_a_folder_and_in_memory_conflicts(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("I26.99\tEmbolie pulmonaire \xe9\n".encode("latin-1"))
    with pytest.raises(IcdMapError, match="invalid UTF-8 byte 0xe9"):
        load_icd_map(path)
    with pytest.raises(IsADirectoryError, match="is a folder"):
        load_icd_map(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_icd_map(tmp_path / "none.tsv")
    with pytest.raises(ValueError, match="names I2699 already, not J189"):
        IcdMap({"I26.99": ["PE"], "J18.9": ["pe"]})
    assert IcdMap({"J18.9": ["Pneumonia"]}).code("pneumonia.") == "J189"
