"""The environment with LLM simulators: opt-in patient and judge, ``astep``, seeds, event loops.

Model calls go over a real socket to a :class:`~clinenv.testing.fake_server.FakeChatServer`
on 127.0.0.1 (delay 0) through :class:`~clinenv.llm.openai_backend.OpenAIChatModel`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.judge import LLMJudge
from clinenv.agents.llm_patient import LLMPatient
from clinenv.agents.prompts import JUDGE_SYSTEM, JUDGE_USER
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.env import EGIPEnv
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.llm.scripted import ScriptedChatModel
from clinenv.runs.logged import run_episode
from clinenv.testing.clinic import PATIENT_REPLY, clinic_responder, role_of
from clinenv.testing.data import leaves
from clinenv.testing.fake_server import FakeChatServer

ROOT = Path(__file__).resolve().parents[2]


def play(env, actions, *, seed=0, case_id="demo-01"):
    """Reset, then step through ``actions``; every (obs, reward, term, trunc, info)."""
    out = [env.reset(seed=seed, options={"case_id": case_id})]
    for action in actions:
        out.append(env.step(action))
    return out


async def aplay(env, actions, *, seed=0, case_id="demo-01"):
    out = [env.reset(seed=seed, options={"case_id": case_id})]
    for action in actions:
        out.append(await env.unwrapped.astep(action))
    return out


def comparable(steps):
    """Steps with numpy masks as lists, for ``==``."""
    result = []
    for step in steps:
        obs, *rest = step
        result.append(({"text": obs["text"], "mask": obs["exam_mask"].tolist()}, *rest))
    return result


def scripted_actions(case_id="demo-01", seed=0, **kwargs):
    """The scripted doctor's actions over one episode of the default environment."""
    env = gym.make("EGIP-Demo-v0", **kwargs)
    doctor = ScriptedDoctor()
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    actions, done = [], False
    while not done:
        actions.append(doctor.act(obs, info))
        obs, _, done, _, info = env.step(actions[-1])
    return actions


# ------------------------------------------------------------------------ kwargs
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"patient": "llm"}, "patient_model"),
    ({"patient": "retrieval", "patient_model": ScriptedChatModel(["x"])}, "patient_model"),
    ({"patient": "oracle"}, "patient must be one of"),
    ({"patient": object()}, "reply(view)"),
    ({"patient": "llm", "patient_model": "gpt-4o"}, "patient_model must be a"),
    ({"judge": "llm"}, "judge_model"),
    ({"judge_model": ScriptedChatModel(["Yes"])}, "judge_model is used only"),
    ({"judge": "gpt"}, "judge must be None"),
    ({"judge": object()}, "judge(answer, target)"),
])
def test_bad_simulator_kwargs_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EGIPEnv("demo", **kwargs)


def test_simulator_kinds():
    chat = ScriptedChatModel(["fine"])
    assert isinstance(EGIPEnv("demo", patient="llm", patient_model=chat).patient, LLMPatient)
    assert isinstance(EGIPEnv("demo", judge="llm", judge_model=chat).judge, LLMJudge)
    default = EGIPEnv("demo")
    assert type(default.patient).__name__ == "RetrievalPatient" and default.judge is None
    assert type(EGIPEnv("demo", patient="retrieval").patient).__name__ == "RetrievalPatient"
    assert EGIPEnv("demo", judge="deterministic").judge is None
    assert not default.has_llm_agents and default.drain_llm_calls() == []


# ------------------------------------------------------------------------ astep
def test_astep_gives_exactly_what_step_gives_default_simulators():
    actions = scripted_actions() + ["after the end"]
    sync = play(gym.make("EGIP-Demo-v0"), actions)
    asynchronous = asyncio.run(aplay(gym.make("EGIP-Demo-v0"), actions))
    assert comparable(sync) == comparable(asynchronous)
    assert sync[-2][4]["verdict"] == "correct" and sync[-2][4]["scorer"] == "deterministic"
    assert sync[-1][4]["action_kind"] == "after_end"


