"""Terminal strategies Direct, Vote and Full (EGIP eq. 5, appendix A.2) on hand-made and
real evidence interfaces, with scripted models whose received messages are checked."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.prompts import (
    CONSENSUS_SYSTEM,
    COUNCIL_SYSTEM,
    DIRECT_SYSTEM,
    LEDGER_HEADING,
    LEDGER_SYSTEM,
    PROPOSALS_HEADING,
    REPAIR_USER,
)
from clinenv.agents.terminal import make_strategy
from clinenv.agents.terminal_base import (
    ABSTENTION,
    ABSTENTION_ACTION,
    NO_ANSWER_ACTION,
    extract_answer,
)
from clinenv.agents.terminal_direct import Direct
from clinenv.agents.terminal_full import Full, admissible_ids, normalize_id, observation_status
from clinenv.agents.terminal_vote import Vote, vote_key
from clinenv.llm import GenerationConfig, ScriptedChatModel
from clinenv.scoring import is_abstention
from clinenv.seeding import call_seed

EVIDENCE = """# Objective (S0)
Evaluate the patient with upper abdominal pain.

# Candidate labels (hypotheses, not findings)
A. Biliary colic
B. Acute pancreatitis
C. Peptic ulcer disease

# Acquired observations
[O1] Patient, asked "Where is the pain?": In the upper belly, going through to my back.
[O2] Measurement T1 Lipase (Blood Tests):
    Lipase: 1450 U/L
[O3] Measurement T2 Abdominal CT: not recorded (unknown)

