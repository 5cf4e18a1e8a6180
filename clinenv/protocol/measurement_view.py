"""The native measurement agent's view: every examination record of the case, at once.

What AgentClinic's measurement agent holds (its script, lines 533-562): all the exam and
test data of the case, without mutating it; the opposite of record lookup O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clinenv.cases import Case, Records
from clinenv.protocol.catalog import Catalog

#: Speakers of a measurement agent's history entries.
Speaker = Literal["doctor", "measurement", "patient"]
#: Metadata key that holds a NEJM record's raw ``physical_exams`` text
#: (:mod:`clinenv.datasets.nejm`).
NEJM_EXAMS_KEY = "physical_exams_text"


def exam_information(case: Case) -> str:
    """All examination data of ``case`` as the native measurement agent holds it.

    Args:
        case: any case; read only.

    Returns:
        NEJM cases (``metadata["physical_exams_text"]`` present): that text, stripped
        (``""`` when the record had none). Other cases: ``repr`` of a new dict holding
        the physical-examination sections in source order and then ``"tests"``: the
        test-results tree (a physical-examination section named ``tests`` is replaced,
        as in AgentClinic).
    """
    text = case.metadata.get(NEJM_EXAMS_KEY)
    if isinstance(text, str):
        return text.strip()
    data = dict(case.records.physical_exam)
    data["tests"] = case.records.tests
    return repr(data)


@dataclass(frozen=True, slots=True)
class MeasurementView:
    """What a measurement agent sees when answering one request.

    Attributes:
        records_text: :func:`exam_information` of the case (all PE and test data).
        records: the structured records M of the case (deterministic readers match
            against them).
        request: the request as the doctor wrote it: the whole utterance in the native
            protocols, the validated examination name(s) in the EGIP "native measurement
            access" ablation.
        history: earlier entries ``(speaker, text)``, oldest first; ``speaker`` is
            ``"doctor"`` (an earlier request), ``"measurement"`` (the agent's answer) or
            ``"patient"`` (a patient reply, shared in the native protocols).
        normal_readings: the agent reports ``NORMAL READINGS`` for requests its data do
            not hold (AgentClinic's rule); ``False``: it says they are not recorded.
        catalog: the case's catalog A when the runtime has it (deterministic readers
            iterate it instead of rebuilding it from ``records`` per request); ``None``
            for views built by hand.
    """

    records_text: str
    records: Records
    request: str
    history: tuple[tuple[Speaker, str], ...] = ()
    normal_readings: bool = True
    catalog: Catalog | None = None
