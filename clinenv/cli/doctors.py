"""The ``--doctor`` registry of ``clinenv run``, its doctor options (``--exploration``)
and its doctor wrappers (``--cdeg``, ``--baseline``).

The flags become a :class:`DoctorConfig` and a :class:`WrapperConfig` once
(:func:`doctor_config`, :func:`wrapper_config`); the doctors: docs/cli.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from clinenv.config_model import ConfigModel


class DoctorConfig(ConfigModel):
    """The doctor a command plays (``--doctor`` and the options of its policy).

    Attributes:
        name: the ``--doctor`` name (``llm``, ``scripted``, ``teacher``).
        exploration, exam_budget: ``--exploration``, ``--exam-budget`` (scripted).
        teacher_questions: ``--teacher-questions`` (teacher).
        prompt, strategy: ``--prompt``, ``--strategy`` as given (``None``: by the
            environment's protocol, :func:`clinenv.cli.llm_setup.doctor_prompt`).
        max_questions: ``--max-questions`` (the agentclinic prompt's budget).
        temperature, max_tokens: the LLM doctor's decoding (``None``: the
            :class:`~clinenv.llm.base.GenerationConfig` defaults).
        vote_temperature: ``--vote-temperature`` (the vote strategy's samples).
        doctor_bias: ``--doctor-bias`` (``LLMDoctor(bias=...)``; the LLM doctor only).
    """

    name: str = "scripted"
    exploration: float | None = None
    exam_budget: int | None = None
    teacher_questions: int | None = None
    prompt: str | None = None
    strategy: str | None = None
    max_questions: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    vote_temperature: float | None = None
    doctor_bias: str | None = None


def doctor_config(args: argparse.Namespace) -> DoctorConfig:
    """The :class:`DoctorConfig` of the parsed flags (``--doctor``, the options of
    :func:`add_doctor_arguments` and the LLM doctor's of
    :func:`clinenv.cli.llm_setup.add_llm_arguments`; a command without one of them gets
    its default)."""
    fields = DoctorConfig.model_fields
    return DoctorConfig(name=getattr(args, "doctor", None) or "scripted", **{
        key: getattr(args, key, None) for key in fields if key != "name"})


def _teacher(doctor: DoctorConfig | None = None, cases: Any = None) -> Any:
    """The privileged teacher over ``cases`` (the run environment's case pool)."""
    from clinenv.agents.teacher_doctor import DEFAULT_MAX_QUESTIONS, TeacherDoctor
    from clinenv.cli.errors import CLIError

    if cases is None:
        raise CLIError("--doctor teacher reads the cases of the run's environment; this "
                       "command gives it none")
    k = None if doctor is None else doctor.teacher_questions
    return TeacherDoctor(cases, max_questions=DEFAULT_MAX_QUESTIONS if k is None else k)


#: The note ``clinenv run --doctor teacher`` prints.
TEACHER_NOTE = ("--doctor teacher is PRIVILEGED: it reads each case's target Y and records "
                "M; every line of its log carries privileged: true, which eval, compare, "
                "report, cdeg build and replay refuse without --allow-privileged (export "
                "keeps the field in its rows)")


def _scripted(doctor: DoctorConfig | None = None) -> Any:
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    doctor = doctor or DoctorConfig()
    budget = doctor.exam_budget
    return ScriptedDoctor(exploration=doctor.exploration or 0.0,
                          **({} if budget is None else {"exam_budget": budget}))


#: ``--doctor`` choices: name -> factory of a fresh policy from a :class:`DoctorConfig`
#: (or ``None``: the defaults); ``llm`` is built from the LLM options by
#: :class:`clinenv.cli.llm_setup.LLMSeats`.
DOCTORS: dict[str, Callable[..., Any]] = {"scripted": _scripted, "teacher": _teacher}
#: Every ``--doctor`` value.
DOCTOR_CHOICES = ("llm", *DOCTORS)

#: ``--baseline`` choices (CDEG paper, "Baselines").
BASELINES = ("self-reflection", "trajectory-rag", "flat-experience")


def exploration(text: str) -> float:
    """argparse type of ``--exploration``: a number in [0, 1]."""
    import argparse

    from clinenv.cli.argtypes import number

    value = number(0.0)(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be <= 1, got {text}")
    return value


def add_doctor_arguments(run: Any) -> None:
    """``--exploration`` and ``--exam-budget`` of ``clinenv run`` (docs/cli.md)."""
    from clinenv.cli.argtypes import count

    run.add_argument("--exploration", type=exploration, default=None, metavar="X",
                     help="--doctor scripted: probability (0..1) of a random exam pick and "
                          "of a score-weighted answer, seeded per episode (doctor name "
                          "scripted-explore<X>); with --repetitions K it samples the "
                          "successes and failures CDEG construction needs")
    run.add_argument("--exam-budget", type=count(0), default=None, metavar="N",
                     help="--doctor scripted: examinations it requests (default: 8); a "
                          "small budget with --exploration makes the sampled runs of a "
                          "case acquire different evidence")
    run.add_argument("--teacher-questions", type=count(0), default=None, metavar="K",
                     help="--doctor teacher (privileged: it reads the target): the most "
                          "history questions it asks (default: 5)")


def check_doctor(doctor: DoctorConfig, wrapper: WrapperConfig, *, env_id: str = "auto",
                 preset: str | None = None, premature_diagnosis: str | None = None) -> None:
    """Refuse doctor options that the chosen ``--doctor`` does not use.

    Args:
        doctor, wrapper: the doctor and its wrapper.
        env_id, preset, premature_diagnosis: ``--env``, ``--preset`` and
            ``--premature-diagnosis`` (the teacher's settings refuse some).

    Raises:
        CLIError: ``--exploration`` or ``--exam-budget`` without ``--doctor scripted``;
            ``--baseline`` with
            ``--doctor scripted`` (the baselines act through the doctor's prompt).
    """
    from clinenv.cli.errors import CLIError

    if doctor.exploration is not None and doctor.name != "scripted":
        raise CLIError("--exploration is used only with --doctor scripted (the LLM doctor "
                       "samples with --temperature)")
    if doctor.exam_budget is not None and doctor.name != "scripted":
        raise CLIError("--exam-budget is used only with --doctor scripted")
    if wrapper.baseline and doctor.name == "scripted":
        raise CLIError(f"--baseline {wrapper.baseline} acts through the doctor's prompt, "
                       "which the scripted doctor has not; use --doctor llm (--cdeg works "
                       "with the scripted doctor)")
    if doctor.teacher_questions is not None and doctor.name != "teacher":
        raise CLIError("--teacher-questions is used only with --doctor teacher")
    if doctor.name == "teacher":
        _check_teacher(wrapper, env_id, preset, premature_diagnosis)


def _check_teacher(wrapper: WrapperConfig, env_id: str, preset: str | None,
                   premature_diagnosis: str | None) -> None:
    """Refuse what contradicts the teacher's settings (docs/teacher.md)."""
    from clinenv.cli.errors import CLIError

    why = ("the privileged teacher plays with the tool view's settings (delta observations, "
           "premature_diagnosis='decide', the id's own T), so that its exported prompts "
           "equal a trainer's rollouts")
    if premature_diagnosis not in (None, "decide"):
        raise CLIError(f"--doctor teacher with --premature-diagnosis "
                       f"{premature_diagnosis}: {why}; leave the option out")
    if preset is not None:
        raise CLIError(f"--doctor teacher with --preset {preset}: {why}; leave the "
                       "option out")
    for option in ("cdeg", "baseline"):
        if getattr(wrapper, option):
            raise CLIError(f"--doctor teacher with --{option}: the teacher is no doctor to "
                           "improve or evaluate (it reads the target); run it plain")
    if env_id != "auto":
        import gymnasium as gym

        import clinenv  # noqa: F401  (registers the ids)

        try:
            spec = gym.spec(env_id)
        except gym.error.Error:
            return  # an unknown id: the environment choice says so
        if spec.entry_point != "clinenv.env:EGIPEnv" or spec.kwargs.get("preset"):
            raise CLIError(f"--doctor teacher with --env {env_id}: {why}, which need an "
                           "EGIP text environment (EGIP-<Dataset>-v0), not a Menu or "
                           "native-protocol id")


def add_wrapper_arguments(run: Any) -> None:
    """The doctor-wrapper options of ``clinenv run``: ``--cdeg``, ``--cdeg-similarity``,
    the ``--cdeg-*`` settings (:func:`clinenv.cli.cdeg_run.add_cdeg_run_arguments`),
    ``--baseline``, ``--experience`` (``clinenv run --allow-privileged`` lets it read
    a privileged doctor's logs)."""
    from clinenv.cli.cdeg_run import add_cdeg_run_arguments

    group = run.add_argument_group("doctor wrappers (CDEG and its baselines)")
    group.add_argument("--cdeg", default=None, metavar="GRAPH.json",
                       help="wrap the doctor with CDEG evidence-state intervention using "
                            "this graph (from `clinenv cdeg build`)")
    group.add_argument("--cdeg-similarity", default="lexical", metavar="SPEC",
                       help="similarity of evidence/diagnosis matching and of the "
                            "baselines' retrieval: lexical (default, no model), sapbert "
                            "(the paper's), minilm, a hub id or a local model folder; "
                            "lexical matches evidence and diagnoses at the 0.9 thresholds "
                            "unless --cdeg-*-threshold is given")
    add_cdeg_run_arguments(group)
    group.add_argument("--baseline", default=None, choices=BASELINES,
                       help="wrap the doctor with a baseline of the CDEG paper")
    group.add_argument("--experience", nargs="+", default=None, metavar="RUN.jsonl",
                       help="run logs of the memory of trajectory-rag / flat-experience")


class WrapperConfig(ConfigModel):
    """The doctor wrapper of ``clinenv run`` (``--cdeg`` or ``--baseline``) and its options
    (:func:`add_wrapper_arguments`; the ``cdeg_*`` fields are the ``--cdeg-*`` flags of
    :func:`clinenv.cli.cdeg_run.add_cdeg_run_arguments`, ``None``: the wrapper's default).

    Attributes:
        allow_privileged: ``--allow-privileged`` (``--experience`` may hold a
            privileged doctor's logs).
    """

    cdeg: str | None = None
    cdeg_similarity: str = "lexical"
    cdeg_mode: str = "both"
    cdeg_coverage_basis: str = "edge"
    cdeg_global_guidance: bool = False
    cdeg_max_deferrals: int | None = None
    cdeg_evidence_threshold: float | None = None
    cdeg_diagnosis_threshold: float | None = None
    cdeg_coverage_threshold: float | None = None
    baseline: str | None = None
    experience: tuple[str, ...] | None = None
    allow_privileged: bool = False


def wrapper_config(args: argparse.Namespace) -> WrapperConfig:
    """The :class:`WrapperConfig` of the parsed flags (a command without the wrapper
    options gets the defaults: no wrapper)."""
    given = {key: getattr(args, key) for key in WrapperConfig.model_fields
             if getattr(args, key, None) is not None}
    if given.get("experience") is not None:
        given["experience"] = tuple(str(path) for path in given["experience"])
    given["allow_privileged"] = bool(given.get("allow_privileged", False))
    return WrapperConfig(**given)


def doctor_wrapper(config: WrapperConfig) -> Callable[[Any], Any] | None:
    """The wrapper ``config`` asks for, loaded now (before the run creates anything), as
    a function ``doctor -> wrapped doctor``; ``None`` without ``--cdeg`` / ``--baseline``.
    The doctor's own options are checked before (:func:`check_doctor`).

    Raises:
        CLIError: conflicting or missing options, a graph or run log that cannot be
            read, or a similarity that cannot be built (one line naming the option).
    """
    from clinenv.cli.errors import CLIError

    if config.cdeg and config.baseline:
        raise CLIError("--cdeg and --baseline wrap the doctor in different ways; give one")
    experience = list(config.experience) if config.experience else None
    if experience and config.baseline not in ("trajectory-rag", "flat-experience"):
        raise CLIError("--experience is used only with --baseline trajectory-rag or "
                       "flat-experience")
    if config.baseline in ("trajectory-rag", "flat-experience") and not experience:
        raise CLIError(f"--baseline {config.baseline} needs --experience RUN.jsonl...")
    allow_privileged = config.allow_privileged
    if allow_privileged and not experience:
        raise CLIError("--allow-privileged is used only with --experience (the run logs "
                       "of the baselines' memory)")
    if not (config.cdeg or config.baseline):
        return None
    if config.baseline == "self-reflection":
        from clinenv.wrappers.baselines.self_reflection import SelfReflectionDoctor

        return SelfReflectionDoctor
    similarity = _similarity(config.cdeg_similarity)
    if config.baseline:
        from clinenv.runlog import RunLogError, is_privileged_line, read_run_log
        from clinenv.wrappers.baselines.experience import load_trajectories
        from clinenv.wrappers.baselines.flat_experience import (
            FlatExperienceDoctor,
            snippets_from_trajectories,
        )
        from clinenv.wrappers.baselines.trajectory_rag import TrajectoryRAGDoctor

        assert experience is not None  # checked above
        try:
            trajectories = load_trajectories(experience, allow_privileged=allow_privileged)
            # a memory of a privileged doctor's episodes makes this run privileged too
            tainted = allow_privileged and any(
                is_privileged_line(line) for path in experience
                for line in read_run_log(path).lines)
        except (OSError, RunLogError) as err:
            raise CLIError(f"--experience: {err}") from None

        def marked(wrapper: Any) -> Any:
            if tainted:
                wrapper.privileged = True  # its lines carry privileged: true
            return wrapper

        if config.baseline == "trajectory-rag":
            return lambda doctor: marked(TrajectoryRAGDoctor(doctor, trajectories,
                                                             similarity=similarity))
        snippets = snippets_from_trajectories(trajectories)
        return lambda doctor: marked(FlatExperienceDoctor(doctor, snippets,
                                                          similarity=similarity))
    from clinenv.cli.cdeg_run import cdeg_wrapper

    return cdeg_wrapper(config, similarity)


def _similarity(spec: str) -> Any:
    from clinenv.cli.errors import CLIError
    from clinenv.embeddings.factory import make_similarity

    try:
        return make_similarity(spec)
    except (ValueError, ImportError, OSError) as err:
        raise CLIError(f"--cdeg-similarity {spec}: {err}") from None
