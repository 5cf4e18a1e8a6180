"""``clinenv run --paper-settings`` and the vote strategy's temperature, end to end.

Every run is a real ``clinenv run`` (:func:`clinenv.cli.main` in process, once a
``python -m clinenv`` subprocess) against the local OpenAI-compatible fake server; the
assertions read what the server received per request (``temperature``, ``max_tokens``,
``n``, ``seed``) and what the run log holds. The expected values come from EGIP 4.1
(0.05 AgentClinic, 0.2 MedAgentSim, 3 repetitions, 200 tokens) and the expected seeds
from the derivation the seeding module documents, recomputed here with numpy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clinenv.agents.terminal_vote import Vote
from clinenv.cli import main
from clinenv.llm.base import GenerationConfig
from clinenv.llm.openai_backend import OpenAIChatModel
from clinenv.runlog import read_run_log

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ("# Objective\nA 54-year-old with epigastric pain radiating to the back.\n"
            "# Observations\nO1 Measurement: Lipase: 1,200 U/L (recorded)")



def run(capsys, env, *args):
    """``clinenv run --env env ...``: (exit code, stdout, stderr)."""
    code = main(["run", "--env", env, *args])
    out, err = capsys.readouterr()
    return code, out, err


def llm(server, *args):
    return ["--doctor", "llm", "--model", "fake-model", "--base-url", server.base_url,
            *args]


def seed_of(*entropy):
    """First 32-bit word of numpy's SeedSequence over ``entropy``, masked to 31 bits;
    a string key is its UTF-8 bytes cut or zero-padded to 16, read little-endian (the
    derivation :mod:`clinenv.seeding` documents)."""
    words = [int.from_bytes(k.encode()[:16].ljust(16, b"\0"), "little")
             if isinstance(k, str) else k for k in entropy]
    return int(np.random.SeedSequence(words).generate_state(1, dtype=np.uint32)[0]) \
        & 0x7FFF_FFFF


def expected_seed(line, call):
    """The seed a doctor call of episode ``line`` must send (run seed 0)."""
    episode = seed_of(0, line["repetition"], line["case_index"])
    if call["purpose"] == "vote":
        return seed_of(seed_of(episode, call["turn"], "decide"), "vote")
    return seed_of(episode, call["turn"], call["purpose"])


def sent(server, key):
    """The values of ``key`` in every request the server received, in arrival order."""
    return [body.get(key) for body in server.requests]


def check_seeds(server, lines):
    """Each request the server received (sequential run: in log order) carries the seed
    its episode, turn and purpose give; the three repetitions differ."""
    calls = [(line, call) for line in lines for call in line["llm"]["calls"]]
    assert len(calls) == len(server.requests)
    assert sent(server, "seed") == [expected_seed(line, call) for line, call in calls]
    first: dict[int, set[int]] = {}
    for line in lines:
        first.setdefault(line["case_index"], set()).add(line["llm"]["calls"][0]["seed"])
    n_reps = len({line["repetition"] for line in lines})
    assert all(len(seeds) == n_reps for seeds in first.values())


def test_agentclinic_id_runs_at_005_for_three_repetitions(workdir, server, capsys):
    code, out, err = run(capsys, "AgentClinic-Demo-v0", *llm(server), "--paper-settings",
                         "--episodes", "2", "--out", "ac.jsonl")
    assert code == 0, err
    assert ("paper settings (EGIP 4.1, agentclinic framework): temperature 0.05, max "
            "tokens 200, 3 repetition(s)\n") in out
    assert "| 2 cases x 3 repetition(s) |" in out
    assert set(sent(server, "temperature")) == {0.05}
    assert set(sent(server, "max_tokens")) == {200}
    lines = read_run_log(workdir / "ac.jsonl").lines
    assert sorted((x["case_index"], x["repetition"]) for x in lines) == [
        (i, r) for i in range(2) for r in range(3)]
    assert {x["n_repetitions"] for x in lines} == {3}
    check_seeds(server, lines)
    assert lines[0]["doctor"]["config"]["generation"]["temperature"] == 0.05
    assert lines[0]["paper_settings"] == {
        "source": "EGIP 4.1", "framework": "agentclinic", "framework_from": "env id",
        "paper": {"temperature": 0.05, "max_tokens": 200, "repetitions": 3},
        "applied": {"temperature": 0.05, "max_tokens": 200, "repetitions": 3},
        "given": [], "applies_to": "doctor", "notes": []}
    assert all(x["paper_settings"] == lines[0]["paper_settings"] for x in lines)


def test_medagentsim_id_runs_at_02_every_call_of_the_discussion(workdir, server, capsys):
    code, out, err = run(capsys, "MedAgentSim-Demo-v0", *llm(server), "--paper-settings",
                         "--episodes", "1", "--quiet", "--out", "ms.jsonl")
    assert code == 0, err
    assert set(sent(server, "temperature")) == {0.2}
    assert set(sent(server, "max_tokens")) == {200}
    lines = read_run_log(workdir / "ms.jsonl").lines
    assert len(lines) == 3 and lines[0]["doctor"]["name"] == "llm-medagentsim"
    assert lines[0]["paper_settings"]["framework"] == "medagentsim"
    assert lines[0]["paper_settings"]["applied"]["temperature"] == 0.2
    check_seeds(server, lines)


@pytest.mark.parametrize("flags, framework, origin, temperature", [
    ([], "agentclinic", "default", 0.05),
    (["--framework", "agentclinic"], "agentclinic", "--framework", 0.05),
    (["--framework", "medagentsim"], "medagentsim", "--framework", 0.2),
])
def test_egip_id_takes_the_framework_flag(workdir, server, capsys, flags, framework,
                                          origin, temperature):
    code, _, err = run(capsys, "EGIP-Demo-v0", *llm(server), "--paper-settings", *flags,
                       "--episodes", "1", "--quiet", "--out", "egip.jsonl")
    assert code == 0, err
    assert set(sent(server, "temperature")) == {temperature}
    lines = read_run_log(workdir / "egip.jsonl").lines
    assert len(lines) == 3
    settings = lines[0]["paper_settings"]
    assert (settings["framework"], settings["framework_from"]) == (framework, origin)
    # the framework changes the decoding only: the protocol stays EGIP's
    assert lines[0]["env_id"] == "EGIP-Demo-v0" and lines[0]["phase"] == "done"
    assert [c["purpose"] for c in lines[0]["llm"]["calls"]][-1] == "decide"


def test_preset_fixes_the_framework(workdir, server, capsys):
    code, _, err = run(capsys, "EGIP-Demo-v0", "--preset", "medagentsim", *llm(server),
                       "--paper-settings", "--episodes", "1", "--repetitions", "1",
                       "--quiet", "--out", "p.jsonl")
    assert code == 0, err
    assert set(sent(server, "temperature")) == {0.2}
    settings = read_run_log(workdir / "p.jsonl").lines[0]["paper_settings"]
    assert (settings["framework"], settings["framework_from"]) == ("medagentsim", "preset")


def test_explicit_flags_win_even_when_zero(workdir, server, capsys):
    code, out, err = run(capsys, "EGIP-Demo-v0", *llm(server), "--paper-settings",
                         "--framework", "medagentsim", "--temperature", "0",
                         "--max-tokens", "64", "--repetitions", "2", "--episodes", "1",
                         "--out", "x.jsonl")
    assert code == 0, err
    assert set(sent(server, "temperature")) == {0.0}
    assert set(sent(server, "max_tokens")) == {64}
    assert "given: --temperature, --max-tokens, --repetitions" in out
    lines = read_run_log(workdir / "x.jsonl").lines
    assert sorted(x["repetition"] for x in lines) == [0, 1]
    assert {x["n_repetitions"] for x in lines} == {2}
    settings = lines[0]["paper_settings"]
    assert settings["paper"] == {"temperature": 0.2, "max_tokens": 200, "repetitions": 3}
    assert settings["applied"] == {"temperature": 0.0, "max_tokens": 64, "repetitions": 2}
    assert settings["given"] == ["--temperature", "--max-tokens", "--repetitions"]
    check_seeds(server, lines)


def test_one_explicit_flag_keeps_the_other_paper_values(workdir, server, capsys):
    code, _, err = run(capsys, "AgentClinic-Demo-v0", *llm(server), "--paper-settings",
                       "--temperature", "0.7", "--episodes", "1", "--quiet",
                       "--out", "y.jsonl")
    assert code == 0, err
    assert set(sent(server, "temperature")) == {0.7}
    assert set(sent(server, "max_tokens")) == {200}
    assert len(read_run_log(workdir / "y.jsonl").lines) == 3


def test_without_the_option_clinenv_defaults_apply(workdir, server, capsys):
    code, out, err = run(capsys, "AgentClinic-Demo-v0", *llm(server), "--episodes", "2",
                         "--out", "d.jsonl")
    assert code == 0, err
    assert "paper settings" not in out
    assert set(sent(server, "temperature")) == {0.0}
    assert set(sent(server, "max_tokens")) == {200}
    lines = read_run_log(workdir / "d.jsonl").lines
    assert len(lines) == 2 and {x["repetition"] for x in lines} == {0}
    assert all("paper_settings" not in x for x in lines)


def test_scripted_doctor_gets_the_repetitions_and_a_note(workdir):
    """A real ``python -m clinenv`` process; no model: no server is needed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "clinenv", "run", "--env", "EGIP-Demo-v0",
                           "--paper-settings", "--episodes", "2", "--out", "s.jsonl"],
                          capture_output=True, text=True, env=env, cwd=workdir, timeout=300)
    assert proc.returncode == 0, proc.stderr
    note = ("note: --paper-settings with --doctor scripted: no model decodes the doctor's "
            "actions, so temperature 0.05 and max tokens 200 are not applied; the "
            "repetitions (3) are\n")
    assert note in proc.stderr
    assert ("paper settings (EGIP 4.1, agentclinic framework): no model decoding, 3 "
            "repetition(s)\n") in proc.stdout
    lines = read_run_log(workdir / "s.jsonl").lines
    assert sorted((x["case_index"], x["repetition"]) for x in lines) == [
        (i, r) for i in range(2) for r in range(3)]
    settings = lines[0]["paper_settings"]
    assert settings["applied"] == {"temperature": None, "max_tokens": None,
                                   "repetitions": 3}
    assert settings["applies_to"] is None
    assert settings["notes"] == [note[len("note: "):-1]]


