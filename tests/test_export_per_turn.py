"""``clinenv export --per-turn``: one row per assistant turn, in every
format, checked against the same log's whole-episode rows (no TRL needed; the chat
template check is tests/integrations/test_trl_per_turn.py).
"""
# issue 29 §2

from __future__ import annotations

import json
from pathlib import Path

import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.cli import main
from clinenv.export import FORMATS, episode_rows, per_turn_rows, write_rows
from clinenv.integrations.tools import FINAL_RESULT, TOOL_SCHEMAS


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


@pytest.fixture
def logs(workdir):
    """A scripted log (EGIP defaults: full views, clarify) and a teacher log (the tool
    view's settings) of four demo cases, two repetitions of the scripted one."""
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "scripted", "--episodes", "4",
                 "--repetitions", "2", "--quiet", "--out", "scripted.jsonl"]) == 0
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "teacher", "--episodes", "4",
                 "--quiet", "--out", "teacher.jsonl"]) == 0
    return [workdir / "scripted.jsonl", workdir / "teacher.jsonl"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_per_turn_rows_rebuild_the_episodes(logs, fmt):
    episodes = list(episode_rows(logs, fmt=fmt))
    turns = list(episode_rows(logs, fmt=fmt, per_turn=True))
    assert len(episodes) == 12
    n = 0
    for episode in episodes:
        messages = episode["messages"]
        assistant_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        assert len(assistant_at) == episode["num_turns"] > 0
        rows = turns[n:n + len(assistant_at)]
        n += len(assistant_at)
        assert [r["turn_index"] for r in rows] == list(range(len(assistant_at)))
        for row, at in zip(rows, assistant_at, strict=True):
            assert row["prompt"] == messages[:at]  # the messages before the turn
            assert row["completion"] == [messages[at]]  # that turn, an assistant message
            assert json.loads(row["tools"]) == (TOOL_SCHEMAS if fmt == "tools" else [])
            rest = {k: v for k, v in row.items()
                    if k not in ("prompt", "completion", "tools", "turn_index")}
            assert rest == {k: v for k, v in episode.items() if k != "messages"}
        for earlier, later in zip(rows, rows[1:], strict=False):  # each extends the last
            whole = earlier["prompt"] + earlier["completion"]
            assert later["prompt"][:len(whole)] == whole
        last = rows[-1]["prompt"] + rows[-1]["completion"]
        tail = messages[len(last):]
        assert messages[:len(last)] == last
        if fmt == "tools":  # only the scored answer's result follows the last turn
            assert [(m["role"], m["content"]) for m in tail] == [("tool", FINAL_RESULT)]
        else:
            assert tail == []
    assert n == len(turns)


def test_per_turn_rows_are_fresh_copies():
    row = {"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "content": "b"}], "reward": 1.0}
    (turn,) = per_turn_rows(row)
    turn["prompt"][0]["content"] = "changed"
    assert row["messages"][0]["content"] == "a"
    with pytest.raises(ValueError, match="fmt must be one of"):
        per_turn_rows(row, fmt="text")


def test_the_cli_flag_in_both_formats(logs, capsys):
    teacher = logs[1]
    lines = lines_of(teacher)
    n_turns = sum(len([e for e in line["events"] if e["source"] == "doctor"])
                  for line in lines)
    for fmt in FORMATS:
        assert main(["export", str(teacher), "--out", f"{fmt}.jsonl", "--format", fmt,
                     "--per-turn"]) == 0
        assert f"exported {n_turns} turn(s) to {fmt}.jsonl" in capsys.readouterr().out
        rows = lines_of(teacher.parent / f"{fmt}.jsonl")
        assert len(rows) == n_turns
        assert all(r["privileged"] is True for r in rows)
        assert rows[0]["completion"][0]["role"] == "assistant"


def test_parquet_round_trip_keeps_the_tool_schemas(logs, workdir):
    datasets = pytest.importorskip("datasets")
    rows = list(episode_rows([logs[1]], fmt="tools", per_turn=True))
    assert write_rows(rows, workdir / "turns.parquet") == len(rows)
    back = datasets.Dataset.from_parquet(str(workdir / "turns.parquet"))
    assert json.loads(back[0]["tools"]) == TOOL_SCHEMAS
    assert back[len(rows) - 1]["prompt"] == rows[-1]["prompt"]