# Instructions
Reply with exactly one line: DIAGNOSIS READY: <single diagnosis>"""
CANDIDATES = ["Biliary colic", "Acute pancreatitis", "Peptic ulcer disease"]


def _episode(doctor, case_id, seed=5, actions=(), **env_kwargs):
    """Run a demo episode: the scripted ``actions`` first, then the doctor. Final info."""
    env = gym.make("EGIP-Demo-v0", **env_kwargs)
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    pending = list(actions)
    while True:
        action = pending.pop(0) if pending else doctor.act(obs, info)
        obs, _reward, terminated, _truncated, info = env.step(action)
        if terminated:
            return info, env.unwrapped


# --------------------------------------------------------------------------- Direct
def test_direct_prompt_states_the_appendix_a2_rules():
    text = DIRECT_SYSTEM.lower()
    assert "only facts" in text  # acquired evidence is the factual basis
    assert "do not assume it is normal" in text  # unknown findings are not normal
    assert "hypotheses" in text and "not findings" in text  # candidate labels
    assert DIRECT_SYSTEM.endswith("DIAGNOSIS READY: <one diagnosis>")


def test_direct_makes_one_seeded_call_and_passes_the_reply_through():
    reply = "**DIAGNOSIS READY:** *Acute pancreatitis*."
    model = ScriptedChatModel([reply])
    decision = Direct().decide(model, EVIDENCE, candidates=CANDIDATES, seed=11,
                               config=GenerationConfig(temperature=0.2, n=3))
    assert model.calls == [([{"role": "system", "content": DIRECT_SYSTEM},
                             {"role": "user", "content": EVIDENCE}],
                            GenerationConfig(temperature=0.2, n=1, seed=11))]
    assert decision.action == reply  # the environment's parser reads it (B05)
    assert decision.answer == "Acute pancreatitis" and not decision.abstained
    [record] = decision.calls
    assert (record["purpose"], record["seed"], record["answers"], record["flags"]) == (
        "decide", 11, ["Acute pancreatitis"], [])


def test_direct_without_seed_uses_the_config_seed():
    model = ScriptedChatModel(["DIAGNOSIS READY: Gout"])
    Direct().decide(model, EVIDENCE, config=GenerationConfig(seed=4))
    assert model.calls[0][1].seed == 4


@pytest.mark.parametrize(("reply", "answer", "abstained", "flags"), [
    ("DIAGNOSIS READY: I cannot determine the diagnosis", None, True, []),
    ("The lipase is high.\nI would still want imaging before naming anything.", None, False,
     ["unparsed"]),
    ("", None, False, ["unparsed"]),
    ("<think>REQUEST TEST: CT? No.</think>\nDIAGNOSIS READY: Acute pancreatitis",
     "Acute pancreatitis", False, []),
])
def test_direct_reads_abstentions_and_unparseable_replies(reply, answer, abstained, flags):
    decision = Direct().decide(ScriptedChatModel([reply]), EVIDENCE)
    assert (decision.answer, decision.abstained, decision.calls[0]["flags"]) == (
        answer, abstained, flags)
    assert decision.action == reply


def test_direct_sync_and_async_agree():
    sync_model, async_model = (ScriptedChatModel(["DIAGNOSIS READY: B"]) for _ in range(2))
    sync = Direct().decide(sync_model, EVIDENCE, candidates=CANDIDATES, seed=3)
    asyn = asyncio.run(Direct().adecide(async_model, EVIDENCE, candidates=CANDIDATES, seed=3))
    assert sync_model.calls == async_model.calls
    assert (sync.action, sync.answer) == (asyn.action, asyn.answer) == ("DIAGNOSIS READY: B",
                                                                         "B")


def test_strategies_reject_bad_inputs():
    for bad in ("", "   ", None, 3):
        with pytest.raises(ValueError, match="evidence_text"):
            Direct().decide(ScriptedChatModel(["x"]), bad)
    with pytest.raises(ValueError, match="candidates"):
        Direct().decide(ScriptedChatModel(["x"]), EVIDENCE, candidates="ABC")


def test_extract_answer_follows_the_decision_phase_rules():
    assert extract_answer("### Diagnosis ready: acute pancreatitis") == "acute pancreatitis"
    assert extract_answer("**Diagnosis:** Acute pancreatitis") == "Acute pancreatitis"
    assert extract_answer("Acute pancreatitis.") == "Acute pancreatitis"
    assert extract_answer("x" * 121) is None  # too long to be a bare answer
    assert extract_answer("REQUEST TEST: Lipase") is None
    assert extract_answer("<think>\n\n</think>") is None


# ----------------------------------------------------------------------------- Vote
def _vote(replies, *, candidates=CANDIDATES, seed=21, **kwargs):
    model = ScriptedChatModel(replies)
    return Vote(**kwargs).decide(model, EVIDENCE, candidates=candidates, seed=seed,
                                 config=GenerationConfig(temperature=0.0)), model


def test_vote_first_sample_is_the_direct_call_then_four_more():
    decision, model = _vote(["DIAGNOSIS READY: Acute pancreatitis"])
    direct_model = ScriptedChatModel(["DIAGNOSIS READY: Acute pancreatitis"])
    Direct().decide(direct_model, EVIDENCE, candidates=CANDIDATES, seed=21,
                    config=GenerationConfig(temperature=0.0))
    assert len(model.calls) == 2
    assert model.calls[0] == direct_model.calls[0]
    messages, config = model.calls[1]
    assert messages == direct_model.calls[0][0]
    # the extra samples share the run's decoding settings (EGIP appendix A.2)
    assert config == GenerationConfig(temperature=0.0, n=4, seed=call_seed(21, "vote"))
    assert [c["purpose"] for c in decision.calls] == ["decide", "vote"]


def test_vote_majority_over_normalized_answers_and_letters():
    decision, _ = _vote([
        "DIAGNOSIS READY: Biliary colic",
        "**DIAGNOSIS READY:** **acute pancreatitis.**",
        "DIAGNOSIS READY: B",  # candidate letter -> "Acute pancreatitis"
        "DIAGNOSIS READY: Undetermined",  # abstention: not eligible
        "I need more tests before deciding.\nPerhaps an ultrasound first.",  # unparsed
    ])
    assert decision.action == "DIAGNOSIS READY: Acute pancreatitis"
    assert decision.answer == "Acute pancreatitis" and not decision.abstained
    assert [v["status"] for v in decision.detail["votes"]] == [
        "eligible", "eligible", "eligible", "abstention", "unparsed"]
    assert decision.detail["counts"] == {"biliary colic": 1, "acute pancreatitis": 2}


@pytest.mark.parametrize(("replies", "winner"), [
    (["Gout", "Pseudogout", "pseudogout.", "GOUT", "Septic arthritis"], "Gout"),
    (["Pseudogout", "Gout", "GOUT", "pseudogout.", "Septic arthritis"], "Pseudogout"),
])
def test_vote_tie_keeps_the_first_encountered_label(replies, winner):
    decision, _ = _vote([f"DIAGNOSIS READY: {r}" for r in replies], candidates=None)
    assert decision.action == f"DIAGNOSIS READY: {winner}"


def test_vote_abstains_when_no_answer_is_eligible():
    decision, _ = _vote(["DIAGNOSIS READY: Undetermined", "", "Not sure.",
                         "<think>hmm</think>", "DIAGNOSIS READY: insufficient information"])
    assert decision.action == ABSTENTION_ACTION and decision.abstained
    assert decision.answer is None and is_abstention(ABSTENTION)
    assert [v["status"] for v in decision.detail["votes"]] == [
        "abstention", "unparsed", "abstention", "unparsed", "abstention"]


def test_vote_key_maps_letters_only_to_existing_options():
    options = ["Toxic adenoma", "Graves disease", "Clostridioides difficile colitis"]
    assert vote_key("(B)", options) == ("graves disease", "Graves disease")
    assert vote_key("Option b", options) == ("graves disease", "Graves disease")
    assert vote_key("B. Graves disease", options) == ("graves disease", "Graves disease")
    assert vote_key("**graves disease**", options) == ("graves disease", "Graves disease")
    assert vote_key("C. difficile colitis", options) == ("c. difficile colitis",
                                                         "C. difficile colitis")
    assert vote_key("D", options) == ("d", "D")  # no option D: free text
    assert vote_key("B", None) == ("b", "B")


def test_vote_with_one_sample_is_direct_only_and_checks_its_arguments():
    decision, model = _vote(["DIAGNOSIS READY: Gout"], n_samples=1)
    assert len(model.calls) == 1 and decision.answer == "Gout"
    for bad in ({"n_samples": 0}, {"n_samples": 2.0}, {"temperature": -1},
                {"temperature": float("nan")}):
        with pytest.raises(ValueError):
            Vote(**bad)


# ----------------------------------------------------------------------------- Full
def _full_model(consensus_replies, *, council="DIAGNOSIS: Acute pancreatitis\nBASIS: O2",
                ledger="Acute pancreatitis: supported by O1 and O2."):
    replies = iter(consensus_replies)

    def respond(messages, config, index):
        system = messages[0]["content"]
        if system == COUNCIL_SYSTEM:
            return council
        if system == LEDGER_SYSTEM:
            return ledger
        assert system == CONSENSUS_SYSTEM
        return next(replies)

    return ScriptedChatModel(respond)


GOOD = ('{"diagnosis": "Acute pancreatitis", "support": ["O2", "S0"], "conflict": [], '
        '"insufficient": false}')


def test_full_council_ledger_consensus_accepts_a_valid_reply():
    model = _full_model(["```json\n" + GOOD.replace('"O2"', '"[o2]"') + "\n```"])
    decision = Full().decide(model, EVIDENCE, candidates=CANDIDATES, seed=9,
                             config=GenerationConfig())
    assert decision.action == "DIAGNOSIS READY: Acute pancreatitis" and not decision.abstained
    assert [c["purpose"] for c in decision.calls] == ["council", "ledger", "consensus"]
    (council_msgs, council_cfg), (ledger_msgs, ledger_cfg), (cons_msgs, cons_cfg) = model.calls
    assert council_msgs == [{"role": "system", "content": COUNCIL_SYSTEM},
                            {"role": "user", "content": EVIDENCE}]
    assert council_cfg == GenerationConfig(n=3, temperature=0.7, seed=call_seed(9, "council"))
    assert ledger_cfg.seed == call_seed(9, "ledger") and ledger_cfg.n == 1
    assert cons_cfg.seed == call_seed(9, "consensus") and cons_cfg.temperature == 0.0
    proposals = f"{PROPOSALS_HEADING}\n1. Acute pancreatitis"
    assert proposals in ledger_msgs[1]["content"] and EVIDENCE in ledger_msgs[1]["content"]
    consensus_user = cons_msgs[1]["content"]
    # the consensus sees the ORIGINAL e_T, the proposals and the ledger
    assert EVIDENCE in consensus_user and proposals in consensus_user
    assert f"{LEDGER_HEADING}\nAcute pancreatitis: supported by O1 and O2." in consensus_user
    assert decision.detail["support"] == ["O2", "S0"]
    # O3 (Abdominal CT) is "not recorded (unknown)": not admissible (EGIP appendix A.2)
    assert decision.detail["admissible"] == ["S0", "O1", "O2"]
    assert decision.detail["in_proposals"] is True and decision.calls[2]["flags"] == []


def test_full_schema_failure_gets_one_repair_that_can_succeed():
    first = "The most likely diagnosis is acute pancreatitis."
    model = _full_model([first, GOOD])
    decision = Full().decide(model, EVIDENCE, seed=9)
    assert [c["purpose"] for c in decision.calls] == ["council", "ledger", "consensus",
                                                      "repair"]
    repair_msgs, repair_cfg = model.calls[3]
    assert repair_msgs[:2] == model.calls[2][0]
    assert repair_msgs[2:] == [
        {"role": "assistant", "content": first},
        {"role": "user", "content": REPAIR_USER.format(
            errors="- the reply holds no JSON object", admissible="S0, O1, O2")}]
    assert repair_cfg.seed == call_seed(9, "repair")
    assert decision.action == "DIAGNOSIS READY: Acute pancreatitis"
    assert decision.detail["errors"] == [["the reply holds no JSON object"], []]


def test_full_unknown_ids_fail_and_a_failed_repair_gives_no_answer():
    """Ledger text naming [O9] does not make O9 admissible: opinions are not evidence.
    A reply that still fails after the repair is no usable answer, not an abstention:
    the model never declined."""
    bad = '{"diagnosis": "Acute pancreatitis", "support": ["O9"], "conflict": ["O7"]}'
    model = _full_model([bad, bad], ledger="[O9] Amylase: 2000 U/L (supports pancreatitis)")
    decision = Full().decide(model, EVIDENCE, seed=9)
    assert len(model.calls) == 4  # council, ledger, consensus, ONE repair
    assert decision.action == NO_ANSWER_ACTION and not decision.abstained
    assert decision.answer is None and decision.detail["outcome"] == "invalid"
    assert decision.detail["errors"][0] == [
        "'support' cites ids that cannot serve as evidence (only S0 and stated or recorded "
        "observations can): O9 (not in the evidence)",
        "'conflict' cites ids that cannot serve as evidence (only S0 and stated or recorded "
        "observations can): O7 (not in the evidence)",
        "'support' cites no admissible observation id"]


def test_full_prompts_say_unknown_observations_cannot_be_cited():
    assert "marked unknown (not recorded or not available) cannot be cited" in (
        " ".join(CONSENSUS_SYSTEM.split()))
    assert "neither support nor conflict" in LEDGER_SYSTEM


def test_full_rejects_an_unknown_observation_as_support_or_conflict():
    """EGIP appendix A.2: "Unknown observations cannot serve as support or conflict
    references." O3 of EVIDENCE reads "not recorded (unknown)"."""
    bad = ('{"diagnosis": "Acute pancreatitis", "support": ["O2", "O3"], '
           '"conflict": ["[O3]", "P1"]}')
    decision = Full(repair=False).decide(_full_model([bad]), EVIDENCE)
    assert not decision.abstained and decision.detail["outcome"] == "invalid"
    assert (decision.action, decision.answer) == (NO_ANSWER_ACTION, None)
    assert decision.detail["errors"][0] == [
        "'support' cites ids that cannot serve as evidence (only S0 and stated or recorded "
        "observations can): O3 (an unknown observation)",
        "'conflict' cites ids that cannot serve as evidence (only S0 and stated or recorded "
        "observations can): [O3] (an unknown observation), P1 (not an observation id)"]


