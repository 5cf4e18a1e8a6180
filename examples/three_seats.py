"""Three policies in three seats: the EGIP episode as a PettingZoo game.

The doctor (``doctor_0``) is the scripted doctor; the patient (``patient_0``) and the
examiner (``examiner_0``) are scripted seat policies that see only their own role
views: the patient P and the dialogue, the examiner the requested record. The doctor's
action picks who speaks next; the loop is PettingZoo's ``agent_iter`` / ``last`` /
``step``. When the patient was asked something other than the doctor's utterance, the
script prints it first: under the EGIP default a diagnosis given before the last round is
replaced by a fixed clarification question (``premature_diagnosis="clarify"``). Every
seat could be an LLM or a policy under training instead.

Run from the repository root (offline; the demo cases ship with clinenv)::

    python examples/three_seats.py [CASE_ID]      # default: demo-01
"""

from __future__ import annotations

import sys

from clinenv.agents import ScriptedDoctor, ScriptedExaminer, ScriptedPatient
from clinenv.multiagent import egip_v0


def main(case_id: str = "demo-01", seed: int = 0) -> int:
    env = egip_v0.env(dataset="demo", patient="external", examiner="external")
    policies = {"doctor_0": ScriptedDoctor(), "patient_0": ScriptedPatient(),
                "examiner_0": ScriptedExaminer()}
    env.reset(seed=seed, options={"case_id": case_id})
    for policy in policies.values():
        policy.reset(seed=seed)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    final: dict = {}
    last_doctor_action = ""
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        returns[agent] += reward
        if terminated or truncated:
            final = final or (info if agent == "doctor_0" else {})
            env.step(None)
            continue
        if agent == "patient_0":  # the protocol may have replaced the doctor's utterance
            # (a premature diagnosis becomes a clarification question): show what was asked
            asked = observation["text"].rpartition("# Doctor's question\n")[2].strip()
            if asked != last_doctor_action.strip():
                print(f"{'(asked)':>10}: {asked}")
        action = policies[agent].act(observation, info)
        if agent == "doctor_0":
            last_doctor_action = action
        first_line = action.splitlines()[0] if action else ""
        more = " ..." if "\n" in action else ""
        print(f"{agent:>10}: {first_line}{more}")
        env.step(action)
    env.close()
    print(f"case {case_id}: answer {final['answer']!r}, verdict {final['verdict']}, "
          f"returns " + ", ".join(f"{a} {r:g}" for a, r in returns.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:2]))
