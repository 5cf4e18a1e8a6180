"""Agents that fill the seats of an episode: doctors, patient simulators, examiners.

Installed as ``clinenv.agents``; its public names load on first use.
"""

from clinenv.lazy import lazy_exports

#: Public names -> the module that defines them, imported on first use.
_EXPORTS = {
    "DoctorPolicy": "clinenv.agents.base",
    "ScriptedDoctor": "clinenv.agents.scripted_doctor",
    "LLMDoctor": "clinenv.agents.llm_doctor",
    "LLMDoctorConfig": "clinenv.agents.llm_doctor",
    "TeacherDoctor": "clinenv.agents.teacher_doctor",
    "ScriptedPatient": "clinenv.agents.scripted_patient",
    "ScriptedExaminer": "clinenv.agents.scripted_examiner",
    "LLMPatient": "clinenv.agents.llm_patient",
    "CachedPatient": "clinenv.agents.patient_cache",
    "LLMMeasurementAgent": "clinenv.agents.measurement_agent",
    "LLMJudge": "clinenv.agents.judge",
    "make_strategy": "clinenv.agents.terminal",
    "Direct": "clinenv.agents.terminal_direct",
    "Vote": "clinenv.agents.terminal_vote",
    "Full": "clinenv.agents.terminal_full",
    "Discussion": "clinenv.agents.terminal_discussion",
    "MedAgentSimDiscussion": "clinenv.agents.terminal_medagentsim",
    "candidate_scores": "clinenv.agents.evidence_reading",
    "evidence_text": "clinenv.agents.evidence_reading",
    "named_diagnosis": "clinenv.agents.evidence_reading",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
