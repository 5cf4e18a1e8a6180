"""The ``--doctor`` registry of ``clinenv run`` and its doctor wrappers (``--cdeg``,
``--baseline``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _scripted() -> Any:
    from clinenv.agents.scripted_doctor import ScriptedDoctor

    return ScriptedDoctor()


#: ``--doctor`` choices: name -> factory of a fresh policy (``llm`` is built from the
#: LLM options by :class:`clinenv.cli.llm_setup.LLMSetup`).
DOCTORS: dict[str, Callable[[], Any]] = {"scripted": _scripted}
#: Every ``--doctor`` value.
DOCTOR_CHOICES = ("llm", *DOCTORS)

#: ``--baseline`` choices (CDEG paper, "Baselines").
BASELINES = ("self-reflection", "trajectory-rag", "flat-experience")


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
                            "lexical uses the thresholds LEXICAL_THRESHOLDS (0.9) for "
                            "evidence and diagnosis matching unless given")
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
