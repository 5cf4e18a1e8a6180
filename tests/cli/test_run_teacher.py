"""``clinenv run --doctor teacher`` and its privileged logs, end to end on the
demo set: the tool view's settings, the refusals of eval / compare / report / cdeg build
/ replay without ``--allow-privileged``, and export rows that carry ``privileged`` and
equal what a trainer's rollouts of the same actions see.
"""
# issue 29 §2

from __future__ import annotations

import json
from pathlib import Path

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.cli import main
from clinenv.export import episode_rows
from clinenv.integrations.tools import (
    FINAL_RESULT,
    TASK_INTRO,
    TEXT_SYSTEM_PROMPT,
    TOOL_SYSTEM_PROMPT,
    ToolEpisode,
)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


@pytest.fixture
def logs(workdir):
    """A teacher log and a scripted log of the whole demo set."""
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "teacher", "--quiet",
                 "--out", "teacher.jsonl"]) == 0
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "scripted", "--quiet",
                 "--out", "scripted.jsonl"]) == 0
    return workdir / "teacher.jsonl", workdir / "scripted.jsonl"


def test_the_run_is_privileged_and_plays_the_tool_view(logs, capsys):
    teacher, scripted = logs
    lines = lines_of(teacher)
    assert len(lines) == 17 and all(line["privileged"] is True for line in lines)
    assert all(line["correct"] for line in lines)
    assert {line["doctor"]["name"] for line in lines} == {"privileged-teacher"}
    kwargs = lines[0]["env_spec"]["kwargs"]
    assert kwargs["observation_format"] == "delta"
    assert kwargs["premature_diagnosis"] == "decide"
    assert "acquisition_rounds" not in kwargs  # the id's own T, as the tool view's
    assert all("privileged" not in line for line in lines_of(scripted))
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "teacher", "--episodes", "1",
                 "--quiet", "--out", "other.jsonl"]) == 0
    assert "--doctor teacher is PRIVILEGED" in capsys.readouterr().err  # even --quiet


def test_the_default_out_names_it(workdir):
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "teacher", "--episodes", "2",
                 "--quiet"]) == 0
    assert (workdir / "runs" / "EGIP-Demo-v0_privileged-teacher_seed0.jsonl").is_file()


@pytest.mark.parametrize("args, message", [
    (["--premature-diagnosis", "clarify"], "--premature-diagnosis clarify"),
    (["--preset", "egip-no-menu"], "--preset egip-no-menu"),
    (["--cdeg", "g.json"], "--doctor teacher with --cdeg"),
    (["--baseline", "self-reflection"], "--doctor teacher with --baseline"),
])
def test_contradicting_options_are_refused(workdir, capsys, args, message):
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "teacher", *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "tool view's settings" in err or "no doctor to improve or evaluate" in err
    assert not (workdir / "runs").exists()


@pytest.mark.parametrize("env_id", ["AgentClinic-Demo-v0", "EGIP-Demo-Menu-v0"])
def test_menu_and_native_ids_are_refused(workdir, capsys, env_id):
    assert main(["run", "--env", env_id, "--doctor", "teacher"]) == 2
    assert "EGIP text environment" in capsys.readouterr().err


def test_teacher_questions_only_with_the_teacher(workdir, capsys):
    assert main(["run", "--env", "EGIP-Demo-v0", "--teacher-questions", "2"]) == 2
    assert "--teacher-questions is used only with --doctor teacher" in capsys.readouterr().err
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "teacher", "--episodes", "1",
                 "--teacher-questions", "1", "--quiet", "--out", "k1.jsonl"]) == 0
    (line,) = lines_of(workdir / "k1.jsonl")
    assert line["doctor"]["config"]["max_questions"] == 1
    asked = [e for e in line["events"] if e["source"] == "doctor"
             and not e["text"].startswith(("REQUEST TEST:", "DIAGNOSIS READY:"))]
    assert len(asked) == 1


REFUSING = {
    "eval": lambda log, other: ["eval", log, "--out-dir", "r"],
    "compare": lambda log, other: ["compare", other, log, "--out-dir", "c",
                                   "--resamples", "50", "--flips", "50"],
    "report": lambda log, other: ["report", log, other, "--out", "rep.html",
                                  "--no-figures", "--resamples", "50", "--flips", "50"],
    "cdeg build": lambda log, other: ["cdeg", "build", log, "--out", "g.json", "--quiet"],
    "replay": lambda log, other: ["replay", log, "--ablation", "full", "--doctor",
                                  "scripted", "--out", "rp.jsonl", "--quiet"],
}


@pytest.mark.parametrize("command", sorted(REFUSING))
def test_readers_refuse_privileged_logs_unless_allowed(logs, capsys, command):
    teacher, scripted = logs
    argv = REFUSING[command](str(teacher.name), str(scripted.name))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0  # one line
    assert "teacher.jsonl, line 1: privileged run" in err
    assert "--allow-privileged" in err
    code = main([*argv, "--allow-privileged"])
    err = capsys.readouterr().err
    assert "privileged run" not in err
    assert code in (0, 1), err  # cdeg build: 1 when a graph has no revision edges
    if command == "replay":  # the replay's lines keep the mark
        assert all(line["privileged"] is True for line in lines_of(teacher.parent / "rp.jsonl"))


