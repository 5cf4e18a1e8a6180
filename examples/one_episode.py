"""One EGIP episode with the scripted doctor, end to end.

Shows the Gymnasium loop a doctor policy lives in: ``gym.make("EGIP-Demo-v0")``, a
seeded ``reset`` pinned to one case, ``doctor.act`` -> ``env.step`` until the episode ends.
It prints the doctor's actions, the doctor's final view — the evidence interface e_T
(objective, candidate labels, the ordered patient and measurement observations) that the
terminal answer is given from — and the verdict.

Run from the repository root (offline; the demo cases ship with clinenv)::

    python examples/one_episode.py [CASE_ID]      # default: demo-01
"""

from __future__ import annotations

import sys

import gymnasium as gym

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv.agents import ScriptedDoctor


def main(case_id: str = "demo-01", seed: int = 0) -> int:
    env = gym.make("EGIP-Demo-v0")
    doctor = ScriptedDoctor()
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    final_view = ""
    while True:
        if info["phase"] == "decide":
            final_view = obs["text"]  # the evidence interface e_T
        action = doctor.act(obs, info)
        print(f"round {info['turn'] + 1:2d} [{info['phase']}] doctor: {action}")
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    print("\n===== doctor's final view (evidence interface) =====")
    print(final_view)
    print("=====")
    print(f"case {case_id}: answer {info['answer']!r}, verdict {info['verdict']}, "
          f"reward {reward}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:2]))