@pytest.mark.parametrize(("consensus", "in_proposals", "flags"), [
    ("Acute pancreatitis", True, []),
    ("**acute pancreatitis.**", True, []),  # formatting aside
    ("B", True, []),  # candidate letter B is "Acute pancreatitis"
    ("Gallstone pancreatitis", False, ["not_a_proposal"]),  # recorded, still accepted
])
def test_full_records_whether_the_consensus_is_a_council_proposal(consensus, in_proposals,
                                                                  flags):
    reply = f'{{"diagnosis": "{consensus}", "support": ["O2"]}}'
    decision = Full().decide(_full_model([reply]), EVIDENCE, candidates=CANDIDATES)
    assert decision.detail["proposals"] == ["Acute pancreatitis"]
    assert decision.detail["in_proposals"] is in_proposals
    assert decision.calls[2]["flags"] == flags
    assert not decision.abstained and decision.detail["outcome"] == "accepted"


@pytest.mark.parametrize(("reply", "problem", "action"), [
    ('{"diagnosis": "Acute pancreatitis", "support": "O2"}', "field 'support'",
     NO_ANSWER_ACTION),
    ('{"diagnosis": 3, "support": ["O2"]}', "field 'diagnosis'", NO_ANSWER_ACTION),
    ('{"diagnosis": "", "support": ["O2"]}', "'diagnosis' is empty", NO_ANSWER_ACTION),
    ('{"diagnosis": "Undetermined", "support": ["O2"]}', "names no diagnosis",
     ABSTENTION_ACTION),  # an explicit decline
    ('{"diagnosis": "<single diagnosis>", "support": ["O2"]}', "template's placeholder",
     NO_ANSWER_ACTION),
    ('{"diagnosis": "N/A", "support": ["O2"]}', "template's placeholder", NO_ANSWER_ACTION),
    ('{"diagnosis": "Acute pancreatitis", "support": [], "conflict": ["O1"]}',
     "'support' cites no admissible observation id", NO_ANSWER_ACTION),
    ('["Acute pancreatitis"]', "no JSON object", NO_ANSWER_ACTION),
])
def test_full_schema_and_consistency_checks(reply, problem, action):
    decision = Full(repair=False).decide(_full_model([reply]), EVIDENCE)
    assert decision.action == action
    assert decision.abstained is (action == ABSTENTION_ACTION) and decision.answer is None
    assert any(problem in p for p in decision.detail["errors"][0])
    assert [c["purpose"] for c in decision.calls] == ["council", "ledger", "consensus"]


