"""Verdicts of terminal outputs: placeholders, abstention, the native moderator's reading,
what the judge is sent and when it contradicts an exact match.

Expected values are worked out by hand from the inputs: which text follows the marker,
which words are template vocabulary, which strategy reply is an explicit decline.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.judge import LLMJudge, answer_only
from clinenv.agents.prompts import JUDGE_USER
from clinenv.agents.terminal_base import ABSTENTION_ACTION, NO_ANSWER_ACTION
from clinenv.agents.terminal_direct import Direct
from clinenv.agents.terminal_full import Full
from clinenv.agents.terminal_vote import Vote
from clinenv.cases import Case, Target
from clinenv.env.terminal_outcome import NOT_JUDGED, contradicts_exact, terminal_outcome
from clinenv.llm import ScriptedChatModel
from clinenv.protocol.native import moderator_answer
from clinenv.scoring import is_abstention, is_placeholder_answer, score_answer

MG = "Myasthenia gravis"
OPTIONS = ("Contact dermatitis", "Eczematous drug eruption", "Exogenous ochronosis",
           "Lichen planus pigmentosus", "Systemic lupus erythematosus")
EVIDENCE = "# Objective\n[S0] Find the most likely diagnosis.\n"


def free_case(target: str = MG) -> Case:
    return Case(case_id="v-1", dataset="test", objective="Diagnose.", target=Target(text=target))


def option_case(index: int) -> Case:
    return Case(case_id="v-2", dataset="test", objective="Diagnose.", candidates=OPTIONS,
                target=Target(text=OPTIONS[index], option_index=index))


class RecordingJudge:
    """A judge that records what it is asked and rules ``verdict``."""

    def __init__(self, verdict: str = "correct") -> None:
        self.verdict = verdict
        self.asked: list[tuple[str, str]] = []

    def judge(self, answer: str, target: str) -> SimpleNamespace:
        self.asked.append((answer, target))
        return SimpleNamespace(verdict=self.verdict)


# ----------------------------------------------------------------- scorer: placeholders
@pytest.mark.parametrize("answer", [
    "<single diagnosis>", "DIAGNOSIS READY: <single diagnosis>", "[diagnosis]",
    "**[Diagnosis]**", "{diagnosis}", "your diagnosis here", "Your final diagnosis here.",
    "...", "…", "N/A", "n/a", "NA", "TBD", "Diagnosis: <diagnosis>", "(most likely diagnosis)",
])
def test_placeholders_are_unscored_and_never_abstentions(answer):
    score = score_answer(answer, free_case())
    assert (score.verdict, score.placeholder, score.abstained, score.status) == (
        "unscored", True, False, "placeholder")
    assert not is_abstention(answer)


@pytest.mark.parametrize(("answer", "status"), [
    (None, "no_answer"), ("", "no_answer"), ("   ", "no_answer"), ("**", "no_answer"),
    ("Undetermined", "abstained"), ("insufficient information", "abstained"),
    ("I cannot determine the diagnosis", "abstained"), ("None", "abstained"),
])
def test_no_answer_and_abstention_are_not_placeholders(answer, status):
    score = score_answer(answer, free_case())
    assert (score.verdict, score.status, score.placeholder) == ("unscored", status, False)
    assert score.abstained is (status == "abstained")


@pytest.mark.parametrize(("answer", "index", "verdict"), [
    ("A", 0, "correct"), ("E", 4, "correct"), ("Option A", 0, "correct"),
    ("Answer: E", 4, "correct"), ("(A)", 1, "wrong"), ("a", 0, "correct"),
])
def test_option_letters_that_are_template_words_are_answers(answer, index, verdict):
    """``a`` and ``e`` are template vocabulary (article, "e.g."), yet a candidate letter
    is an answer: scored against K, never a placeholder."""
    assert not is_placeholder_answer(answer)
    score = score_answer(answer, option_case(index))
    assert (score.verdict, score.method, score.status) == (verdict, "option", "answer")


def test_filled_templates_and_real_answers_are_not_placeholders():
    assert score_answer("<Myasthenia gravis>", free_case()).verdict == "correct"
    assert score_answer("Diagnosis: Myasthenia gravis", free_case()).verdict == "correct"
    assert score_answer("Fever of unknown origin", free_case()).status == "answer"


# ------------------------------------------------------------------- EGIP environment
def _decide(env, action: str, case_id: str = "demo-13"):
    env.reset(seed=0, options={"case_id": case_id})
    env.step("DIAGNOSIS READY: Pneumonia")  # ends acquisition (premature_diagnosis=decide)
    return env.step(action)


@pytest.mark.parametrize("action", [
    "DIAGNOSIS READY: [diagnosis]", "DIAGNOSIS READY: <single diagnosis>",
    "DIAGNOSIS READY: your diagnosis here", "DIAGNOSIS READY: N/A",
])
def test_egip_placeholder_answer_is_unscored_and_never_judged(action):
    judge = RecordingJudge()
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge=judge)
    _, reward, terminated, _, info = _decide(env, action)
    assert terminated and judge.asked == []
    assert (info["verdict"], info["correct"], info["abstained"]) == ("unscored", False, False)
    assert (info["answer_status"], info["placeholder"], info["judge_verdict"]) == (
        "placeholder", True, None)
    assert info["judge_disagrees"] is False


def test_egip_judge_gets_the_answer_without_its_marker():
    judge = RecordingJudge()
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge=judge)
    # demo-01 has no candidate labels: the judge gets the doctor's own words
    _, _, _, _, info = _decide(env, "**Diagnosis ready:** Community acquired pneumonia.",
                               case_id="demo-01")
    assert judge.asked == [("Community acquired pneumonia", "Lobar pneumonia")]
    assert info["answer_status"] == "answer" and info["scored_answer"] == info["answer"]


# --------------------------------------------------------------------- judge prompt
@pytest.mark.parametrize(("answer", "sent"), [
    ("DIAGNOSIS READY: Myasthenia gravis", MG),
    ("I think DIAGNOSIS READY: Myasthenia gravis", MG),
    ("**DIAGNOSIS READY:** **Myasthenia gravis**", MG),
    ("Final diagnosis: Myasthenia gravis", MG),
    ("Myasthenia gravis", MG),
    ("  Lambert-Eaton syndrome or myasthenia gravis ", "Lambert-Eaton syndrome or myasthenia "
                                                       "gravis"),
])
def test_judge_is_sent_the_answer_only(answer, sent):
    assert answer_only(answer) == sent
    messages = LLMJudge.messages_for(answer, "Myasthenia gravis (MG)")
    assert messages[1]["content"] == JUDGE_USER.format(target="Myasthenia gravis (MG)",
                                                        answer=sent)
    assert "DIAGNOSIS READY" not in messages[1]["content"]


# ------------------------------------------------- judge against an exact scorer match
@pytest.mark.parametrize(("answer", "case", "label", "verdict", "flag"), [
    ("Myasthenia gravis", free_case(), "wrong", "wrong", True),  # exact: judge stands
    ("**myasthenia gravis.**", free_case(), "wrong", "wrong", True),  # formatting only
    ("E", option_case(4), "wrong", "wrong", True),  # the correct option by its letter
    ("Myasthenia gravs", free_case(), "wrong", "wrong", False),  # fuzzy, not exact
    ("MG", free_case("Myasthenia gravis (MG)"), "wrong", "wrong", False),  # acronym
    ("Myasthenia gravis", free_case(), "correct", "correct", False),
    ("Myasthenia gravis", free_case(), "unparsed", "unscored", False),
    ("Lambert-Eaton syndrome", free_case(), "correct", "correct", False),  # judge wins
])
def test_judge_contradicting_an_exact_match_stands_and_is_flagged(answer, case, label,
                                                                  verdict, flag):
    score = score_answer(answer, case)
    got, keys = terminal_outcome(score, label, with_judge=True)
    assert (got, keys["judge_verdict"], keys["judge_disagrees"]) == (verdict, label, flag)
    assert contradicts_exact(score, label) is flag


def test_no_judge_no_judge_keys_and_not_asked_is_no_disagreement():
    score = score_answer(MG, free_case())
    assert terminal_outcome(score) == ("correct", {})
    assert terminal_outcome(score, NOT_JUDGED, with_judge=True)[1] == {
        "scorer": "deterministic", "judge_verdict": None, "judge_disagrees": False}


def test_env_flags_the_judge_contradicting_an_exact_match():
    judge = RecordingJudge("wrong")
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge=judge)
    target = gym.make("EGIP-Demo-v0").unwrapped.pool.case("demo-13").target.text
    _, reward, _, _, info = _decide(env, f"DIAGNOSIS READY: {target}")
    assert (info["verdict"], info["judge_verdict"], info["judge_disagrees"]) == (
        "wrong", "wrong", True)
    assert info["match_score"] == 100.0


# ------------------------------------------------------ native: the moderator's reading
@pytest.mark.parametrize(("utterance", "read"), [
    ("DIAGNOSIS READY: Myasthenia gravis\nPatient: Thank you doctor.", MG),
    ("I think DIAGNOSIS READY: Myasthenia gravis", MG),
    ("Based on the ptosis, DIAGNOSIS READY: Myasthenia gravis<|im_end|>\n<|im_start|>user\n"
     "Patient: What now?", MG),
    ("DIAGNOSIS READY: Myasthenia gravis<|eot_id|><|start_header_id|>user", MG),
    ("DIAGNOSIS READY: Myasthenia gravis<end_of_turn>\n<start_of_turn>user", MG),
    ("DIAGNOSIS READY: Myasthenia gravis [INST] Patient: ok [/INST]", MG),
    ("DIAGNOSIS READY: Myasthenia gravis\n**Patient:** Is it serious?", MG),
    ("DIAGNOSIS READY:\n**Myasthenia gravis**\nI will start pyridostigmine.", MG),
    ("Doctor: DIAGNOSIS READY: Myasthenia gravis.", MG),
    ("<think>DIAGNOSIS READY: Botulism</think>Then DIAGNOSIS READY: Myasthenia gravis", MG),
    ("Hello.\nPatient: DIAGNOSIS READY: Myasthenia gravis", None),  # not the doctor's turn
    ("DIAGNOSIS READY:", None),
    ("diagnosis ready: Myasthenia gravis", None),  # strict markers are case-sensitive
])
def test_moderator_answer(utterance, read):
    assert moderator_answer(utterance) == read


def _native_final(utterance: str, **kwargs):
    env = gym.make("AgentClinic-Demo-v0", **kwargs)
    env.reset(seed=0, options={"case_id": "demo-01"})
    return env, env.step(utterance)


@pytest.mark.parametrize("template", [
    "DIAGNOSIS READY: {t}\nPatient: Thank you doctor.",
    "I think DIAGNOSIS READY: {t}",
    "Given everything we found, DIAGNOSIS READY: {t}<|im_end|>\n<|im_start|>user\nok",
    "DIAGNOSIS READY: {t}<|eot_id|>",
    "DIAGNOSIS READY:\n{t}\nPatient: Thanks.",
])
def test_native_offline_scoring_reads_as_the_moderator(template):
    env = gym.make("AgentClinic-Demo-v0")
    target = env.unwrapped.pool.case("demo-01").target.text
    env, (_, reward, terminated, _, info) = _native_final(template.format(t=target))
    assert terminated and info["verdict"] == "correct" and info["correct"]
    assert info["scored_answer"] == target and info["answer_status"] == "answer"
    assert info["answer"] == env.unwrapped.runtime.answer  # the utterance as recorded


@pytest.mark.parametrize(("utterance", "status"), [
    ("DIAGNOSIS READY: <single diagnosis>", "placeholder"),
    ("Okay. DIAGNOSIS READY: [diagnosis]\nPatient: ok", "placeholder"),
    ("DIAGNOSIS READY: N/A", "placeholder"),
    ("DIAGNOSIS READY: Undetermined", "abstained"),
    ("DIAGNOSIS READY:", "no_answer"),
])
def test_native_unidentifiable_answer_is_strict_wrong_unscored_and_not_judged(utterance,
                                                                             status):
    judge = RecordingJudge()
    _, (_, _, terminated, _, info) = _native_final(utterance, judge=judge)
    assert terminated and judge.asked == []
    assert (info["verdict"], info["answer_status"], info["judge_verdict"]) == (
        "wrong", status, None)
    assert info["abstained"] is (status == "abstained")
    assert info["placeholder"] is (status == "placeholder")


def test_native_judge_gets_the_moderators_reading():
    judge = RecordingJudge()
    env, (_, _, _, _, info) = _native_final(
        "Thanks. DIAGNOSIS READY: Lobar pneumonia\nPatient: Thank you doctor.", judge=judge)
    assert judge.asked == [("Lobar pneumonia", env.unwrapped.runtime.case.target.text)]
    assert info["scored_answer"] == "Lobar pneumonia"


# --------------------------------------- Direct, Vote and Full on the same replies
@pytest.mark.parametrize(("reply", "answer", "abstained", "no_answer"), [
    ("DIAGNOSIS READY: <single diagnosis>", None, False, True),
    ("DIAGNOSIS READY: [diagnosis]", None, False, True),
    ("DIAGNOSIS READY: N/A", None, False, True),
    ("I would want more tests before naming anything.\nThe picture is unclear so far.",
     None, False, True),
    ("", None, False, True),
    ("DIAGNOSIS READY: Undetermined", None, True, False),
    ("DIAGNOSIS READY: insufficient information", None, True, False),
])
def test_direct_vote_full_agree_on_no_answer_and_abstention(reply, answer, abstained,
                                                            no_answer):
    """Every call of every strategy gets ``reply``: the three strategies give the same
    answer and the same ``abstained``; no usable answer is the empty action, an explicit
    decline the abstention action."""
    decisions = {name: strategy.decide(ScriptedChatModel([reply]), EVIDENCE)
                 for name, strategy in (("direct", Direct()), ("vote", Vote()),
                                        ("full", Full()))}
    for name, decision in decisions.items():
        assert (decision.answer, decision.abstained) == (answer, abstained), name
    expected = NO_ANSWER_ACTION if no_answer else ABSTENTION_ACTION
    assert decisions["vote"].action == decisions["full"].action == expected
    assert decisions["direct"].action == reply  # Direct passes the reply on unchanged


def test_vote_placeholders_are_never_votes():
    """Two placeholders would outvote one real answer if they counted."""
    replies = ["DIAGNOSIS READY: <single diagnosis>", "DIAGNOSIS READY: Gout",
               "DIAGNOSIS READY: <single diagnosis>", "DIAGNOSIS READY: N/A",
               "DIAGNOSIS READY: [diagnosis]"]
    model = ScriptedChatModel(replies)
    decision = Vote().decide(model, EVIDENCE)
    assert (decision.action, decision.answer, decision.abstained) == (
        "DIAGNOSIS READY: Gout", "Gout", False)
    assert [v["status"] for v in decision.detail["votes"]] == [
        "placeholder", "eligible", "placeholder", "placeholder", "placeholder"]
    assert decision.detail["counts"] == {"gout": 1}


def test_vote_abstains_only_when_a_sample_declined():
    mixed = ["DIAGNOSIS READY: <single diagnosis>", "", "DIAGNOSIS READY: Undetermined",
             "DIAGNOSIS READY: [diagnosis]", "Not sure."]
    declined = Vote().decide(ScriptedChatModel(mixed), EVIDENCE)
    assert (declined.action, declined.answer, declined.abstained) == (
        ABSTENTION_ACTION, None, True)
    nothing = ["DIAGNOSIS READY: <single diagnosis>", "", "DIAGNOSIS READY: N/A",
               "DIAGNOSIS READY: [diagnosis]", "<think>hmm</think>"]
    silent = Vote().decide(ScriptedChatModel(nothing), EVIDENCE)
    assert (silent.action, silent.answer, silent.abstained) == (NO_ANSWER_ACTION, None, False)


@pytest.mark.parametrize(("action", "answer", "verdict", "abstained"), [
    (NO_ANSWER_ACTION, None, "unscored", False),
    (ABSTENTION_ACTION, "Undetermined", "unscored", True),
])
def test_strategy_actions_reach_the_env_as_no_answer_or_abstention(action, answer, verdict,
                                                                  abstained):
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    _, reward, terminated, _, info = _decide(env, action)
    assert terminated and (info["answer"], info["verdict"], info["correct"]) == (
        answer, verdict, False)
    assert info["abstained"] is abstained
    assert info["answer_status"] == ("abstained" if abstained else "no_answer")
