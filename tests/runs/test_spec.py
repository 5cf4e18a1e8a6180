"""One settings object for the run functions (:mod:`clinenv.runs.spec`), on real logs.

One :class:`RunSpec` writes byte-identical run logs (``timing`` masked: wall seconds)
under every executor; a bad field is refused with its name before anything is written;
a field given as a keyword is a :class:`TypeError` naming the field (the spec is the only
carrier of run settings).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
import re

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.case_list import read_case_list, write_case_list
from clinenv.runs import Concurrent, RunSpec, Serial, areplay_run, arun, replay_run, run
from clinenv.runs.logged import prepare_run
from clinenv.runs.replaying import NOT_REPLAYED
from clinenv.runs.spec import FIELD_DEFAULTS
from clinenv.seeding import episode_seed

#: ``timing`` is the one field of a scripted run that differs between two equal runs.
TIMING = re.compile(r'"timing": \{[^{}]*\}')
#: Three demo cases, listed out of dataset order (a run schedules them in dataset order).
LISTED = ["demo-09", "demo-02", "demo-05"]


def demo_env():
    return gym.make("EGIP-Demo-v0")


def log_bytes(path):
    """The log's bytes with every ``timing`` object replaced by a fixed token."""
    return TIMING.sub('"timing": T', path.read_text(encoding="utf-8"))


@pytest.fixture
def case_list(tmp_path):
    return read_case_list(write_case_list(tmp_path / "three.txt", LISTED))


def full_options(out, cases):
    """Every RunSpec field away from its default (except ``episodes``: not with cases)."""
    return dict(out=out, seed=5, repetitions=2, env_id="EGIP-Demo-v0", resume=False,
                retry_errors=False, max_consecutive_errors=3,
                paper_settings={"temperature": 0.7, "framework": "egip"}, cases=cases)


# ------------------------------------------------------------------ same logs
def test_spec_and_keywords_write_byte_identical_logs(tmp_path, case_list):
    by_kwargs = run(demo_env, ScriptedDoctor,
                    RunSpec(**full_options(tmp_path / "kwargs.jsonl", case_list)))
    spec = RunSpec(**full_options(tmp_path / "spec.jsonl", case_list))
    by_spec = run(demo_env, ScriptedDoctor, spec)
    assert log_bytes(tmp_path / "spec.jsonl") == log_bytes(tmp_path / "kwargs.jsonl")
    # what the spec asked for, pinned from its fields: the listed cases in dataset order
    # (indices 1, 4, 8), repetition-major, with their full-run seeds
    lines = [json.loads(x) for x in (tmp_path / "spec.jsonl").read_text("utf-8").splitlines()]
    assert [(x["case_id"], x["repetition"]) for x in lines] == [
        ("demo-02", 0), ("demo-05", 0), ("demo-09", 0),
        ("demo-02", 1), ("demo-05", 1), ("demo-09", 1)]
    assert [x["seed"] for x in lines] == [episode_seed(5, r, i) for r in (0, 1)
                                          for i in (1, 4, 8)]
    assert {x["run_seed"] for x in lines} == {5}
    assert all(x["paper_settings"] == {"temperature": 0.7, "framework": "egip"}
               for x in lines)
    assert all(x["case_list"]["case_ids"] == ["demo-02", "demo-05", "demo-09"]
               for x in lines)
    assert by_spec.plan == by_kwargs.plan and by_spec.n_new == 6


def test_one_spec_gives_the_same_lines_sequentially_and_concurrently(tmp_path):
    spec = RunSpec(out=tmp_path / "seq.jsonl", seed=2, episodes=6)
    seq = run(demo_env, ScriptedDoctor, spec)
    con = run(demo_env, ScriptedDoctor, spec.replace(out=tmp_path / "con.jsonl"),
              Concurrent(3))

    async def inside():
        return await arun(demo_env, ScriptedDoctor,
                          spec.replace(out=tmp_path / "acon.jsonl"), Concurrent(2))

    acon = asyncio.run(inside())

    def masked(lines):
        return [{k: v for k, v in x.items() if k != "timing"} for x in lines]

    assert len(seq.lines) == 6
    assert masked(con.lines) == masked(seq.lines) == masked(acon.lines)


