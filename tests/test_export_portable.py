"""Export rows as portable SFT input.

``--delta`` user turns (only what is new), ``--tool-results compact`` (tool results
replayed with that setting), ``--tool-arguments json``, the ``datasets.Json`` message
columns and :func:`clinenv.template_check.check_template` / ``--chat-template``. Logs are
written by ``clinenv run`` on the demo set; expected values come from a fresh
environment or a fresh :class:`~clinenv.integrations.tools.ToolEpisode`. The templates
here are small ones written for these tests (the released models' templates are
rendered in ``tests/integrations/test_export_templates.py``, from TRL's copies).
"""
# issue 30

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.prompts import DIRECT_SYSTEM, EGIP_DOCTOR_SYSTEM
from clinenv.cli import main
from clinenv.export import episode_rows, episodes_dataset, write_rows
from clinenv.integrations.tools import FINAL_RESULT, ToolEpisode
from clinenv.template_check import check_template

#: Plain ChatML without tool support (SmolLM2's own template is of this kind).
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
          "{% endif %}")
#: ChatML that writes tool calls as JSON objects (arguments through tojson).
CHATML_TOOLS = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% for c in m.get('tool_calls') or [] %}<call>{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}</call>{% endfor %}<|im_end|>\n"
    "{% endfor %}")
#: A template that accepts only system, user and assistant turns.
NO_TOOL_ROLE = ("{% for m in messages %}{% if m['role'] not in ('system', 'user', "
                "'assistant') %}{{ raise_exception('Conversation roles must be user or "
                "assistant') }}{% endif %}{{ m['content'] }}\n{% endfor %}")


def run(doctor: str, out: str, episodes: int = 3) -> Path:
    assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", doctor, "--episodes",
                 str(episodes), "--quiet", "--out", out]) == 0
    return Path(out)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def tokens(messages: list[dict]) -> int:
    """docs/training.md's estimate: ceil(chars / 3.5) + 8 a message (a call's chars: its
    content and its function object as JSON)."""
    return sum(math.ceil(len(m["content"] + "".join(json.dumps(c["function"]) for c in
                                                    m.get("tool_calls", []))) / 3.5) + 8
               for m in messages)


def test_delta_user_turns_are_the_fresh_delta_observations(workdir):
    log = run("scripted", "run.jsonl")
    assert main(["export", str(log), "--delta", "--out", "delta.jsonl"]) == 0
    views = list(episode_rows([log]))
    env = gym.make("EGIP-Demo-v0", observation_format="delta")
    for row, view, line in zip(lines_of(workdir / "delta.jsonl"), views, lines_of(log),
                               strict=True):
        actions = [e["text"] for e in line["events"] if e["source"] == "doctor"]
        obs, info = env.reset(seed=line["seed"], options={"case_id": line["case_id"]})
        users = []
        for action in actions:
            users.append(DIRECT_SYSTEM + "\n\n" + obs["text"] if info["phase"] == "decide"
                         else obs["text"])
            obs, _, _, _, info = env.step(action)
        assert row["messages"] == [{"role": "system", "content": EGIP_DOCTOR_SYSTEM}] + [
            {"role": role, "content": text} for user, action in zip(users, actions,
                                                                    strict=True)
            for role, text in (("user", user), ("assistant", action))]
        assert row["messages_source"] == "rebuilt" and row["tool_results"] == "full"
        assert view["tool_results"] is None
        # the view rows resend the whole view each turn: 19 turns make them ~3x longer
        assert tokens(row["messages"]) * 2.5 < tokens(view["messages"])
    env.close()


def test_compact_tool_results_are_the_compact_tool_episode(workdir):
    log = run("teacher", "teacher.jsonl")
    assert main(["export", str(log), "--format", "tools", "--tool-results", "compact",
                 "--out", "compact.jsonl"]) == 0
    full = list(episode_rows([log], fmt="tools"))
    rows = lines_of(workdir / "compact.jsonl")
    assert [r["tool_results"] for r in rows] == ["compact"] * 3
    assert [r["tool_results"] for r in full] == ["full"] * 3
    for row, line, whole in zip(rows, lines_of(log), full, strict=True):
        live = ToolEpisode("EGIP-Demo-v0", tool_results="compact")
        assert row["messages"][1] == whole["messages"][1]  # the opening is unchanged
        live.reset(line["case_id"], line["seed"])
        results = []
        for message in row["messages"][2::2]:
            function = message["tool_calls"][0]["function"]
            results.append(live.call(function["name"], function["arguments"]))
        assert [m["content"] for m in row["messages"][3::2]] == results
        assert results[-1] == FINAL_RESULT and live.reward == 1.0
        assert results[0].endswith("\n\nRound 2 of 19.")
        assert tokens(row["messages"]) < tokens(whole["messages"])


