"""``task_rows(..., exclude_flags=...)``: flagged cases left out of a trainer's rows,
reported, and the other rows unchanged: training rows that do not teach the wrong
thing.

The counts are checked by hand against the data: the demo records name the target in
demo-01 ("consistent with lobar pneumonia"), demo-05 (appendicitis), demo-13 (pulmonary
embolism) and demo-17 (pancreatitis); in MedQA a plain search for the whole target text
in the records finds 15 cases, and the flag adds medqa-0054 (the record says "BPPV", the
target's bracketed abbreviation) and medqa-0104 (the record names Legg-Calvé-Perthes
disease; the target adds "(LCPD)"). No case of either set has ``target_in_menu``.
"""
# issue 30

from __future__ import annotations

import pickle

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.integrations.tools import CASE_FLAG_NAMES, LEAK_FLAGS, TaskRows, task_rows
from clinenv.seeding import episode_seed
from clinenv.testing.data import needs_shared_data

DEMO_LEAKS = ("demo-01", "demo-05", "demo-13", "demo-17")
MEDQA_LEAKS = tuple(f"medqa-{n:04d}" for n in (2, 3, 11, 14, 18, 20, 23, 39, 48, 52, 54,
                                               62, 86, 87, 102, 104, 107))


def test_demo_leaks_left_out_and_reported():
    every = task_rows("EGIP-Demo-v0")
    assert isinstance(every, TaskRows) and len(every) == 17
    assert every.excluded == {} and every.note == "" and every.considered == 17
    with pytest.warns(UserWarning) as caught:
        rows = task_rows("EGIP-Demo-v0", exclude_flags=LEAK_FLAGS)
    note = ("EGIP-Demo-v0: exclude_flags left out 4 of 17 cases (target_in_records: 4, "
            "target_in_menu: 0); 13 rows remain, `excluded` lists the case ids")
    assert [str(w.message) for w in caught] == [note]
    assert rows.note == note and rows.considered == 17
    assert rows.excluded == {"target_in_records": DEMO_LEAKS, "target_in_menu": ()}
    # the kept rows are the full rows minus the flagged ones, seeds untouched: a seed
    # derives from the case's index in the dataset (demo-02 is index 1)
    assert rows == [r for r in every if r["case_id"] not in DEMO_LEAKS]
    assert rows[0] == {"case_id": "demo-02", "seed": episode_seed(0, 0, 1),
                       "env_id": "EGIP-Demo-v0"}
    assert pickle.loads(pickle.dumps(rows)).excluded == rows.excluded


def test_exclusion_within_a_split_counts_the_split():
    with pytest.warns(UserWarning, match=r"left out 2 of 3 cases \(target_in_records: 2\); "
                                         r"1 rows remain"):
        rows = task_rows("EGIP-Demo-v0", ["demo-13", "demo-02", "demo-01"],
                         exclude_flags=("target_in_records",))
    assert [r["case_id"] for r in rows] == ["demo-02"]
    assert rows.excluded == {"target_in_records": ("demo-01", "demo-13")}
    assert rows.considered == 3


def test_nothing_flagged_is_quiet(recwarn):
    rows = task_rows("EGIP-Demo-v0", ["demo-02", "demo-03"], exclude_flags=LEAK_FLAGS)
    assert len(rows) == 2 and not recwarn.list
    assert rows.note.startswith("EGIP-Demo-v0: exclude_flags left out 0 of 2 cases")
    assert rows.excluded == {"target_in_records": (), "target_in_menu": ()}


@pytest.mark.parametrize(("flags", "message"), [
    (("target_in_record",), "exclude_flags: unknown flag 'target_in_record'; the flags are "
                            + ", ".join(CASE_FLAG_NAMES)),
    ("target_in_records", r"exclude_flags must be a tuple of flag names, e\.g\. "
                          r"\('target_in_records',\), not a string"),
    (("target_in_menu", "target_in_menu"), "exclude_flags: target_in_menu named twice"),
])
def test_bad_flags_are_refused_in_one_line(flags, message):
    with pytest.raises(ValueError, match=message):
        task_rows("EGIP-Demo-v0", exclude_flags=flags)


def test_a_split_with_only_flagged_cases_is_refused():
    with pytest.raises(ValueError, match="leaves no case: each of the 2 cases has one of "
                                         "these flags"):
        task_rows("EGIP-Demo-v0", ["demo-01", "demo-05"], exclude_flags=LEAK_FLAGS)


@needs_shared_data()
def test_medqa_leaks(shared_data_dir):
    every = task_rows("EGIP-MedQA-v0")
    with pytest.warns(UserWarning, match=r"left out 17 of 107 cases \(target_in_records: "
                                         r"17, target_in_menu: 0\); 90 rows remain"):
        rows = task_rows("EGIP-MedQA-v0", exclude_flags=LEAK_FLAGS)
    assert rows.excluded == {"target_in_records": MEDQA_LEAKS, "target_in_menu": ()}
    assert rows == [r for r in every if r["case_id"] not in MEDQA_LEAKS]
    assert len(rows) == 90