def _vote_requests(server):
    return [b for b in server.requests if b.get("n") == 4]


def test_vote_samples_at_the_run_temperature(workdir, server, capsys):
    code, _, err = run(capsys, "EGIP-Demo-v0", *llm(server), "--strategy", "vote",
                       "--paper-settings", "--framework", "medagentsim", "--episodes", "1",
                       "--quiet", "--out", "v.jsonl")
    assert code == 0, err
    votes = _vote_requests(server)
    assert len(votes) == 3  # one per repetition
    assert {b["temperature"] for b in votes} == {0.2}
    assert set(sent(server, "temperature")) == {0.2}
    lines = read_run_log(workdir / "v.jsonl").lines
    assert lines[0]["doctor"]["config"]["strategy"] == {"name": "vote", "n_samples": 5,
                                                        "temperature": None}
    check_seeds(server, lines)


def test_vote_temperature_flag_sets_only_the_extra_samples(workdir, server, capsys):
    code, _, err = run(capsys, "EGIP-Demo-v0", *llm(server), "--strategy", "vote",
                       "--paper-settings", "--vote-temperature", "0.9", "--episodes", "1",
                       "--repetitions", "1", "--quiet", "--out", "v9.jsonl")
    assert code == 0, err
    votes = _vote_requests(server)
    assert [b["temperature"] for b in votes] == [0.9]
    others = [b["temperature"] for b in server.requests if b.get("n") != 4]
    assert others and set(others) == {0.05}
    line = read_run_log(workdir / "v9.jsonl").lines[0]
    assert line["doctor"]["config"]["strategy"]["temperature"] == 0.9


