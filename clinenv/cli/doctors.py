"""The ``--doctor`` registry of ``clinenv run``, its doctor options (``--exploration``)
and its doctor wrappers (``--cdeg``, ``--baseline``).

``--exploration X`` (0..1, ``--doctor scripted`` only) makes the scripted doctor a seeded
sampling policy (:class:`~clinenv.agents.scripted_doctor.ScriptedDoctor`, named
``scripted-explore<X>``): with ``--repetitions K`` it yields the successful and failed
trajectories of one case that CDEG construction pairs, offline; ``--exam-budget N``
sets its examinations per episode (default 8: with a small menu every run then acquires
everything, and paired runs differ in no evidence). ``--baseline`` is
refused with the scripted doctor: the CDEG paper's baselines act through the doctor's
prompt, which the scripted doctor has not; ``--cdeg`` works with it (its acquisition
guidance reaches the doctor as ``info["guidance"]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _scripted(args: Any = None) -> Any:
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    budget = getattr(args, "exam_budget", None)
    return ScriptedDoctor(exploration=getattr(args, "exploration", None) or 0.0,
                          **({} if budget is None else {"exam_budget": budget}))


#: ``--doctor`` choices: name -> factory of a fresh policy from the parsed options (or
#: ``None``: the defaults); ``llm`` is built from the LLM options by
#: :class:`clinenv.cli.llm_setup.LLMSetup`.
DOCTORS: dict[str, Callable[[], Any]] = {"scripted": _scripted}
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
    """``--exploration`` and ``--exam-budget`` of ``clinenv run`` (module docstring)."""
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


def check_doctor_args(args: Any) -> None:
    """Refuse doctor options that the chosen ``--doctor`` does not use.

    Raises:
        CLIError: ``--exploration`` or ``--exam-budget`` without ``--doctor scripted``;
            ``--baseline`` with
            ``--doctor scripted`` (the baselines act through the doctor's prompt).
    """
    from clinenv.cli.errors import CLIError

    if getattr(args, "exploration", None) is not None and args.doctor != "scripted":
        raise CLIError("--exploration is used only with --doctor scripted (the LLM doctor "
                       "samples with --temperature)")
    if getattr(args, "exam_budget", None) is not None and args.doctor != "scripted":
        raise CLIError("--exam-budget is used only with --doctor scripted")
    if getattr(args, "baseline", None) and args.doctor == "scripted":
        raise CLIError(f"--baseline {args.baseline} acts through the doctor's prompt, which "
                       "the scripted doctor has not; use --doctor llm (--cdeg works with the "
                       "scripted doctor)")


def add_wrapper_arguments(run: Any) -> None:
    """The doctor-wrapper options of ``clinenv run``: ``--cdeg``, ``--cdeg-similarity``,
    the ``--cdeg-*`` settings (:func:`clinenv.cli.cdeg_run.add_cdeg_run_arguments`),
    ``--baseline``, ``--experience``."""
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


def doctor_wrapper(args: Any) -> Callable[[Any], Any] | None:
    """The wrapper the options ask for, loaded now (before the run creates anything), as
    a function ``doctor -> wrapped doctor``; ``None`` without ``--cdeg`` / ``--baseline``.

    Raises:
        CLIError: conflicting or missing options, a graph or run log that cannot be
            read, or a similarity that cannot be built (one line naming the option).
    """
    from clinenv.cli.errors import CLIError

    check_doctor_args(args)
    if args.cdeg and args.baseline:
        raise CLIError("--cdeg and --baseline wrap the doctor in different ways; give one")
    if args.experience and args.baseline not in ("trajectory-rag", "flat-experience"):
        raise CLIError("--experience is used only with --baseline trajectory-rag or "
                       "flat-experience")
    if args.baseline in ("trajectory-rag", "flat-experience") and not args.experience:
        raise CLIError(f"--baseline {args.baseline} needs --experience RUN.jsonl...")
    if not (args.cdeg or args.baseline):
        return None
    if args.baseline == "self-reflection":
        from clinenv.wrappers.baselines.self_reflection import SelfReflectionDoctor

        return SelfReflectionDoctor
    similarity = _similarity(args.cdeg_similarity)
    if args.baseline:
        from clinenv.runlog import RunLogError
        from clinenv.wrappers.baselines.experience import load_trajectories
        from clinenv.wrappers.baselines.flat_experience import (
            FlatExperienceDoctor,
            snippets_from_trajectories,
        )
        from clinenv.wrappers.baselines.trajectory_rag import TrajectoryRAGDoctor

        try:
            trajectories = load_trajectories(args.experience)
        except (OSError, RunLogError) as err:
            raise CLIError(f"--experience: {err}") from None
        if args.baseline == "trajectory-rag":
            return lambda doctor: TrajectoryRAGDoctor(doctor, trajectories,
                                                      similarity=similarity)
        snippets = snippets_from_trajectories(trajectories)
        return lambda doctor: FlatExperienceDoctor(doctor, snippets, similarity=similarity)
    from clinenv.cli.cdeg_run import cdeg_wrapper

    return cdeg_wrapper(args, similarity)


def _similarity(spec: str) -> Any:
    from clinenv.cli.errors import CLIError
    from clinenv.embeddings.factory import make_similarity

    try:
        return make_similarity(spec)
    except (ValueError, ImportError, OSError) as err:
        raise CLIError(f"--cdeg-similarity {spec}: {err}") from None