def test_astep_gives_exactly_what_step_gives_llm_patient_and_judge(model, server):
    actions = scripted_actions()
    kwargs = dict(patient="llm", patient_model=model, judge="llm", judge_model=model)
    sync = play(gym.make("EGIP-Demo-v0", **kwargs), actions, seed=5)
    sync_bodies = list(server.requests)
    server.requests.clear()
    asynchronous = asyncio.run(aplay(gym.make("EGIP-Demo-v0", **kwargs), actions, seed=5))
    assert comparable(sync) == comparable(asynchronous)
    # the same requests, seeds included (B08c), whichever step was used
    assert server.requests == sync_bodies
    roles = [role_of(body) for body in sync_bodies]
    # 5 questions, and 6 premature proposals that the EGIP default replaces with a
    # clarification question to the patient (the 7th proposal is the decision)
    assert roles.count("judge") == 1 and roles.count("patient") == 5 + 6
    final = sync[-1][4]
    assert final["verdict"] == "correct" and final["scorer"] == "llm-judge"
    assert final["judge_verdict"] == "correct"


# ------------------------------------------------------------- LLM patient: views
def _messages_text(bodies):
    return [m["content"] for body in bodies for m in body["messages"]]


def _check_no_records_or_target(env, case_ids, server, model):
    """Run the scripted doctor with the LLM patient; the patient requests hold P but no
    record leaf of M (not also in P) and never the target Y."""
    doctor = ScriptedDoctor()
    for case_id in case_ids:
        server.requests.clear()
        record = run_episode(env, doctor, case_id=case_id, seed=1)
        case = env.unwrapped.pool.case(case_id)
        bodies = [b for b in server.requests if role_of(b) == "patient"]
        assert len(bodies) == sum(e["source"] == "patient" for e in record["events"]) >= 1
        texts = _messages_text(bodies)
        p_text = json.dumps(case.patient, ensure_ascii=False).lower()
        m_leaves = {str(v).strip().lower() for v in leaves(case.records)}
        hidden = [v for v in m_leaves if len(v) >= 12 and v not in p_text]
        assert hidden, case_id  # results the patient must never see
        target = case.target.text.lower()
        for text in texts:
            low = text.lower()
            assert target not in low, (case_id, "Y in a patient message")
            assert not [v for v in hidden if v in low], (case_id, "M in a patient message")
        # not vacuous: the facts P reach the system prompt, and the reply is used
        p_leaves = [str(v) for v in leaves(case.patient, strings_only=True)
                    if len(str(v)) >= 12 and target not in str(v).lower()]
        assert any(leaf.split(".")[0][:40] in bodies[0]["messages"][0]["content"]
                   for leaf in p_leaves)
        assert {e["reply"] for e in record["events"] if e["source"] == "patient"} == {
            PATIENT_REPLY}


def test_llm_patient_messages_hold_no_records_or_target_demo(model, server):
    env = gym.make("EGIP-Demo-v0", patient="llm", patient_model=model)
    _check_no_records_or_target(env, [c.case_id for c in env.unwrapped.pool.cases],
                                server, model)


def test_llm_patient_messages_hold_no_records_or_target_medqa(shared_data_dir, model,
                                                              server):
    env = gym.make("EGIP-MedQA-v0", patient="llm", patient_model=model)
    ids = [c.case_id for c in env.unwrapped.pool.cases]
    _check_no_records_or_target(env, ids[:6] + ids[-2:], server, model)


# ------------------------------------------------------------------------ seeds
class SeedRecorder:
    """A patient that records the seeds it is reset with."""

    def __init__(self):
        self.seeds = []

    def reset(self, *, seed=None):
        self.seeds.append(seed)

    def reply(self, view):
        return "I feel unwell."


# field-bug-reports B08(c)
def test_patient_seed_comes_from_the_reset_seed_B08c():
    """Env-side randomness is the same in two runs."""
    patient = SeedRecorder()
    env = gym.make("EGIP-Demo-v0", patient=patient)
    default = gym.make("EGIP-Demo-v0")
    for seed in (7, 7, 8):
        _, info = env.reset(seed=seed)
        _, plain = default.reset(seed=seed)
        assert info["case_id"] == plain["case_id"]  # the case is drawn before the patient seed
    first, again, other = patient.seeds
    assert first == again and first != other
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in patient.seeds)


