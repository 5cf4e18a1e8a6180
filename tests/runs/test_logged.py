"""Rollouts and run logs (:mod:`clinenv.runs.logged`), in process, on real files."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
from dataclasses import replace

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.evaluation.summary import summarize
from clinenv.runlog import (
    SCHEMA,
    RunContext,
    RunLogError,
    RunLogWriter,
    env_settings,
    read_run_log,
)
from clinenv.runs import RunSpec, run
from clinenv.runs.logged import (
    awaitable,
    episode_seed,
    plan_episodes,
    run_episode,
    run_without_loop,
)

LINE_KEYS = {
    "schema", "case_id", "case_index", "repetition", "seed", "env_id", "env_spec",
    "dataset", "dataset_sha256", "clinenv_version", "doctor", "events", "evidence",
    "answer", "verdict", "correct", "reward", "turns", "n_exams_requested",
    "invalid_actions", "timing",
}
N_DEMO = 17


def without_timing(lines):
    return [{k: v for k, v in line.items() if k != "timing"} for line in lines]


@pytest.fixture
def demo_env():
    env = gym.make("EGIP-Demo-v0")
    yield env
    env.close()



def test_rollouts_re_exports_the_episode_module():
    """One concept per module (clinenv.runs.episode, clinenv.runs.fail_fast);
    ``from clinenv.runs.logged import ...`` keeps giving the same objects."""
    import clinenv.runs.logged as rollouts
    from clinenv.runs import episode, fail_fast

    for module in (episode,):
        for name in module.__all__:
            assert getattr(rollouts, name) is getattr(module, name), name
            assert name in rollouts.__all__
    assert rollouts.RunAborted is fail_fast.RunAborted


# ------------------------------------------------------------------------ seeds, plan
def test_episode_seed_is_fixed_31_bit_and_distinct():
    seeds = {episode_seed(7, r, i) for r in range(5) for i in range(200)}
    assert len(seeds) == 1000
    assert all(0 <= s < 2**31 for s in seeds)
    assert episode_seed(7, 1, 3) == episode_seed(7, 1, 3)
    assert episode_seed(7, 1, 3) != episode_seed(8, 1, 3)
    assert episode_seed(0, 1, 0) != episode_seed(0, 0, 1)
    with pytest.raises(ValueError):
        episode_seed(-1, 0, 0)


def test_plan_is_repetition_major():
    plan = plan_episodes(10, 3, 2, seed=4)
    assert [(i, r) for i, r, _ in plan] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert [s for _, _, s in plan] == [episode_seed(4, r, i) for i, r, _ in plan]
    assert len(plan_episodes(10, None, 1, 0)) == 10
    for bad in ((10, 11, 1, 0), (10, 0, 1, 0), (10, 2, 0, 0), (10, 2, 1, -1)):
        with pytest.raises(ValueError):
            plan_episodes(*bad)


# --------------------------------------------------------------------------- episode
def test_run_episode_record(demo_env):
    record = run_episode(demo_env, ScriptedDoctor(), case_id=0, seed=123)
    assert record["case_id"] == "demo-01"
    assert record["phase"] == "done" and record["terminated"] and not record["truncated"]
    assert record["verdict"] in ("correct", "wrong", "unscored")
    assert record["reward"] == (1.0 if record["correct"] else 0.0)
    assert record["steps"] == record["turns"] + 1
    assert set(record["timing"]) == {"reset_s", "doctor_s", "env_s", "total_s"}
    assert record["timing"]["total_s"] >= record["timing"]["env_s"] > 0
    # timings never reach the environment's info
    _, info = demo_env.reset(seed=123, options={"case_id": 0})
    assert not any("time" in key or "timing" in key for key in info)


def test_run_episode_same_seed_same_record(demo_env):
    doctor = ScriptedDoctor(exploration=0.5)
    a = run_episode(demo_env, doctor, case_id="demo-05", seed=9)
    b = run_episode(demo_env, doctor, case_id="demo-05", seed=9)
    assert without_timing([a]) == without_timing([b])
    json.dumps(a, ensure_ascii=False, allow_nan=False)


# field-bug-reports B10
def test_the_sync_runner_refuses_a_move_that_awaits_io():
    """run_episode drives the shared episode loop without an event loop (no nested
    loop); a coroutine that really suspends is closed and refused, never left pending."""
    assert run_without_loop(awaitable(lambda x: x + 1)(41)) == 42
    suspended = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="arun_episode"):
        run_without_loop(suspended)
    assert suspended.cr_frame is None  # closed


# --------------------------------------------------------------------------- run log
def _lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_run_logged_writes_one_line_per_case_and_repetition(demo_env, tmp_path):
    out = tmp_path / "runs" / "demo.jsonl"
    result = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=3, repetitions=2))
    lines = _lines(out)
    assert len(lines) == 2 * N_DEMO == result.n_new
    assert {(ln["case_id"], ln["repetition"]) for ln in lines} == {
        (f"demo-{i:02d}", r) for i in range(1, N_DEMO + 1) for r in (0, 1)}
    for line in lines:
        assert LINE_KEYS <= set(line)
        assert line["schema"] == SCHEMA and line["env_id"] == "EGIP-Demo-v0"
        assert line["env_spec"]["id"] == "EGIP-Demo-v0"
        assert line["dataset"] == "demo"
        assert line["dataset_sha256"] == demo_env.unwrapped.pool.sha256
        assert line["doctor"] == {"name": "scripted", "config": {
            "exam_budget": 8, "exploration": 0.0, "n_questions": 3}}
        assert line["seed"] == episode_seed(3, line["repetition"], line["case_index"])
    # Unicode from the records is written as is, not \u-escaped
    text = out.read_text(encoding="utf-8")
    assert "\\u00b0" not in text and "°" in text


def test_same_seed_twice_identical_except_timing(demo_env, tmp_path):
    run(lambda: demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "a.jsonl", seed=11))
    run(lambda: demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "b.jsonl", seed=11))
    a, b = _lines(tmp_path / "a.jsonl"), _lines(tmp_path / "b.jsonl")
    assert without_timing(a) == without_timing(b)
    assert [x["timing"] for x in a] != [x["timing"] for x in b]


def test_refuses_to_overwrite_without_resume(demo_env, tmp_path):
    out = tmp_path / "log.jsonl"
    out.write_text("something\n", encoding="utf-8")
    with pytest.raises(FileExistsError):
        run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out))
    assert out.read_text(encoding="utf-8") == "something\n"


def test_resume_after_crash_runs_exactly_the_missing_keys(demo_env, tmp_path):
    out = tmp_path / "log.jsonl"
    full = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=5, repetitions=2))
    reference = {(x["case_id"], x["repetition"]): x for x in without_timing(full.lines)}
    raw = out.read_bytes().splitlines(keepends=True)
    deleted = [raw[3], raw[10], raw[20]]
    kept = [x for x in raw if x not in deleted]
    partial = kept[-1][: len(kept[-1]) // 2]  # a crash in the middle of the last line
    out.write_bytes(b"".join(kept[:-1]) + partial)
    missing = {(json.loads(x)["case_id"], json.loads(x)["repetition"])
               for x in deleted + [kept[-1]]}

    log = read_run_log(out)  # reading alone changes nothing
    assert log.partial_bytes == len(partial) and not log.repaired
    assert len(log.lines) == len(raw) - 4

    seen = []
    result = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=5, repetitions=2,
                                                           resume=True), progress=seen.append)
    assert {(x["case_id"], x["repetition"]) for x in seen} == missing
    assert result.n_new == 4 and result.n_resumed == 2 * N_DEMO - 4
    assert result.partial_bytes == len(partial)
    final = _lines(out)
    keys = [(x["case_id"], x["repetition"]) for x in final]
    assert len(keys) == len(set(keys)) == 2 * N_DEMO
    assert {(x["case_id"], x["repetition"]): x for x in without_timing(final)} == reference
    assert without_timing(result.lines) == without_timing(full.lines)

    again = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=5, repetitions=2,
                                                          resume=True))
    assert again.n_new == 0 and len(_lines(out)) == 2 * N_DEMO


def test_complete_last_line_without_newline_is_kept(demo_env, tmp_path):
    out = tmp_path / "log.jsonl"
    run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, episodes=3))
    out.write_bytes(out.read_bytes().rstrip(b"\n"))
    log = read_run_log(out, repair=True)
    assert len(log.lines) == 3 and log.partial_bytes == 0
    assert out.read_bytes().endswith(b"}\n")
    more = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, episodes=4, resume=True))
    assert more.n_new == 1
    assert len(_lines(out)) == 4


def test_corrupt_middle_line_is_an_error_naming_the_line(demo_env, tmp_path):
    out = tmp_path / "log.jsonl"
    run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, episodes=3))
    raw = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(raw[0] + b'{"broken": \n' + raw[1] + raw[2])
    with pytest.raises(RunLogError, match=r"log\.jsonl, line 2"):
        read_run_log(out, repair=True)
    assert len(out.read_bytes().splitlines()) == 4  # nothing cut


@pytest.mark.parametrize("change", ["env_id", "doctor", "seed"])
def test_resume_refuses_a_different_run(demo_env, tmp_path, change):
    out = tmp_path / "log.jsonl"
    run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=1, episodes=4))
    before = out.read_bytes()
    kwargs = {"seed": 1, "episodes": 5, "resume": True}
    doctor = ScriptedDoctor()
    if change == "env_id":
        kwargs["env_id"] = "EGIP-Other-v0"
    elif change == "doctor":
        doctor = ScriptedDoctor(n_questions=2)
    else:
        kwargs["seed"] = 2
    # the message names the differing field in full (doctor.config.n_questions)
    field = {"env_id": "env_id", "doctor": r"doctor\.config\.n_questions",
             "seed": "run_seed"}[change]
    with pytest.raises(RunLogError, match=rf"log\.jsonl, line 1: {field} is"):
        run(lambda: demo_env, lambda: doctor, RunSpec(out=out, **kwargs))
    assert out.read_bytes() == before


@pytest.mark.parametrize("kwargs, field", [
    ({"preset": "egip-no-menu"}, r"env_spec\.kwargs\.preset is absent but this run has "
                                 r'"egip-no-menu"'),
    ({"exam_cost": 0.5}, r"env_spec\.kwargs\.exam_cost is absent"),
    ({"observation_format": "delta"}, r"env_spec\.kwargs\.observation_format is absent"),
])
def test_resume_refuses_other_environment_settings(tmp_path, kwargs, field):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=3))
    before = out.read_bytes()
    with gym.make("EGIP-Demo-v0", **kwargs) as env, pytest.raises(
            RunLogError, match=rf"log\.jsonl, line 1: {field}"):
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=5, resume=True))
    assert out.read_bytes() == before  # nothing written


def test_resume_keeps_a_run_whose_data_or_model_server_moved(tmp_path):
    """Where the files lie and where a seat's model is served are not the run."""
    model = {"backend": "openai", "model": "m", "config": {"temperature": 0.0},
             "base_url": "http://127.0.0.1:8000/v1", "timeout_s": 60.0, "max_retries": 3}
    spec = {"id": "EGIP-Demo-v0", "kwargs": {"dataset": "demo", "data_dir": "/a",
                                             "verify": True, "patient_model": model}}
    moved = {"id": "EGIP-Demo-v0", "kwargs": {
        "dataset": "demo", "data_dir": "/b", "render_mode": "ansi", "patient_model": {
            **model, "base_url": "http://127.0.0.1:9000/v1", "timeout_s": 5.0,
            "max_retries": 0}}}
    assert env_settings(spec) == env_settings(moved) == {
        "dataset": "demo", "patient_model": {"backend": "openai", "model": "m",
                                             "config": {"temperature": 0.0}}}
    with gym.make("EGIP-Demo-v0") as env:
        context = RunContext.from_env(env, ScriptedDoctor(), seed=0)
    line = context.scheduled(17, 1).line({}, case_index=0, repetition=0,
                                         seed=episode_seed(0, 0, 0))
    context = replace(context, env_spec=spec)
    context.check({**line, "env_spec": moved}, path="log.jsonl", line_no=1)  # accepted
    other = {**moved, "kwargs": {**moved["kwargs"], "patient_model": {
        **model, "config": {"temperature": 0.7}}}}
    with pytest.raises(RunLogError, match=r"env_spec\.kwargs\.patient_model\.config"
                                          r"\.temperature is 0\.7 but this run has 0\.0"):
        context.check({**line, "env_spec": other}, path="log.jsonl", line_no=1)
    assert env_settings(None) is None and env_settings({"id": "x"}) == {}


