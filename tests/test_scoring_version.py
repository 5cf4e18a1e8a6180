"""Every run-log line carries ``scoring_version``; ``clinenv eval`` and ``clinenv
compare`` refuse to pool or pair logs of different versions unless ``--mixed-scoring``."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.evaluation import (
    MixedScoringError,
    accuracy_table,
    align,
    comparison_table,
    load_runs,
    pair_runs,
    scoring_version,
)
from clinenv.runlog import read_run_log
from clinenv.runs import RunSpec, run
from clinenv.scoring import SCORING_VERSION
from clinenv.testing.cli_calls import main_cli, one_error_line, run_cli
from clinenv.testing.eval_logs import EGIP_ALPHA, NATIVE_ALPHA, log_lines, write_log


def versioned(lines: list[dict], version: int | None) -> list[dict]:
    """``lines`` with ``scoring_version`` set (``None``: left out, a version-1 log)."""
    return [line if version is None else {**line, "scoring_version": version}
            for line in lines]


def test_the_current_version_is_3():
    assert SCORING_VERSION == 3


def test_every_run_log_line_carries_the_scoring_version(tmp_path):
    env = gym.make("EGIP-Demo-v0")
    try:
        run(lambda: env, ScriptedDoctor, RunSpec(out=tmp_path / "run.jsonl", seed=0, repetitions=1,
                                                 env_id="EGIP-Demo-v0", episodes=2))
    finally:
        env.close()
    lines = read_run_log(tmp_path / "run.jsonl").lines
    assert len(lines) == 2
    assert {line["scoring_version"] for line in lines} == {SCORING_VERSION}
    assert all("answer_status" in line for line in lines)


@pytest.mark.parametrize(("line", "version"), [
    ({}, 1), ({"scoring_version": 2}, 2), ({"scoring_version": 1}, 1),
    ({"scoring_version": "2"}, 1), ({"scoring_version": True}, 1),
])
def test_scoring_version_of_a_line(line, version):
    assert scoring_version(line) == version


def test_load_runs_refuses_to_pool_or_pair_versions(tmp_path):
    old = write_log(tmp_path / "old.jsonl", log_lines("alpha", "native", NATIVE_ALPHA))
    new = write_log(tmp_path / "new.jsonl",
                    versioned(log_lines("alpha", "egip", EGIP_ALPHA), 2))
    with pytest.raises(MixedScoringError) as err:
        load_runs([old, new])
    message = str(err.value)
    assert f"version 1 ({old})" in message and f"version 2 ({new})" in message
    assert "--mixed-scoring" in message
    runs = load_runs([old, new], mixed_scoring=True)
    with pytest.raises(MixedScoringError, match="cannot pair"):
        align(*runs)
    with pytest.raises(MixedScoringError):
        comparison_table(pair_runs(runs, base_label="native"), n_resamples=50, n_flips=50)
    table = comparison_table(pair_runs(runs, base_label="native"), n_resamples=50,
                             n_flips=50, mixed_scoring=True)
    assert f"Mixed scoring versions (--mixed-scoring): version 1: {old}; version 2: {new}." \
        in table.to_markdown()
    assert "Mixed scoring versions" in accuracy_table(runs).to_markdown()


def test_one_resumed_file_with_two_versions_is_refused(tmp_path):
    """A v1 log resumed by a newer clinenv holds lines of both versions."""
    lines = log_lines("alpha", "native", NATIVE_ALPHA)
    path = write_log(tmp_path / "resumed.jsonl", lines[:6] + versioned(lines[6:], 2))
    with pytest.raises(MixedScoringError, match=r"version 1 \(.*\), version 2 \("):
        load_runs([path])
    assert len(load_runs([path], mixed_scoring=True)[0].records) == 12


def test_same_version_logs_load_as_before(tmp_path):
    a = write_log(tmp_path / "a.jsonl", versioned(log_lines("alpha", "native", NATIVE_ALPHA), 2))
    b = write_log(tmp_path / "b.jsonl", versioned(log_lines("alpha", "egip", EGIP_ALPHA), 2))
    runs = load_runs([a, b])
    assert [r.scoring_versions for r in runs] == [{2: (str(a),)}, {2: (str(b),)}]
    assert "Mixed scoring" not in accuracy_table(runs).to_markdown()


def test_cli_refuses_mixed_versions_unless_told(tmp_path):
    old = write_log(tmp_path / "old.jsonl", log_lines("alpha", "native", NATIVE_ALPHA))
    new = write_log(tmp_path / "new.jsonl",
                    versioned(log_lines("alpha", "egip", EGIP_ALPHA), 2))
    for command in ("eval", "compare"):
        line = one_error_line(main_cli(tmp_path, command, str(old), str(new), code=2))
        assert "different scoring versions" in line
        assert f"version 1 ({old})" in line and f"version 2 ({new})" in line
    proc = run_cli(tmp_path, "eval", str(old), str(new), "--mixed-scoring", "--out-dir",
                   "out")
    assert "Mixed scoring versions" in proc.stdout
    run_cli(tmp_path, "compare", str(old), str(new), "--mixed-scoring", "--out-dir", "out",
            "--resamples", "100", "--flips", "100")


@pytest.mark.parametrize("version", [None, 1, 2, 4])
def test_resume_refuses_a_log_of_another_scoring_version(tmp_path, version):
    from clinenv.runlog import RunLogError

    out = tmp_path / "log.jsonl"
    env = gym.make("EGIP-Demo-v0")
    run(lambda: env, ScriptedDoctor, RunSpec(out=out, seed=1, episodes=2))
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for line in lines:
        line.pop("scoring_version")
        if version is not None:
            line["scoring_version"] = version
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    before = out.read_bytes()
    with pytest.raises(RunLogError, match=r"log\.jsonl, line 1: scoring_version is"):
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, seed=1, episodes=3, resume=True))
    assert out.read_bytes() == before