def test_llm_patient_and_judge_requests_carry_reset_derived_seeds(model, server):
    kwargs = dict(patient="llm", patient_model=model, judge="llm", judge_model=model)
    actions = scripted_actions()
    runs = []
    for seed in (3, 3, 4):
        server.requests.clear()
        play(gym.make("EGIP-Demo-v0", **kwargs), actions, seed=seed)
        runs.append([(role_of(b), b.get("seed")) for b in server.requests
                     if role_of(b) in ("patient", "judge")])
    assert runs[0] == runs[1]
    assert [s for _, s in runs[0]] != [s for _, s in runs[2]]
    seeds = [s for _, s in runs[0]]
    assert None not in seeds and len(set(seeds)) == len(seeds)  # one seed per call


# ------------------------------------------------------------------------ judge
def _answer_episode(env, answer, case_id="demo-13", *, action=None):
    """Propose ``answer`` at once (ends acquisition), then answer with ``action``
    (default: the same proposal)."""
    env.reset(seed=0, options={"case_id": case_id})
    env.step(f"DIAGNOSIS READY: {answer}")
    return env.step(f"DIAGNOSIS READY: {answer}" if action is None else action)


def test_llm_judge_verdict_replaces_the_scorer(server, model):
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge="llm",
                   judge_model=model)
    server.requests.clear()
    _, reward, terminated, _, info = _answer_episode(env, "Acute pulmonary embolism")
    # the deterministic scorer refuses the added qualifier; the judge (Yes) accepts it
    plain = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    assert _answer_episode(plain, "Acute pulmonary embolism")[4]["verdict"] == "wrong"
    assert terminated and reward == 1.0
    assert (info["verdict"], info["scorer"], info["judge_verdict"]) == (
        "correct", "llm-judge", "correct")
    judged = [b for b in server.requests if role_of(b) == "judge"]
    assert len(judged) == 1
    assert judged[0]["messages"] == [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": JUDGE_USER.format(target="Pulmonary embolism",
                                                      answer="Acute pulmonary embolism")}]
    record = env.unwrapped.episode_record()
    assert record["judge_verdict"] == "correct" and record["scorer"] == "llm-judge"
    calls = env.unwrapped.drain_llm_calls()
    assert [c["agent"] for c in calls] == ["judge"] and calls[0]["verdict"] == "correct"
    assert env.unwrapped.drain_llm_calls() == []


# field-bug-reports B07
def test_unparsed_judge_reply_is_unscored_never_wrong():
    """An unreadable verdict stays apart from wrong answers."""
    with FakeChatServer(clinic_responder(judge_reply="Yes and no, partly")) as srv:
        chat = OpenAIChatModel("fake-model", base_url=srv.base_url, max_retries=0)
        env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge="llm",
                       judge_model=chat)
        _, reward, _, _, info = _answer_episode(env, "Pulmonary embolism")
        chat.close()
        n_judge = sum(role_of(b) == "judge" for b in srv.requests)
    assert (info["verdict"], info["judge_verdict"], info["correct"], reward) == (
        "unscored", "unparsed", False, 0.0)
    assert n_judge == 2  # the LLM judge's one retry
    assert env.unwrapped.episode_record()["judge_verdict"] == "unparsed"


def test_abstention_and_no_answer_never_reach_the_judge(server, model):
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge="llm",
                   judge_model=model)
    for action in ("DIAGNOSIS READY: Undetermined", "", "   "):
        server.requests.clear()
        info = _answer_episode(env, "Pulmonary embolism", action=action)[4]
        assert info["verdict"] == "unscored" and info["scorer"] == "deterministic"
        assert info["judge_verdict"] is None
        assert info["abstained"] == (action == "DIAGNOSIS READY: Undetermined")
        assert server.requests == []


def test_judge_object_sync_and_async():
    class Contrarian:
        def __init__(self):
            self.asked = []

        def judge(self, answer, target):
            self.asked.append((answer, target))
            return SimpleNamespace(verdict="wrong")

    judge = Contrarian()
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge=judge)
    info = _answer_episode(env, "Pulmonary embolism")[4]
    assert (info["verdict"], info["judge_verdict"]) == ("wrong", "wrong")
    assert judge.asked == [("Pulmonary embolism", "Pulmonary embolism")]

    class AsyncOnly:
        async def ajudge(self, answer, target, *, seed=None):
            return SimpleNamespace(verdict="correct")

    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge=AsyncOnly())

    async def episode():
        env.reset(seed=0, options={"case_id": "demo-13"})
        await env.unwrapped.astep("DIAGNOSIS READY: PE")
        return await env.unwrapped.astep("DIAGNOSIS READY: PE")

    assert asyncio.run(episode())[4]["verdict"] == "correct"


