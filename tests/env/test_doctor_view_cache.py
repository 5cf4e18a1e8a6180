"""The step's caches give what computing from scratch gives, after every step.

The environment keeps per-episode state that it could recompute from the runtime: the
rendered view (header once, history events once, menu block once per set of requests),
the menu state, the observations of e_T, the prepared record lookups and the retrieval
patient's scored questions. Each test replays real episodes (the demo set; MedQA too
where the shared files are present) with a scripted doctor interleaved with unusual
actions, and compares every cached value with a reference written here from the
definitions: the uncached renderers, a plain loop over the catalog, the observations of
the whole history, a fresh patient.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pickle
import random
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from rapidfuzz import fuzz, process

from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.env import EGIPEnv
from clinenv.env import retrieval_patient as rp
from clinenv.env.doctor_view import exam_mask
from clinenv.protocol import doctor_text, parser
from clinenv.protocol.evidence import build_evidence
from clinenv.protocol.history import event_to_dict
from clinenv.protocol.lookup import lookup
from clinenv.protocol.menu import build_menu, menu_order
from clinenv.protocol.render import render_delta, render_doctor_view
from clinenv.protocol.views import FrozenFacts, PatientView
from clinenv.testing.data import MEDQA_FILE, SHARED_DATA, needs_shared_data

#: Actions mixed into the scripted doctor's: feedback of every kind, group and name
#: requests, repeats, placeholders, markers in odd forms, multi-line text.
ODD_ACTIONS = (
    "", "REQUEST TEST: T1", "REQUEST TEST: T1", "REQUEST TEST: Imaging",
    "REQUEST TEST: Vital signs", "REQUEST TEST: T99", "REQUEST TEST: PE1, T2",
    "REQUEST TEST: <id or name>", "DIAGNOSIS READY: <single diagnosis>",
    "REQUEST TEST: serum unobtainium level", "REQUEST TEST: blod", "T2",
    "**Diagnosis ready:** maybe gout", "request tests: cbc", "Round 3\n of 19. Any pain?",
    "<think>hidden</think>Do you smoke?", "Doctor: Any fever?\nPatient: yes",
    "# Task\nWhat is wrong?", "x" * 5000, "Tell me more", "Hello!",
)

SETTINGS = [
    {},
    {"observation_format": "delta"},
    {"show_menu": False},
    {"menu_limit": 3, "premature_diagnosis": "decide"},
    {"acquisition_rounds": 7, "clarify_repeats": False, "max_exams": 4},
]


def _actions(doctor, seed):
    """The scripted doctor's next action, or (one step in three) an odd one."""
    rng = random.Random(seed)

    def act(obs, info):
        if info["phase"] == "acquire" and rng.random() < 0.35:
            return rng.choice(ODD_ACTIONS)
        return doctor.act(obs, info)

    return act


def _reference_mask(rt, max_exams):
    mask = np.zeros(max_exams, dtype=np.int8)
    if rt.config.show_menu and rt.phase == "acquire":
        for entry in rt.catalog.entries:
            if entry.index < max_exams and entry.exam_id not in rt.requested:
                mask[entry.index] = 1
    return mask


def _reference_new_observations(rt):
    """The observations acquired in round ``rt.turn``, numbered over the whole history."""
    if rt.phase == "done":
        return []
    tail = []
    for event in reversed(rt.history):
        if event.turn != rt.turn:
            break
        tail.append(event)
    if not any(e.source in ("patient", "measurement") for e in tail):
        return []
    everything = build_evidence(rt.case.objective, rt.case.candidates, rt.history)
    return [o.to_dict() for o in everything.observations if o.turn == rt.turn]


def _check_state(env, obs, info, since):
    """Every cached value of the current step against its reference."""
    rt = env.runtime
    cfg = rt.config
    reference = build_evidence(rt.case.objective, rt.case.candidates, rt.history)
    assert rt.observations() == reference.observations
    assert rt.evidence() == reference
    if rt.phase != "done":
        full = render_doctor_view(rt)  # from scratch: a fresh history renderer
        assert env.loop.view() == full
        if env.observation_format == "view":
            expected = full
        else:
            expected = render_delta(rt, since)
        if not info["text_clipped"]:
            assert obs["text"] == expected
    order = menu_order(rt.catalog)
    menu = build_menu(order, rt.requested, cfg.menu_limit) if cfg.show_menu else []
    assert rt.menu() == menu
    state = rt.menu_state()
    assert state is rt.menu_state()  # kept while the requests are unchanged
    assert state.requested == tuple(rt.requested)
    assert list(state.entries) == build_menu(order, rt.requested, cfg.menu_limit)
    unrequested = [e for e in rt.catalog.entries if e.exam_id not in rt.requested]
    assert state.n_hidden == len(unrequested) - len(state.entries)
    assert state.open_mask == bytes(e in unrequested for e in rt.catalog.entries)
    np.testing.assert_array_equal(obs["exam_mask"], _reference_mask(rt, env.max_exams))
    np.testing.assert_array_equal(exam_mask(rt, env.max_exams),
                                  _reference_mask(rt, env.max_exams))
    expected_menu = ([{"id": e.exam_id, "name": e.label} for e in menu]
                     if rt.phase == "acquire" else [])
    assert info["menu"] == expected_menu
    if info["action_kind"] not in (None, "after_end"):
        assert info["new_observations"] == _reference_new_observations(rt)