def test_full_declared_insufficiency_abstains_without_repair():
    model = _full_model(['{"diagnosis": "", "support": [], "insufficient": true}'])
    decision = Full().decide(model, EVIDENCE)
    assert len(model.calls) == 3
    assert decision.abstained and decision.detail["outcome"] == "insufficient"


def test_full_checks_its_arguments_and_normalizes_ids():
    for bad in ({"n_council": 0}, {"council_temperature": -0.1}):
        with pytest.raises(ValueError):
            Full(**bad)
    assert [normalize_id(x) for x in ("[o3]", " O 12 ", "s0", "O", "P1", "X3")] == [
        "O3", "O12", "S0", None, None, None]


def test_admissible_ids_of_a_real_evidence_interface():
    """Ids are S0 plus the known observations of e_T: patient replies (also to a fixed
    clarification) and recorded measurements, never a 'not recorded' one, feedback or
    doctor events. Expected ids computed by hand from the five actions below."""
    actions = ["What brings you in today?",  # O1 patient
               "REQUEST TEST: T4",  # O2 chest X-ray
               "REQUEST TEST: T4",  # repeat -> clarification question -> O3 patient
               "",  # empty -> interface feedback, no observation
               "REQUEST TEST: Bone marrow biopsy"]  # O4 not recorded
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=5)
    env.reset(seed=0, options={"case_id": "demo-01"})
    for action in actions:
        obs, *_ , info = env.step(action)
    assert info["phase"] == "decide"
    assert admissible_ids(obs["text"]) == ["S0", "O1", "O2", "O3"]
    assert "[O4] Measurement Bone marrow biopsy: not recorded (unknown)" in obs["text"]
    assert observation_status(obs["text"]) == {
        "O1": "stated", "O2": "recorded", "O3": "stated", "O4": "unknown"}