# ------------------------------------------------------------------ event loops
class AsyncOnlyPatient:
    async def areply(self, view):
        await asyncio.sleep(0)
        return "Only asynchronously."


# field-bug-reports B10
def test_sync_step_with_async_only_patient_says_use_astep_and_changes_nothing():
    """Never a nested loop or a deadlock; a clear error instead."""
    env = gym.make("EGIP-Demo-v0", patient=AsyncOnlyPatient())
    env.reset(seed=0, options={"case_id": "demo-01"})
    with pytest.raises(TypeError, match="astep"):
        env.step("What brings you in?")
    runtime = env.unwrapped.runtime
    assert runtime.turn == 0 and runtime.history == []

    async def inside_a_loop():
        return await env.unwrapped.astep("What brings you in?")

    obs, *_ = asyncio.run(inside_a_loop())
    assert "Only asynchronously." in obs["text"]


B10_SCRIPT = textwrap.dedent("""
    import asyncio, gc
    import gymnasium as gym
    import clinenv
    from clinenv.testing.fake_server import FakeChatServer
    from clinenv.llm.openai_backend import OpenAIChatModel

    with FakeChatServer(lambda body, index: "It hurts here.") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0)
        env = gym.make("EGIP-Demo-v0", patient="llm", patient_model=model)
        env.reset(seed=0, options={"case_id": "demo-01"})
        for question in ("What brings you in?", "When did it start?", "Any fever?"):
            obs, reward, terminated, truncated, info = env.step(question)
        env.close()
        print("sync", info["turn"], obs["text"].count("It hurts here."))

        async def inside_a_running_loop():
            env = gym.make("EGIP-Demo-v0", patient="llm", patient_model=model)
            env.reset(seed=0, options={"case_id": "demo-01"})
            obs, *_ = env.step("Any cough?")           # sync step, loop running
            obs, *_ = await env.unwrapped.astep("Any pain?")
            env.close()
            return obs["text"].count("It hurts here.")

        print("loop", asyncio.run(inside_a_running_loop()), asyncio.run(inside_a_running_loop()))
        model.close()
        gc.collect()
        print("requests", server.stats()["n_requests"])
""")