def test_vote_at_temperature_zero_gets_a_note(workdir, server, capsys):
    code, _, err = run(capsys, "EGIP-Demo-v0", *llm(server), "--strategy", "vote",
                       "--episodes", "1", "--out", "v0.jsonl")
    assert code == 0, err
    assert "note: --strategy vote at temperature 0:" in err
    assert [b["temperature"] for b in _vote_requests(server)] == [0.0]


def test_vote_python_api_temperature(server):
    with OpenAIChatModel("fake-model", base_url=server.base_url, max_retries=0) as chat:
        config = GenerationConfig(temperature=0.05, max_tokens=120)
        Vote().decide(chat, EVIDENCE, seed=5, config=config)
        Vote(temperature=0.35).decide(chat, EVIDENCE, seed=5, config=config)
    got = [(b["n"], b["temperature"], b["max_tokens"], b["seed"]) for b in server.requests]
    direct, vote_seed = (1, 0.05, 120, 5), seed_of(5, "vote")
    assert got == [direct, (4, 0.05, 120, vote_seed), direct, (4, 0.35, 120, vote_seed)]
    with pytest.raises(ValueError, match="temperature must be a number >= 0 or None"):
        Vote(temperature=-0.1)


@pytest.mark.parametrize("env, args, message", [
    ("EGIP-Demo-v0", ["--framework", "medagentsim"],
     "--framework is used only with --paper-settings"),
    ("AgentClinic-Demo-v0", ["--paper-settings", "--framework", "medagentsim"],
     "--framework medagentsim: --env AgentClinic-Demo-v0 runs the agentclinic protocol, "
     "whose paper temperature is 0.05"),
    ("MedAgentSim-Demo-v0", ["--paper-settings", "--framework", "agentclinic"],
     "--framework agentclinic: --env MedAgentSim-Demo-v0 runs the medagentsim protocol"),
    ("EGIP-Demo-v0", ["--vote-temperature", "0.5"],
     "--vote-temperature is used only with --doctor llm --strategy vote"),
])
def test_bad_combinations_exit_2_before_anything_is_made(workdir, capsys, env, args,
                                                         message):
    code, out, err = run(capsys, env, *args)
    assert code == 2
    assert err.startswith(f"clinenv: error: {message}") and err.count("\n") == 1
    assert not (workdir / "runs").exists()