def test_resume_from_a_spec(tmp_path):
    spec = RunSpec(out=tmp_path / "run.jsonl", episodes=3)
    run(demo_env, ScriptedDoctor, spec)
    more = run(demo_env, ScriptedDoctor, spec.replace(episodes=5, resume=True))
    assert (more.n_new, more.n_resumed) == (2, 3)
    prepared = prepare_run(demo_env(), ScriptedDoctor(),
                           spec.replace(episodes=5, resume=True))
    assert prepared.todo == [] and len(prepared.plan) == 5


def test_replay_takes_a_spec(tmp_path):
    source = tmp_path / "source.jsonl"
    run(demo_env, ScriptedDoctor, RunSpec(out=source, episodes=4))
    replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "kwargs.jsonl",
                                               max_consecutive_errors=2))
    replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "spec.jsonl",
                                               max_consecutive_errors=2))

    async def inside():
        return await areplay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "a.jsonl"),
                                 Concurrent(2))

    assert asyncio.run(inside()).n_new == 4
    assert log_bytes(tmp_path / "spec.jsonl") == log_bytes(tmp_path / "kwargs.jsonl")
    for name in NOT_REPLAYED:
        value = {"seed": 1, "episodes": 2, "repetitions": 2, "env_id": "X",
                 "paper_settings": {}, "cases": read_case_list(
                     write_case_list(tmp_path / "one.txt", ["demo-01"]))}[name]
        with pytest.raises(ValueError, match=rf"RunSpec\.{name}="):
            replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "x.jsonl",
                                                       **{name: value}))
    assert not (tmp_path / "x.jsonl").exists()


def test_replay_runs_under_the_run_executors(tmp_path):
    """replay_run / areplay_run take run's executors: Serial() (the default) and
    Concurrent(n) write the same lines (timing masked); Ray's is refused in one line,
    and so is Concurrent inside a running loop (await areplay_run there)."""
    source = tmp_path / "source.jsonl"
    run(demo_env, ScriptedDoctor, RunSpec(out=source, episodes=5))
    default = replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "default.jsonl"))
    serial = replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "serial.jsonl"),
                        Serial())
    con = replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "con.jsonl"),
                     executor=Concurrent(3))

    async def inside(name, executor):
        return await areplay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / name),
                                 executor)

    aserial = asyncio.run(inside("aserial.jsonl", Serial()))
    acon = asyncio.run(inside("acon.jsonl", Concurrent(2)))
    assert [r.n_new for r in (default, serial, con, aserial, acon)] == [5] * 5
    logs = {tuple(sorted(log_bytes(tmp_path / f"{n}.jsonl").splitlines()))
            for n in ("default", "serial", "con", "aserial", "acon")}  # in finish order
    assert len(logs) == 1
    assert log_bytes(tmp_path / "serial.jsonl") == log_bytes(tmp_path / "default.jsonl")

    from clinenv.distributed import Ray, RayConfig  # no ray needed to refuse it

    for runner in (replay_run, lambda *a: asyncio.run(areplay_run(*a))):
        with pytest.raises(TypeError, match=r"runs with Serial\(\) or Concurrent\(n\), "
                                            r"not Ray: replay is not distributed"):
            runner(source, ScriptedDoctor, RunSpec(out=tmp_path / "ray.jsonl"),
                   Ray(RayConfig(address="local")))
    with pytest.raises(TypeError, match="concurrency"):
        replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "ray.jsonl"),
                   concurrency=2)

    async def nested():
        replay_run(source, ScriptedDoctor, RunSpec(out=tmp_path / "nested.jsonl"),
                   Concurrent(2))

    with pytest.raises(RuntimeError, match=r"await areplay_run\(\.\.\.\)"):
        asyncio.run(nested())
    assert not (tmp_path / "ray.jsonl").exists() and not (tmp_path / "nested.jsonl").exists()