def test_resume_refuses_a_log_from_another_environment(tmp_path, shared_data_dir):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as demo:
        run(lambda: demo, ScriptedDoctor, RunSpec(out=out, episodes=2))
    with gym.make("EGIP-MedQA-v0") as medqa, pytest.raises(RunLogError) as err:
        run(lambda: medqa, ScriptedDoctor, RunSpec(out=out, episodes=2, resume=True))
    assert "line 1" in str(err.value) and "EGIP-Demo-v0" in str(err.value)
    assert "EGIP-MedQA-v0" in str(err.value)


def _as_error_line(line):
    """``line`` as an episode stopped by a backend error before its first step."""
    return {**line, "error": {"type": "BackendError", "message": "HTTP 500",
                              "backend": "openai", "detail": "http_500"},
            "verdict": "unscored", "correct": False, "terminated": False, "answer": None}


def _write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_later_line_supersedes_only_an_error_line(demo_env, tmp_path):
    """The supersession rule (clinenv.runlog): error line, then its retry, is one episode;
    any other repeated key is refused by the reader and by resume."""
    good = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "good.jsonl", seed=4,
                                                         episodes=3)).lines
    err = _as_error_line(good[1])
    retried = _write(tmp_path / "retried.jsonl", [good[0], err, err, good[2], good[1]])
    episodes = read_run_log(retried).episodes()
    assert list(episodes) == [("demo-01", 0), ("demo-02", 0), ("demo-03", 0)]
    assert list(episodes.values()) == good  # the retry stands, in first-line order
    again = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=retried, seed=4, episodes=3,
                                                          resume=True))
    assert (again.n_new, again.n_retried, again.n_errors) == (0, 0, 0)
    assert without_timing(again.lines) == without_timing(good)
    s = summarize(_lines(retried))
    assert (s["n_records"], s["n_errors"]) == (3, 0)
    assert s == summarize(good)

    for name, lines, line_no, earlier in (
            ("twice.jsonl", [*good, good[0]], 4, 1),        # a repeated finished episode
            ("late_error.jsonl", [*good, err], 4, 2)):      # an error after a finished one
        path = _write(tmp_path / name, lines)
        pattern = rf"{name}, line {line_no}: episode \('demo-0\d', 0\) appears twice " \
                  rf"\(also on line {earlier}\)"
        with pytest.raises(RunLogError, match=pattern):
            read_run_log(path).episodes()
        before = path.read_bytes()
        with pytest.raises(RunLogError, match=pattern):
            run(lambda: demo_env, ScriptedDoctor,
                RunSpec(out=path, seed=4, episodes=3, resume=True))
        assert path.read_bytes() == before
        with pytest.raises(ValueError, match=r"records \d and 3 are both episode"):
            summarize(lines)


