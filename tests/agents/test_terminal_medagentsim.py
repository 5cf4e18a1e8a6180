"""MedAgentSim's final turn as published (discussion, answer options, consensus) and the
unscored count U it leaves, against a real local server on 127.0.0.1."""

from __future__ import annotations

import random
import re

import pytest

from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.medagentsim_options import (
    CHOICE_SYSTEM,
    EXCLUDED_ORDERS,
    REASONER_SYSTEM,
    majority,
    option_orders,
    parse_candidates,
    parse_letter,
    shuffled_options,
)
from clinenv.agents.terminal import make_strategy
from clinenv.agents.terminal_discussion import TEAM_SYSTEM
from clinenv.agents.terminal_medagentsim import MedAgentSimDiscussion
from clinenv.evaluation.metrics import is_unscored
from clinenv.llm.base import GenerationConfig
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.seeding import call_seed
from clinenv.testing.fake_native import NO_CONSENSUS
from clinenv.testing.fake_server import FakeChatServer

TRANSCRIPT = (
    "Doctor: What brings you in today?\n"
    "Patient: I have had a cough with rusty sputum and chills for three days.\n"
    "Doctor: REQUEST TEST: Chest_X-Ray\n"
    "Measurement: RESULTS: Right lower lobe consolidation."
)
OPINIONS = {1: "Lobar pneumonia", 2: "Lobar pneumonia", 3: "Acute bronchitis",
            4: "Lobar pneumonia", 5: "Acute bronchitis"}
CANDIDATES = '["Lobar pneumonia", "Acute bronchitis", "Lung abscess"]'
_SHOWN = re.compile(r"^([A-D])\. (.+)$", re.MULTILINE)


def responder(consensus: str, choices: list[str]):
    """Opinions by persona; question; candidates; the k-th choice call answers the shown
    letter of ``choices[k]``; the consensus reply ``consensus``."""
    seen = {"choice": 0}

    def reply(body: dict, index: int) -> str:
        system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system == TEAM_SYSTEM and "Doctor " in text and "give your opinion" in text:
            k = int(re.search(r"Doctor (\d), give", text).group(1))
            return f"<think>maybe TB</think>My view.\nDIAGNOSIS READY: {OPINIONS[k]}"
        if system == REASONER_SYSTEM and text.startswith("Question:"):
            return f"Sure: {CANDIDATES}"
        if system == REASONER_SYSTEM:
            return "Provide the most likely final diagnosis. A 60 year old man ..."
        if system == CHOICE_SYSTEM:
            wanted = choices[seen["choice"]]
            seen["choice"] += 1
            letter = next(s for s, name in _SHOWN.findall(text) if name == wanted)
            return f"Step by step ... Answer: [{letter}]"
        return consensus

    return reply


@pytest.fixture
def model(fake_server):  # noqa: F811 - the fixture imported above
    chat = OpenAIChatModel("fake-model", base_url=fake_server.base_url, max_retries=0,
                           config=GenerationConfig(temperature=0.2, seed=7))
    yield chat
    chat.close()


# --------------------------------------------------------------- the option step parts
@pytest.mark.parametrize(("reply", "expected"), [
    ('["Pneumonia", "Bronchitis"]', ["Pneumonia", "Bronchitis", "Undetermined diagnosis 3",
                                     "Undetermined diagnosis 4"]),
    ("Here: ['Gout', 'Pseudogout', 'Septic arthritis', 'Cellulitis', 'Lyme']",
     ["Gout", "Pseudogout", "Septic arthritis", "Cellulitis"]),
    ("[Gout, Pseudogout, Septic arthritis, Cellulitis]",
     ["Gout", "Pseudogout", "Septic arthritis", "Cellulitis"]),
    ("1. **Gout**\n2. Pseudogout.\n- Cellulitis", ["Gout", "Pseudogout", "Cellulitis",
                                                   "Undetermined diagnosis 4"]),
    ("<think>[Lupus]</think>", [f"Undetermined diagnosis {k}" for k in range(1, 5)]),
])
def test_candidate_lists(reply, expected):
    assert parse_candidates(reply) == expected


@pytest.mark.parametrize(("reply", "letter"), [
    ("reasoning... Answer: [C]", "C"), ("so the answer is (b).", "B"),
    ("**Answer:** D", "D"), ("Answer: [A] ... on reflection Answer: [B]", "B"),
    ("<think>Answer: [A]</think>No choice possible.", None), ("Answer: Alpha", None),
    ("Answer: a 45-year-old man with a cough", None), ("The answer is a.", "A"),
    ("answer is based on the X-ray", None), ("ANSWER: c", "C"), ("No letter here.", None),
])
def test_answer_letters(reply, letter):
    assert parse_letter(reply) == letter