# ------------------------------------------------------------------ bad values
BAD = [
    ("seed", -1, ValueError, r"seed must be >= 0, got -1"),
    ("seed", 1.5, ValueError, r"seed must be an integer >= 0"),
    ("seed", True, ValueError, r"seed must be an integer >= 0"),
    ("repetitions", 0, ValueError, r"repetitions must be >= 1, got 0"),
    ("repetitions", "2", ValueError, r"repetitions must be an integer >= 1"),
    ("episodes", 0, ValueError, r"episodes must be None \(all cases\) or an integer >= 1"),
    ("resume", "yes", ValueError, r"resume must be True or False, got 'yes'"),
    ("retry_errors", 0, ValueError, r"retry_errors must be True or False"),
    ("env_id", "", ValueError, r"env_id must be None or a non-empty string"),
    ("max_consecutive_errors", 0, ValueError,
     r"max_consecutive_errors must be an integer >= 1 or None, got 0"),
    ("out", 3, ValueError, r"out must be a file path"),
    ("paper_settings", ["a"], ValueError, r"paper_settings must be None or a JSON-ready"),
    ("paper_settings", {"model": object()}, ValueError, r"paper_settings must be JSON-ready"),
    ("cases", [0, 1], ValueError, r"cases must be None or a clinenv\.case_list\.CaseList"),
    ("cases", {"path": "p"}, ValueError, r"cases must be None or a clinenv\.case_list"),
]


@pytest.mark.parametrize(("field", "value", "error", "message"), BAD)
def test_a_bad_field_is_named_before_anything_is_written(tmp_path, field, value, error,
                                                        message):
    out = tmp_path / "x.jsonl"
    options = {"out": out, field: value}
    with pytest.raises(error, match=message):
        RunSpec(**options)
    runners = [lambda: run(demo_env, ScriptedDoctor, RunSpec(**options)),
               lambda: run(demo_env, ScriptedDoctor, RunSpec(**options), Concurrent())]
    if field != "max_consecutive_errors":  # prepare_run does not stop runs
        runners.append(lambda: prepare_run(demo_env(), ScriptedDoctor(), RunSpec(**options)))
    for runner in runners:
        with pytest.raises(error, match=message):
            runner()
    assert not out.exists()


def test_episodes_beyond_the_dataset_and_episodes_with_cases(tmp_path, case_list):
    with pytest.raises(ValueError, match=r"episodes must be in 1\.\.17 \(the dataset has 17"):
        run(demo_env, ScriptedDoctor, RunSpec(out=tmp_path / "x.jsonl",
                                                         episodes=18))
    with pytest.raises(ValueError, match="give either episodes .* or a case list, not both"):
        RunSpec(out=tmp_path / "x.jsonl", episodes=2, cases=case_list)
    assert not (tmp_path / "x.jsonl").exists()


def test_unknown_field_and_frozen_spec(tmp_path):
    with pytest.raises(ValidationError, match=r"bogus\n  Extra inputs are not permitted"):
        RunSpec(out=tmp_path / "x.jsonl", bogus=1)
    spec = RunSpec(out=tmp_path / "x.jsonl")
    with pytest.raises(ValidationError, match="Instance is frozen"):
        spec.seed = 3
    with pytest.raises(ValueError, match="seed must be >= 0"):
        spec.replace(seed=-2)  # a variant is checked again


def test_values_are_normalised(tmp_path):
    settings = {"temperature": 0.7}
    spec = RunSpec(out=str(tmp_path / "x.jsonl"), seed=np.int64(3), episodes=np.int32(2),
                   paper_settings=settings)
    settings["temperature"] = 0.0  # the spec keeps its own JSON copy
    assert spec.out == tmp_path / "x.jsonl" and type(spec.seed) is int and spec.seed == 3
    assert type(spec.episodes) is int and spec.paper_settings == {"temperature": 0.7}


