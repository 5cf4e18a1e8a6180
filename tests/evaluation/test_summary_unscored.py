"""One definition of an unscored output (EGIP's U) for the run summary, ``clinenv eval``
and ``clinenv compare``: no identifiable answer came out, whatever the protocol.

Counts are worked out by hand from the records written here.
"""

from __future__ import annotations

import csv
import io

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.evaluation import (
    accuracy_table,
    answer_status,
    comparison_table,
    coverage,
    is_unparsed,
    is_unscored,
    load_runs,
    pair_runs,
)
from clinenv.evaluation.summary import summarize
from clinenv.testing.eval_logs import log_lines, write_log

#: Records of the current scoring version (with ``answer_status``).
NATIVE_UNFINISHED = {"case_id": "c1", "answer": None, "verdict": "wrong",
                     "correct": False, "abstained": False, "placeholder": False,
                     "answer_status": "no_answer", "end_reason": "no_diagnosis"}
NATIVE_PLACEHOLDER = {"case_id": "c2", "answer": "DIAGNOSIS READY: <single diagnosis>",
                      "scored_answer": "single diagnosis", "verdict": "wrong",
                      "correct": False, "abstained": False, "placeholder": True,
                      "answer_status": "placeholder", "end_reason": "diagnosis"}
EGIP_NO_ANSWER = {"case_id": "c1", "answer": None, "verdict": "unscored", "correct": False,
                  "abstained": False, "placeholder": False, "answer_status": "no_answer"}
JUDGE_UNPARSED = {"case_id": "c3", "answer": "Lobar pneumonia", "verdict": "unscored",
                  "correct": False, "abstained": False, "placeholder": False,
                  "answer_status": "answer", "judge_verdict": "unparsed"}
WRONG = {"case_id": "c4", "answer": "Bronchitis", "verdict": "wrong", "correct": False,
         "answer_status": "answer"}
CORRECT = {"case_id": "c5", "answer": "Lobar pneumonia", "verdict": "correct",
           "correct": True, "answer_status": "answer"}


@pytest.mark.parametrize(("record", "status", "unscored", "unparsed"), [
    (NATIVE_UNFINISHED, "no_answer", True, False),
    (NATIVE_PLACEHOLDER, "placeholder", True, False),
    (EGIP_NO_ANSWER, "no_answer", True, False),
    (JUDGE_UNPARSED, "answer", False, True),
    (WRONG, "answer", False, False),
    (CORRECT, "answer", False, False),
    (None, "no_answer", True, False),  # a scheduled output without a record
    ({**CORRECT, "error": {"type": "BackendError"}, "verdict": "unscored"}, "no_answer",
     True, False),
    # records written before answer_status existed (scoring version 1)
    ({"answer": None, "verdict": "wrong"}, "no_answer", True, False),  # native unfinished
    ({"answer": "Undetermined", "verdict": "unscored", "abstained": True}, "abstained",
     True, False),
    ({"answer": "Lobar pneumonia", "verdict": "unscored", "judge_verdict": "unparsed"},
     "answer", False, True),
    ({"answer": "   ", "verdict": "unscored"}, "no_answer", True, False),
    ({"answer": "Bronchitis", "verdict": "wrong"}, "answer", False, False),
])
def test_one_definition_of_unscored(record, status, unscored, unparsed):
    assert answer_status(record) == status
    assert is_unscored(record) is unscored
    assert is_unparsed(record) is unparsed


def test_summary_counts_partition_the_schedule_and_match_coverage():
    """Six records and one missing output (plan of 7): correct 1 (c5), wrong 1 (c4),
    unscored 4 (c1 unfinished native, c2 placeholder, c6 EGIP without an answer, the
    missing slot), unparsed 1 (c3)."""
    records = [dict(NATIVE_UNFINISHED, repetition=0), dict(NATIVE_PLACEHOLDER, repetition=0),
               dict(JUDGE_UNPARSED, repetition=0), dict(WRONG, repetition=0),
               dict(CORRECT, repetition=0),
               dict(EGIP_NO_ANSWER, case_id="c6", repetition=0)]
    plan = [(0, 0, i) for i in range(7)]
    summary = summarize(records, plan=plan)
    assert (summary["n_scheduled"], summary["n_correct"], summary["n_wrong"],
            summary["n_unscored"], summary["n_unparsed"]) == (7, 1, 1, 4, 1)
    assert summary["n_correct"] + summary["n_wrong"] + summary["n_unscored"] \
        + summary["n_unparsed"] == summary["n_scheduled"]
    # covered: c3 (judge unparsed), c4, c5 -> 3 of 7
    assert summary["coverage"] == pytest.approx(100 * 3 / 7)
    assert summary["coverage"] == pytest.approx(
        100 * (1 - summary["n_unscored"] / summary["n_scheduled"]))
    assert summary["accuracy"] == pytest.approx(100 / 7)


