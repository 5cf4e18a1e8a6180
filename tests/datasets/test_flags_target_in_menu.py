"""Menus that name the diagnosis: the ``target_in_menu`` flag, its stratum in ``clinenv
eval``, the ``target_in_menu`` menu setting, and short requests in exam matching.

Every record here is written by hand in AgentClinic's OSCE schema (no public MedQA or
NEJM case has a menu that names its target; AgentClinic's extended MedQA case 154,
"Varicella" with the key ``Varicella_Specific_Tests``, is the shape copied first).
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from clinenv.cases import Case
from clinenv.cli import main
from clinenv.datasets import load_cases
from clinenv.datasets.flags import menu_names, names_target_in_menu, target_in_menu
from clinenv.env import EGIPEnv
from clinenv.protocol.catalog import Catalog
from clinenv.protocol.exam_matching import ExamMatcher
from clinenv.protocol.menu import menu_setting_cases, neutral_group_names
from clinenv.testing.data import MEDQA_FILE, NEJM_FILE, SHARED_DATA, needs_shared_data
from clinenv.testing.eval_logs import log_lines, write_log


def _case(case_id: str, target: str, tests: dict, physical_exam: dict | None = None) -> Case:
    return Case.model_validate({
        "case_id": case_id, "dataset": "synthetic", "objective": "Evaluate the patient.",
        "patient": {"History": "Two days of fever and an itchy rash."},
        "records": {"physical_exam": physical_exam or {"Vital_Signs": {"Pulse": "90"}},
                    "tests": tests},
        "target": {"text": target}})


#: (target, physical exam, tests, expected flag): several shapes of test and group names.
SHAPES = [
    # a group key named after the target, its test under it (MedQA_Ext case 154's shape)
    ("Varicella", {}, {"Varicella_Specific_Tests": {
        "IgM_Antibodies_to_Varicella_Zoster_Virus": "Positive"}}, True),
    # word order, case and underscores
    ("Systemic lupus erythematosus", {},
     {"ERYTHEMATOSUS_LUPUS_SYSTEMIC_Panel": {"ANA": "1:640", "Anti_dsDNA": "High"}}, True),
    ("Lyme disease", {}, {"Serology": {"lyme-disease_western_blot": {"IgM": "Positive"},
                                        "Hepatitis_Panel": {"HBsAg": "Negative"}}}, True),
    # a test inside a group (the child name is a menu name)
    ("Hepatitis B", {}, {"Blood_Tests": {"Hepatitis_B_Surface_Antigen": "Positive",
                                         "ALT": "412 U/L"}}, True),
    # the main noun phrase (qualifier "Acute" dropped) and a plural s
    ("Acute pancreatitis", {}, {"Pancreatitis_Markers": {"Lipase": "900 U/L"}}, True),
    ("Kidney stones", {}, {"Kidney_Stone_Analysis": "Calcium oxalate"}, True),
    # a bracketed abbreviation, capitals kept
    ("Benign paroxysmal positional vertigo (BPPV)", {},
     {"BPPV_Provocation": "Positive on the right"}, True),
    # an examination section named after the target
    ("Varicella", {"Varicella_Rash_Examination": "Vesicles in crops."},
     {"CBC": {"WBC": "7.1"}}, True),
    # not menu names: a value (that is target_in_records), a depth-3 key
    ("Varicella", {}, {"Serology": "IgM antibodies to varicella-zoster virus"}, False),
    ("Varicella", {}, {"Imaging": {"Chest_CT": {"Varicella_Pneumonitis": "Absent"}}}, False),
    # one shared word is not the target
    ("Iron deficiency anemia", {}, {"Iron_Studies": {"Ferritin": "6 ug/L"}}, False),
    ("Acute kidney injury", {}, {"Kidney_Function_Tests": {"Creatinine": "3.1"}}, False),
    # an abbreviation's letters in lower case are a word, not the abbreviation
    ("Acute lymphoblastic leukemia (ALL)", {}, {"Ball_Valve_Test": "Normal",
                                                  "All_Labs": {"Hb": "9"}}, False),
]


@pytest.mark.parametrize(("target", "exam", "tests", "expected"), SHAPES)
def test_target_in_menu_over_test_and_group_names(target, exam, tests, expected):
    assert target_in_menu(target, exam, tests) is expected


def test_names_target_in_menu_lists_the_names_that_name_it():
    names = ["Vital_Signs", "Varicella_Specific_Tests", "IgM_Antibodies_to_Varicella_Zoster_Virus",
             "CBC"]
    assert names_target_in_menu("Varicella", names) == names[1:3]
    assert names_target_in_menu("", names) == []


def _catalog_names(case: Case) -> set[str]:
    catalog = Catalog(case.records)
    return {e.name for e in catalog} | {e.group for e in catalog if e.group}


def test_menu_names_hold_every_name_and_group_the_catalog_shows():
    from clinenv.protocol.catalog import readable_name

    cases = load_cases("demo") + [_case(f"s{i}", t, tests, exam)
                                  for i, (t, exam, tests, _) in enumerate(SHAPES)]
    if (SHARED_DATA / MEDQA_FILE).is_file():
        cases += load_cases(SHARED_DATA / MEDQA_FILE)
    for case in cases:
        listed = {readable_name(n) for n in menu_names(case.records.physical_exam,
                                                       case.records.tests)}
        assert _catalog_names(case) <= listed, case.case_id


def test_the_osce_loader_sets_the_flag(tmp_path):
    record = {"OSCE_Examination": {
        "Objective_for_Doctor": "Evaluate the child with a rash.",
        "Patient_Actor": {"Demographics": "6-year-old boy", "History": "Itchy spots."},
        "Physical_Examination_Findings": {"Skin": "Vesicles in crops."},
        "Test_Results": {"Varicella_Specific_Tests": {
            "IgM_Antibodies_to_Varicella_Zoster_Virus": "Positive"}},
        "Correct_Diagnosis": "Varicella"}}
    plain = json.loads(json.dumps(record))
    plain["OSCE_Examination"]["Test_Results"] = {"Serology": {"IgM": "Positive"}}
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(plain) + "\n", encoding="utf-8")
    flagged, clean = load_cases(path)
    assert flagged.flags.target_in_menu is True
    assert flagged.flags.target_in_records is False  # the name is a key, not a value
    assert clean.flags.target_in_menu is False


@needs_shared_data(MEDQA_FILE, NEJM_FILE)
def test_no_public_medqa_or_nejm_case_names_its_target_in_the_menu():
    for name in (MEDQA_FILE, NEJM_FILE):
        assert not [c.case_id for c in load_cases(SHARED_DATA / name)
                    if c.flags.target_in_menu]


# ------------------------------------------------------------------ the menu setting
FLAGGED = _case("flagged", "Varicella", {
    "Varicella_Specific_Tests": {"IgM_Antibodies_to_Varicella_Zoster_Virus": "Positive"},
    "Blood_Tests": {"WBC": {"Value": "7.1"}, "CRP": {"Value": "12 mg/L"}}})
CLEAN = _case("clean", "Varicella", {"Serology": {"IgM": "Positive"}})


def _menu(env: EGIPEnv, case_id: str) -> list[str]:
    _, info = env.reset(seed=0, options={"case_id": case_id})
    return [item["name"] for item in info["menu"]]


def test_the_default_keeps_the_menu_as_recorded():
    env = EGIPEnv(cases=[FLAGGED, CLEAN])
    assert env.config.target_in_menu == "keep"
    assert "Varicella Specific Tests" in _menu(env, "flagged")


def test_exclude_leaves_the_flagged_cases_out():
    env = EGIPEnv(cases=[FLAGGED, CLEAN], target_in_menu="exclude")
    assert [c.case_id for c in env.pool.cases] == ["clean"]
    with pytest.raises(KeyError, match="target_in_menu=exclude"):
        env.reset(options={"case_id": "flagged"})
    with pytest.raises(ValueError, match="leaves no case"):
        EGIPEnv(cases=[FLAGGED], target_in_menu="exclude")


def test_neutral_words_the_group_name_and_keeps_every_result():
    env = EGIPEnv(cases=[FLAGGED, CLEAN], target_in_menu="neutral")
    menu = _menu(env, "flagged")
    # "Specific Tests" would be template words only (a placeholder): the fallback name
    assert "Test panel" in menu and not any("aricella" in m for m in menu)
    obs, *_ = env.step("REQUEST TEST: Test panel")
    assert "IgM Antibodies to Varicella Zoster Virus: Positive" in obs["text"]
    renamed = env.pool.case("flagged")
    assert renamed.metadata["renamed_groups"] == {"Varicella_Specific_Tests": "Test_panel"}
    assert FLAGGED.records.tests.keys() == {"Varicella_Specific_Tests", "Blood_Tests"}
    assert env.pool.case("clean") is CLEAN  # nothing to rename: the same case


def test_neutral_names_keep_other_words_fall_back_and_stay_unique():
    case = _case("c", "Lyme disease", {
        "Test_panel": {"A": "1"}, "Lyme_Disease": {"IgM": "Positive", "IgG": "Negative"},
        "Lyme_Disease_Tests": {"PCR": "Detected"}, "Lyme_Serology": {"ELISA": "Positive"},
        "Lyme_Titer": "1:256"},
        {"Lyme_Disease_Examination": {"Skin": "Erythema migrans"}})
    renamed = neutral_group_names(case)
    # the target's words go ("Lyme_Disease_Tests" leaves "Tests", a placeholder); a name
    # holding one of its two words does not name it, and a leaf test keeps its name
    assert list(renamed.records.tests) == ["Test_panel", "Test_panel_2", "Test_panel_3",
                                           "Lyme_Serology", "Lyme_Titer"]
    assert list(renamed.records.physical_exam) == ["Examination_section"]
    assert renamed.records.tests["Test_panel_3"] == {"PCR": "Detected"}
    case = _case("d", "Varicella", {"Varicella_Serology": {"IgM": "Positive", "IgG": "-"}})
    assert list(neutral_group_names(case).records.tests) == ["Serology"]


def test_the_setting_is_checked():
    with pytest.raises(ValidationError):
        EGIPEnv(cases=[CLEAN], target_in_menu="hide")
    with pytest.raises(ValueError, match="target_in_menu must be one of"):
        menu_setting_cases([CLEAN], "hide")


# ------------------------------------------------------------------ eval stratum
def test_eval_reports_the_flag_as_a_stratum(tmp_path, capsys):
    lines = log_lines("alpha", "scripted", {"a1": "CC", "a2": "WW", "a3": "CW"})
    for line in lines:
        line["case_flags"] = {"target_in_menu": line["case_id"] == "a1"}
    log = write_log(tmp_path / "run.jsonl", lines)
    assert main(["eval", str(log), "--by", "target_in_menu",
                 "--out-dir", str(tmp_path / "out")]) == 0
    rows = (tmp_path / "out" / "accuracy_by_target_in_menu.csv").read_text().splitlines()
    header = rows[0].split(",")
    by_stratum = {r.split(",")[header.index("stratum")]: r.split(",") for r in rows[1:]}
    # True: a1 (2 of 2 correct); False: a2, a3 (1 of 4 correct)
    assert by_stratum["True"][header.index("n_cases")] == "1"
    assert float(by_stratum["True"][header.index("accuracy_pooled")]) == 100.0
    assert by_stratum["False"][header.index("n_cases")] == "2"
    assert float(by_stratum["False"][header.index("accuracy_pooled")]) == 25.0


def test_eval_by_a_flag_the_logs_do_not_record_says_so(tmp_path, capsys):
    lines = log_lines("alpha", "scripted", {"a1": "CC", "a2": "WW"})
    for line in lines:
        line.pop("case_flags", None)
    log = write_log(tmp_path / "old.jsonl", lines)
    assert main(["eval", str(log), "--by", "target_in_menu",
                 "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"--by target_in_menu: no line of {log} records case_flags.target_in_menu" in err


# ------------------------------------------------------------------ short requests
def test_a_short_request_matches_only_where_it_starts_a_word():
    # the fragments these requests are inside ("swALLow", "uriNAlysis", "eleCTrolytes")
    # scored 90 before SHORT_REQUEST, and matched (MedQA cases 0003, 0005, 0007...)
    case = _case("m", "Double aortic arch", {
        "Barium_Swallow": {"Findings": "Compression"}, "Chest_CT": "Normal",
        "Urinalysis": {"Protein": "Negative"}, "Electrolytes": {"Sodium": "139"},
        "Creatinine": "0.9 mg/dL"}, {"Abdominal_Examination": "Soft, non-tender."})
    matcher = ExamMatcher.for_records(Catalog(case.records), case.records)
    # a fragment inside a word is at most unclear: nothing is looked up
    for request in ("ALL", "Na"):
        match = matcher.match(request)
        assert (match.status, match.entries) == ("unclear", ()), request
    assert matcher.match("ALL").candidates[0].name == "Barium Swallow"
    assert [e.name for e in matcher.match("CT").entries] == ["Chest CT"]
    # a short abbreviation cut from the start of a word still finds its name
    assert [e.name for e in matcher.match("Abd").entries] == ["Abdominal Examination"]
    assert [e.name for e in matcher.match("Cr").entries] == ["Creatinine"]
    # the abbreviation table comes first: UA / CXR / Cr are not fuzzy requests
    assert [e.name for e in matcher.match("UA").entries] == ["Urinalysis"]
    assert [e.name for e in matcher.match("CR").entries] == ["Creatinine"]
    assert [e.name for e in matcher.match("barium swalow").entries] == ["Barium Swallow"]


def test_the_pettingzoo_game_applies_the_setting_too():
    from clinenv.multiagent.aec import EGIPAECEnv

    game = EGIPAECEnv(cases=[FLAGGED, CLEAN], target_in_menu="exclude")
    assert [c.case_id for c in game.pool.cases] == ["clean"]
    # the derived pool is made once per setting and shared; "keep" is the pool itself
    pool = EGIPEnv(cases=[FLAGGED, CLEAN]).pool
    neutral = pool.with_target_in_menu("neutral")
    assert neutral is pool.with_target_in_menu("neutral") and neutral is not pool
    assert pool.with_target_in_menu("keep") is pool


def test_compare_reports_the_flag_as_a_stratum(tmp_path):
    base = log_lines("alpha", "native", {"a1": "WW", "a2": "WW", "a3": "CC"})
    method = log_lines("alpha", "egip", {"a1": "CC", "a2": "WW", "a3": "CC"})
    for line in base + method:
        line["case_flags"] = {"target_in_menu": line["case_id"] == "a1"}
    paths = [write_log(tmp_path / f"{name}.jsonl", lines)
             for name, lines in (("native", base), ("egip", method))]
    assert main(["compare", *map(str, paths), "--by", "target_in_menu", "--resamples", "200",
                 "--flips", "200", "--out-dir", str(tmp_path / "out")]) == 0
    rows = (tmp_path / "out" / "comparison_by_target_in_menu.csv").read_text().splitlines()
    header = rows[0].split(",")
    cells = {r.split(",")[header.index("stratum")]: r.split(",") for r in rows[1:]}
    assert set(cells) == {"True", "False"}
    # True: a1 goes from WW to CC (+100 points); False: a2 WW/WW, a3 CC/CC (no change)
    assert float(cells["True"][header.index("difference_pp")]) == 100.0
    assert float(cells["False"][header.index("difference_pp")]) == 0.0
    assert cells["True"][header.index("n_cases")] == "1"