# ------------------------------------------------------------------ spec and keywords
RUNNERS = {
    "run": lambda spec, **kw: run(demo_env, ScriptedDoctor, spec, **kw),
    "prepare_run": lambda spec, **kw: prepare_run(demo_env(), ScriptedDoctor(), spec, **kw),
    "run_concurrent": lambda spec, **kw: run(demo_env, ScriptedDoctor, spec, Concurrent(), **kw),
    "arun": lambda spec, **kw: asyncio.run(
        arun(demo_env, ScriptedDoctor, spec, Concurrent(), **kw)),
}


FIELD_VALUES = [("out", "other.jsonl"), ("seed", 4), ("episodes", 2), ("repetitions", 3),
                ("resume", True), ("retry_errors", False), ("env_id", "EGIP-Demo-v0"),
                ("max_consecutive_errors", None), ("paper_settings", {"a": 1})]


@pytest.mark.parametrize(("name", "field", "value"), [
    (name, field, value) for name in RUNNERS for field, value in FIELD_VALUES
    if not (name == "prepare_run" and field == "max_consecutive_errors")])
def test_a_field_keyword_is_a_type_error(tmp_path, name, field, value):
    """RunSpec is the only carrier of run settings: a field as a keyword is refused."""
    spec = RunSpec(out=tmp_path / "x.jsonl", seed=1)
    with pytest.raises(TypeError, match=rf"got an unexpected keyword argument '{field}'"):
        RUNNERS[name](spec, **{field: value})
    assert not (tmp_path / "x.jsonl").exists()


def test_the_hooks_leave_the_spec_alone(tmp_path):
    spec = RunSpec(out=tmp_path / "x.jsonl", seed=7, episodes=2)
    result = run(demo_env, ScriptedDoctor, spec, progress=None)
    assert [s for _, _, s in result.plan] == [episode_seed(7, 0, 0), episode_seed(7, 0, 1)]


def test_no_log_file_and_a_spec_of_another_type(tmp_path):
    with pytest.raises(ValidationError, match=r"for RunSpec\nout\n  Field required"):
        run(demo_env, ScriptedDoctor, RunSpec())
    with pytest.raises(TypeError, match=r"replay_run\(\) missing 1 required positional "
                                        r"argument: 'spec'"):
        replay_run(tmp_path / "missing.jsonl", ScriptedDoctor)
    with pytest.raises(TypeError, match="spec must be a clinenv.runs.spec.RunSpec, got dict"):
        run(demo_env, ScriptedDoctor, {"out": tmp_path / "x.jsonl"}, Concurrent())


@pytest.mark.parametrize("runner", [run, arun, prepare_run, replay_run, areplay_run])
def test_the_run_functions_take_a_spec_and_no_field(runner):
    """One carrier: every run function takes a required spec and declares no field."""
    params = inspect.signature(runner).parameters
    assert list(params)[2] == "spec" and params["spec"].default is inspect.Parameter.empty
    assert not set(params) & set(FIELD_DEFAULTS)
    assert FIELD_DEFAULTS == {
        "out": None, "seed": 0, "episodes": None, "repetitions": 1, "resume": False,
        "retry_errors": True, "env_id": None, "max_consecutive_errors": 5,
        "paper_settings": None, "cases": None}


def test_a_spec_pickles_and_dumps(tmp_path, case_list):
    """Ray ships specs to its actors: a pickled spec is an equal one; the JSON dump holds
    every field."""
    spec = RunSpec(**full_options(tmp_path / "x.jsonl", case_list))
    assert pickle.loads(pickle.dumps(spec)) == spec
    dumped = spec.model_dump(mode="json")
    assert set(dumped) == set(FIELD_DEFAULTS) and dumped["out"] == str(tmp_path / "x.jsonl")
    assert dumped["cases"]["case_ids"] == LISTED
