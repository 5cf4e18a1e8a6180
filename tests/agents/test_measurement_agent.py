"""The examiner seat (LLMMeasurementAgent): its reply cut to its own turn at chat-template
tokens and other speakers' labels, and the stop strings it sends.

Expected texts are written out by hand from the raw replies, never computed with
:func:`clinenv.protocol.turns.cut_turn`.
"""

from __future__ import annotations

import pytest

from clinenv.agents.measurement_agent import NO_REPLY, LLMMeasurementAgent
from clinenv.llm import ScriptedChatModel
from clinenv.protocol.measurement_view import MeasurementView


def measurement_view():
    return MeasurementView(records_text="Hemoglobin: 9.1 g/dL", records={},
                           request="REQUEST TEST: CBC")


@pytest.mark.parametrize(("raw", "answer", "flags"), [
    ("RESULTS: Hemoglobin 9.1 g/dL<|im_end|>\n<|im_start|>user\nDoctor: And the CRP?",
     "RESULTS: Hemoglobin 9.1 g/dL", ["wrote_past_turn"]),
    ("Examiner: RESULTS: Hemoglobin 9.1 g/dL\nPatient: I feel faint.",
     "RESULTS: Hemoglobin 9.1 g/dL", ["wrote_past_turn"]),
    ("RESULTS: NORMAL READINGS<|eot_id|><|start_header_id|>user<|end_header_id|>",
     "RESULTS: NORMAL READINGS", ["wrote_past_turn"]),
    ("<|im_end|>Doctor: anything?", NO_REPLY, ["wrote_past_turn"]),
    ("RESULTS: Hemoglobin 9.1 g/dL", "RESULTS: Hemoglobin 9.1 g/dL", []),
])
def test_llm_measurement_agent_cuts_its_reply_to_its_turn(raw, answer, flags):
    model = ScriptedChatModel([raw])
    agent = LLMMeasurementAgent(model)
    assert agent.measure(measurement_view()) == answer
    (record,) = agent.drain_calls()
    assert record["flags"] == flags
    assert model.calls[0][1].stop == ("\nDoctor:", "\nPatient:", "<|im_end|>", "<|eot_id|>")
