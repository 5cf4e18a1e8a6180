"""CDEG's extra actions (clinenv.protocol.extra_actions): clinical-history review and
knowledge retrieval, on a synthetic MIMIC-IDx-style admission and the demo set.

Knowledge answers are checked against a hand-ranked source: for the query "dermatomal
vesicular rash" the content words are {dermatomal, vesicular, rash}; "Herpes zoster"
holds all three (score 1), "Contact dermatitis" holds "vesicular" and "rash" (2/3),
"Pulmonary embolism" none (never returned).
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.cli import main
from clinenv.errors import CaseFormatError
from clinenv.protocol.extra_actions import KnowledgeSource, read_extra_action
from clinenv.runlog import read_run_log

ADMISSION = {
    "hadm_id": 1, "subject_id": "p1",
    "initial_presentation": "A 72-year-old woman with a painful rash on the left chest.",
    "patient": "It burns and there are small blisters.",
    "clinical_history": {"Past_Medical_History": "Polymyalgia rheumatica.",
                         "Medications": "Prednisolone 7.5 mg daily."},
    "labs": {"Vesicle_Swab_PCR": "Varicella-zoster virus DNA detected."},
    "diagnosis": "Herpes zoster",
}
ENTRIES = [
    {"title": "Pulmonary embolism", "text": "Pleuritic chest pain, tachycardia, hypoxia."},
    {"title": "Contact dermatitis", "text": "Itchy vesicular rash where an allergen "
                                            "touched the skin."},
    {"title": "Herpes zoster", "text": "Painful dermatomal vesicular rash; reactivation of "
                                       "varicella-zoster virus.", "source": "textbook"},
]


@pytest.fixture
def files(tmp_path):
    cases = tmp_path / "mimic_idx.jsonl"
    cases.write_text(json.dumps(ADMISSION) + "\n", encoding="utf-8")
    knowledge = tmp_path / "knowledge.jsonl"
    knowledge.write_text("".join(json.dumps(e) + "\n" for e in ENTRIES), encoding="utf-8")
    return cases, knowledge


@pytest.mark.parametrize(("text", "kind", "payload"), [
    ("REVIEW HISTORY", "history_review", ""),
    ("**Review clinical history:** medications", "history_review", "medications"),
    ("review the history.", "history_review", ""),
    ("RETRIEVE KNOWLEDGE: causes of dermatomal rash", "knowledge_query",
     "causes of dermatomal rash"),
    ("<think>plan</think>search knowledge: zoster", "knowledge_query", "zoster"),
    ("<think>REVIEW HISTORY</think>Do you take any medicines?", None, None),
    ("Could I review history later?", None, None),
    ("REQUEST TEST: Clinical History", None, None),
])
def test_markers(text, kind, payload):
    found = read_extra_action(text)
    assert (found and (found.kind, found.payload)) == (kind and (kind, payload))


def test_history_review_is_the_record_request_of_the_clinical_history(files):
    env = gym.make("EGIP-MedQA-v0", dataset=str(files[0]), preset="cdeg-30")
    obs, _ = env.reset(seed=0, options={"case_id": "mimic_idx-1"})
    assert "You may also review the clinical history with REVIEW HISTORY." in obs["text"]
    assert "RETRIEVE KNOWLEDGE" not in obs["text"]
    obs = env.step("REVIEW HISTORY")[0]
    assert "Polymyalgia rheumatica." in obs["text"]
    record = env.unwrapped.episode_record()
    doctor = [e for e in record["events"] if e["source"] == "doctor"]
    assert (doctor[0]["text"], doctor[0]["routed_as"], doctor[0]["payload"]) == (
        "REVIEW HISTORY", "test_request", "Clinical History")
    env.step("REVIEW HISTORY")  # a repeat: the fixed clarification question
    events = env.unwrapped.episode_record()["events"]
    assert [e["kind"] for e in events if e["source"] == "interface"] == ["repeated_request"]
    env.step("DIAGNOSIS READY: Herpes zoster")
    (obs_,) = [o for o in env.unwrapped.episode_record()["evidence"]["observations"]
               if o["source"] == "Measurement"]
    assert obs_["context"] == "Clinical History"
    assert "Prednisolone 7.5 mg daily." in obs_["content"]


def test_without_a_record_or_without_the_setting(files):
    demo = gym.make("EGIP-Demo-v0", preset="cdeg-30")
    demo.reset(seed=0, options={"case_id": "demo-01"})
    demo.step("REVIEW HISTORY")
    (event,) = [e for e in demo.unwrapped.episode_record()["events"]
                if e["source"] == "measurement"]
    assert (event["name"], event["result_availability"]) == ("Clinical History",
                                                             "not_recorded")
    plain = gym.make("EGIP-MedQA-v0", dataset=str(files[0]))  # EGIP: not an action
    obs, _ = plain.reset(seed=0, options={"case_id": "mimic_idx-1"})
    assert "REVIEW HISTORY" not in obs["text"]
    plain.step("REVIEW HISTORY")
    events = plain.unwrapped.episode_record()["events"]
    assert events[0]["routed_as"] == "question"
    assert events[1]["source"] == "patient"


def test_knowledge_retrieval_reads_the_source_only(files):
    cases, knowledge = files
    texts = []
    for env_id, kwargs, case_id in (
            ("EGIP-MedQA-v0", {"dataset": str(cases)}, "mimic_idx-1"),
            ("EGIP-Demo-v0", {}, "demo-05")):
        env = gym.make(env_id, knowledge_source=str(knowledge), **kwargs)
        obs, _ = env.reset(seed=0, options={"case_id": case_id})
        assert "look up medical knowledge with RETRIEVE KNOWLEDGE: <query>" in obs["text"]
        assert "REVIEW HISTORY" not in obs["text"]  # only knowledge is enabled
        env.step("RETRIEVE KNOWLEDGE: dermatomal vesicular rash")
        record = env.unwrapped.episode_record()
        (note,) = [e for e in record["events"] if e["source"] == "interface"]
        assert note["kind"] == "knowledge"
        texts.append(note["message"])
        assert record["evidence"]["observations"] == []  # not patient evidence
        assert record["events"][0]["routed_as"] == "knowledge_query"
        env.step("RETRIEVE KNOWLEDGE: appendicitis")
        last = env.unwrapped.episode_record()["events"][-1]
        assert last["message"] == "Knowledge: no entry matches 'appendicitis'."
    assert texts[0] == texts[1] == (
        "Knowledge for 'dermatomal vesicular rash':\n"
        "1. Herpes zoster: Painful dermatomal vesicular rash; reactivation of "
        "varicella-zoster virus.\n"
        "2. Contact dermatitis: Itchy vesicular rash where an allergen touched the skin.")


def test_the_source_ranks_by_shared_content_words(files):
    source = KnowledgeSource.from_file(files[1])
    assert [e.title for e in source.search("vesicular chest pain")] == [
        "Pulmonary embolism", "Contact dermatitis", "Herpes zoster"]  # 2/3, 1/3, 1/3
    assert source.search("the and for") == []
    assert "needs a query" in source.answer("  ")


@pytest.mark.parametrize(("line", "where"), [
    ('{"title": "x"}', "line 2, field 'text'"),
    ('{"title": " ", "text": "y"}', "line 2, field 'title'"),
    ("[1, 2]", "line 2: expected a JSON object"),
    ("{", "line 2"),
])
def test_a_bad_knowledge_file_names_line_and_field(tmp_path, line, where):
    path = tmp_path / "k.jsonl"
    path.write_text(json.dumps(ENTRIES[0]) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(CaseFormatError) as err:
        KnowledgeSource.from_file(path)
    assert str(err.value).startswith(str(path)) and where in str(err.value)


def test_clinenv_run_with_the_knowledge_source(files, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = ["run", "--quiet", "--env", "EGIP-Demo-v0", "--preset", "cdeg-30",
            "--episodes", "1"]
    assert main([*base, "--knowledge-source", str(files[1]), "--out", "r.jsonl"]) == 0
    (line,) = read_run_log(tmp_path / "r.jsonl").lines
    assert line["env_spec"]["kwargs"]["knowledge_source"] == str(files[1])
    assert main([*base, "--knowledge-source", "none.jsonl", "--out", "s.jsonl"]) == 2
    assert "--knowledge-source none.jsonl: no such file" in capsys.readouterr().err
