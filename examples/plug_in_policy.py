"""Plug your own doctor policy into clinenv and compare it with the scripted baseline.

A doctor policy is any object with ``name``, ``reset(seed=None)`` and
``act(observation, info) -> str`` (:class:`clinenv.agents.base.DoctorPolicy`). The one
below asks one question, requests the first two examinations of the menu
(``info["menu"]``), then answers from the acquired observations of the evidence interface
(the ``# Acquired observations`` section, never the candidate list itself).

The environment is made with ``premature_diagnosis="decide"``: the policy's first
``DIAGNOSIS READY`` ends acquisition (under the EGIP default it would be replaced by a
clarification question), and the answer given from the evidence interface is scored.
:func:`clinenv.runs.logged.run_episode` runs it and the scripted doctor over a few demo
cases; the script prints each verdict and both accuracies.

Run from the repository root (offline)::

    python examples/plug_in_policy.py
"""

from __future__ import annotations

import re

import gymnasium as gym

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv.agents import ScriptedDoctor
from clinenv.runs import run_episode


class TwoTestDoctor:
    """Ask one question, request the first two menu entries, then answer."""

    name = "two-test-doctor"

    def reset(self, seed=None):
        self.plan = None

    def act(self, observation, info):
        if self.plan is None:  # first step: fix the plan from the displayed menu
            self.plan = ["What brings you in today?"]
            self.plan += [f"REQUEST TEST: {entry['id']}" for entry in info["menu"][:2]]
        if self.plan and info["phase"] == "acquire":
            return self.plan.pop(0)
        evidence = observation["text"].partition("# Acquired observations")[2].lower()
        named = re.search(r"consistent with (?:an? )?([^.;,\n]+)", evidence)
        options = info["candidates"] or [named.group(1) if named else "unknown"]
        overlap = [sum(w in evidence for w in o.lower().split()) for o in options]
        return f"DIAGNOSIS READY: {options[overlap.index(max(overlap))]}"


def main() -> int:
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    cases = ["demo-01", "demo-05", "demo-11", "demo-13", "demo-15", "demo-17"]
    for doctor in (TwoTestDoctor(), ScriptedDoctor()):
        correct = 0
        for seed, case_id in enumerate(cases):
            record = run_episode(env, doctor, case_id=case_id, seed=seed)
            correct += bool(record["correct"])
            print(f"  {doctor.name} on {case_id}: {record['turns']} turns, "
                  f"{record['n_exams_requested']} exams, answer {record['answer']!r} -> "
                  f"{record['verdict']}")
        print(f"accuracy of {doctor.name}: {correct}/{len(cases)} = "
              f"{100 * correct / len(cases):.1f} %")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
