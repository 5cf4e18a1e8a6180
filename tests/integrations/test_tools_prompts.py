"""The trainable adapters' text-protocol prompt says what their environment does.

The verifiers and SkyRL adapters step :class:`clinenv.integrations.tools.ToolEpisode`
(``premature_diagnosis="decide"``) with the doctor's text replies and instruct it with
``TEXT_SYSTEM_PROMPT``; the evaluated Direct/Vote/Full doctors run EGIP's default
(``"clarify"``) under ``EGIP_DOCTOR_SYSTEM``. Each prompt is checked against an episode
of its own environment (the adapters' own use of the constant is checked in
``tests/integrations/``, with their packages).
"""

from __future__ import annotations

import gymnasium as gym

import clinenv  # noqa: F401  (registers the ids)
from clinenv.agents.prompts import EGIP_DOCTOR_SYSTEM
from clinenv.integrations.tools import FINAL_RESULT, TEXT_SYSTEM_PROMPT, ToolEpisode

ENV_ID = "EGIP-Demo-v0"
EARLY = ("- DIAGNOSIS READY: <diagnosis> once you have enough evidence. This ends evidence "
         "gathering early: you are then shown the acquired evidence and asked for your "
         "final answer, as you are after the last round.")


def test_the_adapters_prompt_says_an_early_diagnosis_ends_acquisition():
    assert EARLY in TEXT_SYSTEM_PROMPT.splitlines()
    assert "Do not state a diagnosis" not in TEXT_SYSTEM_PROMPT
    episode = ToolEpisode(ENV_ID, action_format="text")  # the text adapters' wording
    episode.reset("demo-03", 0)
    episode.step_text("Any weakness in the legs?")
    shown = episode.step_text("DIAGNOSIS READY: Botulism")  # round 2 of 19
    # as the prompt says: acquisition is over, the acquired evidence and the request
    assert episode.env.runtime.phase == "decide" and not episode.done
    assert shown.startswith("Interface: Acquisition ended early at your request")
    assert "# Acquired observations\n[O1] Patient, asked \"Any weakness in the legs?\"" \
        in shown
    assert shown.rstrip().endswith("DIAGNOSIS READY: <single diagnosis>")
    assert episode.reward == 0.0  # the early text is not scored
    # ... and the answer to that request is scored and ends the consultation
    assert episode.step_text("DIAGNOSIS READY: Guillain-Barre syndrome") == FINAL_RESULT
    assert episode.done and episode.reward == 1.0


def test_the_evaluated_doctors_prompt_matches_the_default_environment():
    assert ("Do not state a diagnosis yet: you will be asked for it once the "
            "evidence-gathering rounds are over.") in EGIP_DOCTOR_SYSTEM
    env = gym.make(ENV_ID, observation_format="delta").unwrapped
    env.reset(seed=0, options={"case_id": "demo-03"})
    obs, reward, terminated, _, _ = env.step("DIAGNOSIS READY: Botulism")
    # "clarify": no early end; a fixed clarification question, the next round follows
    assert env.runtime.phase == "acquire" and not terminated and reward == 0.0
    assert obs["text"].startswith("Interface: A diagnosis is given only in the decision "
                                  "phase")
    assert "Round 2 of 19" in obs["text"]
