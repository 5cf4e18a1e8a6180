"""The acquired-evidence interface E(s0, K, h_T) (EGIP section 3.3, Eq. 4).

e_T holds the objective s0 (``S0``), the labels K and the Patient and Measurement
observations of h_T (``O1``, ``O2``, ...); doctor and interface events are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clinenv.protocol.doctor_text import indent_lines, one_line
from clinenv.protocol.history import Event, MeasurementEvent, PatientEvent

#: Terminal instructions shared by every strategy (EGIP appendix A.2).
TERMINAL_INSTRUCTIONS = (
    "Base your answer only on the acquired evidence above. A finding that is not recorded "
    "or not available is unknown, not normal. Reply with exactly one line: "
    "DIAGNOSIS READY: <single diagnosis>"
)
#: The tool view's terminal instructions (``ProtocolConfig.action_format="tools"``).
TOOL_TERMINAL_INSTRUCTIONS = (
    "Base your answer only on the acquired evidence above. A finding that is not recorded "
    "or not available is unknown, not normal. Call `submit_diagnosis` with your final "
    "answer: a single diagnosis."
)
#: Added when the case has candidate labels K.
CANDIDATE_INSTRUCTIONS = (
    "Candidate labels are hypotheses, not findings; you may answer with a candidate's "
    "letter or its text."
)
#: Heading of the candidate block, in the doctor view and in e_T alike.
CANDIDATES_HEADING = "# Candidate labels (hypotheses, not findings)"


@dataclass(frozen=True, slots=True)
class Observation:
    """One acquired observation.

    Attributes:
        obs_id: ``O<n>`` in acquisition order.
        source: ``"Patient"`` or ``"Measurement"``.
        turn: the round it was acquired in.
        context: the question asked, or the examination requested.
        content: the patient's reply, or the stored result text (``None`` if none).
        availability: ``"stated"`` for patient replies; ``"recorded"``, ``"unavailable"``,
            ``"not_recorded"`` or ``"generated"`` (a measurement agent's text) for
            measurements.
        exam_id: public exam id for measurements, else ``None``.
    """

    obs_id: str
    source: Literal["Patient", "Measurement"]
    turn: int
    context: str
    content: str | None
    availability: str
    exam_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"obs_id", "source", "turn", "context", "content",
        "availability", "exam_id"}`` (run logs, ``info["new_observations"]``)."""
        return {"obs_id": self.obs_id, "source": self.source, "turn": self.turn,
                "context": self.context, "content": self.content,
                "availability": self.availability, "exam_id": self.exam_id}


@dataclass(frozen=True, slots=True)
class EvidenceBundle:
    """e_T = E(s0, K, h_T).

    Attributes:
        objective: s0.
        candidates: K, or ``None``.
        observations: ordered Patient and Measurement observations.
    """

    objective: str
    candidates: tuple[str, ...] | None
    observations: tuple[Observation, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for run logs."""
        return {
            "objective": self.objective,
            "candidates": None if self.candidates is None else list(self.candidates),
            "observations": [o.to_dict() for o in self.observations],
        }

    def without_observations(self) -> EvidenceBundle:
        """Terminal-input ablation: the same bundle with no observations (EGIP Table 3B)."""
        return EvidenceBundle(self.objective, self.candidates, ())

    def without_candidates(self) -> EvidenceBundle:
        """Terminal-input ablation: the same bundle with no candidate labels."""
        return EvidenceBundle(self.objective, None, self.observations)


def option_letter(index: int) -> str:
    """``0 -> "A"``, ``1 -> "B"`` ...; beyond Z: ``"AA"``-style two letters."""
    if index < 26:
        return chr(ord("A") + index)
    return option_letter(index // 26 - 1) + chr(ord("A") + index % 26)


def observation_of(event: Event, number: int) -> Observation | None:
    """The observation ``O<number>`` of a Patient or Measurement event; ``None`` for
    Doctor and Interface events, which are not observations (EGIP 3.3)."""
    if isinstance(event, PatientEvent):
        return Observation(f"O{number}", "Patient", event.turn, event.question_context,
                           event.reply, "stated")
    if isinstance(event, MeasurementEvent):
        return Observation(f"O{number}", "Measurement", event.turn, event.name,
                           event.recorded_value, event.result_availability, event.exam_id)
    return None


def build_evidence(
    objective: str, candidates: tuple[str, ...] | None, history: Iterable[Event]
) -> EvidenceBundle:
    """E(s0, K, h_T): keep Patient and Measurement events, in order, as observations."""
    observations: list[Observation] = []
    for event in history:
        observation = observation_of(event, len(observations) + 1)
        if observation is not None:
            observations.append(observation)
    return EvidenceBundle(objective, candidates, tuple(observations))


class ObservationLog:
    """The observations of one append-only history h_t, extracted incrementally.

    :meth:`read` takes the history each time and extracts only the events appended since
    the last call, so an episode reads each event once instead of once per step. The
    observations are those of :func:`build_evidence` (same ids, same order). A history
    shorter than the one last read (a different history) is read again from the start.
    """

    __slots__ = ("_observations", "_seen")

    def __init__(self) -> None:
        self._observations: list[Observation] = []
        self._seen = 0

    def read(self, history: Sequence[Event]) -> tuple[Observation, ...]:
        """The observations of ``history`` (a list that only grows between calls)."""
        if len(history) < self._seen:
            self._observations, self._seen = [], 0
        observations = self._observations
        for event in history[self._seen:]:
            observation = observation_of(event, len(observations) + 1)
            if observation is not None:
                observations.append(observation)
        self._seen = len(history)
        return tuple(observations)


def render_candidates(candidates) -> list[str]:
    """The candidate block: heading and ``A. label`` lines (empty without K)."""
    if not candidates:
        return []
    return [CANDIDATES_HEADING] + [f"{option_letter(i)}. {c}" for i, c in enumerate(candidates)]


def render_evidence(bundle: EvidenceBundle, *, instructions: bool = True,
                    action_format: str = "text") -> str:
    """The evidence interface as text: objective, candidates, observations, instructions
    (:data:`TERMINAL_INSTRUCTIONS`, or :data:`TOOL_TERMINAL_INSTRUCTIONS` with
    ``action_format="tools"``)."""
    lines = ["# Objective (S0)", bundle.objective]
    if bundle.candidates:
        lines += ["", *render_candidates(bundle.candidates)]
    lines += ["", "# Acquired observations"]
    if not bundle.observations:
        lines.append("(none)")
    for o in bundle.observations:
        if o.source == "Patient":
            lines.append(f"[{o.obs_id}] Patient, asked \"{one_line(o.context)}\": "
                         + indent_lines(o.content or ""))
        elif o.availability == "not_recorded":
            lines.append(f"[{o.obs_id}] Measurement {one_line(o.context)}: "
                         "not recorded (unknown)")
        elif o.availability == "unavailable":
            lines.append(f"[{o.obs_id}] Measurement {o.exam_id} {o.context}: "
                         "result not available (unknown)")
        elif o.availability == "generated":  # a measurement agent's answer, not a lookup
            body = (o.content or "").replace("\n", "\n    ")
            lines.append(f"[{o.obs_id}] Measurement {o.exam_id or '-'} {one_line(o.context)} "
                         f"(reported by the measurement agent):\n    {body}")
        else:
            body = (o.content or "").replace("\n", "\n    ")
            lines.append(f"[{o.obs_id}] Measurement {o.exam_id} {o.context}:\n    {body}")
    if instructions:
        lines += ["", "# Instructions", TOOL_TERMINAL_INSTRUCTIONS
                  if action_format == "tools" else TERMINAL_INSTRUCTIONS]
        if bundle.candidates:
            lines.append(CANDIDATE_INSTRUCTIONS)
    return "\n".join(lines)
