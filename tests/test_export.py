"""``clinenv export`` and :mod:`clinenv.export`: run-log episodes as training rows.

Every log is written by ``clinenv run`` (its ``main()``): the scripted doctor on the
demo set (messages rebuilt by replay), and an LLM doctor, patient and judge against a
real local FakeChatServer with ``--log-messages`` (messages taken from the call
records). Row values are checked against the log lines and a fresh environment.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.prompts import DIRECT_SYSTEM, EGIP_DOCTOR_SYSTEM, JUDGE_SYSTEM
from clinenv.cli import main
from clinenv.export import ExportError, episode_rows, group_id
from clinenv.integrations.tools import FINAL_RESULT, TASK_INTRO, TOOL_SYSTEM_PROMPT
from clinenv.protocol.evidence import render_evidence
from clinenv.runs.replay import bundle_from_dict
from clinenv.testing.clinic import PATIENT_PREFIX, clinic_responder
from clinenv.testing.fake_server import FakeChatServer

TOOLS = {"ask_patient": "question", "order_exam": "exam", "submit_diagnosis": "diagnosis"}



def scripted_run(out: str, *, seed: int, episodes: int = 4, repetitions: int = 2) -> Path:
    rc = main(["run", "--env", "EGIP-Demo-v0", "--doctor", "scripted", "--seed", str(seed),
               "--episodes", str(episodes), "--repetitions", str(repetitions), "--quiet",
               "--out", out])
    assert rc == 0
    return Path(out)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def export(*args: str) -> int:
    return main(["export", *args])


def read_rows(path: Path) -> list[dict]:
    return lines_of(path)


# ------------------------------------------------------------------ scripted doctor
def test_rows_match_the_log_and_a_fresh_environment(workdir, capsys):
    log = scripted_run("run.jsonl", seed=7, episodes=3, repetitions=2)
    assert export(str(log), "--out", "rows.jsonl") == 0
    assert "exported 6 episode(s) to rows.jsonl" in capsys.readouterr().out
    rows, lines = read_rows(workdir / "rows.jsonl"), lines_of(log)
    assert len(rows) == len(lines) == 6
    env = gym.make("EGIP-Demo-v0")
    for row, line in zip(rows, lines, strict=True):
        doctor_events = [e for e in line["events"] if e["source"] == "doctor"]
        assert (row["case_id"], row["seed"], row["repetition"]) == (
            line["case_id"], line["seed"], line["repetition"])
        assert row["reward"] == line["reward"] and isinstance(row["reward"], float)
        assert (row["terminated"], row["truncated"]) == (True, False)
        assert row["num_turns"] == line["steps"] == len(doctor_events)
        assert row["answer"] == line["answer"] and row["target"] == line["target"]
        assert row["correct"] == line["correct"]
        assert row["exams_ordered"] == [e["exam_id"] for e in line["events"]
                                        if e["source"] == "measurement"]
        assert row["exams_ordered"] and row["exams_ordered"][0] == "PE1"
        assert (row["env_id"], row["dataset"], row["doctor"], row["model"]) == (
            "EGIP-Demo-v0", "demo", "scripted", None)
        assert row["dataset_sha256"] == line["dataset_sha256"]
        assert row["clinenv_version"] == clinenv.__version__
        assert row["messages_source"] == "rebuilt"
        messages = row["messages"]
        # one system message, first, then (user, assistant) per action (issue 30: Gemma
        # 3 raises on a second system message); the decision call's own system prompt
        # opens its user turn
        assert messages[0] == {"role": "system", "content": EGIP_DOCTOR_SYSTEM}
        assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * len(
            doctor_events)
        assert [m["content"] for m in messages if m["role"] == "assistant"] == [
            e["text"] for e in doctor_events]
        # the first observation is the fresh environment's reset text
        obs, _ = env.reset(seed=line["seed"], options={"case_id": line["case_id"]})
        assert messages[1]["content"] == obs["text"]
        # the decision observation is e_T, rendered from the logged evidence
        assert messages[-2]["content"] == DIRECT_SYSTEM + "\n\n" + render_evidence(
            bundle_from_dict(line["evidence"], path="run.jsonl", line=1))
    env.close()


def test_no_row_holds_the_target_outside_its_column(workdir):
    log = scripted_run("run.jsonl", seed=0, episodes=17, repetitions=1)
    checked = 0
    for row, line in zip(episode_rows([log]), lines_of(log), strict=True):
        if line["case_flags"]["target_in_records"] or \
                line["case_flags"]["target_in_patient_facts"] or \
                line["evidence"]["candidates"]:
            continue  # the records name the diagnosis, or it is one of the options K
        target = row["target"].lower()
        seen = [m["content"] for m in row["messages"] if m["role"] != "assistant"]
        others = {k: v for k, v in row.items()
                  if k not in ("target", "messages", "answer", "tool_calls", "verdict")}
        assert target not in json.dumps(seen, ensure_ascii=False).lower()
        assert target not in json.dumps(others, ensure_ascii=False).lower()
        checked += 1
    assert checked >= 6


def test_group_id_ties_the_repetitions_of_a_case_in_one_run_only(workdir):
    run_a = scripted_run("a.jsonl", seed=1, episodes=3, repetitions=3)
    run_b = scripted_run("b.jsonl", seed=2, episodes=3, repetitions=2)
    assert export(str(run_a), str(run_b), "--out", "both.jsonl") == 0
    rows = read_rows(workdir / "both.jsonl")
    assert len(rows) == 9 + 6
    groups: dict[str, set] = {}
    for row, source in zip(rows, ["a"] * 9 + ["b"] * 6, strict=True):
        groups.setdefault(row["group_id"], set()).add((source, row["case_id"]))
        assert row["group_id"].startswith(row["case_id"] + ":")
    # 3 cases x 2 runs = 6 groups, each one (run, case) only
    assert len(groups) == 6 and all(len(members) == 1 for members in groups.values())
    sizes = sorted(sum(r["group_id"] == g for r in rows) for g in groups)
    assert sizes == [2, 2, 2, 3, 3, 3]
    # within a group the seeds differ (the repetitions), the case is the same
    for g in groups:
        seeds = [r["seed"] for r in rows if r["group_id"] == g]
        assert len(set(seeds)) == len(seeds)
    # a resumed run keeps its groups
    line = lines_of(run_a)[0]
    assert group_id({**line, "n_cases_scheduled": 99, "n_repetitions": 7}) == \
        group_id(line)


def test_tool_calls_are_always_lists_in_both_formats(workdir):
    log = scripted_run("run.jsonl", seed=3, episodes=3, repetitions=1)
    lines = lines_of(log)
    for fmt in ("messages", "tools"):
        assert export(str(log), "--out", f"{fmt}.jsonl", "--format", fmt) == 0
        rows = read_rows(workdir / f"{fmt}.jsonl")
        for row, line in zip(rows, lines, strict=True):
            doctor_events = [e for e in line["events"] if e["source"] == "doctor"]
            assert isinstance(row["tool_calls"], list)
            assert len(row["tool_calls"]) == len(doctor_events)
            for call, event in zip(row["tool_calls"], doctor_events, strict=True):
                name = call["function"]["name"]
                assert json.loads(call["function"]["arguments"]) == {
                    TOOLS[name]: event["payload"]}
            assert row["tool_calls"][0]["function"]["name"] == "ask_patient"
            assert row["tool_calls"][-1]["function"]["name"] == "submit_diagnosis"
            if fmt == "tools":  # issue 30: only a message that calls a tool has the key
                assert all(("tool_calls" in m) == (m["role"] == "assistant")
                           for m in row["messages"])
    rows = read_rows(workdir / "tools.jsonl")
    # the tool view's wording (action_format="tools"), as GRPO's rollouts show it
    env = gym.make("EGIP-Demo-v0", observation_format="delta", action_format="tools")
    for row, line in zip(rows, lines, strict=True):
        messages = row["messages"]
        assert messages[0]["content"] == TOOL_SYSTEM_PROMPT
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert messages[-1]["role"] == "tool" and messages[-1]["content"] == FINAL_RESULT
        calls = [m for m in messages if m["role"] == "assistant"]
        results = [m for m in messages if m["role"] == "tool"]
        assert len(calls) == len(results) == row["num_turns"]
        assert [r["tool_call_id"] for r in results] == [c["tool_calls"][0]["id"]
                                                        for c in calls] == [
            f"call_{i}" for i in range(len(calls))]
        assert [r["name"] for r in results] == [c["tool_calls"][0]["function"]["name"]
                                                for c in calls]
        # dict arguments (issue 30: Hugging Face templates write them with tojson), the
        # tool_calls column's JSON strings decoded
        assert [c["tool_calls"][0]["function"]["arguments"] for c in calls] == [
            json.loads(c["function"]["arguments"]) for c in row["tool_calls"]]
        assert all(set(m) == {"role", "content", "tool_call_id", "name"} for m in results)
        # the tool results are the delta observations of a fresh delta environment
        obs, _ = env.reset(seed=line["seed"], options={"case_id": line["case_id"]})
        assert messages[1]["content"] == TASK_INTRO + obs["text"]  # as a GRPO row shows it
        event = next(e for e in line["events"] if e["source"] == "doctor")
        obs, *_ = env.step(event["text"])
        assert results[0]["content"] == obs["text"]
        assert results[0]["content"].startswith("Patient: ")
    env.close()


# ------------------------------------------------------------------ LLM doctor
@pytest.fixture
def llm_log(workdir):
    with FakeChatServer(clinic_responder()) as server:
        rc = main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--patient", "llm",
                   "--judge", "llm", "--base-url", server.base_url, "--model", "fake",
                   "--episodes", "2", "--repetitions", "2", "--quiet", "--log-messages",
                   "--out", "llm.jsonl"])
    assert rc == 0
    return workdir / "llm.jsonl"


def test_logged_messages_are_the_exact_texts(llm_log):
    rows = list(episode_rows([llm_log]))
    lines = lines_of(llm_log)
    assert len(rows) == 4
    for row, line in zip(rows, lines, strict=True):
        calls = [c for c in line["llm"]["calls"] if c["agent"] == "doctor"]
        assert row["messages_source"] == "logged" and row["model"] == "fake"
        assert row["doctor"] == "llm-direct"
        users = [m["content"] for m in row["messages"] if m["role"] == "user"]
        assistants = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert [calls[0]["messages"][0]["content"], calls[-1]["messages"][0]["content"]] \
            == [EGIP_DOCTOR_SYSTEM, DIRECT_SYSTEM]
        # one system message (issue 30); the decision call's opens its user turn
        assert users == [c["messages"][-1]["content"] for c in calls[:-1]] + [
            DIRECT_SYSTEM + "\n\n" + calls[-1]["messages"][-1]["content"]]
        assert assistants == [c["raw_reply"][0] for c in calls]
        systems = [m["content"] for m in row["messages"] if m["role"] == "system"]
        assert systems == [EGIP_DOCTOR_SYSTEM] and row["messages"][0]["role"] == "system"
        assert assistants[-1].startswith("DIAGNOSIS READY:")
        # never another seat's prompt (the LLM patient and judge ran too)
        text = json.dumps(row["messages"], ensure_ascii=False)
        assert PATIENT_PREFIX.strip() not in text and JUDGE_SYSTEM not in text
        assert any(c["agent"] == "patient" for c in line["llm"]["calls"])


# issue 29 §3
def test_a_placeholder_reply_is_an_assistant_text_not_a_tool_call(workdir):
    """A template placeholder is no tool call (the environment refused it):
    in the tools format it is an assistant text followed by a user turn, as any other
    text that is no call, and ``tool_calls`` leaves it out, logged or rebuilt."""
    placeholders = {"Round 1 of": "DIAGNOSIS READY: [diagnosis]",
                    "Round 2 of": "REQUEST TEST: <id or name>"}
    clinic = clinic_responder()

    def responder(body, index):
        text = body["messages"][-1]["content"]
        for footer, reply in placeholders.items():
            if body["messages"][0]["content"] == EGIP_DOCTOR_SYSTEM and footer in text:
                return reply
        return clinic(body, index)

    with FakeChatServer(responder) as server:
        assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--base-url",
                     server.base_url, "--model", "fake", "--episodes", "1", "--quiet",
                     "--log-messages", "--out", "ph.jsonl"]) == 0
    (line,) = lines_of(workdir / "ph.jsonl")
    doctor = [e for e in line["events"] if e["source"] == "doctor"]
    assert [(e["routed_as"], e["payload"]) for e in doctor[:2]] == [
        ("placeholder", text) for text in placeholders.values()]
    stripped = workdir / "stripped.jsonl"  # no call records: the messages are rebuilt
    stripped.write_text(json.dumps({k: v for k, v in line.items() if k != "llm"}) + "\n",
                        encoding="utf-8")
    for log in (workdir / "ph.jsonl", stripped):
        (row,) = episode_rows([log], fmt="tools")
        assert len(row["tool_calls"]) == len(doctor) - 2
        assert all(json.loads(c["function"]["arguments"]) != {"diagnosis": "diagnosis"}
                   for c in row["tool_calls"])
        messages = row["messages"]
        for n, text in enumerate(placeholders.values()):
            said, answered = messages[2 + 2 * n], messages[3 + 2 * n]
            assert said == {"role": "assistant", "content": text}
            assert answered["role"] == "user" and answered["content"].startswith(
                "Interface: That is the template's placeholder")
        assert messages[6]["tool_calls"][0]["function"]["name"] == "order_exam"
    # an older log routed them as what they imitated (payload: the template's inner
    # words); its episode still replays, while a reply the log did not answer so is
    # still refused (only a placeholder-flagged event's label is not compared)
    older = json.loads(json.dumps(line))
    olds = [e for e in older["events"] if e["source"] == "doctor"]
    olds[0].update(routed_as="diagnosis", payload="diagnosis")
    olds[1].update(routed_as="test_request", payload="id or name")
    stripped.write_text(json.dumps(older) + "\n", encoding="utf-8")
    (row,) = episode_rows([stripped], fmt="tools")
    assert row["messages"][2]["content"] == "DIAGNOSIS READY: [diagnosis]"
    olds[0]["text"] = "Any fever?"
    stripped.write_text(json.dumps(older) + "\n", encoding="utf-8")
    with pytest.raises(ExportError, match="the messages cannot be rebuilt"):
        list(episode_rows([stripped], fmt="tools"))


def test_rebuilt_messages_equal_the_logged_ones(llm_log):
    logged = list(episode_rows([llm_log]))
    rebuilt = list(episode_rows([llm_log], rebuild=True))
    assert [r["messages_source"] for r in rebuilt] == ["rebuilt"] * 4
    assert [r["messages"] for r in rebuilt] == [r["messages"] for r in logged]
    # the same without the call records: the LLM patient's logged replies are replayed
    stripped = llm_log.with_name("stripped.jsonl")
    stripped.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "llm"})
                                + "\n" for line in lines_of(llm_log)), encoding="utf-8")
    assert [r["messages"] for r in episode_rows([stripped])] == [
        r["messages"] for r in logged]


# ------------------------------------------------------------------ refusals
def test_credentialed_data_needs_the_flag_and_warns(workdir, capsys):
    log = scripted_run("run.jsonl", seed=0, episodes=2, repetitions=1)
    lines = lines_of(log)
    lines[1]["dataset"] = "mimiciv"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert export(str(log), "--out", "x.jsonl") == 2
    err = capsys.readouterr().err
    assert "run.jsonl, line 2" in err and "--allow-credentialed" in err
    assert not (workdir / "x.jsonl").exists()
    assert export(str(log), "--out", "x.jsonl", "--allow-credentialed") == 0
    err = capsys.readouterr().err
    assert "data-use agreement" in err and "never publish" in err
    assert len(read_rows(workdir / "x.jsonl")) == 2


def test_bad_inputs_name_the_file_line_and_field(workdir, capsys):
    log = scripted_run("run.jsonl", seed=0, episodes=2, repetitions=1)
    assert export(str(log), str(log), "--out", "x.jsonl") == 2
    assert "given twice" in capsys.readouterr().err
    lines = lines_of(log)
    lines[1]["events"][1]["reply"] = "No."  # not what the patient of this case says
    bad = workdir / "bad.jsonl"
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(ExportError,
                       match=r"bad.jsonl, line 2: field 'events\[1\]\.reply'.*'No\.'"):
        list(episode_rows([bad]))
    lines[1]["steps"] = 3
    bad.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(ExportError, match=r"line 2: field 'events' holds \d+ doctor"):
        list(episode_rows([bad]))
    assert export(str(log), "--out", "x.csv") == 2
    assert ".jsonl or .parquet" in capsys.readouterr().err
    assert export(str(log), "--out", "x.jsonl") == 0


def test_an_earlier_export_is_replaced_and_run_logs_never_are(workdir, capsys):
    """export follows the rule of eval, compare and report: its earlier output is
    replaced, in one line; ``--force`` (once needed for that) is still accepted. A run
    log, given or not, is never an output."""
    log = scripted_run("run.jsonl", seed=0, episodes=2, repetitions=1)
    other = scripted_run("other.jsonl", seed=1, episodes=1, repetitions=1)
    capsys.readouterr()
    assert export(str(log), "--out", "x.jsonl") == 0
    assert capsys.readouterr().out == "exported 2 episode(s) to x.jsonl\n"
    (workdir / "x.jsonl").write_text("stale\n", encoding="utf-8")
    assert export(str(log), "--out", "x.jsonl") == 0
    assert capsys.readouterr().out == ("exported 2 episode(s) to x.jsonl\n"
                                       "replaced 1 earlier file in .\n")
    assert len(read_rows(workdir / "x.jsonl")) == 2
    assert export(str(log), "--out", "x.jsonl", "--force") == 0
    assert "replaced 1 earlier file in ." in capsys.readouterr().out
    before = {p: p.read_bytes() for p in (log, other)}
    for out, message in [(log, "is one of the run logs given"),
                         (other, "is a clinenv run log; run logs are never overwritten")]:
        assert export(str(log), "--out", str(out), "--force") == 2
        captured = capsys.readouterr()
        assert captured.out == "" and message in captured.err
    assert {p: p.read_bytes() for p in (log, other)} == before


def test_parquet_without_datasets_names_the_extra(workdir, monkeypatch, capsys):
    log = scripted_run("run.jsonl", seed=0, episodes=1, repetitions=1)
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)
    assert export(str(log), "--out", "x.parquet") == 2
    assert "pip install -e '.[export]' in a clinenv clone" in capsys.readouterr().err
    from clinenv.export import episodes_dataset

    with pytest.raises(ImportError, match=r"pip install -e '\.\[export\]' in a clinenv clone"):
        episodes_dataset([log])
    assert export(str(log), "--out", "x.jsonl") == 0  # jsonl needs nothing


def _usable_datasets():
    datasets = pytest.importorskip("datasets", reason="datasets (extra export) not installed")
    try:
        datasets.Dataset.from_list([{"a": [1]}])
    except Exception as err:  # noqa: BLE001 - a broken install here, not our code
        pytest.skip(f"datasets is installed but cannot build a Dataset here: {err}")
    return datasets


def test_parquet_round_trip_and_episodes_dataset(workdir, llm_log):
    datasets = _usable_datasets()
    from clinenv.export import episodes_dataset

    scripted = scripted_run("run.jsonl", seed=0, episodes=2, repetitions=1)
    for fmt in ("messages", "tools"):
        assert export(str(scripted), str(llm_log), "--out", f"{fmt}.parquet",
                      "--format", fmt) == 0
        assert export(str(scripted), str(llm_log), "--out", f"{fmt}.jsonl",
                      "--format", fmt) == 0
        back = datasets.Dataset.from_parquet(str(workdir / f"{fmt}.parquet")).to_list()
        assert back == read_rows(workdir / f"{fmt}.jsonl")
    ds = episodes_dataset([scripted, llm_log])
    assert len(ds) == 6 and ds[0]["tool_calls"] and ds["doctor"][-1] == "llm-direct"


# ------------------------------------------------------------------ reward components
def _without_components(path: Path, out: Path, **changes: object) -> Path:
    """``path`` as a log written before reward_components (the field removed), with
    ``changes`` applied to its second line."""
    lines = lines_of(path)
    for line in lines:
        line.pop("reward_components")
    lines[1].update(changes)
    out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return out


def test_rows_carry_the_logged_reward_components_and_old_logs_get_them_computed(
        workdir, llm_log):
    """Every format and --per-turn: the row's reward_components are the line's (all keys,
    in COMPONENTS order, typed as REWARD_COMPONENTS_SCHEMA), reward unchanged; a log
    without them gives the same components from the line and its case."""
    from clinenv.export import REWARD_COMPONENTS_SCHEMA
    from clinenv.reward_components import COMPONENTS

    assert list(REWARD_COMPONENTS_SCHEMA) == list(COMPONENTS)
    scripted = scripted_run("run.jsonl", seed=3, episodes=3, repetitions=1)
    assert main(["run", "--env", "AgentClinic-Demo-v0", "--episodes", "2", "--quiet",
                 "--out", "native.jsonl"]) == 0
    logs = [scripted, llm_log, workdir / "native.jsonl"]
    lines = [line for log in logs for line in lines_of(log)]
    old = [_without_components(log, workdir / f"old-{log.name}") for log in logs]
    for fmt in ("messages", "tools"):
        if fmt == "tools":
            logs, old, lines = logs[:2], old[:2], lines[:-2]  # the native loop has no tools
        for per_turn in (False, True):
            for paths in (logs, old):
                rows = list(episode_rows(paths, fmt=fmt, per_turn=per_turn))
                first = {}  # the episode's row, or its first turn's
                for row in rows:
                    first.setdefault((row["group_id"], row["repetition"]), row)
                assert len(first) == len(lines) and len(rows) >= len(lines)
                if per_turn:
                    assert all(r["reward_components"] == first[(
                        r["group_id"], r["repetition"])]["reward_components"] for r in rows)
                for row, line in zip(first.values(), lines, strict=True):
                    assert list(row["reward_components"]) == list(COMPONENTS)
                    assert row["reward_components"] == line["reward_components"]
                    assert row["reward"] == line["reward"]
                    for name, kind in REWARD_COMPONENTS_SCHEMA.items():
                        value = row["reward_components"][name]
                        assert value is None or type(value) is (
                            float if kind == "float64" else int), (name, value)
    native = [r["reward_components"] for r in episode_rows([workdir / "native.jsonl"])]
    assert all(c["workup_f1"] is None and c["exam_spend"] is None for c in native)


def test_an_old_line_whose_case_cannot_be_found_names_file_line_and_case(workdir, llm_log,
                                                                         capsys):
    # logged messages (no replay needed for them), so the case is needed only for the
    # components
    bad = _without_components(llm_log, workdir / "old.jsonl", case_id="no-such-case")
    with pytest.raises(ExportError, match=r"old.jsonl, line 2: case 'no-such-case': the "
                                          r"line has no reward_components and its case "
                                          r"cannot be found"):
        list(episode_rows([bad]))
    assert export(str(bad), "--out", "x.jsonl") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 2: case 'no-such-case'" in err[0]
    assert not (workdir / "x.jsonl").exists()


def test_parquet_keeps_a_fixed_reward_components_struct(workdir):
    """A native log (workup and spend None in every row) and an EGIP log give the same
    struct: float64 and int64 fields, whatever the rows hold."""
    datasets = _usable_datasets()
    from clinenv.export import REWARD_COMPONENTS_SCHEMA

    scripted = scripted_run("run.jsonl", seed=0, episodes=2, repetitions=1)
    assert main(["run", "--env", "AgentClinic-Demo-v0", "--episodes", "2", "--quiet",
                 "--out", "native.jsonl"]) == 0
    expected = {name: datasets.Value(kind) for name, kind in REWARD_COMPONENTS_SCHEMA.items()}
    for log in (scripted, workdir / "native.jsonl"):
        out = workdir / f"{log.stem}.parquet"
        assert export(str(log), "--out", str(out)) == 0
        back = datasets.Dataset.from_parquet(str(out))
        assert back.features["reward_components"] == expected
        assert back.to_list() == [
            {**row, "reward_components": row["reward_components"]}
            for row in episode_rows([log])]