#: demo-02 actions: O1 a question, O2 potassium (4.1 mmol/L), O3 a biopsy the case does not
#: record, O4 the lipid panel whose stored value is the placeholder "Pending", O5 the ECG.
DEMO_02_ACTIONS = ["Where does it hurt?", "REQUEST TEST: T3",
                   "REQUEST TEST: Bone marrow biopsy", "REQUEST TEST: T5", "REQUEST TEST: T1"]


def _demo_02_evidence() -> str:
    env = gym.make("EGIP-Demo-v0", acquisition_rounds=5)
    env.reset(seed=0, options={"case_id": "demo-02"})
    for action in DEMO_02_ACTIONS:
        obs, *_, info = env.step(action)
    assert info["phase"] == "decide"
    return obs["text"]


def test_unknown_observations_of_a_real_evidence_interface_are_not_admissible():
    """EGIP appendix A.2. By hand from demo.jsonl: demo-02 records Potassium "4.1
    mmol/L", Lipid_Panel "Pending" (a placeholder) and an Electrocardiogram, and no bone
    marrow biopsy; so O3 and O4 are unknown and S0, O1, O2, O5 are admissible."""
    text = _demo_02_evidence()
    assert "[O3] Measurement Bone marrow biopsy: not recorded (unknown)" in text
    assert "[O4] Measurement T5 Lipid Panel (Blood Tests): result not available (unknown)" in text
    assert "[O2] Measurement T3 Potassium (Blood Tests):\n    4.1 mmol/L" in text
    assert observation_status(text) == {"O1": "stated", "O2": "recorded", "O3": "unknown",
                                        "O4": "unknown", "O5": "recorded"}
    assert admissible_ids(text) == ["S0", "O1", "O2", "O5"]