def test_resume_retries_error_lines_unless_told_not_to(demo_env, tmp_path):
    good = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "good.jsonl", seed=4,
                                                         episodes=3, repetitions=2)).lines
    out = _write(tmp_path / "log.jsonl",
                 [good[0], _as_error_line(good[1]), good[2], good[3], _as_error_line(good[5])])
    no_retry = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=4, episodes=3,
                                                             repetitions=2, resume=True,
                                                             retry_errors=False))
    assert (no_retry.n_new, no_retry.n_retried, no_retry.n_errors) == (1, 0, 2)
    assert [x["repetition"] for x in _lines(out)[5:]] == [1]  # only the missing (demo-02, 1)
    retry = run(lambda: demo_env, ScriptedDoctor, RunSpec(out=out, seed=4, episodes=3,
                                                          repetitions=2, resume=True))
    assert (retry.n_new, retry.n_retried, retry.n_resumed, retry.n_errors) == (2, 2, 4, 0)
    assert [(x["case_id"], x["repetition"]) for x in _lines(out)[6:]] == [
        ("demo-02", 0), ("demo-03", 1)]
    assert without_timing(retry.lines) == without_timing(good)


def test_writer_refuses_nan(tmp_path):
    with RunLogWriter(tmp_path / "x.jsonl") as writer, pytest.raises(ValueError):
        writer.write({"schema": SCHEMA, "x": math.nan})


