"""The patient simulator, the examiner and the judge of an environment, from its settings.

Each takes a known name, ``"llm"`` with a chat model, or an object with the role's
method; the defaults are offline and deterministic.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from clinenv.env.persona import PersonaPatient
from clinenv.env.record_reader import NativeRecordReader
from clinenv.env.retrieval_patient import RetrievalPatient
from clinenv.llm.base import ChatModel

#: ``patient=`` names; anything else must be a patient object.
PATIENT_KINDS = ("retrieval", "llm")
#: ``judge=`` names; anything else must be a judge object.
JUDGE_KINDS = ("deterministic", "llm")
#: The model-backed seats of ``"llm"``, by entry-point string (``module:attr``): they
#: live in :mod:`clinenv.agents`, which the environment never imports by name.
LLM_SEATS = {
    "patient": "clinenv.agents.llm_patient:LLMPatient",
    "judge": "clinenv.agents.judge:LLMJudge",
    "examiner": "clinenv.agents.measurement_agent:LLMMeasurementAgent",
}
#: ``examiner=`` names; anything else must be an examiner object. ``"lookup"`` is record
#: lookup O (EGIP section 3.2), answered inside the runtime (no simulator object).
EXAMINER_KINDS = ("lookup", "reader", "llm")


def make_patient(patient: Any, patient_model: Any = None, *, bias: str | None = None,
                 persona: Any = None) -> Any:
    """The patient simulator of ``EGIPEnv(patient=..., patient_model=...)``.

    Args:
        patient: ``None`` / ``"retrieval"``, ``"llm"``, or an object with ``reply`` or
            ``areply``.
        patient_model: a :class:`~clinenv.llm.base.ChatModel`, only with ``"llm"``.
        bias: ``EnvConfig.patient_bias`` (a checked name or ``None``): given to the LLM
            patient; a patient object must carry the same ``bias`` attribute.
        persona: the retrieval patient's :class:`~clinenv.env.persona.PersonaConfig`
            (``None`` or ``cooperative``: the plain patient).

    Returns:
        A ``RetrievalPatient`` (``PersonaPatient`` under a persona), an ``LLMPatient``,
        or ``patient`` itself.

    Raises:
        ValueError: an unknown name; ``"llm"`` without a ChatModel, or
            ``patient_model`` with another patient; an object without ``reply`` or
            ``areply``; a ``bias`` the patient cannot take; a persona with any patient
            but the retrieval patient.
    """
    if persona is not None and persona.active:
        if not (patient is None or patient == "retrieval"):
            kind = patient if isinstance(patient, str) else type(patient).__name__
            raise ValueError(f"patient_persona={persona.to_value()!r} works with the "
                             f"retrieval patient only (patient=None or 'retrieval'), got "
                             f"patient={kind!r}: the LLM patient and patient objects "
                             "take no persona")
        if patient_model is not None:
            raise ValueError("patient_model is used only with patient='llm'")
        if bias is not None:
            raise ValueError(f"patient_bias={bias!r} needs the LLM patient, "
                             f"patient_persona={persona.to_value()!r} the retrieval patient: "
                             "set one of them")
        return PersonaPatient(persona)

    if bias is not None and (patient is None or patient == "retrieval"):
        raise ValueError(f"patient_bias={bias!r} needs the LLM patient (patient='llm' with "
                         "patient_model=...): the retrieval patient answers from the case "
                         "facts by lookup and has no prompt to put a bias in")
    built = _build("patient", patient, patient_model, kinds=PATIENT_KINDS,
                   kinds_text=f"one of {PATIENT_KINDS} or a patient object",
                   default=RetrievalPatient,
                   llm=lambda model: _llm_seat("patient")(model, bias=bias),
                   methods=("reply", "areply"),
                   method_text="a reply(view) -> str method (or async areply)")
    own = getattr(built, "bias", None)
    if own != bias:
        raise ValueError(f"patient_bias={bias!r} but the patient object "
                         f"{type(built).__name__} has bias={own!r}: set the same bias on "
                         "both (LLMPatient(model, bias=NAME) and patient_bias=NAME), so that "
                         "the run log's env_spec records the bias the patient uses")
    return built


def make_judge(judge: Any, judge_model: Any = None, *, strict: bool = False) -> Any:
    """The judge of ``EGIPEnv(judge=..., judge_model=...)``; ``None`` for the scorer.

    Args:
        judge: ``None`` / ``"deterministic"``, ``"llm"``, or an object with ``judge`` or
            ``ajudge``.
        judge_model: a :class:`~clinenv.llm.base.ChatModel`, only with ``"llm"``.
        strict: the LLM judge uses AgentClinic's exact ``"yes"`` rule
            (``LLMJudge(strict=True)``; the native protocols' ``strict_yes``).

    Returns:
        ``None`` (the deterministic scorer :func:`clinenv.scoring.score_answer`), an
        :class:`~clinenv.agents.judge.LLMJudge`, or ``judge`` itself.

    Raises:
        ValueError: as :func:`make_patient`, for ``judge`` and ``judge_model``.
    """

    return _build("judge", judge, judge_model, kinds=JUDGE_KINDS,
                  kinds_text=f"None, one of {JUDGE_KINDS} or a judge object",
                  default=lambda: None,
                  llm=lambda model: _llm_seat("judge")(model, strict=strict),
                  methods=("judge", "ajudge"),
                  method_text="a judge(answer, target) method (or async ajudge)")


def make_examiner(examiner: Any, examiner_model: Any = None, *, native: bool = False) -> Any:
    """The examiner of ``EGIPEnv(examiner=..., examiner_model=...)``.

    Args:
        examiner: ``None`` (``"lookup"`` under EGIP, ``"reader"`` under a native
            protocol), ``"lookup"`` (EGIP only), ``"reader"``, ``"llm"``, or an object
            with ``measure(MeasurementView) -> str`` (optionally ``async ameasure``).
        examiner_model: a :class:`~clinenv.llm.base.ChatModel`, only with ``"llm"``.
        native: the environment runs a native protocol (AgentClinic, MedAgentSim), whose
            measurement agent answers whole utterances: record lookup cannot.

    Returns:
        ``None`` for record lookup (the runtime answers), else the examiner object.

    Raises:
        ValueError: as :func:`make_patient`, for ``examiner`` and ``examiner_model``;
            ``"lookup"`` with a native protocol.
    """

    if examiner is None:
        examiner = "reader" if native else "lookup"
    if examiner == "lookup" and native:
        raise ValueError("examiner='lookup' (record lookup O) cannot answer the native "
                         "protocols' whole utterances; use 'reader', 'llm' or an object")
    if examiner == "reader":
        if examiner_model is not None:
            raise ValueError("examiner_model is used only with examiner='llm'")
        return NativeRecordReader()
    return _build("examiner", examiner, examiner_model, kinds=EXAMINER_KINDS,
                  kinds_text=f"None, one of {EXAMINER_KINDS} or an examiner object",
                  default=lambda: None, llm=lambda model: _llm_seat("examiner")(model),
                  methods=("measure", "ameasure"),
                  method_text="a measure(view) -> str method (or async ameasure)")


def _llm_seat(role: str) -> Any:
    """The class :data:`LLM_SEATS` names for ``role``, imported on first use."""
    module, _, attr = LLM_SEATS[role].partition(":")
    return getattr(importlib.import_module(module), attr)


def accepts_seed(judge: Any) -> bool:
    """Whether ``judge.judge`` (else ``judge.ajudge``) takes a ``seed`` keyword, as the
    LLM judge's does (``False`` for ``None`` and for signatures that cannot be read)."""
    method = getattr(judge, "judge", None) or getattr(judge, "ajudge", None)
    if method is None:
        return False
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "seed" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _build(role: str, value: Any, model: Any, *, kinds: tuple[str, ...], kinds_text: str,
           default: Callable[[], Any], llm: Callable[[Any], Any],
           methods: tuple[str, str], method_text: str) -> Any:
    """One setting: ``None`` or ``kinds[0]`` -> ``default()``; ``"llm"`` -> ``llm(model)``;
    an object with one of ``methods`` -> itself. Errors name ``role`` / ``role_model``."""
    if isinstance(value, str) and value not in kinds:
        raise ValueError(f"{role} must be {kinds_text}, got {value!r}")
    if value == "llm":
        if model is None:
            raise ValueError(f"{role}='llm' needs {role}_model=<clinenv.llm.ChatModel>")
        if not isinstance(model, ChatModel):
            raise ValueError(f"{role}_model must be a clinenv.llm.ChatModel, "
                             f"got {type(model).__name__}")
        return llm(model)
    if model is not None:
        raise ValueError(f"{role}_model is used only with {role}='llm'")
    if value is None or value == kinds[0]:
        return default()
    if not any(callable(getattr(value, name, None)) for name in methods):
        raise ValueError(f"{role} object {type(value).__name__} needs {method_text}")
    return value
