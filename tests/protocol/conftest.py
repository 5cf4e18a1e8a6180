"""Fixtures of the protocol tests: one hand-built EGIP case (``gbs_records``,
``gbs_case``) and ``play``, which routes one doctor utterance through a runtime."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clinenv.cases import Case, Records, Target
from clinenv.protocol.runtime import EGIPRuntime


@pytest.fixture
def gbs_records() -> Records:
    """Records of a Guillain-Barre case: two exam sections and six tests (one group of two
    imaging studies, a pending leaf, a pending test, an empty one, a bare string)."""
    return Records(
        physical_exam={
            "Neurological_Examination": {"Reflexes": "Absent ankle reflexes"},
            "Vital_Signs": {"Temperature": "37.2 °C", "Heart_Rate": "88 bpm"},
        },
        tests={
            "Imaging": {
                "MRI_Brain": {"Findings": "Normal"},
                "MRI_Spine": {"Findings": "Nerve root enhancement"},
            },
            "Complete_Blood_Count": {"WBC": "7,000/mm3", "Hemoglobin": "13 g/dL"},
            "Lumbar_Puncture": {"Protein": "Elevated", "Cells": "Pending"},
            "Nerve_Conduction_Studies": "Pending",
            "Special_Tests": {},
            "ESR": "12 mm/h",
        },
    )


@pytest.fixture
def gbs_case(gbs_records) -> Case:
    """The case of ``gbs_records``; its patient history names the target."""
    return Case(
        case_id="t-1", dataset="test", objective="Evaluate the patient with leg weakness.",
        patient={"Demographics": "40-year-old man",
                 "History": "Weakness began in my feet. I was told it may be Guillain-Barre "
                            "syndrome. It is getting worse."},
        records=gbs_records, target=Target(text="Guillain-Barre syndrome"),
    )


def _play(runtime: EGIPRuntime, text: str, reply: str = "ok") -> None:
    routing = runtime.route(text)
    if routing.to == "patient":
        runtime.answer_patient(routing, reply)
    elif routing.to == "examiner":
        runtime.answer_exam(routing)


@pytest.fixture
def play() -> Callable[..., None]:
    """``play(runtime, text, reply="ok")``: route ``text``; a question gets ``reply`` from
    the patient, a request the examiner's answer."""
    return _play
