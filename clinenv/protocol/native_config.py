"""Settings of the native AgentClinic and MedAgentSim protocols, in one commented place.

Defaults reproduce the published loops ("Native" rows of EGIP Table 1); each reproduced
defect is a named setting (docs/protocols.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clinenv.config_model import ConfigModel

#: The doctor's whole starting information on NEJM cases in AgentClinic (weakness W6).
NEJM_NATIVE_QUESTION = "What is the most likely diagnosis?"


class NativeConfig(ConfigModel):
    """Native protocol settings.

    Attributes:
        max_turns: doctor utterances per episode (AgentClinic: 20). Test requests use
            turns too. >= 2.
        final_turn: ``"notice"`` (AgentClinic): the last turn's observation carries the
            final-turn notice and an utterance without ``DIAGNOSIS READY`` ends the
            episode unfinished; ``"discussion"`` (MedAgentSim): the last turn is a
            decision phase on the transcript plus a discussion instruction.
        final_notice: append the final-turn notice to the last reply (``"notice"`` mode).
        strict_markers: case-sensitive ``DIAGNOSIS READY`` / ``REQUEST TEST`` substrings
            (AgentClinic, weakness W9); ``False`` uses the lenient EGIP parser (case and
            markdown tolerant). The diagnosis marker is checked first either way.
        strict_yes: with ``judge="llm"``, only a judge reply that is exactly ``yes``
            (lower-cased) is correct (AgentClinic's moderator rule); every other
            verdict is wrong. ``False`` uses the lenient judge, whose unparsed replies
            stay unscored.
        unfinished: the verdict of an episode that ends without a diagnosis marker:
            ``"wrong"`` (AgentClinic counts it in the denominator as wrong, W10) or
            ``"unscored"``. The record says why (``end_reason``).
        normal_readings: the measurement agent reports ``NORMAL READINGS`` for requests
            its data do not hold (AgentClinic, weakness W1); ``False`` makes it say "not
            recorded".
        patient_sees_results: the patient's history also receives every measurement
            result (AgentClinic, weakness W5).
        measurement_sees_patient: the measurement agent's history also receives every
            patient reply (AgentClinic).
        patient_withholds_target: remove sentences that name the target from the
            patient's facts (EGIP's rule); AgentClinic's patient sees all of them.
        nejm_question: the doctor's start on NEJM cases: ``"fixed"``
            (:data:`NEJM_NATIVE_QUESTION`, AgentClinic) or ``"final"`` (the vignette's
            own final question without its options; fixes weakness W8).
        discard_image_reply: text-only NEJM runs, as AgentClinic's (W7); only ``True``
            is supported.
        nejm_ext_images: only ``False`` is supported (AgentClinic sends none, W7).
        decision_objective: ``final_turn="discussion"`` only: open the decision
            observation with ``# Task``; ``False`` as MedAgentSim's discussion.
        max_action_chars: the visible utterance (reasoning removed) is cut to this
            length.
        show_menu: always ``False``: the native doctor gets no examination menu (W2).
    """


    max_turns: int = Field(default=20, ge=2, le=1000)
    final_turn: Literal["notice", "discussion"] = "notice"
    final_notice: bool = True
    strict_markers: bool = True
    strict_yes: bool = True
    unfinished: Literal["wrong", "unscored"] = "wrong"
    normal_readings: bool = True
    patient_sees_results: bool = True
    measurement_sees_patient: bool = True
    patient_withholds_target: bool = False
    nejm_question: Literal["fixed", "final"] = "fixed"
    discard_image_reply: Literal[True] = True
    nejm_ext_images: Literal[False] = False
    decision_objective: bool = False
    max_action_chars: int = Field(default=4096, ge=16)
    show_menu: Literal[False] = False

    @property
    def acquisition_rounds(self) -> int:
        """Doctor turns before a decision phase: ``max_turns`` in ``"notice"`` mode (the
        diagnosis comes within them), ``max_turns - 1`` in ``"discussion"`` mode (the
        last turn is the discussion). Read by tools that state a question budget."""
        return self.max_turns - (self.final_turn == "discussion")
