"""REINFORCE with a baseline, numpy only, on the menu-index environment.

A linear softmax policy over the valid actions of ``EGIP-<Dataset>-Menu-v0``
(:class:`clinenv.wrappers.env.menu_action.MenuActionEnv`) is trained on the construction
cases of a :func:`clinenv.datasets.case_split.split_cases` split (fraction 0.7, the
``--seed``) and evaluated greedily on the held-out cases against a uniform random policy
over the same mask and the scripted doctor (menu order, no questions, on the text env
with the same budget). Menus differ from case to case, so an action's features never use
its index:

- an examination: a hashed bag of words of its menu name and group (``"Chest CT
  (Imaging)"``) and its kind (``PE``/``T``, the id's prefix); a history question: the
  word ``question``, plus ``asked`` once it is in the view. These go to a first block of
  weights while the evidence names no diagnosis, to a second one once it does
  (:func:`~clinenv.agents.evidence_reading.named_diagnosis`);
- an answer slot with candidates K (NEJM): a hashed bag of the candidate's words, the
  share of them found in the evidence and whether it is the best such candidate. Without
  K (MedQA) the env has one answer action, which copies the diagnosis a record names
  (else abstains), so only the acquisition is learned; held-out accuracy is then also
  given without the cases whose records name the target (``target_in_records``), where
  that copy is a leak.

The acquisition budget is ``ROUNDS`` (``acquisition_rounds``; EGIP's 19 rounds would
let every policy order the whole menu of these cases, leaving nothing to learn). The
return is the terminal score (1 correct, else 0). Greedy ties go to the lower index (with
untrained weights: catalog order). Same ``--seed``, same curve.

Run from the repository root (offline on the demo cases; MedQA and NEJM need
``CLINENV_DATA_DIR``)::

    python examples/train_menu_policy.py --dataset Demo --episodes 1500 --seed 0
"""

from __future__ import annotations

import argparse
import re
import sys
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np

import clinenv  # noqa: F401  (registers the environment ids)
from clinenv import DatasetNotFoundError
from clinenv.agents import ScriptedDoctor, candidate_scores, evidence_text, named_diagnosis
from clinenv.datasets import split_cases
from clinenv.env import MENU_IDS
from clinenv.runs import run_episode

DIM = 512  # features per block (two blocks: before / after a diagnosis is named)
ROUNDS = 3  # acquisition rounds T, the exam budget
LR = 0.2  # step size of the policy gradient
BASELINE_RATE = 0.05  # the baseline is an exponential moving average of the returns
FRACTION = 0.7  # construction share of the case split
DATASETS = [i.removeprefix("EGIP-").removesuffix("-Menu-v0") for i in MENU_IDS]


def _slot(word: str) -> int:
    return zlib.crc32(word.encode()) % DIM  # crc32: the same in every process


def action_features(env, obs, info) -> tuple[np.ndarray, np.ndarray]:
    """``(valid, phi)``: the valid action indices ``(n,)`` and their features
    ``(n, 2 * DIM + 2)`` in the current state, from what the doctor sees only."""
    valid = np.flatnonzero(obs["action_mask"])
    evidence = evidence_text(obs["text"])
    found = bool(named_diagnosis(evidence))
    names = {entry["id"]: entry["name"] for entry in info["menu"]}
    cands = info.get("candidates") or []
    overlap = candidate_scores(cands, evidence) if cands else []
    phi = np.zeros((valid.size, 2 * DIM + 2))
    for row, index in enumerate(valid):
        utterance = env.utterance(int(index))
        if utterance.startswith("DIAGNOSIS READY: "):
            k = index - valid[0]
            if overlap:
                phi[row, -2] = overlap[k]
                phi[row, -1] = float(overlap[k] == max(overlap) > 0)
                for word in re.findall(r"[a-z0-9]+", cands[k].lower()):
                    phi[row, _slot("answer:" + word)] += 1.0
            continue
        if utterance.startswith("REQUEST TEST: "):
            exam_id = utterance.removeprefix("REQUEST TEST: ")
            words = ["exam", exam_id.rstrip("0123456789")]
            words += re.findall(r"[a-z0-9]+", names.get(exam_id, "").lower())
        else:
            words = ["question"] + (["asked"] if utterance in obs["text"] else [])
        for word in words:
            phi[row, _slot(word) + DIM * found] += 1.0
    return valid, phi


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


