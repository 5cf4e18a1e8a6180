"""Repairing a log that holds episodes twice (:mod:`clinenv.runlog_dedupe`, ``clinenv
data dedupe``), on real logs written by two appending runs."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.cli import main
from clinenv.evaluation.runs import RunsError, load_runs
from clinenv.runlog import RunLogError, read_run_log
from clinenv.runlog_dedupe import dedupe_run_log, dropped_path
from clinenv.runlog_lock import RunLogLock, RunLogLocked
from clinenv.runs import RunSpec, run

N_DEMO = 17


@pytest.fixture
def two_appenders(tmp_path) -> tuple[Path, list[bytes]]:
    """The log two runs leave when both append to it: run A's 34 lines (2 repetitions),
    with run B's first 20 lines (same run, timing apart) written between A's 10th and
    11th line; returns the log and its raw lines."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        with gym.make("EGIP-Demo-v0") as env:
            run(lambda: env, lambda: ScriptedDoctor(exploration=0.5), RunSpec(out=path,
                                                                              repetitions=2))
    lines_a, lines_b = a.read_bytes().splitlines(True), b.read_bytes().splitlines(True)
    raw = lines_a[:10] + lines_b[:20] + lines_a[10:]
    dup = tmp_path / "runs" / "dup.jsonl"
    dup.parent.mkdir()
    dup.write_bytes(b"".join(raw))
    return dup, raw


def test_readers_refuse_the_log_and_name_the_repair(two_appenders):
    dup, _ = two_appenders
    with pytest.raises(RunLogError, match=r"dup\.jsonl, line 11: episode .* appears twice "
                                          r"\(also on line 1\).*repair it with `clinenv "
                                          r"data dedupe .*dup\.jsonl`"):
        read_run_log(dup).episodes()
    with pytest.raises(RunsError, match=r"duplicate episode .*; repair it with `clinenv "
                                        r"data dedupe .*dup\.jsonl` \(keeps the first line"):
        load_runs([dup])


def test_dedupe_keeps_the_first_line_of_each_episode_and_moves_the_rest(two_appenders):
    dup, raw = two_appenders
    result = dedupe_run_log(dup)
    assert (result.n_lines, result.n_kept, len(result.dropped)) == (54, 34, 20)
    # B's 20 lines (file lines 11-30) repeat A's first 20 episodes: A's lines 1-10 and
    # A's lines 11-20, which follow B's in the file (lines 31-40)
    assert [d.line for d in result.dropped] == list(range(11, 21)) + list(range(31, 41))
    assert [d.kept_line for d in result.dropped] == list(range(1, 11)) + list(range(21, 31))
    kept = dup.read_bytes().splitlines(True)
    assert kept == raw[:10] + raw[10:30][10:] + raw[40:]  # B's 11-20 stand; A's 11-20 go
    moved = dropped_path(dup).read_bytes().splitlines(True)
    assert sorted(kept + moved) == sorted(raw)  # nothing lost
    keys = [(x["case_id"], x["repetition"]) for x in map(json.loads, kept)]
    assert len(keys) == len(set(keys)) == 2 * N_DEMO
    (run,) = load_runs([dup])  # readable again
    assert run.n_repetitions == 2
    again = dedupe_run_log(dup)
    assert again.dropped == [] and not again.written


def test_the_cli_says_what_it_dropped(two_appenders, capsys, monkeypatch):
    dup, raw = two_appenders
    monkeypatch.chdir(dup.parent)
    assert main(["data", "dedupe", "dup.jsonl", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("line 11: case 'demo-") and "already on line 1" in out[0]
    assert out[5] == "... and 15 more"
    assert out[6].startswith("dup.jsonl: would drop 20 of 54 line(s) and keep 34")
    assert out[6].endswith("nothing changed (--dry-run)")
    assert dup.read_bytes() == b"".join(raw) and not dropped_path(dup).exists()
    assert main(["data", "dedupe", "dup.jsonl"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("dup.jsonl: dropped 20 of 54 line(s), kept 34")
    assert last.endswith("the dropped lines are in dup.jsonl.dropped")
    assert main(["data", "dedupe", "dup.jsonl"]) == 0
    assert capsys.readouterr().out == ("dup.jsonl: 34 line(s), no episode twice; "
                                       "nothing changed\n")


def test_differing_duplicates_are_counted(tmp_path):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2))
    first, second = out.read_bytes().splitlines(True)
    other = json.loads(first)
    other.update(answer="something else", timing={"wall_s": 9.0})
    same = json.loads(first)
    same["timing"] = {"wall_s": 1.0}
    out.write_bytes(first + second + json.dumps(same).encode() + b"\n"
                    + json.dumps(other).encode() + b"\n")
    result = dedupe_run_log(out)
    assert [(d.line, d.same) for d in result.dropped] == [(3, True), (4, False)]
    assert result.n_differing == 1
    assert out.read_bytes() == first + second


def test_error_lines_and_their_retries_stay(tmp_path):
    """The supersession rule: a retry after an error line is no duplicate."""
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2))
    first, second = out.read_bytes().splitlines(True)
    error = json.loads(first)
    error["error"] = {"type": "timeout", "message": "x"}
    data = json.dumps(error).encode() + b"\n" + first + second + first
    out.write_bytes(data)
    result = dedupe_run_log(out)
    assert [d.line for d in result.dropped] == [4]
    assert out.read_bytes() == json.dumps(error).encode() + b"\n" + first + second


def test_a_partial_last_line_stays_for_resume_to_cut(tmp_path):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=2))
    first, second = out.read_bytes().splitlines(True)
    out.write_bytes(first + second + first + second[:40])
    result = dedupe_run_log(out)
    assert [d.line for d in result.dropped] == [3]
    assert out.read_bytes() == first + second + second[:40]
    # a complete last line without its newline gets one
    out.write_bytes(first + second + first.rstrip(b"\n"))
    assert [d.line for d in dedupe_run_log(out).dropped] == [3]
    assert out.read_bytes() == first + second


def test_dedupe_refuses_a_log_in_use_and_bad_input(tmp_path, capsys, monkeypatch):
    out = tmp_path / "log.jsonl"
    with gym.make("EGIP-Demo-v0") as env:
        run(lambda: env, ScriptedDoctor, RunSpec(out=out, episodes=1))
    before = out.read_bytes()
    with RunLogLock(out), pytest.raises(RunLogLocked):
        dedupe_run_log(out)
    monkeypatch.chdir(tmp_path)
    assert main(["data", "dedupe", "missing.jsonl"]) == 2
    assert capsys.readouterr().err == "clinenv: error: missing.jsonl: no such run log\n"
    (tmp_path / "bad.jsonl").write_bytes(before + b"not json\n" + before)
    assert main(["data", "dedupe", "bad.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clinenv: error: bad.jsonl, line 2: not a complete JSON line")
    assert (tmp_path / "bad.jsonl").read_bytes() == before + b"not json\n" + before
    assert out.read_bytes() == before


def test_dedupe_through_a_symlink_rewrites_its_target(two_appenders, tmp_path):
    dup, raw = two_appenders
    link = tmp_path / "link.jsonl"
    link.symlink_to(dup)
    dup.chmod(0o640)
    result = dedupe_run_log(link)
    assert link.is_symlink() and len(result.dropped) == 20
    assert result.dropped_path == dropped_path(dup) and not dropped_path(link).exists()
    assert len(dup.read_bytes().splitlines()) == 34
    assert dup.stat().st_mode & 0o777 == dropped_path(dup).stat().st_mode & 0o777 == 0o640
