"""Terminal-input ablations by replay (EGIP Table 3 Panel B, appendix C), end to end.

The source run is a real ``clinenv run --doctor llm`` on the first 12 demo cases (10
without candidate labels, 2 with five) against a real local server
(:class:`~clinenv.testing.fake_server.FakeChatServer` with the deterministic clinic
responder of ``clinenv.testing.clinic``); replays go through ``clinenv replay`` and
:func:`clinenv.runs.replay_run.replay_run`, and every prompt is read back from the server.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from clinenv.agents.llm_doctor import LLMDoctor
from clinenv.agents.prompts import DIRECT_SYSTEM
from clinenv.cli import main
from clinenv.evaluation.runs import align, load_runs
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runs import Concurrent, RunSpec, replay_run
from clinenv.runs.replay import ReplayError, load_source
from clinenv.seeding import call_seed
from clinenv.testing.clinic import clinic_responder, without_volatile
from clinenv.testing.fake_server import FakeChatServer

N_CASES = 12
#: Demo cases 11 and 12 have five candidate labels; the first option of each is wrong.
WITH_K = {"demo-11": "Toxic multinodular goiter", "demo-12": "Allergic contact dermatitis"}


@pytest.fixture(scope="module")
def server():
    with FakeChatServer(clinic_responder()) as srv:
        yield srv


@pytest.fixture(scope="module")
def source(server, tmp_path_factory) -> tuple[Path, list[dict], list[dict]]:
    """The source run log, its lines and the terminal (Direct) requests of the run."""
    folder = tmp_path_factory.mktemp("replay")
    path = folder / "run.jsonl"
    code = main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--model", "fake-model",
                 "--base-url", server.base_url, "--episodes", str(N_CASES), "--quiet",
                 "--out", str(path)])
    assert code == 0
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    decide = [b for b in server.requests if b["messages"][0]["content"] == DIRECT_SYSTEM]
    assert len(lines) == len(decide) == N_CASES
    return path, lines, decide


def replay_cli(server, src: Path, ablation: str, out: Path, *extra: str) -> tuple[int, list]:
    """Run ``clinenv replay``; return the exit code and the requests it sent."""
    before = len(server.requests)
    code = main(["replay", str(src), "--ablation", ablation, "--out", str(out), "--model",
                 "fake-model", "--base-url", server.base_url, "--quiet", *extra])
    return code, server.requests[before:]


def read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


@pytest.fixture(scope="module")
def control(server, source, tmp_path_factory):
    out = tmp_path_factory.mktemp("control") / "control.jsonl"
    code, requests = replay_cli(server, source[0], "full", out)
    assert code == 0
    return out, read(out), requests


# field-bug-reports B08c
def test_control_replay_sends_the_original_terminal_prompts(source, control):
    """The rerun control sends each episode's original terminal request, byte for byte:
    messages, generation settings and the seed derived from the episode seed and the
    decision turn."""
    _, lines, decide = source
    _, _, requests = control
    assert requests == decide
    for line, body in zip(lines, requests, strict=True):
        assert body["seed"] == call_seed(line["seed"], 19, "decide")


def test_control_keeps_histories_and_reproduces_the_scores(source, control):
    """Output lines keep the source's events and evidence byte for byte and, with the same
    replies, its verdicts, answers and rewards (scoring as the environment scores)."""
    path, lines, _ = source
    out, replayed, _ = control
    raw = out.read_text(encoding="utf-8").splitlines()
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert [x["case_id"] for x in replayed] == [f"demo-{i:02d}" for i in range(1, 13)]
    for number, (src, new, text) in enumerate(zip(lines, replayed, raw, strict=True), 1):
        for field in ("events", "evidence"):
            assert new[field] == src[field]
            assert json.dumps(src[field], ensure_ascii=False) in text  # byte-identical
        for field in ("answer", "verdict", "correct", "abstained", "match_score", "reward",
                      "target", "seed", "repetition", "case_index", "env_id", "run_seed"):
            assert new[field] == src[field], field
        assert new["doctor"]["name"] == "llm-direct/replay"
        assert new["replay"]["source"] == str(path)
        assert new["replay"]["source_sha256"] == sha
        assert new["replay"]["source_line"] == number
        assert new["replay"]["ablation_applied"] is False
        assert new["replay"]["terminal_events"][0]["text"] == src["events"][-1]["text"]
        assert [c["purpose"] for c in new["llm"]["calls"]] == ["decide"]
    # the clinic reads demo-01's X-ray ("consistent with lobar pneumonia"): correct
    assert (replayed[0]["answer"], replayed[0]["verdict"]) == ("lobar pneumonia", "correct")


def _without_observations(prompt: str) -> str:
    """The control prompt with the body of its observation section replaced by (none)."""
    head, rest = prompt.split("# Acquired observations\n", 1)
    _, tail = rest.split("\n\n# Instructions\n", 1)
    return f"{head}# Acquired observations\n(none)\n\n# Instructions\n{tail}"


def test_no_observations_changes_only_the_terminal_input(server, source, control, tmp_path):
    """Each prompt is the control's without any observation line; objective, candidate
    block and instructions stay; seeds and settings are the control's. No observations:
    the clinic names the first candidate (wrong on both cases with K) or abstains."""
    _, lines, _ = source
    _, _, control_requests = control
    out = tmp_path / "noobs.jsonl"
    code, requests = replay_cli(server, source[0], "no-observations", out)
    assert code == 0
    replayed = read(out)
    for src, body, ctrl, new in zip(lines, requests, control_requests, replayed, strict=True):
        prompt = user_text(body)
        assert prompt == _without_observations(user_text(ctrl))
        for obs in src["evidence"]["observations"]:
            assert f"[{obs['obs_id']}]" not in prompt
            assert obs["context"] not in prompt
        assert src["evidence"]["objective"] in prompt
        assert {k: v for k, v in body.items() if k != "messages"} == {
            k: v for k, v in ctrl.items() if k != "messages"}
        assert body["messages"][0] == ctrl["messages"][0]
        assert (new["events"], new["evidence"]) == (src["events"], src["evidence"])
        assert new["doctor"]["name"] == "llm-direct/no-observations"
        assert new["replay"]["ablation_applied"] is True
        if src["case_id"] in WITH_K:
            assert "# Candidate labels (hypotheses, not findings)\nA. " in prompt
            assert (new["answer"], new["verdict"], new["reward"]) == (
                WITH_K[src["case_id"]], "wrong", 0.0)
        else:
            assert (new["answer"], new["verdict"], new["abstained"]) == (
                "Undetermined", "unscored", True)


def test_no_candidates_removes_only_the_candidate_block(server, source, control, tmp_path):
    """Cases with K lose the candidate block and its instruction line, nothing else;
    cases without K are replayed unchanged (ablation_applied false)."""
    _, lines, _ = source
    _, _, control_requests = control
    out = tmp_path / "nok.jsonl"
    code, requests = replay_cli(server, source[0], "no-candidates", out)
    assert code == 0
    replayed = read(out)
    for src, body, ctrl, new in zip(lines, requests, control_requests, replayed, strict=True):
        prompt, before = user_text(body), user_text(ctrl)
        if src["case_id"] in WITH_K:
            block = re.search(r"\n\n# Candidate labels \(hypotheses, not findings\)\n"
                              r"(?:[A-E]\. [^\n]+\n){4}E\. [^\n]+", before).group(0)
            instruction = "\nCandidate labels are hypotheses, not findings; you may answer " \
                          "with a candidate's letter or its text."
            assert before.endswith(instruction)
            assert prompt == before.replace(block, "").removesuffix(instruction)
            assert "A. " not in prompt and "Candidate" not in prompt
            assert new["replay"]["ablation_applied"] is True
        else:
            assert prompt == before
            assert new["replay"]["ablation_applied"] is False
        assert (new["events"], new["evidence"]) == (src["events"], src["evidence"])


def test_compare_pairs_control_and_ablation(server, source, control, tmp_path, capsys):
    """``clinenv compare`` accepts the control and an ablation and pairs all 12 cases."""
    out = tmp_path / "noobs.jsonl"
    assert replay_cli(server, source[0], "no-observations", out)[0] == 0
    base, method = load_runs([control[0], out])
    assert (base.label, method.label) == ("llm-direct/replay", "llm-direct/no-observations")
    assert len(align(base, method).case_ids) == N_CASES
    capsys.readouterr()
    code = main(["compare", str(control[0]), str(out), "--out-dir", str(tmp_path / "rep"),
                 "--resamples", "50", "--flips", "50"])
    text = capsys.readouterr().out
    assert code == 0
    assert "llm-direct/no-observations" in text and "llm-direct/replay" in text


def _edit(src: Path, dst: Path, number: int, change) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()
    line = json.loads(lines[number - 1])
    change(line)
    lines[number - 1] = json.dumps(line, ensure_ascii=False)
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dst


@pytest.mark.parametrize(("number", "change", "words"), [
    (3, lambda x: x.pop("evidence"), "field 'evidence' must be present, got nothing"),
    (2, lambda x: x.update(target="Sarcoidosis"), "field 'target' is 'Sarcoidosis' but case "
                                                   "'demo-02'"),
    (4, lambda x: x["evidence"]["observations"][1].update(turn="2"),
     "field 'evidence.observations[1].turn' must be an integer, got '2'"),
    (5, lambda x: x.update(case_id="demo-99"), "field 'case_id': dataset 'demo' has no case"),
    (6, lambda x: x["env_spec"]["kwargs"].update(preset="medagentsim"),
     "the run used the native protocol 'medagentsim' (field 'protocol')"),
])
def test_bad_source_lines_are_one_line_errors(source, server, tmp_path, capsys, number, change,
                                              words):
    """A broken source line stops the replay before anything is written, with one line
    naming the file, the line and the field."""
    bad = _edit(source[0], tmp_path / "bad.jsonl", number, change)
    capsys.readouterr()
    code, requests = replay_cli(server, bad, "full", tmp_path / "out.jsonl")
    err = capsys.readouterr().err
    assert (code, requests) == (2, [])
    assert err == f"clinenv: error: {bad}, line {number}: {words}" + err.split(words, 1)[1]
    assert err.count("\n") == 1
    assert not (tmp_path / "out.jsonl").exists()


def test_no_candidates_on_a_log_without_k_is_refused(source, server, tmp_path, capsys):
    """MedQA-like logs (no episode with K) refuse the no-candidates ablation."""
    kept = source[0].read_text(encoding="utf-8").splitlines()[:10]  # demo-01..10: no K
    path = tmp_path / "nok.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    capsys.readouterr()
    code, requests = replay_cli(server, path, "no-candidates", tmp_path / "out.jsonl")
    err = capsys.readouterr().err
    assert (code, requests) == (2, [])
    assert err.startswith(f"clinenv: error: {path}, line 1: ablation no_candidates: no "
                          "episode of this log (dataset 'demo') has candidate labels K")
    with pytest.raises(ReplayError, match="line 1: ablation no_candidates"):
        load_source(path, ablation="no_candidates")


def test_error_lines_resume_and_concurrency(server, source, control, tmp_path):
    """A failed decision is an error line; a resume replays exactly it and the new line
    supersedes it. A concurrent replay writes the same lines as the sequential control."""
    path = source[0]
    out = tmp_path / "resumed.jsonl"
    with OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0) as chat:
        def doctor():
            return LLMDoctor(chat)

        server.inject(status=500, count=1)
        first = replay_run(path, doctor, RunSpec(out=out), ablation="full")
        assert first.n_errors == 1 and "error" in first.lines[0]
        assert first.lines[0]["verdict"] == "unscored" and first.lines[0]["terminated"] is False
        again = replay_run(path, doctor, RunSpec(out=out, resume=True), ablation="full")
        assert (again.n_new, again.n_resumed, again.n_errors) == (1, N_CASES - 1, 0)
        assert len(read(out)) == N_CASES + 1
        concurrent = replay_run(path, doctor, RunSpec(out=tmp_path / "conc.jsonl"),
                                Concurrent(4))
    assert without_volatile(again.lines) == without_volatile(control[1])
    assert without_volatile(concurrent.lines) == without_volatile(control[1])
    with pytest.raises(FileExistsError):
        replay_run(path, doctor, RunSpec(out=out), ablation="full")


def test_llm_judge_scores_answers_only(server, source, tmp_path):
    """With ``--judge llm`` every answered episode is judged (clinic judge: "Yes") and
    non-answers stay unscored without a judge call (as in the environment)."""
    _, lines, _ = source
    out = tmp_path / "judged.jsonl"
    code, requests = replay_cli(server, source[0], "full", out, "--judge", "llm")
    assert code == 0
    judged = read(out)
    answered = [x["verdict"] != "unscored" for x in lines]
    assert len(requests) == N_CASES + sum(answered)
    for new, ok in zip(judged, answered, strict=True):
        assert new["scorer"] == ("llm-judge" if ok else "deterministic")
        assert new["judge_verdict"] == ("correct" if ok else None)
        assert new["verdict"] == ("correct" if ok else "unscored")
        assert new["replay"]["judge"]["name"] == "llm_judge"


class LetterDoctor:
    """Answers every decision with one fixed action."""

    name = "letter"

    def __init__(self, action: str) -> None:
        self.action = action

    def reset(self, seed=None) -> None:
        pass

    def act(self, observation, info) -> str:
        return self.action


class RecordingJudge:
    """Rules every answer correct and records what it was asked."""

    name = "recording_judge"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def judge(self, answer: str, target: str) -> str:
        self.asked.append(answer)
        return "correct"


def test_no_candidates_reads_an_option_letter_as_a_free_answer(source):
    """Without K the doctor never saw the options, so the letter of the right option is a
    free answer (wrong against the target text) and reaches a judge as the bare letter;
    with K (the control) the letter is the option and the judge gets its label."""
    import asyncio

    from clinenv.runs.replaying import decide_and_score

    ablated = load_source(source[0], ablation="no_candidates")
    full = load_source(source[0], ablation="full")
    with_k = [e for e in ablated.episodes if e.case.candidates]
    assert [e.case.case_id for e in with_k] == list(WITH_K)
    for episode, control_ep in zip(with_k, (e for e in full.episodes if e.case.candidates),
                                   strict=True):
        letter = "ABCDE"[episode.case.target.option_index]
        doctor = LetterDoctor(f"DIAGNOSIS READY: {letter}")
        cut = asyncio.run(decide_and_score(episode, doctor, ablation="no_candidates"))
        kept = asyncio.run(decide_and_score(control_ep, doctor, ablation="full"))
        assert (cut["outcome"]["verdict"], kept["outcome"]["verdict"]) == ("wrong", "correct")
        judge = RecordingJudge()
        asyncio.run(decide_and_score(episode, doctor, ablation="no_candidates", judge=judge))
        asyncio.run(decide_and_score(control_ep, doctor, ablation="full", judge=judge))
        assert judge.asked == [letter, episode.case.target.text]


def test_replay_warns_when_the_doctor_differs(server, source, tmp_path, capsys):
    """Appendix C holds the doctor fixed: a replay with another temperature gets one
    warning line naming that field on stderr; the same doctor gets none."""
    capsys.readouterr()
    code, _ = replay_cli(server, source[0], "no-observations", tmp_path / "same.jsonl")
    assert code == 0 and "warning:" not in capsys.readouterr().err
    code, _ = replay_cli(server, source[0], "no-observations", tmp_path / "hot.jsonl",
                         "--temperature", "0.5")
    warnings = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning:")]
    assert code == 0 and len(warnings) == 1
    assert "config.generation.temperature: 0.5 here" in warnings[0]
