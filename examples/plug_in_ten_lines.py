"""A doctor policy in ten lines of code, plugged into an EGIP environment.

Any object with ``name``, ``reset(seed=None)`` and ``act(observation, info) -> str`` is a
doctor (:class:`clinenv.agents.base.DoctorPolicy`). The one below orders every imaging
study of the result-blinded menu (``info["menu"]``), then names what a returned report
calls "consistent with ..." (or abstains with "Undetermined", which is unscored). With
``premature_diagnosis="decide"`` its first ``DIAGNOSIS READY`` ends acquisition, and it
answers again from the evidence interface e_T, which is scored. On demo-13 the
deterministic scorer rejects "acute pulmonary embolism" for "Pulmonary embolism": it
forgives formatting, never an added qualifier (an LLM judge, ``judge="llm"``, decides
such cases by meaning).

Run from the repository root (offline; the demo cases ship with clinenv)::

    python examples/plug_in_ten_lines.py
"""

import gymnasium as gym

import clinenv  # noqa: F401  (registers the EGIP environment ids)
from clinenv.runs import run_episode


class ImagingFirstDoctor:
    name = "imaging-first"

    def reset(self, seed=None):
        pass

    def act(self, observation, info):
        imaging = [entry["id"] for entry in info["menu"] if "Imaging" in entry["name"]]
        if info["phase"] == "acquire" and imaging:
            return f"REQUEST TEST: {imaging[0]}"
        found = observation["text"].partition("consistent with ")[2].split(";")[0]
        return f"DIAGNOSIS READY: {found.split('.')[0].strip() or 'Undetermined'}"


if __name__ == "__main__":
    env = gym.make("EGIP-Demo-v0", premature_diagnosis="decide")
    for case_id in ("demo-01", "demo-05", "demo-13", "demo-03"):
        record = run_episode(env, ImagingFirstDoctor(), case_id=case_id, seed=0)
        print(f"{case_id}: {record['n_exams_requested']} exams, answer {record['answer']!r} "
              f"-> {record['verdict']} (target: {record['target']})")
