"""benchmarks/train_grpo.py's plumbing, in the TRL venv, on a tiny random model.

Not its result: the stages run in order on the demo cases (split, teacher rows, an
evaluation per stage through TRL's tool-call loop, one SFT step, one GRPO step), each
writes its JSON, ``--resume-from`` goes on from the files, and the measures are checked
against values computed here by hand: the rewards from the components under the spec,
the spread from the rollouts, and tool-call validity, completion and accuracy of a
scripted policy whose turns are known.
"""
# issue 31

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path

import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed: run in .venv-trl "
                                         "(pip install -e '.[test,trl]'), as .ci/run does")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


import clinenv  # noqa: E402,F401
from clinenv.datasets import load_cases  # noqa: E402
from clinenv.integrations import tools as tool_view  # noqa: E402
from clinenv.reward_components import RewardComponents  # noqa: E402
from clinenv.reward_spec import load_reward_spec  # noqa: E402
from clinenv.testing.tiny_models import chatml_tokenizer, tiny_qwen3  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV_ID = "EGIP-Demo-v0"


def load_script():
    spec = importlib.util.spec_from_file_location("train_grpo",
                                                  ROOT / "benchmarks" / "train_grpo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_grpo"] = module
    spec.loader.exec_module(module)
    return module


tg = load_script()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A two-layer Qwen3 with random weights and a ChatML BPE tokenizer, saved as a
    model folder (what ``--model DIR`` reads)."""
    episode = tool_view.ToolEpisode(ENV_ID, acquisition_rounds=5, tool_results="compact")
    corpus = [tool_view.TOOL_SYSTEM_PROMPT, tool_view.TASK_INTRO,
              json.dumps(tool_view.TOOL_SCHEMAS)]
    for case in episode.env.pool.cases:
        corpus.append(episode.reset(case.case_id, 0))
    tok = chatml_tokenizer(corpus, vocab_size=2000)
    folder = tmp_path_factory.mktemp("tiny-model")
    tiny_qwen3(tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def argv(model_dir, out, *extra):
    return ["--env", ENV_ID, "--model", str(model_dir), "--out", str(out),
            "--sft-max-steps", "1", "--sft-eval-every", "1", "--validation-turns", "2",
            "--grpo-steps", "1", "--num-generations", "2", "--max-completion-length", "192",
            "--eval-max-cases", "3", *extra]


def stage(out, name):
    return json.loads((out / f"{name}.json").read_text(encoding="utf-8"))


def test_every_stage_runs_and_writes_what_it_measured(model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert tg.main(argv(model_dir, out)) == 0
    for name in tg.STAGES:
        assert (out / f"{name}.json").is_file(), name

    # split: clinenv data split's lists; flagged construction cases left out of training
    split = stage(out, "split")
    listed = (out / "split" / "construction.txt").read_text().split()
    held = (out / "split" / "evaluation.txt").read_text().split()
    assert (split["construction"], split["held_out"]) == (listed, held)
    assert (len(listed), len(held)) == (12, 5)  # 17 demo cases, 0.7 construction
    cases = {c.case_id: c for c in load_cases("demo")}
    flagged = {c for c in listed if cases[c].flags.target_in_records
               or cases[c].flags.target_in_menu}
    assert set(split["excluded"]) == flagged and flagged
    assert sorted(split["train"] + split["validation"]) == sorted(set(listed) - flagged)
    assert len(split["validation"]) == 1  # 10 % of 9, at least one

    # teacher rows: TRL's messages, dict arguments, the answer scored, a closing turn
    teacher = stage(out, "teacher")
    assert sorted(d["case_id"] for d in teacher["demos"]) == sorted(set(listed) - flagged)
    for demo in teacher["demos"]:
        assert demo["correct"]
        messages = demo["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert messages[-1] == {"role": "assistant", "content": tg.CLOSING}
        calls = [m["tool_calls"][0]["function"] for m in messages if m.get("tool_calls")]
        assert all(isinstance(c["arguments"], dict) for c in calls)
        assert calls[-1]["name"] == "submit_diagnosis"
        assert messages[-2]["content"] == tool_view.FINAL_RESULT
        assert len(calls) == demo["calls"] <= 5 + 2  # T + 2

    # SFT: one step, a validation measure; GRPO: rewards are the spec's, spread by hand
    sft = stage(out, "sft")
    assert sft["steps"] == 1 and len(sft["validation"]) == 1
    grpo = stage(out, "grpo")
    spec = load_reward_spec("diagagent")
    assert len(grpo["rollouts"]) == 2
    for r in grpo["rollouts"]:
        assert r["reward"] == pytest.approx(
            spec.reward(RewardComponents.from_dict(r["components"])))
    rewards = [r["reward"] for r in grpo["rollouts"]]
    assert grpo["spread_share"] == float(max(rewards) > min(rewards))

    # every evaluation: 3 held-out cases, one rollout each, flagged ones apart
    for name in ("eval-base", "eval-sft", "eval-grpo"):
        result = stage(out, name)
        ids = [r["case_id"] for r in result["rollouts"]]
        assert sorted(ids) == sorted(held[:3])
        n_flagged = sum(i in split["held_out_flagged"] for i in ids)
        assert (result["flagged"]["episodes"], result["unflagged"]["episodes"]) == (
            n_flagged, 3 - n_flagged)
        for r in result["rollouts"]:
            assert r["reward"] == pytest.approx(
                spec.reward(RewardComponents.from_dict(r["components"])))
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["table"]) == ["eval-base", "eval-sft", "eval-grpo"]
    assert (out / "checkpoints" / "grpo-model" / "config.json").is_file()
    if importlib.util.find_spec("matplotlib"):
        assert (out / "curve.png").stat().st_size > 0

    # --resume-from: only the later stages run again; the earlier files are kept
    before = {n: (out / f"{n}.json").stat().st_mtime_ns for n in tg.STAGES}
    assert tg.main(argv(model_dir, out, "--resume-from", "eval-grpo")) == 0
    after = {n: (out / f"{n}.json").stat().st_mtime_ns for n in tg.STAGES}
    assert [n for n in tg.STAGES if before[n] != after[n]] == ["eval-grpo"]

    # --stop-after: one stage again (an evaluation of the SFT model), nothing after it
    assert tg.main(argv(model_dir, out, "--resume-from", "eval-sft", "--stop-after",
                        "eval-sft")) == 0
    again = {n: (out / f"{n}.json").stat().st_mtime_ns for n in tg.STAGES}
    assert [n for n in tg.STAGES if again[n] != after[n]] == ["eval-sft"]
    after = again
    assert tg.main(argv(model_dir, out, "--resume-from", "grpo", "--stop-after", "sft")) == 2
    assert "comes before" in capsys.readouterr().err

    # --measure-validation: a saved model's validity on the validation slice, nothing run
    capsys.readouterr()
    assert tg.main(argv(model_dir, out, "--measure-validation",
                        str(out / "checkpoints" / "sft-model"))) == 0
    measured = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert measured["turns"] == 2 and 0 <= measured["valid"] <= 2
    assert {n: (out / f"{n}.json").stat().st_mtime_ns for n in tg.STAGES} == after


def test_resume_without_the_earlier_stage_is_refused_in_one_line(model_dir, tmp_path,
                                                                   capsys):
    assert tg.main(argv(model_dir, tmp_path / "empty", "--resume-from", "sft")) == 2
    err = capsys.readouterr().err
    assert "split.json" in err and "did not finish" in err


def test_the_sft_rows_render_the_tools_trl_renders(model_dir, tmp_path):
    """The tools block of the SFT rows is the one GRPOTrainer builds from the
    environment class (its public methods, through get_json_schema)."""
    from transformers.utils import get_json_schema

    args = tg.parse_args(argv(model_dir, tmp_path / "x"))
    log: list = []
    cls = tg.recording_factory(args, log, {})
    names = [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    assert names == list(tg.TOOLS)
    assert [get_json_schema(getattr(cls, n)) for n in names] == tg.trl_tools(args)


def scripted(tok, scripts):
    """The model's sampling replaced by each case's script of replies (raw text)."""

    def generate(self, prompt_ids, images, multimodal_fields, num_generations,
                 has_tool_images=False):
        out = []
        for ids in prompt_ids:
            text = tok.decode(ids)
            case = next(c for c, (marker, _) in scripts.items() if marker in text)
            turn = text.count("<tool_response>")
            replies = scripts[case][1]
            reply = replies[turn] if turn < len(replies) else "Thank you."
            out.append(tok.encode(reply + "<|im_end|>", add_special_tokens=False))
        return out, None

    return generate


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + \
        "\n</tool_call>"


def test_measures_of_a_scripted_policy_by_hand(model_dir, tmp_path, monkeypatch):
    """demo-05 is played right (5 valid turns; the closing text after the scored answer
    is no turn); demo-01 makes 4 turns: an unknown tool, an exam id the menu lacks (an
    invalid action), a valid question, then text, which ends the rollout unfinished.
    Validity (5 + 1) / (5 + 4), completion 1/2, accuracy 1/2."""
    pool = tool_view.ToolEpisode(ENV_ID).env.pool
    scripts = {
        "demo-05": (pool.case("demo-05").objective, [
            call("ask_patient", question="Where exactly is the pain?"),
            call("order_exam", exam="PE1"),
            call("list_exams"),
            call("submit_diagnosis", diagnosis="Acute appendicitis"),
            call("submit_diagnosis", diagnosis="Acute appendicitis"), "Done."]),
        "demo-01": (pool.case("demo-01").objective, [
            call("examine_patient", part="chest"),
            call("order_exam", exam="T99"),
            call("ask_patient", question="How long have you had the cough?"),
            "I think it is pneumonia."]),
    }
    monkeypatch.setattr(trl.GRPOTrainer, "_generate_single_turn", scripted(
        transformers.AutoTokenizer.from_pretrained(model_dir), scripts))
    args = tg.parse_args(argv(model_dir, tmp_path / "run", "--max-completion-length", "3072"))
    model, tok = tg.load_model(args, str(model_dir), "cpu")
    result = tg.evaluate(model, tok, args, "cpu", ["demo-01", "demo-05"], {}, tg.trl_tools(
        args), "eval-test")
    by_case = {r["case_id"]: r for r in result["rollouts"]}
    assert (by_case["demo-05"]["turns"], by_case["demo-05"]["valid"]) == (5, 5)
    assert (by_case["demo-01"]["turns"], by_case["demo-01"]["valid"]) == (4, 1)
    measures = result["all"]
    assert measures["tool_call_validity"] == pytest.approx(6 / 9)
    assert measures["completion"] == 0.5 and measures["accuracy"] == 0.5
    assert by_case["demo-05"]["components"]["diagnosis"] == 1.0
    assert by_case["demo-01"]["completed"] is False


def test_bad_settings_are_refused_by_the_parser(tmp_path, capsys):
    for extra, said in ((["--num-generations", "1"], "--num-generations must be >= 2"),
                        (["--construction", "1.5"], "must be in (0, 1)"),
                        (["--resume-from", "nope"], "invalid choice")):
        with pytest.raises(SystemExit) as exit_:
            tg.parse_args(["--out", str(tmp_path), *extra])
        assert exit_.value.code == 2 and said in capsys.readouterr().err
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(SystemExit):
            tg.parse_args(["--out", str(tmp_path), "--use-vllm"])
        assert "--use-vllm needs vllm" in capsys.readouterr().err


def test_sft_rows_keep_exactly_their_keys(monkeypatch):
    """An Arrow struct would give ask_patient every tool's arguments ("exam": null), which
    a model then learns to write; the rows come back from the dataset unchanged."""
    demos = [{"case_id": "a", "messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "ask_patient", "arguments": {"question": "Where?"}}}]},
        {"role": "tool", "name": "ask_patient", "content": "Here."},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "order_exam", "arguments": {"exam": "PE1"}}}]}]}]
    data = tg.sft_dataset(demos, [{"type": "function"}])
    assert data[0]["messages"] == demos[0]["messages"]
    import datasets

    monkeypatch.delattr(datasets, "Json")
    with pytest.raises(tg.SetupError, match="datasets >= 4.7"):
        tg.sft_dataset(demos, [])