def test_vote_temperature_with_direct_strategy_is_refused(workdir, server, capsys):
    code, _, err = run(capsys, "EGIP-Demo-v0", *llm(server), "--vote-temperature", "0.5")
    assert code == 2 and "--vote-temperature is used only with" in err
    assert server.requests == [] and not (workdir / "runs").exists()


def test_resume_extends_the_repetitions_and_refuses_other_decoding(workdir, server,
                                                                  capsys):
    base = [*llm(server), "--episodes", "1", "--quiet", "--out", "r.jsonl"]
    assert run(capsys, "EGIP-Demo-v0", *base, "--paper-settings", "--repetitions", "1")[0] == 0
    code, out, err = run(capsys, "EGIP-Demo-v0", *base, "--paper-settings", "--resume")
    assert code == 0, err
    assert "| 2 run now, 1 resumed" in out
    lines = read_run_log(workdir / "r.jsonl").lines
    assert [x["paper_settings"]["applied"]["repetitions"] for x in lines] == [1, 3, 3]
    assert {x["doctor"]["config"]["generation"]["temperature"] for x in lines} == {0.05}
    # without the option the doctor decodes at 0: not the same run
    code, _, err = run(capsys, "EGIP-Demo-v0", *base, "--resume")
    assert code == 2 and "temperature" in err and "refusing to resume" in err
    assert len(read_run_log(workdir / "r.jsonl").lines) == 3


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps at hyphens too
    for flag in ("--paper-settings", "--framework{agentclinic,medagentsim}",
                 "--vote-temperatureT", "(default:1;3with--paper-settings)"):
        assert flag in text
