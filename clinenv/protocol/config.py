"""Protocol settings, in one commented place. Defaults are the EGIP paper's.

Every knob is an environment kwarg too (``gym.make("EGIP-MedQA-v0", menu_limit=10)``).
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, field_validator

from clinenv.config_model import ConfigModel

#: Fixed clarification question that replaces a repeated valid test request (EGIP 3.2).
REPEAT_CLARIFICATION = (
    "Is there anything else about how you have been feeling that you have not told me yet?"
)
#: Fixed clarification question that replaces a premature diagnosis marker (EGIP 3.2).
PREMATURE_CLARIFICATION = (
    "Before we finish, is there anything else about your symptoms or history I should know?"
)


class ProtocolConfig(ConfigModel):
    """EGIP protocol settings.

    Attributes:
        acquisition_rounds: T, doctor rounds of evidence acquisition before the decision
            (EGIP 4.1: T = 19, then terminal prediction; 20 turns in all). >= 1.
        menu_limit: how many menu entries are displayed (all stay requestable); ``None``
            shows all.
        show_menu: ``False`` is the "w/o menu" ablation (EGIP Table 3): B is removed from
            the doctor view, validation against A is unchanged.
        clarify_repeats: replace a repeated valid test request by
            :data:`REPEAT_CLARIFICATION` (EGIP default) instead of interface feedback.
        premature_diagnosis: ``"clarify"`` (EGIP default) replaces a diagnosis marker
            during acquisition by :data:`PREMATURE_CLARIFICATION`; ``"decide"`` ends
            acquisition early and enters the decision phase, where the doctor answers
            again on the evidence interface e_T (the early marker's text is not scored).
        strict_markers: AgentClinic's case-sensitive marker matching (see
            :mod:`clinenv.protocol.parser`).
        exam_accept: fuzzy score (0-100) for a unique test-name match.
        exam_suggest: fuzzy score (0-100) from which a non-matching name is "unclear"
            (feedback lists the closest names instead of answering "not recorded");
            inactive without a menu, so that feedback never reveals unlisted names.
        max_action_chars: the visible utterance (after reasoning blocks are removed) is
            cut to this length; the cut is noted in the history.
        target_in_menu: cases whose menu names the target: ``"keep"`` (default, the
            paper's), ``"exclude"`` (left out) or ``"neutral"`` (group names reworded).
        icd_map: path of a user-supplied ICD mapping file (``clinenv.icd_map/1``,
            :mod:`clinenv.icd_map`); the terminal answer is then scored through
            it (the ICD rule of :mod:`clinenv.scoring`). ``None`` (default): off.
        history_review: enable CDEG's ``REVIEW HISTORY`` action, the record request of
            the case's clinical history (:mod:`clinenv.protocol.extra_actions`; on in the
            ``cdeg-30`` preset).
        knowledge_source: path of a user-supplied knowledge source
            (``clinenv.knowledge/1``); enables ``RETRIEVE KNOWLEDGE: <query>``, answered
            from that file only. ``None`` (default): off.
        action_format: the wording of the doctor's instructions: ``"text"`` (default,
            ``REQUEST TEST:`` / ``DIAGNOSIS READY:``) or ``"tools"`` (the tool view's
            function names); the parser reads the same actions either way.
        tool_results: ``"full"`` (default): every delta observation repeats the menu and
            the instructions; ``"compact"``: a round's delta is its result and
            "Round k of T." only.
    """


    acquisition_rounds: int = Field(default=19, ge=1, le=1000)
    menu_limit: int | None = Field(default=25, ge=0)
    show_menu: bool = True
    clarify_repeats: bool = True
    premature_diagnosis: Literal["clarify", "decide"] = "clarify"
    strict_markers: bool = False
    exam_accept: float = Field(default=88.0, ge=0, le=100)
    exam_suggest: float = Field(default=75.0, ge=0, le=100)
    max_action_chars: int = Field(default=4096, ge=16)
    target_in_menu: Literal["keep", "exclude", "neutral"] = "keep"
    icd_map: str | None = None
    history_review: bool = False
    knowledge_source: str | None = None
    action_format: Literal["text", "tools"] = "text"
    tool_results: Literal["full", "compact"] = "full"

    @field_validator("icd_map", "knowledge_source", mode="before")
    @classmethod
    def _path_text(cls, value: object) -> object:
        """A path object (``pathlib.Path``) is given as its text."""
        return os.fspath(value) if isinstance(value, os.PathLike) else value