def test_majority_and_orders():
    assert majority(["B", None, "C", "C", "B"]) == "B"  # tie: answered first
    assert majority([None, None]) is None
    orders = option_orders(random.Random(3), 19)
    assert len(set(orders)) == 19 and not set(orders) & EXCLUDED_ORDERS
    assert all(sorted(o) == list("ABCD") for o in orders)
    assert option_orders(random.Random(3), 5) == orders[:5]  # seeded, reproducible
    with pytest.raises(ValueError, match="1..19"):
        option_orders(random.Random(0), 20)
    with pytest.raises(ValueError, match="exactly 4 candidates, got 2"):
        shuffled_options(["Gout", "Pseudogout"], random.Random(0))


def test_bad_arguments():
    for kwargs in ({"n_doctors": 0}, {"option_samples": 20}, {"repair": True}):
        with pytest.raises(ValueError):
            MedAgentSimDiscussion(**kwargs)
    assert make_strategy("MedAgentSim").describe() == {
        "name": "medagentsim", "personas": [f"Doctor {i}" for i in range(1, 6)],
        "answer_options": True, "option_samples": 5, "require_marker": False,
        "repair": False}


# ------------------------------------------------------------------- the call sequence
def test_published_call_sequence(fake_server, model):  # noqa: F811
    """5 opinions, question, candidates, 5 shuffled choice calls, consensus: 13 calls
    with 13 distinct seeds; the choice majority (3 of 5) is handed to the consensus."""
    fake_server.responder = responder(
        "The team settles on it.\nDIAGNOSIS READY: Lobar pneumonia",
        ["Lobar pneumonia", "Acute bronchitis", "Lobar pneumonia", "Acute bronchitis",
         "Lobar pneumonia"])
    decision = MedAgentSimDiscussion().decide(model, TRANSCRIPT, seed=11)
    bodies = fake_server.requests
    assert [c["purpose"] for c in decision.calls] == (
        ["discussion"] * 5 + ["question", "candidates"] + ["options"] * 5 + ["summary"])
    assert len(bodies) == 13 and len({b["seed"] for b in bodies}) == 13
    assert bodies[0]["seed"] == call_seed(11, "discussion", 1, 1)
    assert bodies[12]["seed"] == call_seed(11, "summary")
    assert all(b["temperature"] == 0.2 for b in bodies)
    # every opinion sees the case, none sees another opinion
    for body in bodies[:5]:
        assert TRANSCRIPT in body["messages"][1]["content"]
        assert "My view" not in body["messages"][1]["content"]
    # the question call sees the opinions without think blocks
    question_call = bodies[5]["messages"][1]["content"]
    assert "Doctor 3: My view.\nDIAGNOSIS READY: Acute bronchitis" in question_call
    assert "maybe TB" not in question_call
    # the choice calls: the padded candidates, each shown once, in 5 distinct orders
    shown = [_SHOWN.findall(b["messages"][1]["content"]) for b in bodies[7:12]]
    expected = {"Lobar pneumonia", "Acute bronchitis", "Lung abscess",
                "Undetermined diagnosis 4"}
    assert all({name for _, name in s} == expected and len(s) == 4 for s in shown)
    assert len({tuple(name for _, name in s) for s in shown}) == 5
    assert all(b["messages"][1]["content"].startswith(
        "## Question\nProvide the most likely final diagnosis.") for b in bodies[7:12])
    assert decision.detail["pick"] == "Lobar pneumonia"
    assert set(decision.detail["options"].values()) == expected
    consensus = bodies[12]["messages"][1]["content"]
    assert "points to: Lobar pneumonia\n" in consensus and "Doctor 5: My view." in consensus
    # as published: the reply stands as the doctor's last utterance
    assert decision.action == "The team settles on it.\nDIAGNOSIS READY: Lobar pneumonia"
    assert (decision.answer, decision.abstained) == ("Lobar pneumonia", False)


def test_without_the_option_step(fake_server, model):  # noqa: F811
    fake_server.responder = responder("DIAGNOSIS READY: Acute bronchitis", [])
    decision = MedAgentSimDiscussion(n_doctors=2, answer_options=False).decide(
        model, TRANSCRIPT, seed=1)
    assert [c["purpose"] for c in decision.calls] == ["discussion"] * 2 + ["summary"]
    assert "points to" not in fake_server.requests[-1]["messages"][1]["content"]
    assert decision.answer == "Acute bronchitis"


def test_unmarked_consensus_stands_or_is_normalized(fake_server, model):  # noqa: F811
    """Published: a consensus without the marker stays as it is (no answer, no repair);
    with ``require_marker`` a short line is read as the answer, a long one repaired."""
    fake_server.responder = responder("Final Diagnosis: Lobar pneumonia", ["Lung abscess"])
    published = MedAgentSimDiscussion(n_doctors=1, option_samples=1).decide(model, TRANSCRIPT)
    assert published.action == "Final Diagnosis: Lobar pneumonia"
    assert published.answer is None and published.detail["outcome"] == "unmarked"
    assert "points to: Lung abscess\n" in fake_server.requests[-1]["messages"][1]["content"]
    fake_server.requests.clear()
    fake_server.responder = responder("We think\nit is probably\nsomething else", ["Lung abscess"])
    fixed = MedAgentSimDiscussion(n_doctors=1, option_samples=1, require_marker=True,
                                  repair=True).decide(model, TRANSCRIPT)
    assert [c["purpose"] for c in fixed.calls][-2:] == ["summary", "repair"]
    assert fixed.action == "" and fixed.answer is None and not fixed.abstained