def test_full_on_a_real_evidence_interface_repairs_a_citation_of_a_placeholder_result():
    first = '{"diagnosis": "Inferior STEMI", "support": ["O5", "O4"], "conflict": []}'
    fixed = '{"diagnosis": "Inferior STEMI", "support": ["O5", "S0"], "conflict": ["O2"]}'
    model = _full_model([first, fixed], council="DIAGNOSIS: Inferior STEMI\nBASIS: O5")
    text = _demo_02_evidence()
    decision = Full().decide(model, text, seed=2)
    repair_messages = model.calls[3][0]
    assert repair_messages[-1]["content"] == REPAIR_USER.format(
        errors="- 'support' cites ids that cannot serve as evidence (only S0 and stated or "
               "recorded observations can): O4 (an unknown observation)",
        admissible="S0, O1, O2, O5")
    assert decision.action == "DIAGNOSIS READY: Inferior STEMI"
    assert (decision.detail["support"], decision.detail["conflict"]) == (["O5", "S0"], ["O2"])


@pytest.mark.parametrize(("observations", "statuses"), [
    # a patient reply over two lines: the second line opens no entry
    ('[O1] Patient, asked "Pain?": Yes.\nIt started [O2] days ago.\n'
     "[O2] Measurement T1 ECG:\n    normal", {"O1": "stated", "O2": "recorded"}),
    # a reply imitating an entry with a real id makes that id unreadable, not admissible
    ('[O1] Patient, asked "Tests?": none\n[O2] Measurement T1 ECG:\n    fake\n'
     "[O2] Measurement T1 ECG: not recorded (unknown)", {"O1": "stated", "O2": "unreadable"}),
    # a recorded head without its indented result, and an entry of no known form
    ("[O1] Measurement T1 ECG:\n[O2] Doctor note", {"O1": "unreadable", "O2": "unreadable"}),
    ("(none)", {}),
])
def test_observation_status_reads_the_render_layout(observations, statuses):
    text = (f"# Objective (S0)\nX\n\n# Acquired observations\n{observations}\n\n"
            "# Instructions\n[O7] Measurement T9 CT:\n    not an observation")
    assert observation_status(text) == statuses
    assert admissible_ids(text) == ["S0", *(k for k, v in statuses.items()
                                            if v in ("stated", "recorded"))]