def test_context_line_has_run_fields(demo_env):
    ctx = RunContext.from_env(demo_env, ScriptedDoctor(), seed=0)
    line = ctx.line({"case_id": "demo-01", "turns": 3}, case_index=0, repetition=0, seed=1)
    assert line["verdict"] == "unscored" and line["correct"] is False
    ctx.check({**line, "seed": episode_seed(0, 0, 0)}, path="x", line_no=1)


# --------------------------------------------------------------------------- summary
def _recompute(lines, n_scheduled):
    correct = sum(x["verdict"] == "correct" for x in lines)
    answered = sum(x["verdict"] != "unscored" for x in lines)
    return (100 * correct / n_scheduled, 100 * answered / n_scheduled,
            sum(x["turns"] for x in lines) / len(lines),
            sum(x["n_exams_requested"] for x in lines) / len(lines))


def test_summary_matches_independent_recomputation(demo_env, tmp_path):
    result = run(lambda: demo_env, lambda: ScriptedDoctor(exploration=0.6),
                 RunSpec(out=tmp_path / "l.jsonl", seed=2, repetitions=3))
    lines = _lines(tmp_path / "l.jsonl")
    summary = summarize(lines, plan=result.plan)
    acc, cov, turns, exams = _recompute(lines, len(lines))
    assert summary["n_scheduled"] == 3 * N_DEMO
    assert summary["accuracy"] == pytest.approx(acc)
    assert summary["coverage"] == pytest.approx(cov)
    assert summary["mean_turns"] == pytest.approx(turns)
    assert summary["mean_exams"] == pytest.approx(exams)
    per_rep = [100 * sum(x["verdict"] == "correct" for x in lines if x["repetition"] == r)
               / N_DEMO for r in range(3)]
    assert [v["accuracy"] for v in summary["repetitions"].values()] == pytest.approx(per_rep)
    assert summary["accuracy_mean"] == pytest.approx(statistics.fmean(per_rep))
    assert summary["accuracy_sd"] == pytest.approx(statistics.stdev(per_rep))


