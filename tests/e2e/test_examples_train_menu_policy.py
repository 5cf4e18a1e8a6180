"""examples/train_menu_policy.py: the REINFORCE gradient, position-free features, a short
deterministic run on the demo set with its PNG, and the CLI's error without data."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from scipy.special import log_softmax

from clinenv.cli import main as clinenv_main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def example(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.delenv("CLINENV_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return importlib.import_module("train_menu_policy")


def test_log_prob_gradient_matches_finite_differences(example):
    rng = np.random.default_rng(7)
    phi = rng.normal(size=(4, 6))
    theta = rng.normal(size=6)
    for k in range(4):
        logp, grad = example.log_prob_grad(theta, phi, k)
        assert logp == pytest.approx(log_softmax(phi @ theta)[k], abs=1e-12)
        eps = 1e-6
        numeric = [(log_softmax(phi @ (theta + eps * e))[k]
                    - log_softmax(phi @ (theta - eps * e))[k]) / (2 * eps)
                   for e in np.eye(6)]
        np.testing.assert_allclose(grad, numeric, atol=1e-7)
    # by hand: two one-hot actions, theta = 0 -> pi = (1/2, 1/2), grad log pi(0) = (1/2, -1/2)
    np.testing.assert_allclose(example.log_prob_grad(np.zeros(2), np.eye(2), 0)[1],
                               [0.5, -0.5])


def test_reinforce_gradient_of_an_episode(example):
    """(G - b) * sum_t grad log pi(a_t|s_t) equals the finite-difference gradient of the
    surrogate (G - b) * sum_t log pi(a_t|s_t), over steps with different action counts."""
    rng = np.random.default_rng(11)
    theta = rng.normal(size=5)
    steps = [(rng.normal(size=(3, 5)), 2), (rng.normal(size=(1, 5)), 0),
             (rng.normal(size=(5, 5)), 1)]

    def surrogate(t):
        return (1.0 - 0.3) * sum(log_softmax(phi @ t)[k] for phi, k in steps)

    eps = 1e-6
    numeric = [(surrogate(theta + eps * e) - surrogate(theta - eps * e)) / (2 * eps)
               for e in np.eye(5)]
    np.testing.assert_allclose(example.reinforce_gradient(theta, steps, 1.0, 0.3), numeric,
                               atol=1e-7)
    # a one-action step has no gradient; a return equal to the baseline gives none at all
    assert not example.reinforce_gradient(theta, steps[1:2], 1.0, 0.0).any()
    assert not example.reinforce_gradient(theta, steps, 0.5, 0.5).any()


def test_features_come_from_exam_names_not_positions(example):
    """"Complete Blood Count (Blood Tests)" gets the same row in demo-01 and demo-17,
    whatever its index there; the row counts the words' crc32 slots in the first block
    (no diagnosis named yet)."""
    env = gym.make("EGIP-Demo-Menu-v0").unwrapped
    rows, indices = [], []
    for case_id in ("demo-01", "demo-17"):
        obs, info = env.reset(seed=0, options={"case_id": case_id})
        (exam_id,) = [m["id"] for m in info["menu"]
                      if m["name"] == "Complete Blood Count (Blood Tests)"]
        valid, phi = example.action_features(env, obs, info)
        row = [r for r, i in enumerate(valid)
               if env.utterance(int(i)) == f"REQUEST TEST: {exam_id}"][0]
        rows.append(phi[row])
        indices.append(int(valid[row]))
    assert indices[0] != indices[1]
    np.testing.assert_array_equal(rows[0], rows[1])
    expected = np.zeros(2 * example.DIM + 2)
    for word in ("exam", "T", "complete", "blood", "count", "blood", "tests"):
        expected[zlib.crc32(word.encode()) % example.DIM] += 1
    np.testing.assert_array_equal(rows[0], expected)


def test_short_run_is_deterministic_and_writes_the_png(example, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    args = ["--dataset", "Demo", "--episodes", "30", "--seed", "3"]
    first = example.main([*args, "--out", str(tmp_path / "a.png")])
    second = example.main([*args, "--out", str(tmp_path / "b.png")])
    other = example.main(["--episodes", "30", "--seed", "4", "--out", str(tmp_path / "c.png")])
    out = capsys.readouterr().out
    assert first["curve"] == second["curve"] and first["heldout"] == second["heldout"]
    assert first["heldout_curve"] == second["heldout_curve"]
    np.testing.assert_array_equal(first["theta"], second["theta"])
    assert first["theta"].any() and not np.array_equal(first["theta"], other["theta"])
    assert [e for e, _ in first["curve"]] == list(range(3, 31, 3))
    assert [e for e, _ in first["heldout_curve"]] == [0, *range(3, 31, 3)]
    # the held-out cases are the evaluation list of `clinenv data split` with that seed
    assert clinenv_main(["data", "split", "demo", "--construction", "0.7", "--seed", "3",
                         "--out", str(tmp_path / "split")]) == 0
    evaluation = (tmp_path / "split" / "evaluation.txt").read_text().split()
    for policy in ("trained", "random", "scripted"):
        assert list(first["heldout"][policy]) == evaluation
    assert "EGIP-Demo-Menu-v0, T=3: 12 construction / 5 held-out cases, 30 episodes" in out
    import matplotlib.image

    for name in ("a.png", "b.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert matplotlib.image.imread(tmp_path / name).shape[:2] == (400, 700)
    assert first["png"] == tmp_path / "a.png"


def test_missing_dataset_is_one_clear_error(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("CLINENV_DATA_DIR", None)
    proc = subprocess.run([sys.executable, "examples/train_menu_policy.py", "--dataset",
                           "NEJM", "--episodes", "5"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: dataset 'nejm' (NEJM): file agentclinic_nejm.jsonl "
                                  "not found.")
    assert "CLINENV_DATA_DIR" in proc.stderr and not proc.stdout


def test_without_matplotlib_the_curve_is_printed_and_no_png_written(tmp_path):
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib')\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(fake))
    env.pop("CLINENV_DATA_DIR", None)
    png = tmp_path / "curve.png"
    proc = subprocess.run([sys.executable, "examples/train_menu_policy.py", "--episodes", "10",
                           "--seed", "1", "--out", str(png)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("EGIP-Demo-Menu-v0, T=3: 12 construction / 5 held-out cases, "
                        "10 episodes, seed 1")
    assert lines[1].startswith("training return (mean over blocks of 1 episodes): ")
    assert len(lines[1].split(": ")[1].split()) == 10
    assert [ln.split(":")[0] for ln in lines[3:]] == [
        "held-out  trained", "held-out   random", "held-out scripted"]
    assert not png.exists() and "learning curve" not in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        "no learning-curve PNG written: matplotlib is not installed (pip install -e '.[plot]')"]