def _play(env, case_id, seed, check=True):
    """One episode; returns the per-step hash of observation, info and reward."""
    digest = hashlib.sha256()
    doctor = ScriptedDoctor(exploration=0.3)
    act = _actions(doctor, seed)
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    done = False
    while not done:
        action = act(obs, info)
        since = len(env.runtime.history)
        obs, reward, done, _, info = env.step(action)
        if check:
            _check_state(env, obs, info, since)
        digest.update(obs["text"].encode() + obs["exam_mask"].tobytes())
        digest.update(json.dumps(info, sort_keys=True, default=repr).encode())
        digest.update(repr(reward).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(s) or "default")
def test_cached_step_state_equals_the_uncached_computation(settings):
    env = EGIPEnv("demo", **settings)
    for index in range(len(env.pool.cases)):
        _play(env, index, seed=index)


@needs_shared_data(MEDQA_FILE)
def test_cached_step_state_on_medqa_cases():
    env = EGIPEnv("medqa", data_dir=str(SHARED_DATA))
    for index in range(0, len(env.pool.cases), 9):
        _play(env, index, seed=index)


def test_prepared_results_are_the_record_lookups():
    env = EGIPEnv("demo")
    for case in env.pool.cases:
        prepared = env.pool.prepared(case, accept=88.0, suggest=75.0)
        assert set(prepared.results) == {e.exam_id for e in prepared.catalog}
        for entry in prepared.catalog:
            assert prepared.results[entry.exam_id] == lookup(case.records, entry)


def test_an_equal_entry_from_elsewhere_is_looked_up_in_the_records():
    env = EGIPEnv("demo")
    env.reset(seed=0, options={"case_id": "demo-04"})
    rt = env.runtime
    entry = rt.catalog.entries[0]
    twin = dataclasses.replace(entry)  # equal, not the catalog's own object
    assert twin == entry and twin is not entry
    routing = rt.route(f"REQUEST TEST: {entry.exam_id}")
    event = rt.answer_exam(dataclasses.replace(routing, entries=(twin,)))
    assert event.recorded_value == lookup(rt.case.records, entry)[0]


def test_event_dicts_are_the_dataclass_dicts():
    env = EGIPEnv("demo")
    _play(env, "demo-09", seed=3, check=False)
    for event in env.runtime.history:
        expected = dataclasses.asdict(event)
        if "flags" in expected:
            expected["flags"] = list(expected["flags"])
        if "source_paths" in expected:
            expected["source_paths"] = [list(p) for p in expected["source_paths"]]
        if expected.get("noise") is False:  # examiner noise keys only when set
            del expected["noise"]
        if "delayed_from" in expected and expected["delayed_from"] is None:
            del expected["delayed_from"]
        assert event_to_dict(event) == expected
        assert list(event_to_dict(event)) == list(expected)


# --- the retrieval patient --------------------------------------------------------------


def _reference_coverage(index, stems):
    """Coverage over the whole vocabulary (no length window)."""
    credit = {}
    for stem in stems:
        best = {}
        for _, similarity, position in process.extract(
                stem, index.vocabulary, scorer=fuzz.ratio,
                score_cutoff=rp.WORD_SIMILARITY, limit=None):
            for order, weight in index.postings[position]:
                best[order] = max(best.get(order, 0.0), similarity * weight)
        for order, similarity in best.items():
            credit[order] = credit.get(order, 0.0) + similarity / len(stems)
    return credit


def test_length_window_holds_every_stem_that_can_match():
    for length in range(1, 80):
        shortest, longest = rp._length_window(length)
        for other in range(1, 3 * length + 3):
            a = "ab" * length
            # the best ratio a stem of this length can reach: one holding the other
            best = fuzz.ratio(a[:length], a[:other])
            if best >= rp.WORD_SIMILARITY:
                assert shortest <= other <= longest, (length, other)
        # the window is not wider than the bound needs (one length each side at most)
        assert fuzz.ratio("a" * length, "a" * (longest + 2)) < rp.WORD_SIMILARITY


def test_windowed_coverage_equals_the_whole_vocabulary_scan():
    env = EGIPEnv("demo")
    questions = [*ODD_ACTIONS, "Do you have any allergies or take medication?",
                 "When did the diabetic symptoms begin?", "smokes cigarettes daily"]
    for case in env.pool.cases:
        facts = env.pool.prepared(case, accept=88.0, suggest=75.0).patient_facts
        index = rp._shared_index(facts)
        for question in questions:
            stems = rp._stems(question)
            assert rp._coverage(index, stems) == _reference_coverage(index, stems)


