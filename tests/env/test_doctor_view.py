"""``info["new_observations"]``: every observation of e_T reported exactly once, on the
step that acquired it (policy wrappers such as CDEG build their evidence state S_t from
it; CDEG "Evidence-State Intervention")."""

import pytest

from clinenv.agents.scripted_doctor import ScriptedDoctor
from clinenv.env import EGIPEnv


def _play(env, doctor, case_id, seed):
    obs, info = env.reset(seed=seed, options={"case_id": case_id})
    doctor.reset(seed=seed)
    assert info["new_observations"] == []
    reported, done = [], False
    while not done:
        obs, _, done, _, info = env.step(doctor.act(obs, info))
        for o in info["new_observations"]:
            # reported on the step that acquired it: its round is the current one
            assert o["turn"] == info["turn"]
        reported += info["new_observations"]
    assert info["phase"] == "done" and info["new_observations"] == []
    return reported, env.unwrapped.episode_record()["evidence"]["observations"]


@pytest.mark.parametrize("case_id", ["demo-01", "demo-07", "demo-12"])
@pytest.mark.parametrize("rounds", [19, 4])
def test_new_observations_cover_the_evidence_once(case_id, rounds):
    """Concatenated per-step reports equal e_T's observations, in order — including the
    last round, whose observations are followed by the end-of-acquisition event."""
    env = EGIPEnv("demo", acquisition_rounds=rounds)
    reported, evidence = _play(env, ScriptedDoctor(exploration=0.3), case_id, seed=5)
    assert evidence, "the scripted doctor acquires evidence on every demo case"
    assert reported == evidence
    assert evidence[-1]["turn"] == rounds  # the final round acquired something


def test_interface_feedback_reports_nothing():
    env = EGIPEnv("demo")
    env.reset(seed=0, options={"case_id": "demo-01"})
    _, _, _, _, info = env.step("")  # empty text: interface feedback only
    assert info["action_kind"] is not None
    assert info["new_observations"] == []
    _, _, _, _, info = env.step("What brings you in today?")
    assert [o["source"] for o in info["new_observations"]] == ["Patient"]
    assert info["new_observations"][0]["obs_id"] == "O1"
    # an unrecorded test is an observation ("not recorded", never "normal")
    _, _, _, _, info = env.step("REQUEST TEST: Serum unobtainium level")
    assert [(o["obs_id"], o["availability"]) for o in info["new_observations"]] == [
        ("O2", "not_recorded")]