# ------------------------------------------------------- the MedAgentSim id, end to end
def test_medagentsim_id_runs_it_and_counts_u():
    """On MedAgentSim-Demo-v0 (10 turns: the clinician asks once, requests 8 exams, then
    the final turn) the default strategy is the published one; an unmarked consensus
    ends the episode unfinished: wrong, and unscored by the one definition."""
    gym = pytest.importorskip("gymnasium")
    from clinenv.runs.episode import run_episode
    with FakeChatServer("clinician") as server, OpenAIChatModel(
            "fake", base_url=server.base_url, max_retries=0) as chat:
        records = {case: run_episode(gym.make("MedAgentSim-Demo-v0", max_turns=10),
                                     LLMDoctor(chat, strategy="medagentsim"),
                                     case_id=case, seed=0)
                   for case in ("demo-01", "demo-02")}
        purposes = [b["messages"][0]["content"] for b in server.requests]
    named, unnamed = records["demo-01"], records["demo-02"]
    # demo-01's chest X-ray result names lobar pneumonia: picked, marked, judged correct
    assert named["end_reason"] == "diagnosis" and named["verdict"] == "correct"
    assert named["answer"].endswith("DIAGNOSIS READY: lobar pneumonia")
    assert not is_unscored(named)
    # demo-02's results name nothing: no option picked, the consensus has no marker
    assert unnamed["end_reason"] == "no_diagnosis" and unnamed["verdict"] == "wrong"
    assert unnamed["answer_status"] == "no_answer" and is_unscored(unnamed)
    assert NO_CONSENSUS in str(unnamed["events"][-2:])
    # per episode: 5 opinions + question + candidates + 5 choices + consensus
    assert purposes.count(CHOICE_SYSTEM) == 10 and purposes.count(REASONER_SYSTEM) == 4
    assert purposes.count(TEAM_SYSTEM) == 12


def test_decision_observation_hides_the_objective_unless_asked():
    """MedAgentSim's discussion never sees Objective_for_Doctor (``decision_objective``
    False on the id); ``decision_objective=True`` opens the observation with it."""
    gym = pytest.importorskip("gymnasium")
    texts = {}
    for shown in (False, True):
        env = gym.make("MedAgentSim-Demo-v0", max_turns=3, decision_objective=shown)
        obs, _ = env.reset(seed=0, options={"case_id": "demo-01"})
        objective = obs["text"].split("# Task\n", 1)[1].split("\n\n", 1)[0]
        for action in ("What brings you in?", "REQUEST TEST: Chest X-Ray"):
            obs, *_, info = env.step(action)
        assert info["phase"] == "decide"
        texts[shown] = (obs["text"], objective)
    hidden, objective = texts[False]
    assert hidden.startswith("# Consultation transcript\nDoctor: What brings you in?")
    assert objective not in hidden
    assert texts[True][0] == f"# Task\n{objective}\n\n{hidden}"


def test_no_doctor_seat_ever_sees_the_target():
    """EGIP section 3: Y is in no doctor-facing input. Every demo case gets a target no
    record, fact or prompt could hold ("Quokka fever"); over whole MedAgentSim episodes
    with the published final turn, no request but the judge's mentions it."""
    gym = pytest.importorskip("gymnasium")
    from clinenv.cases import Target
    from clinenv.datasets import load_cases
    from clinenv.runs.episode import run_episode
    from clinenv.testing.fake_responders import role_of

    def leaks(cases) -> tuple[list, set]:
        with FakeChatServer("clinician") as server, OpenAIChatModel(
                "fake", base_url=server.base_url, max_retries=0) as chat:
            for case in cases:
                run_episode(gym.make("MedAgentSim-Demo-v0", cases=cases, max_turns=10),
                            LLMDoctor(chat, strategy="medagentsim"),
                            case_id=case.case_id, seed=0)
            bodies = list(server.requests)
        found = [(role_of(b), m["content"]) for b in bodies if role_of(b) != "judge"
                 for m in b["messages"] if "quokka" in str(m["content"]).lower()]
        return found, {role_of(b) for b in bodies}

    cases = [c.model_copy(update={"target": Target(text="Quokka fever")})
             for c in load_cases("demo")][:4]
    leaked, seats = leaks(cases)
    assert {"discussion", "reasoner", "choice"} <= seats  # the option step ran
    assert leaked == []
    # control: the same scan finds the words once the doctor's objective holds them
    planted = cases[0].model_copy(update={"objective": "Rule out Quokka fever."})
    leaked, _ = leaks([planted])
    assert leaked and {seat for seat, _ in leaked} == {"doctor"}