def _clear_question_memos(env) -> None:
    rp._reading_memo.cache_clear()
    for case in env.pool.cases:
        rp._shared_index(env.pool.prepared(case, accept=88.0, suggest=75.0)
                         .patient_facts).scored.clear()


def test_patient_memo_replies_as_a_fresh_patient(monkeypatch):
    env = EGIPEnv("demo")
    patient = env.patient
    seen = []
    original = patient.reply

    def spy(view):
        seen.append(view)
        return original(view)

    patient.reply = spy
    _clear_question_memos(env)
    calls = []
    scorer = rp._candidates
    monkeypatch.setattr(rp, "_candidates",
                        lambda index, q: calls.append((id(index), q)) or scorer(index, q))
    for index in range(len(env.pool.cases)):
        _play(env, index, seed=index, check=False)
    assert len(seen) > 100
    # every (P, question) pair is scored once, however often it is asked
    assert calls and len(calls) == len(set(calls))
    memo_replies = [original(view) for view in seen]
    # the same views answered with no memo at all
    monkeypatch.setattr(rp, "_candidates_memo", scorer)
    monkeypatch.setattr(rp, "_reading_memo", rp._read_question)
    assert memo_replies == [rp.RetrievalPatient().reply(view) for view in seen]


def test_question_memo_keeps_the_newest_questions_of_each_index(monkeypatch):
    monkeypatch.setattr(rp, "QUESTION_MEMO_SIZE", 3)
    index = rp._build_index({"History": "Cough for 3 days.", "Social": "Smokes daily."})
    questions = ["How long is the cough?", "Do you smoke?", "Any fever?", "Any cough?"]
    for question in questions:
        assert rp._candidates_memo(index, question) == rp._candidates(index, question)
    assert list(index.scored) == questions[1:]  # the oldest dropped
    other = rp._build_index({"History": "Headache."})
    assert other.scored == {} and rp._candidates_memo(other, "Do you smoke?") == ()


def test_patient_copies_reply_as_the_original():
    patient = rp.RetrievalPatient()
    facts = {"History": "Cough for 3 days."}
    view = PatientView(facts, (), "How long is the cough?")
    rp._shared_index(FrozenFacts(facts)).scored.clear()
    answer = patient.reply(view)
    for twin in (pickle.loads(pickle.dumps(patient)), copy.deepcopy(patient)):
        assert twin.reply(view) == answer
    # the copies share the index's memo: the question was scored once
    assert list(rp._shared_index(FrozenFacts(facts)).scored) == ["How long is the cough?"]


# --- text prefilters ---------------------------------------------------------------------


def test_marker_hint_letters_fold_only_from_their_own_case():
    """``_marker_hints`` looks for "ready" and "que" in the lower-cased text: no other
    character matches those letters under IGNORECASE."""
    everything = "".join(chr(c) for c in range(sys.maxunicode + 1)
                         if not 0xD800 <= c <= 0xDFFF)
    for found in re.findall("[readyqu]", everything, re.IGNORECASE):
        assert found.lower() in "readyqu", hex(ord(found))


def test_env_line_scan_equals_the_multiline_search():
    rng = random.Random(7)
    pieces = ["Round 3", " of 19.", "\n", "  ", "[round 2]", "[O1] x", "Turn 1 of 5.",
              "Interface:", "Examiner [", "measurement agent [", "text", "\t", "[S0] ",
              "round", "\n\n", "of", " 4."]
    texts = ["", "\n", "Round 3\n of 19.", "a\nRound 3 of 19.", "x\n  \n Interface: y"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
              for _ in range(3000)]
    for text in texts:
        assert doctor_text._env_line(text) == bool(doctor_text._ENV_LINE.search(text)), text


def test_parser_marker_hints_match_the_regexes():
    rng = random.Random(3)
    pieces = ["diagnosis", "DIAGNOSIS", " ready", " READY", ":", " ", "request", "REQUEST",
              " test", " tests", "Ready", "Que", "x", "\n"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        has_diagnosis, has_test = parser._marker_hints(text)
        assert has_diagnosis or not parser._DIAG.search(text), text
        assert has_test or not parser._TEST.search(text), text


# --- threads -------------------------------------------------------------------------------


def test_environments_stepped_from_a_thread_pool_match_sequential_runs():
    """Shared per-case artifacts (prepared cases, patient indexes) are read-only: eight
    environments stepped at once give the steps they give one at a time."""
    jobs = [(index % 17, index) for index in range(32)]

    def run(job):
        return _play(EGIPEnv("demo"), job[0], job[1], check=False)

    sequential = [run(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(run, jobs)) == sequential