def test_run_experience_refuses_privileged_logs_unless_allowed(logs, capsys):
    """clinenv run --baseline trajectory-rag / flat-experience --experience LOG: a
    privileged LOG is refused in one line naming the flag, which clinenv run has; with
    --allow-privileged the memory is built and the run goes on."""
    from clinenv.testing.fake_server import FakeChatServer

    teacher, scripted = logs
    with FakeChatServer("clinician") as server:
        llm = ["--doctor", "llm", "--model", "fake", "--base-url", server.base_url]
        for baseline in ("trajectory-rag", "flat-experience"):
            argv = ["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet", *llm,
                    "--baseline", baseline, "--experience", teacher.name, scripted.name,
                    "--out", f"{baseline}.jsonl"]
            assert main(argv) == 2
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0, err
            assert err.startswith("clinenv: error: --experience: teacher.jsonl, line 1: "
                                  "privileged run")
            assert "pass --allow-privileged" in err
            assert not (teacher.parent / f"{baseline}.jsonl").exists()
            assert main([*argv, "--allow-privileged"]) == 0, capsys.readouterr().err
            (line,) = lines_of(teacher.parent / f"{baseline}.jsonl")
            assert line["doctor"]["name"] == f"llm-direct+{baseline}"
            # its memory saw Y through the teacher's episodes: its own lines are privileged
            assert line["privileged"] is True
            argv = [*argv[:-1], f"{baseline}-plain.jsonl"]
            argv[argv.index(teacher.name)] = scripted.name
            assert main(argv) == 0, capsys.readouterr().err
            (line,) = lines_of(teacher.parent / f"{baseline}-plain.jsonl")
            assert line.get("privileged") is not True
    # the flag is parsed by clinenv run, and only means something with --experience
    assert main(["run", "--env", "EGIP-Demo-v0", "--episodes", "1", "--quiet",
                 "--allow-privileged", "--out", "x.jsonl"]) == 2
    assert "--allow-privileged is used only with --experience" in capsys.readouterr().err


def test_the_scripted_log_is_still_read(logs):
    _, scripted = logs
    assert main(["eval", str(scripted), "--out-dir", "r2"]) == 0


def test_export_rows_carry_privileged(logs):
    teacher, scripted = logs
    assert main(["export", str(teacher), "--out", "t.jsonl"]) == 0
    assert main(["export", str(scripted), "--out", "s.jsonl", "--format", "tools"]) == 0
    assert [r["privileged"] for r in lines_of(teacher.parent / "t.jsonl")] == [True] * 17
    assert [r["privileged"] for r in lines_of(teacher.parent / "s.jsonl")] == [False] * 17


def test_exported_prompts_equal_the_tool_view_rollouts(logs):
    """Each teacher episode, exported in both formats, against a fresh ToolEpisode (the
    trainers' tool view) played with the same actions: the tools rows are the TRL
    rollout's messages (default settings: the tool wording; system, task row + opening,
    each call and result), the messages rows the text rollout of the SkyRL adapter (its
    text wording, action_format="text"; TEXT_SYSTEM_PROMPT, TASK_INTRO + opening, each
    reply and the delta observation that answered it)."""
    teacher, _ = logs
    tools = list(episode_rows([teacher], fmt="tools"))
    texts = list(episode_rows([teacher]))
    for line, tool_row, text_row in zip(lines_of(teacher), tools, texts, strict=True):
        actions = [e["text"] for e in line["events"] if e["source"] == "doctor"]
        live = ToolEpisode("EGIP-Demo-v0", action_format="text")
        opening = live.reset(line["case_id"], line["seed"])
        expected_text = [{"role": "system", "content": TEXT_SYSTEM_PROMPT},
                         {"role": "user", "content": TASK_INTRO + opening}]
        for n, action in enumerate(actions):
            expected_text.append({"role": "assistant", "content": action})
            reply = live.step_text(action)
            if n + 1 < len(actions):
                expected_text.append({"role": "user", "content": reply})
        assert reply == FINAL_RESULT and live.reward == 1.0
        assert text_row["messages"] == expected_text
        live = ToolEpisode("EGIP-Demo-v0")
        got = tool_row["messages"]
        assert got[0]["content"] == TOOL_SYSTEM_PROMPT
        assert got[1]["content"] == TASK_INTRO + live.reset(line["case_id"], line["seed"])
        for call, result in zip(got[2::2], got[3::2], strict=True):
            (tool_call,) = call["tool_calls"]
            function = tool_call["function"]
            assert result["content"] == live.call(function["name"], function["arguments"])
        assert live.done and live.reward == 1.0


def test_cdeg_scale_refuses_privileged_logs_before_writing(logs, capsys):
    """cdeg scale builds graphs from its logs: a privileged one is refused in one line
    naming the flag, which cdeg scale has, before any subset log is written."""
    teacher, _ = logs
    Path("evaluation.txt").write_text("demo-17\n", encoding="utf-8")
    argv = ["cdeg", "scale", teacher.name, "--eval-cases", "evaluation.txt",
            "--fractions", "0.5", "--out-dir", "scale"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(
        "clinenv: error: teacher.jsonl, line 1: privileged run")
    assert "learned from the answer; pass --allow-privileged" in err
    assert not Path("scale").exists()
    assert main([*argv, "--build-args=--allow-privileged"]) == 2
    assert "--allow-privileged is set by `clinenv cdeg scale` itself" in \
        capsys.readouterr().err
