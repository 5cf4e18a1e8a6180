"""The LLM judge: the verdict parser on a table of judge replies, AgentClinic's
strict rule, retries with distinct seeds, and the exact judge messages."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import pytest

from clinenv.agents.judge import JudgeVerdict, LLMJudge, parse_verdict
from clinenv.agents.prompts import JUDGE_RETRY_USER, JUDGE_SYSTEM, JUDGE_USER
from clinenv.llm import GenerationConfig, ScriptedChatModel
from clinenv.seeding import call_seed

#: B07: judge reply -> verdict.
B07_TABLE = [
    ("Yes.", "correct"),
    (" yes\n", "correct"),
    ("**Yes**", "correct"),
    ("<think>They match; no doubt.</think>Yes", "correct"),
    ("No.", "wrong"),
    ("Yesterday's labs aside, No.", "wrong"),
    ("Not the same disease.", "wrong"),
    ("They overlap but differ. Final answer: No", "wrong"),
    ("Yes and no, partly overlapping", "unparsed"),
    ("", "unparsed"),
    # "no" before a word is a determiner, not the verdict: re-ask, never "wrong".
    ("No doubt, they are the same condition.", "unparsed"),
    ("No difference; same disease.", "unparsed"),
    ("No doubt.", "unparsed"),
]


# field-bug-reports B07
@pytest.mark.parametrize(("reply", "verdict"), B07_TABLE)
def test_b07_table(reply, verdict):
    """Markdown, think blocks, 'Yesterday', negations, final-answer lines, and a
    leading determiner "no" ("No doubt", "No difference") that is not an answer."""
    assert parse_verdict(reply) == verdict


# field-bug-reports B07
@pytest.mark.parametrize(("reply", "verdict"), [
    ("No", "wrong"),
    ("No, they differ.", "wrong"),  # an opening "No" + punctuation is the answer itself
    ("No - they differ", "wrong"),
    ("There is no question they are the same condition.", "unparsed"),
    ("There is no match.", "wrong"),  # a negative phrase, not the answer word
    ("Answer: no doubt they match", "unparsed"),  # the final-answer rule reads "no" alike
    ("Final answer: no.", "wrong"),
    ("No-brainer: same condition.", "unparsed"),
    ("Having compared both, no.", "wrong"),
])
def test_b07_no_decides_only_as_an_answer_word(reply, verdict):
    """A reply "no" is the verdict only when no word follows it on its line."""
    assert parse_verdict(reply) == verdict


@pytest.mark.parametrize(("reply", "verdict"), [
    ("**No.**", "wrong"),
    ("Answer: yes", "correct"),
    ("The answer is no.", "wrong"),
    ("Yes, both describe the same condition.", "correct"),
    ("They are different diseases.", "wrong"),
    ("I cannot answer yes or no", "unparsed"),
    ("Nope", "unparsed"),
    ("<think>unfinished reasoning, yes", "unparsed"),
    (None, "unparsed"),
])
def test_more_judge_replies(reply, verdict):
    assert parse_verdict(reply) == verdict


@pytest.mark.parametrize(("reply", "verdict"), [
    ("yes", "correct"), ("Yes", "correct"), ("YES", "correct"),
    ("Yes.", "wrong"), (" yes", "wrong"), ("**Yes**", "wrong"),
    ("Yes and no, partly overlapping", "wrong"), ("", "wrong"), ("No", "wrong"),
])
def test_strict_mode_is_agentclinics_exact_yes(reply, verdict):
    assert parse_verdict(reply, strict=True) == verdict


def test_judge_prompt_holds_only_the_answer_and_the_target():
    model = ScriptedChatModel(["Yes"])
    result = LLMJudge(model).judge(" Graves disease ", "Graves’ disease")
    assert result == JudgeVerdict("correct", "Yes", 1)
    assert model.calls[0][0] == [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": JUDGE_USER.format(target="Graves’ disease",
                                                       answer="Graves disease")}]
    assert JUDGE_USER.format(target="T", answer="A") == (
        "Reference diagnosis: T\nGiven diagnosis: A\n"
        "Do they name the same condition? Reply Yes or No.")


def test_unparsed_reply_is_retried_with_a_new_seed_then_decides():
    model = ScriptedChatModel(["Yes and no, partly overlapping", "**No.**"])
    judge = LLMJudge(model, retries=1, config=GenerationConfig(seed=40))
    assert judge.judge("Pseudogout", "Gout") == JudgeVerdict("wrong", "**No.**", 2)
    (first, first_cfg), (second, second_cfg) = model.calls
    assert second == [*first, {"role": "assistant", "content": "Yes and no, partly overlapping"},
                      {"role": "user", "content": JUDGE_RETRY_USER}]
    assert (first_cfg.seed, second_cfg.seed) == (40, call_seed(40, "judge", 1))
    records = judge.drain_calls()
    assert [(r["attempt"], r["verdict"], r["purpose"], r["agent"]) for r in records] == [
        (0, "unparsed", "judge", "judge"), (1, "wrong", "judge", "judge")]


def test_persistently_unparsed_stays_unparsed_never_wrong():
    model = ScriptedChatModel(["Maybe.", "It depends.", "Hard to say."])
    verdict = LLMJudge(model, retries=2).judge("Gout", "Gout", seed=3)
    assert verdict == JudgeVerdict("unparsed", "Hard to say.", 3)
    assert [c.seed for _, c in model.calls] == [3, call_seed(3, "judge", 1),
                                                 call_seed(3, "judge", 2)]


def test_no_retries_and_strict_mode_make_one_call():
    model = ScriptedChatModel(["Maybe."])
    assert LLMJudge(model, retries=0).judge("a", "b").n_attempts == 1
    strict = LLMJudge(ScriptedChatModel(["Yes."]), strict=True, retries=3)
    assert strict.judge("Gout", "Gout") == JudgeVerdict("wrong", "Yes.", 1)


def test_async_judge_and_arguments():
    model = ScriptedChatModel(["<think>same thing</think>\n\n**Yes**"])
    judge = LLMJudge(model)
    assert asyncio.run(judge.ajudge("SLE", "Systemic lupus erythematosus")).verdict == "correct"
    for answer, target, field in (("", "Gout", "answer"), ("Gout", "  ", "target"),
                                  (None, "Gout", "answer")):
        with pytest.raises(ValueError, match=field):
            judge.judge(answer, target)
    with pytest.raises(ValueError, match="retries"):
        LLMJudge(model, retries=-1)
    with pytest.raises(TypeError, match="model"):
        LLMJudge(object())
    assert json.loads(json.dumps(judge.config))["strict"] is False


@pytest.mark.skipif(importlib.util.find_spec("openai") is None,
                    reason="the openai client is not installed (extra 'openai')")
def test_judge_over_a_real_http_server():
    from clinenv.llm.openai_backend import OpenAIChatModel
    from clinenv.testing.fake_server import FakeChatServer

    replies = iter(["**Yes**", "Yes and no", "No."])
    with FakeChatServer(lambda body, index: next(replies)) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x")
        try:
            judge = LLMJudge(model)
            first = judge.judge("Lobar pneumonia", "Lobar pneumonia", seed=1)
            second = judge.judge("Pseudogout", "Gout", seed=2)
        finally:
            model.close()
        bodies = list(server.requests)
    assert (first.verdict, second.verdict, second.n_attempts) == ("correct", "wrong", 2)
    assert [b.get("seed") for b in bodies] == [1, 2, call_seed(2, "judge", 1)]
    assert "Lobar pneumonia" in bodies[0]["messages"][1]["content"]


# --------------------------------------------------- the reply cut to the judge's turn
@pytest.mark.parametrize(("raw", "verdict", "kept"), [
    # uncut, "Yes<|im_end|>...No" holds both words and would be unparsed
    ("Yes<|im_end|>\n<|im_start|>user\nDoctor: No", "correct", "Yes"),
    ("No.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nYes", "wrong", "No."),
    ("Yes, the same disease.<end_of_turn>\n<start_of_turn>user\nNo?", "correct",
     "Yes, the same disease."),
])
def test_llm_judge_reads_only_its_own_turn(raw, verdict, kept):
    model = ScriptedChatModel([raw])
    judge = LLMJudge(model, retries=0)
    result = judge.judge("DIAGNOSIS READY: Gout", "Gout")
    assert (result.verdict, result.reply, result.n_attempts) == (verdict, kept, 1)
    (record,) = judge.drain_calls()
    assert record["flags"] == ["wrote_past_turn"]
    assert model.calls[0][1].stop == ("\nDoctor:", "\nPatient:", "<|im_end|>", "<|eot_id|>")


def test_strict_judge_reads_an_uncut_reply_as_sent_and_a_cut_one_cut():
    strict = LLMJudge(ScriptedChatModel([" yes", "yes<end_of_turn>\nno"]), strict=True)
    assert strict.judge("Gout", "Gout").verdict == "wrong"  # AgentClinic's exact rule
    assert strict.judge("Gout", "Gout").verdict == "correct"
    assert [r["flags"] for r in strict.drain_calls()] == [[], ["wrote_past_turn"]]