def test_summary_keeps_unscored_and_missing_in_the_denominator():
    records = [
        {"repetition": 0, "verdict": "correct", "turns": 19, "n_exams_requested": 2},
        {"repetition": 0, "verdict": "unscored", "turns": 19, "n_exams_requested": 0},
        {"repetition": 0, "verdict": "wrong", "turns": 10, "n_exams_requested": 4},
        {"repetition": 1, "verdict": "correct", "turns": 19, "n_exams_requested": 2},
    ]
    plan = [(i, r, 0) for r in (0, 1) for i in range(4)]  # 8 scheduled, 4 outputs
    s = summarize(records, plan=plan)
    assert s["n_scheduled"] == 8 and s["n_records"] == 4
    assert s["accuracy"] == pytest.approx(25.0)
    assert s["coverage"] == pytest.approx(37.5)
    assert (s["n_correct"], s["n_wrong"], s["n_unscored"]) == (2, 1, 5)
    assert s["mean_turns"] == pytest.approx(67 / 4)
    assert s["mean_exams"] == pytest.approx(2.0)
    assert s["repetitions"][0]["accuracy"] == pytest.approx(25.0)
    assert s["repetitions"][1]["coverage"] == pytest.approx(25.0)
    assert s["accuracy_sd"] == pytest.approx(0.0)
    one = summarize(records[:3])
    assert one["accuracy"] == pytest.approx(100 / 3) and one["accuracy_sd"] is None
    assert math.isnan(summarize([])["accuracy"])


# ----------------------------------------------------------------------------- MedQA
def test_medqa_all_cases(tmp_path, shared_data_dir):
    with gym.make("EGIP-MedQA-v0") as env:
        result = run(lambda: env, ScriptedDoctor, RunSpec(out=tmp_path / "medqa.jsonl", seed=0))
    lines = _lines(tmp_path / "medqa.jsonl")
    assert len(lines) == 107 == len({x["case_id"] for x in lines})
    assert all(x["dataset"] == "medqa" and x["phase"] == "done" for x in lines)
    assert lines[0]["dataset_sha256"] == (  # the records digest (clinenv.datasets.digests)
        "a86546cb39243de7fc49386f6655078a1b86d49334eeee728eb5216937b88ddf")
    summary = summarize(result.lines, plan=result.plan)
    assert summary["accuracy"] == pytest.approx(_recompute(lines, 107)[0])
    assert 0 < summary["accuracy"] < 100