def test_native_unfinished_episode_is_unscored_not_wrong_in_the_summary():
    """An AgentClinic episode that never says DIAGNOSIS READY keeps the verdict "wrong"
    (AgentClinic's accuracy rule) but is unscored: 0 wrong, 1 unscored, coverage 0."""
    env = gym.make("AgentClinic-Demo-v0", max_turns=2)
    env.reset(seed=0, options={"case_id": "demo-01"})
    env.step("What brings you in?")
    *_, terminated, _, info = env.step("How long have you had it?")
    assert terminated and info["end_reason"] == "no_diagnosis"
    assert (info["verdict"], info["answer_status"], info["abstained"]) == (
        "wrong", "no_answer", False)
    record = env.unwrapped.episode_record()
    summary = summarize([record])
    assert (summary["n_wrong"], summary["n_unscored"], summary["coverage"]) == (0, 1, 0.0)
    assert coverage([record]) == 0.0


def _write_pair(tmp_path):
    """Native and EGIP runs on the same three cases, one repetition.

    native: a1 unfinished (wrong, no answer), a2 placeholder (wrong), a3 correct.
    egip:   a1 no answer (unscored),          a2 correct,             a3 judge unparsed.
    """
    native = log_lines("alpha", "native", {"a1": "W", "a2": "W", "a3": "C"})
    egip = log_lines("alpha", "egip", {"a1": "U", "a2": "C", "a3": "U"})
    native[0].update(answer=None, answer_status="no_answer", end_reason="no_diagnosis")
    native[1].update(answer="DIAGNOSIS READY: <single diagnosis>", answer_status="placeholder",
                     placeholder=True)
    native[2].update(answer_status="answer")
    egip[0].update(answer=None, answer_status="no_answer")
    egip[1].update(answer_status="answer")
    egip[2].update(answer="Lobar pneumonia", answer_status="answer", judge_verdict="unparsed")
    return (write_log(tmp_path / "native.jsonl", native),
            write_log(tmp_path / "egip.jsonl", egip))


def test_eval_counts_unscored_and_unparsed_apart(tmp_path):
    native, egip = _write_pair(tmp_path)
    table = accuracy_table(load_runs([native, egip]))
    cells = {c.label: c for c in table.data}
    # native: U = a1 + a2 = 2, coverage 1/3; egip: U = a1 = 1, unparsed a3 = 1, cov 2/3
    assert (cells["native"].n_unscored, cells["native"].n_unparsed) == (2, 0)
    assert (cells["egip"].n_unscored, cells["egip"].n_unparsed) == (1, 1)
    assert cells["native"].coverage == pytest.approx(100 / 3)
    assert cells["egip"].coverage == pytest.approx(200 / 3)
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(table.to_csv()))}
    assert (rows["native"]["n_unscored"], rows["native"]["n_unparsed"]) == ("2", "0")
    assert (rows["egip"]["n_unscored"], rows["egip"]["n_unparsed"]) == ("1", "1")
    assert ("Judge replies that could not be read (covered, not correct, not in U): egip on "
            "alpha 1.") in table.to_markdown()


def test_compare_uses_the_same_u_for_both_arms(tmp_path):
    native, egip = _write_pair(tmp_path)
    runs = load_runs([native, egip])
    table = comparison_table(pair_runs(runs, base_label="native"), n_resamples=200,
                             n_flips=200)
    (comp,) = table.data
    assert (comp.u_base, comp.u_method) == (2, 1)
    assert (comp.unparsed_base, comp.unparsed_method) == (0, 1)
    (row,) = csv.DictReader(io.StringIO(table.to_csv()))
    assert (row["u_baseline"], row["u_method"], row["unparsed_baseline"],
            row["unparsed_method"]) == ("2", "1", "0", "1")


def test_same_outputs_give_the_same_u_under_both_protocols(tmp_path):
    """Native unfinished (verdict "wrong") and EGIP no-answer (verdict "unscored") on the
    same cases: the same U in both arms."""
    native = log_lines("alpha", "native", {"a1": "W", "a2": "C"})
    egip = log_lines("alpha", "egip", {"a1": "U", "a2": "C"})
    native[0].update(answer=None, end_reason="no_diagnosis")  # an old line: no status
    egip[0].update(answer=None, answer_status="no_answer")
    runs = load_runs([write_log(tmp_path / "n.jsonl", native),
                      write_log(tmp_path / "e.jsonl", egip)])
    (comp,) = comparison_table(pair_runs(runs, base_label="native"), n_resamples=100,
                               n_flips=100).data
    assert comp.u_base == comp.u_method == 1