def log_prob_grad(theta: np.ndarray, phi: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    """``log pi(k)`` and its gradient in ``theta`` for ``pi = softmax(phi @ theta)``:
    ``phi[k] - pi @ phi``."""
    p = softmax(phi @ theta)
    return float(np.log(p[k])), phi[k] - p @ phi


def reinforce_gradient(theta: np.ndarray, steps: list, ret: float,
                       baseline: float) -> np.ndarray:
    """REINFORCE with a baseline for one episode (terminal reward, no discount):
    ``(G - b) * sum_t grad log pi(a_t | s_t)`` over the ``(phi, k)`` steps."""
    return (ret - baseline) * sum(log_prob_grad(theta, phi, k)[1] for phi, k in steps)


def sampled(theta, rng):
    return lambda phi: int(rng.choice(len(phi), p=softmax(phi @ theta)))


def greedy(theta):
    return lambda phi: int(np.argmax(phi @ theta))


def uniform(rng):
    return lambda phi: int(rng.integers(len(phi)))


def play(env, case_id: str, seed: int, choose) -> tuple[float, list]:
    """One episode; ``choose(phi) -> k`` picks among the valid actions. Returns the
    return and the ``(phi, k)`` steps."""
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    steps, total, done = [], 0.0, False
    while not done:
        valid, phi = action_features(env, obs, info)
        k = choose(phi)
        steps.append((phi, k))
        obs, reward, terminated, truncated, info = env.step(int(valid[k]))
        total, done = total + reward, terminated or truncated
    return total, steps


def scores(env, case_ids, choose, seed: int = 0) -> dict[str, float]:
    """``{case_id: return}`` of one episode per case."""
    return {c: play(env, c, seed, choose)[0] for c in case_ids}


def mean(values: dict[str, float]) -> float:
    return float(np.mean(list(values.values())))


def accuracy(correct: dict[str, float], leaky: set[str]) -> str:
    """``"all x %"`` and, when some cases name their target, ``"w/o target_in_records"``."""
    text = f"{100 * mean(correct):.1f} % of {len(correct)}"
    clean = [v for c, v in correct.items() if c not in leaky]
    if len(clean) < len(correct):
        text += (f" (w/o target_in_records: {100 * np.mean(clean):.1f} % of {len(clean)})"
                 if clean else " (every case is target_in_records)")
    return text


def main(argv: list[str] | None = None) -> dict:
    """Train, evaluate, plot; returns ``{"curve", "heldout_curve", "heldout", "theta",
    "png"}`` (``png`` is ``None`` without matplotlib)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=DATASETS, default="Demo")
    parser.add_argument("--episodes", type=int, default=1500, help="training episodes")
    parser.add_argument("--seed", type=int, default=0, help="split, sampling and env seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="learning-curve PNG (default runs/train_menu_policy_DATASET.png)")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.seed < 0:
        parser.error("--episodes must be >= 1 and --seed >= 0")
    try:
        env = gym.make(f"EGIP-{args.dataset}-Menu-v0", acquisition_rounds=ROUNDS).unwrapped
    except DatasetNotFoundError as err:
        parser.exit(2, f"error: {err}\n")
    cases = env.egip.pool.cases
    split = split_cases(cases, FRACTION, args.seed)
    leaky = {c.case_id for c in cases if c.flags.target_in_records}
    rng = np.random.default_rng(args.seed)
    theta, baseline, returns = np.zeros(2 * DIM + 2), 0.0, []
    checks = {round(args.episodes * (j + 1) / 10) for j in range(10)}
    heldout_curve = [(0, mean(scores(env, split.evaluation, greedy(theta))))]
    for episode in range(1, args.episodes + 1):
        case_id = split.construction[rng.integers(len(split.construction))]
        ret, steps = play(env, case_id, int(rng.integers(2**31)), sampled(theta, rng))
        theta = theta + LR * reinforce_gradient(theta, steps, ret, baseline)
        baseline += BASELINE_RATE * (ret - baseline)
        returns.append(ret)
        if episode in checks:
            heldout_curve.append((episode, mean(scores(env, split.evaluation, greedy(theta)))))
    block = max(1, args.episodes // 10)
    curve = [(i + block, float(np.mean(returns[i:i + block])))
             for i in range(0, args.episodes - block + 1, block)]

    trained = scores(env, split.evaluation, greedy(theta))
    runs = [scores(env, split.evaluation, uniform(np.random.default_rng(args.seed + s)), s)
            for s in range(5)]  # the random policy: mean of 5 seeded runs
    rand = {c: float(np.mean([r[c] for r in runs])) for c in split.evaluation}
    text_env = gym.make(f"EGIP-{args.dataset}-v0", acquisition_rounds=ROUNDS)
    doctor = ScriptedDoctor(n_questions=0, exam_budget=ROUNDS)
    scripted = {c: run_episode(text_env, doctor, case_id=c, seed=0)["reward"]
                for c in split.evaluation}
    result = {"curve": curve, "heldout_curve": heldout_curve, "theta": theta,
              "heldout": {"trained": trained, "random": rand, "scripted": scripted}}

    print(f"EGIP-{args.dataset}-Menu-v0, T={ROUNDS}: {len(split.construction)} construction"
          f" / {len(split.evaluation)} held-out cases, {args.episodes} episodes, "
          f"seed {args.seed}")
    print("training return (mean over blocks of", block, "episodes):",
          " ".join(f"{r:.2f}" for _, r in curve))
    print("held-out greedy accuracy during training:",
          " ".join(f"{e}:{a:.2f}" for e, a in heldout_curve))
    for name, correct in result["heldout"].items():
        print(f"held-out {name:>8}: {accuracy(correct, leaky)}")
    result["png"] = plot(args, curve, heldout_curve, rand, scripted)
    if result["png"]:
        print("learning curve:", result["png"])
    return result


def plot(args, curve, heldout_curve, rand, scripted) -> Path | None:
    """Write the learning curve as a PNG; ``None`` (nothing written) without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no learning-curve PNG written: matplotlib is not installed "
              "(pip install -e '.[plot]')", file=sys.stderr)
        return None
    out = args.out or Path("runs") / f"train_menu_policy_{args.dataset}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(*zip(*curve, strict=True), marker="o", label="training return (block mean)")
    ax.plot(*zip(*heldout_curve, strict=True), marker="s", label="held-out accuracy (greedy)")
    ax.axhline(mean(rand), color="gray", ls="--", label="held-out random")
    ax.axhline(mean(scripted), color="k", ls=":",
               label="held-out scripted")
    ax.set(xlabel="training episode", ylabel="return / accuracy", ylim=(-0.05, 1.05),
           title=f"REINFORCE on EGIP-{args.dataset}-Menu-v0 (T={ROUNDS}, seed {args.seed})")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


if __name__ == "__main__":
    main()
