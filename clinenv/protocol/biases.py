"""AgentClinic's bias conditions, one text per seat and name, in this project's words.

After AgentClinic's ``generate_bias()`` (commit b6570ed); the sources and names
(:data:`PATIENT_BIASES`, :data:`DOCTOR_BIASES`) are in docs/protocols.md.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["BIAS_TEXTS", "CANCER_BIASES", "DOCTOR_BIASES", "PATIENT_BIASES", "Seat",
           "bias_hints_target", "bias_text", "check_bias"]

#: The seat a bias is given to.
Seat = Literal["patient", "doctor"]

#: Patient bias names (AgentClinic ``PatientAgent.biases``, same order).
PATIENT_BIASES: tuple[str, ...] = (
    "recency", "frequency", "false_consensus", "self_diagnosis", "gender", "race",
    "sexual_orientation", "cultural", "education", "religion", "socioeconomic")
#: Doctor bias names (AgentClinic ``DoctorAgent.biases``, same order).
DOCTOR_BIASES: tuple[str, ...] = (
    "recency", "frequency", "false_consensus", "confirmation", "status_quo", "gender",
    "race", "sexual_orientation", "cultural", "education", "religion", "socioeconomic")

_PATIENT_DISTRUST = (
    "You have found out that your doctor {what}, and because of that you doubt their "
    "judgement. Let this colour how you deal with them.")
_DOCTOR_DISTRUST = (
    "You have found out that your patient {what}, and because of that you doubt their "
    "judgement. Let this colour how you deal with them.")

_TEXTS = {
    ("patient", "recency"): (
        "A friend of yours had symptoms much like yours not long ago, and it turned out "
        "to be cancer. Let this colour how you deal with the doctor."),
    ("patient", "frequency"): (
        "You have read that, in cases like yours, the diagnosis doctors make most often "
        "is cancer. Let this colour how you deal with the doctor."),
    ("patient", "false_consensus"): (
        "Most of the friends you told about your symptoms think you have cancer. Let "
        "this colour how you deal with the doctor."),
    ("patient", "self_diagnosis"): (
        "You have researched your symptoms online at length and concluded that you have "
        "cancer. Even if the doctor thinks otherwise, you stay sure of it. Let this "
        "colour how you deal with the doctor."),
    ("patient", "gender"): _PATIENT_DISTRUST.format(what="is of a particular gender"),
    ("patient", "race"): _PATIENT_DISTRUST.format(what="is of a particular race"),
    ("patient", "sexual_orientation"): _PATIENT_DISTRUST.format(
        what="has a particular sexual orientation"),
    ("patient", "cultural"): _PATIENT_DISTRUST.format(
        what="comes from a particular culture"),
    ("patient", "education"): _PATIENT_DISTRUST.format(
        what="trained at a poorly ranked medical school"),
    ("patient", "religion"): _PATIENT_DISTRUST.format(
        what="follows a particular religion"),
    ("patient", "socioeconomic"): _PATIENT_DISTRUST.format(
        what="comes from a particular socioeconomic background"),
    ("doctor", "recency"): (
        "Not long ago you heard of a colleague whose patient had symptoms like this "
        "patient's and was diagnosed with cancer. Let this colour how you deal with the "
        "patient."),
    ("doctor", "frequency"): (
        "You have learned that, in past cases, doctors most often diagnose patients with "
        "symptoms like these with cancer. Let this colour how you deal with the "
        "patient."),
    ("doctor", "false_consensus"): (
        "Most of the colleagues who heard about this patient's symptoms think the "
        "patient has cancer. Let this colour how you deal with the patient."),
    ("doctor", "confirmation"): (
        "From the start you are fairly sure that this patient has cancer. Let this "
        "colour how you deal with the patient."),
    ("doctor", "status_quo"): (
        "For the past ten years your hospital has diagnosed symptoms like these as "
        "cancer. Let this colour how you deal with the patient."),
    ("doctor", "gender"): _DOCTOR_DISTRUST.format(what="is of a particular gender"),
    ("doctor", "race"): _DOCTOR_DISTRUST.format(what="is of a particular race"),
    ("doctor", "sexual_orientation"): _DOCTOR_DISTRUST.format(
        what="has a particular sexual orientation"),
    ("doctor", "cultural"): _DOCTOR_DISTRUST.format(what="comes from a particular culture"),
    ("doctor", "education"): _DOCTOR_DISTRUST.format(what="has little education"),
    ("doctor", "religion"): _DOCTOR_DISTRUST.format(what="follows a particular religion"),
    ("doctor", "socioeconomic"): _DOCTOR_DISTRUST.format(
        what="comes from a particular socioeconomic background"),
}
#: The text of each ``(seat, name)``; each starts and ends with a newline, as it sits
#: between the base prompt and the case information.
BIAS_TEXTS: dict[tuple[str, str], str] = {key: f"\n{text}\n" for key, text in _TEXTS.items()}

#: The biases whose text names "cancer" (AgentClinic's cognitive biases), by seat.
CANCER_BIASES: dict[str, frozenset[str]] = {
    seat: frozenset(name for (s, name), text in BIAS_TEXTS.items()
                    if s == seat and "cancer" in text)
    for seat in ("patient", "doctor")}


def check_bias(seat: Seat, name: object, field: str) -> str | None:
    """``name`` checked for ``seat``: ``None`` (no bias) or a known bias name.

    Args:
        seat: ``"patient"`` or ``"doctor"``.
        name: the setting's value.
        field: the setting's name, for the message (``"patient_bias"``...).

    Raises:
        ValueError: ``name`` is neither ``None`` nor one of the seat's names (the field
            and the allowed names named).
    """
    names = PATIENT_BIASES if seat == "patient" else DOCTOR_BIASES
    if name is None or (isinstance(name, str) and name in names):
        return name
    other = DOCTOR_BIASES if seat == "patient" else PATIENT_BIASES
    hint = (f" ({name!r} is a {'doctor' if seat == 'patient' else 'patient'} bias)"
            if isinstance(name, str) and name in other else "")
    raise ValueError(f"{field} must be None or one of {', '.join(names)}; "
                     f"got {name!r}{hint}")


def bias_text(seat: Seat, name: str | None) -> str:
    """The text inserted for bias ``name`` of ``seat`` (``""`` for ``None``).

    Raises:
        ValueError: an unknown name for that seat (:func:`check_bias`).
    """
    if check_bias(seat, name, f"{seat}_bias") is None:
        return ""
    return BIAS_TEXTS[(seat, name)]


def bias_hints_target(target_in_bias: bool, *, patient_bias: str | None = None,
                      doctor_bias: str | None = None) -> bool:
    """Whether a run's biases hint at this case's target: the case is flagged
    ``target_in_bias`` (its target is a malignancy) and a bias of either seat is one of
    :data:`CANCER_BIASES`."""
    return bool(target_in_bias) and (patient_bias in CANCER_BIASES["patient"]
                                     or doctor_bias in CANCER_BIASES["doctor"])