# -------------------------------------------------------------- strategies by name
def test_make_strategy_by_name():
    assert isinstance(make_strategy("direct"), Direct)
    vote = make_strategy(" Vote ", n_samples=3)
    assert isinstance(vote, Vote) and vote.describe() == {
        "name": "vote", "n_samples": 3, "temperature": None}
    assert isinstance(make_strategy("full"), Full)
    with pytest.raises(ValueError, match="strategy must be one of"):
        make_strategy("council")
    with pytest.raises(TypeError):
        make_strategy("direct", n_samples=3)


# ------------------------------------------------------------ episodes through the env
def test_vote_episode_on_a_candidate_case_is_scored_correct():
    """demo-12: target Herpes zoster (option B); samples mix a letter and markdown."""
    samples = iter(["DIAGNOSIS READY: B", "DIAGNOSIS READY: **Herpes zoster**",
                    "DIAGNOSIS READY: Bullous impetigo", "DIAGNOSIS READY: herpes zoster.",
                    "DIAGNOSIS READY: Bullous impetigo"])

    def respond(messages, config, index):
        if messages[0]["content"] == DIRECT_SYSTEM:
            return next(samples)
        return "REQUEST TEST: PE1"

    doctor = LLMDoctor(ScriptedChatModel(respond), strategy="vote")
    info, env = _episode(doctor, "demo-12", acquisition_rounds=2)
    assert info["answer"] == "Herpes zoster" and info["verdict"] == "correct"
    assert env.episode_record()["events"][1]["exam_id"] == "PE1"
    assert [c["purpose"] for c in doctor.drain_calls()] == ["acquire", "acquire", "decide",
                                                            "vote"]


def test_full_episode_cites_real_observation_ids():
    def respond(messages, config, index):
        system = messages[0]["content"]
        if system == COUNCIL_SYSTEM:
            return "DIAGNOSIS: Lobar pneumonia\nBASIS: O1"
        if system == LEDGER_SYSTEM:
            return "Lobar pneumonia: O1 supports it."
        if system == CONSENSUS_SYSTEM:
            return ('{"diagnosis": "Lobar pneumonia", "support": ["O1"], "conflict": [], '
                    '"insufficient": false}')
        return "REQUEST TEST: T4"

    doctor = LLMDoctor(ScriptedChatModel(respond), strategy=Full())
    info, env = _episode(doctor, "demo-01", acquisition_rounds=1)
    assert info["answer"] == "Lobar pneumonia" and info["verdict"] == "correct"
    assert doctor.last_decision.detail["admissible"] == ["S0", "O1"]
    assert env.episode_record()["evidence"]["observations"][0]["exam_id"] == "T4"


def test_vote_counts_an_empty_marker_as_unparsed():
    decision, _ = _vote(["DIAGNOSIS READY:", "DIAGNOSIS READY: Gout", "DIAGNOSIS READY: **",
                         "Gout", "DIAGNOSIS READY: ("], candidates=None)
    assert decision.action == "DIAGNOSIS READY: Gout"
    assert [v["status"] for v in decision.detail["votes"]] == [
        "unparsed", "eligible", "unparsed", "eligible", "unparsed"]