# field-bug-reports B10
def test_b10_three_steps_then_close_and_steps_inside_a_running_loop():
    """Three sync steps with an LLM patient over the OpenAI
    client, close; then ``step`` and ``await astep`` inside ``asyncio.run``, twice. No
    "Event loop is closed", no unretrieved task exception, no deadlock (timeout)."""
    proc = subprocess.run([sys.executable, "-c", B10_SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["sync 3 3", "loop 2 2", "requests 7"]
    for bad in ("Event loop is closed", "Task exception was never retrieved", "Traceback",
                "RuntimeWarning"):
        assert bad not in proc.stderr


def test_drain_llm_calls_has_timings_info_never(model):
    env = gym.make("EGIP-Demo-v0", patient="llm", patient_model=model)
    steps = play(env, ["What brings you in?", "REQUEST TEST: PE1", "Any fever?"])
    for step in steps:
        info = step[-1]
        assert not {"latency_s", "prompt_tokens", "completion_tokens", "llm"} & set(info)
    calls = env.unwrapped.drain_llm_calls()
    assert [c["agent"] for c in calls] == ["patient", "patient"]
    assert all(c["backend"] == "openai" and c["latency_s"] >= 0 for c in calls)
    assert [c["question_index"] for c in calls] == [0, 1]
    assert env.unwrapped.drain_llm_calls() == []


# field-bug-reports B13
def test_async_vector_env_with_an_llm_patient_b13(model, server):
    """Sub-environments with an LLM patient pickle into worker
    processes (the model's HTTP clients are rebuilt there) and their text survives."""
    from clinenv.env.vector import make_vec

    vec = make_vec("EGIP-Demo-v0", 2, mode="async", patient="llm", patient_model=model)
    try:
        vec.reset(seed=0, options={"case_id": "demo-01"})
        obs, *_ = vec.step(["What brings you in?", "REQUEST TEST: PE1"])
    finally:
        vec.close()
    assert PATIENT_REPLY in obs["text"][0] and PATIENT_REPLY not in obs["text"][1]
    assert sum(role_of(b) == "patient" for b in server.requests) == 1


def test_a_candidate_letter_reaches_the_judge_as_its_label():
    """A bare option letter means nothing to a judge without K: it gets the label."""
    class Recorder:
        def __init__(self):
            self.asked = []

        def judge(self, answer, target):
            self.asked.append((answer, target))
            return SimpleNamespace(verdict="correct")

    judge = Recorder()
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide", judge=judge)
    # demo-15: candidates A..E, E = "Systemic lupus erythematosus" (the target)
    for action in ("DIAGNOSIS READY: E", "DIAGNOSIS READY: B. Dermatomyositis",
                   "DIAGNOSIS READY: Systemic lupus erythematosus (SLE)"):
        _answer_episode(env, "E", case_id="demo-15", action=action)
    target = env.unwrapped.runtime.case.target.text
    assert [a for a, _ in judge.asked] == [
        "Systemic lupus erythematosus", "Dermatomyositis",
        "Systemic lupus erythematosus"]
    assert {t for _, t in judge.asked} == {target}


# ---------------------------------------------------------- patient flags in info
#: Patient replies, in call order, and the flags each must get.
B16_REPLIES = [
    ("It started two days ago.", []),
    ("Doctor: Does it spread anywhere?\nPatient: Yes, to my back.", ["speaks_as_doctor"]),
    ("  it started two days ago. ", ["repeats_own_reply"]),  # its opening, again
    ("", ["empty_reply"]),
]
B16_ACTIONS = ["When did it start?", "Does it spread?", "REQUEST TEST: PE1",
               "When did it start, again?", "Anything else?"]


def b16_env():
    model = ScriptedChatModel([raw for raw, _ in B16_REPLIES])
    return gym.make("EGIP-Demo-v0", patient="llm", patient_model=model,
                    acquisition_rounds=6)


# field-bug-reports B16
def test_b16_patient_flags_are_in_info_and_in_the_record():
    """A patient reply that speaks as the doctor, or repeats its
    opening, is flagged in ``info["patient_flags"]`` (the flags of that step's reply,
    ``[]`` when clean; no key on steps the patient did not answer) and in the episode
    record (turn of each flagged reply)."""
    env = b16_env()
    steps = play(env, B16_ACTIONS)
    infos = [step[-1] for step in steps]
    assert "patient_flags" not in infos[0]  # reset
    assert [info.get("patient_flags", "absent") for info in infos[1:]] == [
        [], ["speaks_as_doctor"], "absent", ["repeats_own_reply"], ["empty_reply"]]
    record = env.unwrapped.episode_record()
    assert record["patient_flags"] == [
        {"turn": 2, "flags": ["speaks_as_doctor"]},
        {"turn": 4, "flags": ["repeats_own_reply"]},
        {"turn": 5, "flags": ["empty_reply"]}]
    said = {e["turn"]: e["reply"] for e in record["events"] if e["source"] == "patient"}
    assert said[2] == "Yes, to my back."  # only the patient's own words were kept
    # the same replies give the same infos, on the async path too
    again = asyncio.run(aplay(b16_env(), B16_ACTIONS))
    assert comparable(again) == comparable(steps)
    # a fresh episode starts with no flagged replies; the retrieval patient reports none
    env.reset(seed=1, options={"case_id": "demo-02"})
    assert env.unwrapped.episode_record()["patient_flags"] == []
    plain = gym.make("EGIP-Demo-v0")
    assert not any("patient_flags" in step[-1] for step in play(plain, B16_ACTIONS))
    assert "patient_flags" not in plain.unwrapped.episode_record()


def test_check_env_with_a_flagging_llm_patient():
    """Gymnasium's checker (determinism of info included) with an LLM patient whose
    every reply is flagged: the flags depend on the reply text only."""
    from gymnasium.utils.env_checker import check_env

    model = ScriptedChatModel(lambda messages, config, index: "Doctor: More?\nPatient: No.")
    check_env(EGIPEnv("demo", patient="llm", patient_model=model), skip_render_check=True)
