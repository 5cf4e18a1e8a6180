"""``clinenv report``: the page's structure, escaping, episode views, side-by-side
divergence, size per episode and the credentialed-data refusal (no browser needed; the
browser tests are tests/browser/).

Logs come from ``clinenv run`` on the bundled demo cases (scripted doctor, EGIP and the
native AgentClinic loop); expected values are read from the log lines themselves or
worked out by hand from the demo case (demo-01, lobar pneumonia).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import sys

import pytest

from clinenv.cli import main
from clinenv.report import (
    StringTable,
    build_report,
    doctor_actions,
    episode_view,
    first_divergence,
    island_json,
)
from clinenv.report.assets import REPORT_JS
from clinenv.runlog import read_run_log
from clinenv.testing.report_pages import HOSTILE, demo_logs, hostile_log, page_parts, string


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """``(native.jsonl, egip.jsonl)`` of the demo cases, one repetition each."""
    folder = tmp_path_factory.mktemp("report-logs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLINENV_DATA_DIR", str(folder / "no-data"))
        mp.setenv("XDG_CACHE_HOME", str(folder / "cache"))
        (folder / "no-data").mkdir()
        return demo_logs(folder)


def lines_of(path):
    return read_run_log(path).lines


# ------------------------------------------------------------------ the data island
def test_island_json_escapes_markup_and_line_separators_and_round_trips():
    data = {"s": [*HOSTILE, "\\<\\u003c \\\\>"], "nan": float("nan"), "inf": [float("inf")],
            "n": 1.5}
    text = island_json(data)
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert "\\u003c/script\\u003e" in text
    back = json.loads(text)
    assert back["s"] == data["s"]  # a backslash before "<" stays a backslash
    assert back["nan"] is None and back["inf"] == [None] and back["n"] == 1.5


def test_string_table_stores_each_string_once():
    table = StringTable()
    refs = [table.ref(v) for v in ("a", "b", "a", None, 3, "3")]
    assert refs == [0, 1, 0, None, 2, 2]
    assert table.strings == ["a", "b", "3"]
    assert table.refs(None) is None and table.refs(["b", None]) == [1, None]


# ------------------------------------------------------------------ episode views
def test_episode_view_rebuilds_the_transcript_and_e_t_from_the_line(logs):
    _, egip = logs
    record = lines_of(egip)[0]
    table = StringTable()
    view = episode_view(record, 0, table, source=("egip.jsonl", 1))

    def s(i):
        return None if i is None else table.strings[i]

    events = record["events"]
    assert len(view["x"]) == len(events)
    kinds = {"question": "Q", "test_request": "R", "diagnosis": "D"}
    for item, event in zip(view["x"], events, strict=True):
        assert item[1] == event["turn"]
        if event["source"] == "doctor":
            assert item[0] == kinds.get(event["routed_as"], "O")
            assert s(item[-1]) == event["text"]
        elif event["source"] == "patient":
            assert item[0] == "P" and s(item[2]) == event["reply"]
        elif event["source"] == "measurement":
            assert item[0] == "M"
            assert [s(v) for v in item[2:]] == [event["exam_id"], event["name"],
                                                event["recorded_value"],
                                                event["result_availability"]]
        else:
            assert item[0] == "I" and s(item[3]) == event["message"]
    # demo-01 under the scripted doctor: 3 questions, then PE1 Vital Signs at turn 4
    assert [i[0] for i in view["x"][:8]] == ["Q", "P", "Q", "P", "Q", "P", "R", "M"]
    assert s(view["x"][7][3]) == "Vital Signs" and view["x"][7][1] == 4
    objective, candidates, observations = view["e"]
    assert s(objective) == record["evidence"]["objective"]
    assert candidates is None  # the demo set has no candidate labels
    assert [[s(o[0]), o[2], s(o[4])] for o in observations] == [
        [o["obs_id"], o["turn"], o["content"]] for o in record["evidence"]["observations"]]
    assert s(view["c"]) == "demo-01" and s(view["v"]) == "correct"
    assert s(view["a"]) == "lobar pneumonia" and s(view["t"]) == "Lobar pneumonia"
    assert s(view["s"]) == "deterministic" and view["ms"] == 100.0
    assert s(view["src"]) == "egip.jsonl:1"
    assert [s(g) for g in view["g"]] == ["specialty: pulmonology"]
    assert view["n"] == [19, 8, 0]
    assert "l" not in view and "p" not in view and "k" not in view


def test_availability_not_recorded_and_not_available_stay_apart():
    record = {"case_id": "c1", "repetition": 0, "verdict": "wrong", "events": [
        {"turn": 1, "source": "doctor", "routed_as": "test_request", "text": "REQUEST TEST: X"},
        {"turn": 1, "source": "measurement", "request": "X", "exam_id": None, "name": "X",
         "recorded_value": None, "result_availability": "not_recorded"},
        {"turn": 2, "source": "doctor", "routed_as": "test_request", "text": "REQUEST TEST: T2"},
        {"turn": 2, "source": "measurement", "request": "T2", "exam_id": "T2",
         "name": "Troponin", "recorded_value": "Pending", "result_availability": "unavailable"},
    ], "evidence": {"objective": "o", "candidates": ["A", "B"], "observations": []}}
    table = StringTable()
    view = episode_view(record, 0, table)
    availabilities = [table.strings[i[5]] for i in view["x"] if i[0] == "M"]
    assert availabilities == ["not_recorded", "unavailable"]
    assert [table.strings[c] for c in view["e"][1]] == ["A", "B"]
    from clinenv.report.episodes import AVAILABILITY_TEXT

    assert AVAILABILITY_TEXT["not_recorded"] == "not recorded"
    assert AVAILABILITY_TEXT["unavailable"] == "not available"


def test_cdeg_interventions_llm_counts_and_errors_are_kept():
    record = {"case_id": "c1", "repetition": 0, "verdict": "unscored", "events": [],
              "doctor_log": [
                  {"turn": 3, "kind": "none", "reason": "no_diagnosis_node"},
                  {"turn": 5, "kind": "acquire", "reason": "promoting_evidence_missing",
                   "proposed": "asthma", "evidence": ["eosinophilia", "ige"],
                   "action": "REQUEST TEST: T4"},
                  {"turn": 6, "kind": "none", "reason": "no_edge"}],
              "llm": {"n_calls": 3, "prompt_tokens": 30, "completion_tokens": 6,
                      "latency_s": 0.5, "calls": [
                          {"agent": "doctor", "prompt_tokens": 10, "completion_tokens": 2,
                           "latency_s": 0.25},
                          {"agent": "patient", "prompt_tokens": 12, "completion_tokens": 3,
                           "latency_s": 0.125},
                          {"agent": "doctor", "prompt_tokens": 8, "completion_tokens": 1,
                           "latency_s": 0.125}]},
              "error": {"type": "BackendError", "message": "server down"}}
    table = StringTable()
    view = episode_view(record, 2, table)
    s = table.strings.__getitem__
    assert view["r"] == 2 and view["kn"] == 2
    (k,) = view["k"]
    assert [k[0], s(k[1]), s(k[2]), s(k[3]), s(k[4]), s(k[5])] == [
        5, "acquire", "promoting_evidence_missing", "asthma", "eosinophilia; ige",
        "REQUEST TEST: T4"]
    assert view["l"] == [3, 30, 6, 0.5]
    assert [[s(a[0]), *a[1:]] for a in view["la"]] == [["doctor", 2, 18, 3, 0.375],
                                                        ["patient", 1, 12, 3, 0.125]]
    assert "p" not in view  # no --log-messages records
    assert s(view["err"]) == "BackendError: server down"
    assert [s(f) for f in view["f"]] == ["error"]


def test_flags_gather_case_action_and_patient_flags():
    from clinenv.report.episodes import flag_names

    record = {"case_flags": {"target_in_records": True, "caregiver_voice": False,
                             "near_duplicate_of": "medqa-0003", "no_recorded_tests": None},
              "stopped_early": True, "judge_disagrees": False,
              "events": [{"source": "doctor", "flags": ["wrote_past_turn"]},
                         {"source": "patient", "flags": ["ignored"]},
                         {"source": "doctor", "flags": ["echoes_prompt", "wrote_past_turn"]}],
              "patient_flags": [{"turn": 2, "flags": ["repeats_own_reply"]},
                                {"turn": 3, "flags": ["repeats_own_reply"]}]}
    assert flag_names(record) == ["target_in_records", "near_duplicate_of", "stopped_early",
                                  "action: wrote_past_turn", "action: echoes_prompt",
                                  "patient: repeats_own_reply"]


# ------------------------------------------------------------------ divergence
def test_first_divergence_of_native_and_egip_on_demo_01(logs):
    native, egip = logs
    a, b = lines_of(native)[0], lines_of(egip)[0]
    assert a["case_id"] == b["case_id"] == "demo-01"
    acts_a, acts_b = doctor_actions(a), doctor_actions(b)
    # both ask the same three questions, then request the vital signs (native by name,
    # EGIP as PE1: both resolve to "Vital Signs"); at turn 5 the native doctor asks for
    # "Imaging" while EGIP's requests PE2, the respiratory examination
    assert acts_a[4] == acts_b[4] == (("exam", "vital signs"),)
    assert acts_a[5] == (("exam", "imaging"),)
    assert acts_b[5] == (("exam", "respiratory examination"),)
    assert first_divergence(acts_a, acts_b) == 5
    assert first_divergence(acts_a, acts_a) is None


def test_first_divergence_when_one_doctor_stops_early():
    a = {1: (("question", "q"),), 2: (("exam", "x"),)}
    b = {1: (("question", "q"),)}
    assert first_divergence(a, b) == 2
    assert first_divergence(b, a) == 2
    assert first_divergence({}, {}) is None


# ------------------------------------------------------------------ the page
def test_page_is_self_contained_and_holds_tables_episodes_and_pairs(logs):
    native, egip = logs
    report = build_report([native, egip], n_resamples=200, n_flips=200,
                          with_figures=False)
    data, scripts, tags = page_parts(report.html)
    n_native, n_egip = len(lines_of(native)), len(lines_of(egip))
    assert report.n_episodes == len(data["episodes"]) == n_native + n_egip == 34
    assert [r["label"] for r in data["runs"]] == ["scripted@agentclinic", "scripted"]
    # no external reference: no src/href but data: URIs, one inline script besides the
    # island, and a policy that forbids fetching anything
    for tag, attrs in tags:
        for key in ("src", "href", "action"):
            assert key not in attrs or str(attrs[key]).startswith("data:"), (tag, attrs)
    assert [a.get("type") for a, _ in scripts] == ["application/json", None]
    assert "default-src 'none'" in report.html
    # the accuracy table as clinenv eval prints it: 3/17 and 4/17 correct, 4/17 and 7/17
    # answered (coverage); one repetition, so no SD
    accuracy, comparison, components = data["tables"]
    assert components["header"] == ["Method", "Dataset", "Component", "Mean", "95% CI",
                                     "n"]
    assert accuracy["header"] == ["Method", "demo", "demo coverage"]
    assert accuracy["rows"] == [["scripted@agentclinic", "17.65 ± –", "23.53"],
                                ["scripted", "23.53 ± –", "41.18"]]
    assert comparison["rows"][0][:7] == ["demo", "scripted", "scripted@agentclinic", "17",
                                         "17.65", "23.53", "+5.88"]
    # one compared pair, every case of it side by side, same case and repetition
    (pair,) = data["pairs"]
    assert (pair["base"], pair["method"]) == (0, 1)
    assert len(pair["rows"]) == 17
    for a, b, turn in pair["rows"]:
        ea, eb = data["episodes"][a], data["episodes"][b]
        assert (ea["r"], eb["r"]) == (0, 1)
        assert string(data, ea["c"]) == string(data, eb["c"]) and ea["i"] == eb["i"]
        assert turn is None or isinstance(turn, int)
    assert pair["rows"][0][2] == 5  # demo-01, worked out in the divergence test
    assert data["figures"] == []


def test_components_table_and_every_episode_show_the_logged_components(logs):
    """The report's components table is clinenv eval --components' table of the same
    logs, and each episode's ``rc`` holds its line's reward_components."""
    from clinenv.evaluation.components import components_table
    from clinenv.evaluation.runs import load_runs
    from clinenv.reward_components import COMPONENTS

    native, egip = logs
    data, _, _ = page_parts(build_report([native, egip], n_resamples=300, n_flips=100,
                                         with_figures=False).html)
    assert data["meta"]["components"] == list(COMPONENTS)
    table = components_table(load_runs([native, egip]), n_resamples=300, seed=0)
    shown = data["tables"][-1]
    assert shown["title"] == table.title
    assert shown["rows"] == [list(row) for row in table.rows]
    lines = lines_of(native) + lines_of(egip)
    assert len(data["episodes"]) == len(lines)
    for view, line in zip(data["episodes"], lines, strict=True):
        logged = line["reward_components"]
        assert view["rc"] == [None if logged[k] is None else pytest.approx(logged[k],
                              abs=1e-6) for k in COMPONENTS]
    # the native loop parses no test names: its workup and spend are undefined (None),
    # so the components table gives them n = 0 and no mean
    rows = {(r[0], r[2]): r for r in shown["rows"]}
    assert rows[("scripted@agentclinic", "workup_f1")][3:] == ["–", "–", "0"]
    assert rows[("scripted", "diagnosis")][3] == f"{4 / 17:.3f}"
    assert rows[("scripted", "diagnosis")][5] == "17"


def test_components_of_old_logs_are_computed_and_unknown_cases_are_left_out(logs,
                                                                            tmp_path):
    """A log written before reward_components gets the same components from the line and
    its case; a line whose case cannot be found has none and a note names it."""
    from clinenv.reward_components import COMPONENTS

    _, egip = logs
    lines = lines_of(egip)
    old = []
    for n, line in enumerate(lines):
        line = {k: v for k, v in line.items() if k != "reward_components"}
        if n == 2:
            line["case_id"] = "no-such-case"
        old.append(json.dumps(line))
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(old) + "\n", encoding="utf-8")
    data, _, _ = page_parts(build_report([path], n_resamples=100, with_figures=False).html)
    views = data["episodes"]
    assert "rc" not in views[2]
    for n, (view, line) in enumerate(zip(views, lines, strict=True)):
        if n != 2:
            assert view["rc"] == [pytest.approx(line["reward_components"][k], abs=1e-6)
                                  if line["reward_components"][k] is not None else None
                                  for k in COMPONENTS]
    notes = data["tables"][-1]["notes"]
    assert any("16 episode(s) from logs written before reward_components" in n
               for n in notes)
    (left_out,) = [n for n in notes if n.startswith("1 episode(s) without components")]
    assert f"{path}, line 3: case 'no-such-case'" in left_out
    rows = {r[2]: r for r in data["tables"][-1]["rows"]}
    assert rows["diagnosis"][5] == "16"


def test_page_script_shows_each_episodes_components():
    assert 'id = "episode-components"' in REPORT_JS and "ep.rc" in REPORT_JS


def test_figures_are_inline_png_data(logs):
    pytest.importorskip("matplotlib")
    native, egip = logs
    data, _, _ = page_parts(build_report([native, egip], n_resamples=200,
                                         n_flips=200).html)
    assert [f["id"] for f in data["figures"]] == ["fig-accuracy", "fig-comparison"]
    for fig in data["figures"]:
        head, _, payload = fig["src"].partition(",")
        assert head == "data:image/png;base64"
        assert base64.b64decode(payload)[:8] == b"\x89PNG\r\n\x1a\n"


def test_hostile_log_text_stays_data(logs, tmp_path):
    _, egip = logs
    bad = hostile_log(egip, tmp_path / "hostile.jsonl")
    page = build_report([bad], n_resamples=50, with_figures=False).html
    # the only script elements are the page's own two: nothing from the log closes the
    # island or opens markup
    assert page.count("</script>") == 2 and page.lower().count("<script") == 2
    for raw in HOSTILE:
        assert raw not in page
    data, scripts, _ = page_parts(page)
    assert len(scripts) == 2
    first = data["episodes"][0]
    assert string(data, first["a"]) == HOSTILE[0]
    assert string(data, first["t"]) == HOSTILE[1]
    assert string(data, first["e"][0]) == HOSTILE[4]
    replies = [string(data, i[2]) for i in first["x"] if i[0] == "P"]
    assert replies[0] == HOSTILE[2]
    questions = [string(data, i[2]) for i in first["x"] if i[0] == "Q"]
    assert questions[0] == HOSTILE[3]


def test_page_script_writes_text_only():
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                 "eval(", "new Function", "setAttribute(\"on"):
        assert sink not in REPORT_JS, sink
    assert "textContent" in REPORT_JS


def test_size_per_episode_keeps_10000_episodes_under_30_mb(logs, tmp_path):
    """A real run's episodes, replicated with new case ids (as benchmarks/bench_report.py
    does): the page costs under 3,000 bytes per episode, so 10,000 stay under 30 MB."""
    native, egip = logs
    out = []
    for path in (native, egip):
        lines = path.read_text(encoding="utf-8").splitlines()
        copies = []
        for k in range(12):  # 12 x 17 = 204 episodes per method
            for text in lines:
                line = json.loads(text)
                line["case_id"] = f"{line['case_id']}-copy{k}"
                line["case_index"] = line["case_index"] + 17 * k
                line["n_cases_scheduled"] = 17 * 12
                copies.append(json.dumps(line, ensure_ascii=False))
        big = tmp_path / path.name
        big.write_text("\n".join(copies) + "\n", encoding="utf-8")
        out.append(big)
    report = build_report(out, n_resamples=50, n_flips=50, with_figures=False)
    assert report.n_episodes == 408
    size = len(report.html.encode("utf-8"))
    assert size / report.n_episodes < 3000, size


# ------------------------------------------------------------------ the command line
def test_cli_writes_the_report(logs, workdir, capsys):
    native, egip = logs
    out = workdir / "site" / "report.html"
    code = main(["report", str(native), str(egip), "--out", str(out), "--no-figures",
                 "--resamples", "100", "--flips", "100"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \(34 episodes, 2 runs, 1 compared "
                        r"pairs, \d+\.\d\d MB\)\n", captured.out)
    data, _, _ = page_parts(out.read_text(encoding="utf-8"))
    assert len(data["episodes"]) == 34
    assert not list(out.parent.glob(".*.tmp"))


def test_cli_refuses_credentialed_logs_without_the_flag(logs, workdir, capsys):
    _, egip = logs
    lines = egip.read_text(encoding="utf-8").splitlines()
    mimic = []
    for text in lines:
        line = json.loads(text)
        line["dataset"] = "mimiciv"
        mimic.append(json.dumps(line))
    log = workdir / "mimic.jsonl"
    log.write_text("\n".join(mimic) + "\n", encoding="utf-8")
    out = workdir / "report.html"
    assert main(["report", str(log), "--out", str(out), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert f"{log}, line 1: field 'dataset' is 'mimiciv'" in err
    assert "--allow-credentialed" in err
    assert not out.exists()
    assert main(["report", str(log), "--out", str(out), "--no-figures",
                 "--allow-credentialed"]) == 0
    err = capsys.readouterr().err
    assert "warning: this report holds MIMIC-IV episodes" in err
    data, _, _ = page_parts(out.read_text(encoding="utf-8"))
    assert data["meta"]["credentialed"] is True
    assert data["meta"]["warnings"] and "data-use agreement" in data["meta"]["warnings"][0]


def test_credentialed_rule():
    from clinenv.report import is_credentialed

    assert is_credentialed({"dataset": "MIMIC-IV"})
    assert is_credentialed({"dataset": "x", "env_spec": {"kwargs": {
        "dataset": "/data/agentclinic_mimiciv.jsonl"}}})
    assert is_credentialed({"dataset": "mimic_idx"})
    assert not is_credentialed({"dataset": "medqa"})
    assert not is_credentialed({"dataset": "demo", "env_spec": None})


def test_cli_without_matplotlib_writes_the_page_without_figures(logs, workdir, capsys,
                                                                monkeypatch):
    native, egip = logs
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if
                        name == "matplotlib" else real_find_spec(name, *a))
    out = workdir / "report.html"
    assert main(["report", str(native), str(egip), "--out", str(out),
                 "--resamples", "50", "--flips", "50"]) == 0
    err = capsys.readouterr().err
    assert "without figures" in err and "pip install -e '.[plot]' in a clinenv clone" in err
    assert "data:image/png" not in out.read_text(encoding="utf-8")


def test_cli_with_a_broken_matplotlib_names_the_extra(logs, workdir, capsys, monkeypatch):
    native, egip = logs
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if
                        name == "matplotlib" else real_find_spec(name, *a))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # found, but its import fails
    out = workdir / "report.html"
    assert main(["report", str(native), str(egip), "--out", str(out),
                 "--resamples", "50", "--flips", "50"]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[plot]' in a clinenv clone" in err and "--no-figures" in err
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["--pair", "nobase"], "--pair 'nobase': expected METHOD=BASE"),
    (["--pair", "x=scripted"], "--pair x=scripted: no run is labelled 'x' "
                               "(labels: scripted@agentclinic, scripted)"),
])
def test_cli_bad_pairs(logs, workdir, capsys, argv, message):
    native, egip = logs
    assert main(["report", str(native), str(egip), "--no-figures", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_out_folder_and_missing_log(workdir, capsys):
    (workdir / "folder").mkdir()
    assert main(["report", "missing.jsonl", "--out", "folder"]) == 2
    assert "--out folder is a folder" in capsys.readouterr().err
    assert main(["report", "missing.jsonl", "--no-figures"]) == 2
    assert "missing.jsonl: no such run-log file" in capsys.readouterr().err


def test_logged_prompts_appear_with_log_messages(workdir, capsys):
    from clinenv.testing.fake_server import FakeChatServer

    with FakeChatServer("clinician") as server:
        assert main(["run", "--env", "EGIP-Demo-v0", "--doctor", "llm", "--patient", "llm",
                     "--base-url", server.base_url, "--model", "fake", "--episodes", "1",
                     "--quiet", "--log-messages", "--out", "llm.jsonl"]) == 0
    capsys.readouterr()
    (line,) = lines_of(workdir / "llm.jsonl")
    data, _, _ = page_parts(build_report([workdir / "llm.jsonl"], n_resamples=20,
                                         with_figures=False).html)
    (episode,) = data["episodes"]
    calls = line["llm"]["calls"]
    assert len(episode["p"]) == len(calls) > 0
    for prompt, call in zip(episode["p"], calls, strict=True):
        assert string(data, prompt[0]) == call["agent"]
        assert [[string(data, r), string(data, c)] for r, c in prompt[3]] == [
            [m["role"], m["content"]] for m in call["messages"]]
        assert [string(data, r) for r in prompt[4]] == call["raw_reply"]
    assert episode["l"][0] == line["llm"]["n_calls"]
    by_agent = {string(data, a[0]): a[1] for a in episode["la"]}
    assert by_agent == {agent: sum(c["agent"] == agent for c in calls)
                        for agent in {c["agent"] for c in calls}}
