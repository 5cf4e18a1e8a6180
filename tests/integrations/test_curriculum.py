"""Curricula: the reset option max_rounds, the difficulty tables, curriculum order and
round-budget schedules (clinenv.datasets.difficulty, clinenv.integrations.curriculum)."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import gymnasium as gym
import pytest

import clinenv  # noqa: F401
from clinenv.cli import main
from clinenv.datasets.difficulty import DifficultyError, load_difficulty
from clinenv.integrations.curriculum import (
    assign_max_rounds,
    draw_max_rounds,
    measure_difficulty,
)
from clinenv.integrations.tools import ToolEpisode, task_rows
from clinenv.integrations.trl import make_env_factory
from clinenv.testing.data import MEDQA_FILE, SHARED_DATA, needs_shared_data

ENV_ID = "EGIP-Demo-v0"
QUESTIONS = ["What brings you in?", "Any fever?", "Any cough?", "Since when?", "Pain?"]
#: The demo curriculum, by hand from the shipped table's numbers: difficulty 0.4375
#: (demo-12), 0.5625 (13), 0.6875 (05 with 7 exams, then 01 with 9), 0.875 (17),
#: 0.9375 (11), then the 1.0 cases (none names its target) by exam count 4, 6, 7, 8, 8,
#: 9, 11, 12, 12, 14, 15 (ties by dataset index).
DEMO_CURRICULUM = ["demo-12", "demo-13", "demo-05", "demo-01", "demo-17", "demo-11",
                   "demo-08", "demo-03", "demo-07", "demo-10", "demo-16", "demo-06",
                   "demo-02", "demo-14", "demo-15", "demo-04", "demo-09"]


def _play(env, options, actions):
    obs, info = env.reset(seed=5, options=options)
    seen = [(obs["text"], info)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        seen.append((obs["text"], info))
        if terminated:
            break
    return seen, env.episode_record()


def test_max_rounds_gives_exactly_t_acquisition_rounds():
    env = gym.make(ENV_ID).unwrapped
    seen, record = _play(env, {"case_id": "demo-01", "max_rounds": 3},
                         QUESTIONS[:3] + ["DIAGNOSIS READY: pneumonia"] + QUESTIONS[3:])
    assert "Round 1 of 3." in seen[0][0]
    assert [info["phase"] for _, info in seen] == ["acquire", "acquire", "acquire",
                                                   "decide", "done"]
    assert record["turns"] == 3 and record["max_rounds"] == 3
    doctor = [e for e in record["events"] if e["source"] == "doctor"]
    assert [e["text"] for e in doctor] == QUESTIONS[:3] + ["DIAGNOSIS READY: pneumonia"]
    assert [e["turn"] for e in doctor] == [1, 2, 3, 4]  # 3 rounds, then the decision
    assert record["answer"] == "pneumonia"  # the 4th action was the decision, the last
    # one round: the first action ends acquisition
    seen, record = _play(env, {"case_id": "demo-01", "max_rounds": 1}, QUESTIONS)
    assert seen[1][1]["phase"] == "decide" and record["turns"] == 1


def test_absent_max_rounds_changes_nothing_and_t_equals_the_default():
    env = gym.make(ENV_ID).unwrapped
    actions = QUESTIONS + ["REQUEST TEST: PE1"] * 16 + ["DIAGNOSIS READY: pneumonia"]
    plain = _play(env, {"case_id": "demo-02"}, actions)
    assert _play(env, {"case_id": "demo-02", "max_rounds": None}, actions) == plain
    assert "max_rounds" not in plain[1]
    full, record = _play(env, {"case_id": "demo-02", "max_rounds": 19}, actions)
    assert full == plain[0]
    assert {k: v for k, v in record.items() if k != "max_rounds"} == plain[1]
    # the next episode without the option is T = 19 again, its record without the key
    seen, record = _play(env, {"case_id": "demo-02"}, actions)
    assert "Round 1 of 19." in seen[0][0] and "max_rounds" not in record


@pytest.mark.parametrize("bad", [0, -1, 20, 2.0, True, "5", [3]])
def test_bad_max_rounds_is_refused_before_the_reset(bad):
    env = gym.make(ENV_ID).unwrapped
    env.reset(seed=1, options={"case_id": "demo-03"})
    runtime = env.runtime
    with pytest.raises(ValueError, match=r"reset option max_rounds must be an int in "
                                         r"1\.\.19 .*got"):
        env.reset(seed=2, options={"case_id": "demo-04", "max_rounds": bad})
    assert env.runtime is runtime and env.runtime.case.case_id == "demo-03"


def test_a_refused_budget_leaves_the_tool_episode_as_it_was():
    episode = ToolEpisode(ENV_ID)
    episode.reset("demo-01", 1)
    episode.call("ask_patient", {"question": "Any fever?"})
    calls, info = list(episode.calls), dict(episode.info)
    with pytest.raises(ValueError, match="max_rounds must be an int in 1..19"):
        episode.reset("demo-02", 1, max_rounds=0)
    assert episode.started and episode.calls == calls and episode.info == info
    assert episode.call("ask_patient", {"question": "Any cough?"})  # it goes on
    assert [c.name for c in episode.calls] == ["ask_patient", "ask_patient"]


def test_max_rounds_follows_the_configured_t_and_is_egip_only():
    env = gym.make(ENV_ID, acquisition_rounds=4).unwrapped
    with pytest.raises(ValueError, match=r"1\.\.4"):
        env.reset(options={"max_rounds": 5})
    seen, record = _play(env, {"case_id": 0, "max_rounds": 4}, QUESTIONS)
    assert record["turns"] == 4
    native = gym.make(ENV_ID, preset="agentclinic").unwrapped
    with pytest.raises(ValueError, match="max_rounds: an EGIP option; the agentclinic "
                                         "protocol limits turns with max_turns="):
        native.reset(options={"max_rounds": 3})


def test_tool_episode_and_trl_factory_pass_max_rounds_from_the_row():
    episode = ToolEpisode(ENV_ID)
    assert "Round 1 of 2." in episode.reset("demo-05", 7, max_rounds=2)
    episode.ask_patient("What brings you in?")
    episode.ask_patient("Any fever?")
    with pytest.raises(ValueError, match="evidence gathering is over"):
        episode.ask_patient("Any cough?")
    factory = make_env_factory(ENV_ID)
    env = factory()
    row = {"case_id": "demo-05", "seed": 7, "env_id": ENV_ID, "max_rounds": 2}
    assert env.reset(**row) == ToolEpisode(ENV_ID).reset("demo-05", 7, max_rounds=2)
    env.ask_patient("What brings you in?")
    env.ask_patient("Any fever?")
    with pytest.raises(ValueError, match="evidence gathering is over"):
        env.order_exam("PE1")
    assert env._episode.env.episode_record()["max_rounds"] == 2
    # a row without the column (or None, as a datasets column stores it) keeps T
    assert "Round 1 of 19." in env.reset(**{**row, "max_rounds": None})
    with pytest.raises(ValueError, match="max_rounds must be an int in 1..19"):
        env.reset(**{**row, "max_rounds": 40})


def test_shipped_demo_table_is_reproducible():
    table = load_difficulty("demo")
    text = resources.files("clinenv.datasets").joinpath(
        "data", "difficulty", "demo.json").read_text(encoding="utf-8")
    assert measure_difficulty("demo").to_json() == text == table.to_json()


@needs_shared_data(MEDQA_FILE)
def test_shipped_medqa_table_is_reproducible_and_its_distribution(monkeypatch):
    monkeypatch.setenv("CLINENV_DATA_DIR", str(SHARED_DATA))
    table = load_difficulty("medqa")
    assert measure_difficulty("medqa").to_json() == table.to_json()
    counts: dict[int, int] = {}
    for case in table.cases:
        counts[case.successes] = counts.get(case.successes, 0) + 1
    # successes of 16 -> cases (95 of 107 never solved by the sampling scripted doctor)
    assert counts == {0: 95, 3: 1, 5: 1, 7: 4, 9: 1, 10: 2, 11: 1, 12: 1, 13: 1}
    assert sum(c.target_in_records for c in table.cases) == 17


def test_tables_are_package_data():
    import configparser
    from pathlib import Path

    parser = configparser.ConfigParser()
    parser.read(Path(__file__).resolve().parents[2] / "setup.cfg", encoding="utf-8")
    assert "data/difficulty/*.json" in parser.get("options.package_data",
                                                  "clinenv.datasets").split()


def test_table_fields_match_their_definitions():
    table = load_difficulty("demo")
    env = gym.make(ENV_ID).unwrapped
    for i, case in enumerate(table.cases):
        assert case.index == i and case.episodes == 16
        assert case.difficulty == pytest.approx(1 - case.successes / 16)
        obs, _ = env.reset(options={"case_id": case.case_id})
        assert case.n_exams == int(obs["exam_mask"].sum())  # catalog size, unrequested
        assert case.target_in_records == env.runtime.case.flags.target_in_records
    order = sorted(table.cases, key=lambda c: (c.successes * -1, not c.target_in_records,
                                               c.n_exams, c.index))
    assert [c.rank for c in order] == list(range(len(order)))


def test_curriculum_order_on_demo():
    assert [r["case_id"] for r in task_rows(ENV_ID)] == [f"demo-{i:02d}" for i in range(1, 18)]
    rows = task_rows(ENV_ID, order="curriculum")
    assert [r["case_id"] for r in rows] == DEMO_CURRICULUM
    by_id = {r["case_id"]: r for r in task_rows(ENV_ID)}
    assert all(r == by_id[r["case_id"]] for r in rows)  # the same rows, reordered
    some = task_rows(ENV_ID, ["demo-09", "demo-12", "demo-02"], order="curriculum")
    assert [r["case_id"] for r in some] == ["demo-12", "demo-02", "demo-09"]


def test_curriculum_order_errors(tmp_path):
    with pytest.raises(ValueError, match="order must be 'dataset' or 'curriculum', got 'hard'"):
        task_rows(ENV_ID, order="hard")
    with pytest.raises(ValueError, match="difficulty= is the table of order='curriculum'"):
        task_rows(ENV_ID, difficulty="demo")
    with pytest.raises(DifficultyError, match="measured on other records"):
        task_rows(ENV_ID, order="curriculum", difficulty="medqa")
    table = load_difficulty("demo")
    short = table.model_copy(update={"cases": table.cases[:-1]})
    with pytest.raises(DifficultyError, match="has no case 'demo-17'"):
        task_rows(ENV_ID, order="curriculum", difficulty=short)
    bad = tmp_path / "bad.json"
    data = json.loads(table.to_json())
    data["cases"][0]["successes"] = -1
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DifficultyError, match=r"bad.json: cases.0.successes"):
        load_difficulty(bad)
    bad.write_text('{"format": "other"}', encoding="utf-8")
    with pytest.raises(DifficultyError, match="format must be 'clinenv.difficulty/1'"):
        load_difficulty(bad)
    with pytest.raises(DifficultyError, match="no shipped difficulty table for 'mimiciv'"):
        load_difficulty("mimiciv")


def test_assign_max_rounds_schedules_by_position():
    rows = task_rows(ENV_ID, order="curriculum")
    staged = assign_max_rounds(rows, (5, 10, 19))
    # 17 rows in 3 equal stages: starts 0, 17 // 3 = 5, 34 // 3 = 11
    assert [r["max_rounds"] for r in staged] == [5] * 5 + [10] * 6 + [19] * 6
    assert [r["case_id"] for r in staged] == DEMO_CURRICULUM
    assert "max_rounds" not in rows[0]  # copies
    assert [r["max_rounds"] for r in assign_max_rounds(rows[:4], (2, 7), starts=(0, 3))] \
        == [2, 2, 2, 7]
    skyrl_row = {"prompt": [], "extra_info": {"case_id": "demo-01", "seed": 3}}
    assert assign_max_rounds([skyrl_row], (6,))[0]["extra_info"]["max_rounds"] == 6
    for budgets, starts, message in (((), None, "budgets: give at least one"),
                                     ((0,), None, "budgets: each must be an int >= 1"),
                                     ((5, 10), (0,), "starts: 1 starts for 2 budgets"),
                                     ((5, 10), (1, 3), "starts must begin at 0"),
                                     ((5, 10), (0, 17), "stay below 17")):
        with pytest.raises(ValueError, match=message):
            assign_max_rounds(rows, budgets, starts=starts)


def test_draw_max_rounds_draws_each_rows_budget_from_low_to_high():
    """DoctorAgent-RL's random budget of 2 to 10 rounds: uniform per row, a pure function
    of the seed, the position and the case (BLAKE2b of "seed, max_rounds, position, case"
    read as a fraction, by hand below)."""
    rows = task_rows(ENV_ID) * 12  # 204 rows: every budget 2..10 appears
    drawn = draw_max_rounds(rows, 2, 10, seed=7)
    budgets = [r["max_rounds"] for r in drawn]
    assert set(budgets) == set(range(2, 11))
    assert [r["case_id"] for r in drawn] == [r["case_id"] for r in rows]
    assert "max_rounds" not in rows[0]  # copies
    for position in (0, 1, 20):
        text = "\x1f".join(["7", "max_rounds", str(position), rows[position]["case_id"]])
        u = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(),
                           "big") / 2.0**64
        assert budgets[position] == 2 + int(u * 9)
    assert draw_max_rounds(rows, 2, 10, seed=7) == drawn
    assert [r["max_rounds"] for r in draw_max_rounds(rows, 2, 10, seed=8)] != budgets
    assert {r["max_rounds"] for r in draw_max_rounds(rows[:5], 4, 4)} == {4}
    skyrl_row = {"prompt": [], "extra_info": {"case_id": "demo-01", "seed": 3}}
    assert 2 <= draw_max_rounds([skyrl_row], 2, 3)[0]["extra_info"]["max_rounds"] <= 3
    # the budget reaches the episode through the trainer's reset
    env = make_env_factory(ENV_ID)()
    row = drawn[0]
    assert f"Round 1 of {row['max_rounds']}." in env.reset(**row)
    for low, high, message in ((0, 5, "low must be an int >= 1"),
                               (2, 1.5, "high must be an int >= 1"),
                               (6, 5, r"low \(6\) must be at most high \(5\)")):
        with pytest.raises(ValueError, match=message):
            draw_max_rounds(rows, low, high)
    with pytest.raises(ValueError, match="no rows"):
        draw_max_rounds([], 2, 10)


def test_cli_data_difficulty(tmp_path, capsys):
    assert main(["data", "difficulty", "demo", "--check"]) == 0
    assert "identical to the shipped demo table" in capsys.readouterr().out
    out = tmp_path / "demo.json"
    assert main(["data", "difficulty", "demo", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == load_difficulty("demo").to_json()
    assert main(["data", "difficulty", "demo", "--out", str(out)]) == 2
    assert "exists; use --force" in capsys.readouterr().err
    assert main(["data", "difficulty", "demo", "--check", "--episodes", "4"]) == 1
    assert "differs from the shipped demo table" in capsys.readouterr().err
    assert main(["data", "difficulty", "demo", "--out", str(out), "--force",
                 "--episodes", "2", "--exam-budgets", "3", "--seed", "1"]) == 0
    method = load_difficulty(out).method
    assert (method.episodes, method.exam_budgets, method.seed) == (2, (3,), 1)