def test_options_refused_in_one_line(workdir, capsys):
    log = run("scripted", "run.jsonl", episodes=1)
    for argv, words in (
            (["--tool-results", "compact"], "--tool-results compact: only with --format "
                                            "tools or --delta"),
            (["--format", "tools", "--delta"], "--delta: only with --format messages"),
            (["--chat-template", "nowhere.jinja"], "--chat-template nowhere.jinja: cannot "
                                                   "read it")):
        assert main(["export", str(log), "--out", "x.jsonl", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and words in err, err
    Path("tokenizer_config.json").write_text('{"eos_token": "</s>"}', encoding="utf-8")
    assert main(["export", str(log), "--out", "x.jsonl", "--chat-template",
                 "tokenizer_config.json"]) == 2
    assert "field 'chat_template' is missing" in capsys.readouterr().err
    assert not Path("x.jsonl").exists()
    for kwargs, words in (({"tool_results": "short"}, "tool_results must be one of"),
                          ({"tool_arguments": "str"}, "tool_arguments must be one of"),
                          ({"fmt": "tools", "delta": True}, "delta applies to")):
        with pytest.raises(ValueError, match=words):
            list(episode_rows([log], **kwargs))


def test_json_arguments_are_the_tool_calls_column(workdir):
    log = run("scripted", "run.jsonl", episodes=2)
    for row in episode_rows([log], fmt="tools", tool_arguments="json"):
        calls = [m["tool_calls"][0] for m in row["messages"] if m.get("tool_calls")]
        assert calls == row["tool_calls"]
        assert all(isinstance(c["function"]["arguments"], str) for c in calls)


def test_datasets_keep_each_message_as_exported(workdir):
    """An Arrow struct would give every message every key (None where absent) and every
    call every tool's argument keys; the message columns are datasets.Json instead, in
    memory and through parquet."""
    datasets = pytest.importorskip("datasets")
    if not hasattr(datasets, "Json"):
        pytest.skip("this datasets version has no datasets.Json")
    log = run("teacher", "teacher.jsonl", episodes=2)
    rows = list(episode_rows([log], fmt="tools"))
    ds = episodes_dataset([log], fmt="tools")
    assert [m for r in ds for m in r["messages"]] == [m for r in rows for m in r["messages"]]
    assert write_rows(rows, "rows.parquet") == 2
    back = datasets.Dataset.from_parquet("rows.parquet")
    assert back["messages"] == [r["messages"] for r in rows]
    assert back.column_names[:3] == ["messages", "reward", "terminated"]
    turns = episodes_dataset([log], fmt="tools", per_turn=True)
    assert turns[0]["completion"] == list(episode_rows(
        [log], fmt="tools", per_turn=True))[0]["completion"]


def test_check_template_names_what_a_template_cannot_render():
    pytest.importorskip("transformers")
    assert check_template(CHATML) == [
        "it does not write a call's name once (ask_patient, order_exam, submit_diagnosis): "
        "a template without tool support renders tool-call turns empty",
        "it does not write a call's arguments once (3 of 3 calls)"]
    assert check_template(CHATML, fmt="messages") == []
    assert check_template(CHATML_TOOLS) == []
    assert check_template(CHATML_TOOLS, tool_arguments="json") == [
        "it writes the arguments as a JSON string inside JSON (double-encoded): export "
        "dict arguments"]
    (raised,) = check_template(NO_TOOL_ROLE)
    assert raised == ("it raises on tools-format rows: Conversation roles must be user or "
                      "assistant")
    assert check_template(NO_TOOL_ROLE, fmt="messages") == []
    with pytest.raises(ValueError, match="fmt must be"):
        check_template(CHATML, fmt="chat")


def test_export_warns_for_a_template_without_tool_support(workdir, capsys):
    pytest.importorskip("transformers")
    log = run("scripted", "run.jsonl", episodes=1)
    Path("chatml.jinja").write_text(CHATML, encoding="utf-8")
    Path("tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}),
                                             encoding="utf-8")
    for source in ("chatml.jinja", "tokenizer_config.json"):
        assert main(["export", str(log), "--format", "tools", "--out", "t.jsonl",
                     "--chat-template", source]) == 0
        err = capsys.readouterr().err.splitlines()
        assert err == [
            "clinenv: warning: the chat template does not fit tools-format rows: " + p
            for p in check_template(CHATML)]
    assert main(["export", str(log), "--out", "m.jsonl", "--chat-template",
                 "chatml.jinja"]) == 0
    assert capsys.readouterr().err == ""


def test_demo_token_figures(workdir):
    """The table of docs/export.md (the scripted doctor on the 17 demo cases, the
    estimate of docs/training.md): (median, max) tokens of a row."""
    log = run("scripted", "all.jsonl", episodes=17)
    figures = []
    for kw in ({}, {"delta": True}, {"delta": True, "tool_results": "compact"},
               {"fmt": "tools"}, {"fmt": "tools", "tool_results": "compact"}):
        counts = [tokens(r["messages"]) for r in episode_rows([log], **kw)]
        figures.append((statistics.median(counts), max(counts)))
    assert figures == [(14193, 15577), (4951, 5637), (2941, 3294), (5515, 6209),
                       (3122, 3466)]
