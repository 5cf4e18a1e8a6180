"""Text observations of the patient and examiner seats (role views R, EGIP Eq. 2).

The patient sees P (Y withheld), the dialogue and the pending question; the examiner the
validated request and its record.
"""

from __future__ import annotations

from pydantic import JsonValue

from clinenv.protocol.catalog import readable_name
from clinenv.protocol.lookup import render_record
from clinenv.protocol.views import ExaminerView, PatientView

PATIENT_ROLE = (
    "You are the patient. Answer the doctor's question in your own words, using only the "
    "facts below; when they do not say, say that you are not sure."
)
CAREGIVER_ROLE = (
    "You are the parent of the patient, who is too young to answer. Answer the doctor's "
    "question using only the facts below; when they do not say, say that you are not sure."
)
EXAMINER_ROLE = (
    "You are the examiner. Report the result of the requested examination from the stored "
    "record only; never add findings that the record does not hold."
)
ROLE_HEADER = "# Your role"
FACTS_HEADER = "# Patient facts"
DIALOGUE_HEADER = "# Conversation so far"
QUESTION_HEADER = "# Doctor's question"
REQUEST_HEADER = "# Examination request"
RECORD_HEADER = "# Stored record"
#: Shown in place of the question until the doctor asks the patient something.
NO_QUESTION = "(none yet: wait for the doctor's question)"
#: The examiner's view until the doctor requests a recorded examination.
NO_REQUEST = "(none yet: wait for the doctor's request)"


def render_facts(tree: JsonValue, indent: int = 0) -> str:
    """A patient-facts tree as ``Field: value`` lines (nested fields indented).

    Keys are made readable (``Past_Medical_History`` -> ``Past Medical History``); list
    items are joined with ``"; "``; booleans read ``yes`` / ``no``.
    """
    pad = "  " * indent
    if isinstance(tree, dict):
        lines = []
        for key, value in tree.items():
            if isinstance(value, dict) and value:
                lines += [f"{pad}{readable_name(str(key))}:", render_facts(value, indent + 1)]
            else:
                lines.append(f"{pad}{readable_name(str(key))}: {render_facts(value).strip()}")
        return "\n".join(lines)
    if isinstance(tree, list):
        return pad + "; ".join(render_facts(item).strip() for item in tree)
    if isinstance(tree, bool):
        return f"{pad}{'yes' if tree else 'no'}"
    return f"{pad}{'' if tree is None else tree}"


def render_patient_view(view: PatientView, *, pending: bool) -> str:
    """The patient seat's observation text.

    Args:
        view: the runtime's patient view (P with Y withheld, dialogue, question).
        pending: ``True`` when ``view.question`` is waiting for this seat's reply;
            ``False`` shows :data:`NO_QUESTION` instead.
    """
    parts = [ROLE_HEADER, CAREGIVER_ROLE if view.caregiver_voice else PATIENT_ROLE, "",
             FACTS_HEADER, render_facts(dict(view.facts)) or "(no facts recorded)"]
    if view.dialogue:
        parts += ["", DIALOGUE_HEADER]
        for question, reply in view.dialogue:
            parts += [f"Doctor: {question}", f"Patient: {reply}"]
    parts += ["", QUESTION_HEADER, view.question if pending else NO_QUESTION]
    return "\n".join(parts)


def render_examiner_view(view: ExaminerView | None) -> str:
    """The examiner seat's observation text: the request and its stored record.

    Args:
        view: the runtime's examiner view of the pending request, or ``None`` before the
            first request (then the view says :data:`NO_REQUEST`).
    """
    parts = [ROLE_HEADER, EXAMINER_ROLE, "", REQUEST_HEADER]
    if view is None:
        return "\n".join([*parts, NO_REQUEST])
    parts += [f"Requested: {view.request}",
              f"Examination: {view.exam_id} {view.name}" if view.exam_id else
              f"Examination: {view.name}",
              "", RECORD_HEADER, render_record(view.record)]
    return "\n".join(parts)
