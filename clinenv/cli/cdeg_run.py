"""``clinenv run --cdeg GRAPH``: the CDEG policy wrapper's options and its construction
(CDEG paper, "Inference"; Table 3 ablations).

:func:`add_cdeg_run_arguments` adds the ``--cdeg-*`` options; :func:`cdeg_wrapper` loads
the graph and returns ``doctor -> CDEGDoctor``.
"""

from __future__ import annotations

import sys
from typing import Any

from clinenv.cli.argtypes import count, number
from clinenv.cli.errors import CLIError
from clinenv.wrappers.cdeg.thresholds import (
    COVERAGE_THRESHOLD,
    DIAGNOSIS_THRESHOLD,
    EVIDENCE_THRESHOLD,
)

__all__ = ["add_cdeg_run_arguments", "cdeg_wrapper", "empty_graph_warning"]


def empty_graph_warning(graph: Any, name: str) -> str | None:
    """The one-line warning of ``--cdeg`` with a graph of 0 revision edges (the wrapper
    then never intervenes: the run is the unwrapped doctor's, under a ``-cdeg`` label),
    or ``None`` when the graph has revisions."""
    if graph.revisions:
        return None
    return (f"warning: --cdeg {name} has 0 revisions: the CDEG wrapper never intervenes, "
            "so this run is the unwrapped doctor's; `clinenv cdeg build` says which stage "
            "left the graph empty")


def add_cdeg_run_arguments(group: Any) -> None:
    """The CDEG options of ``clinenv run`` besides ``--cdeg`` and ``--cdeg-similarity``:
    the :class:`~clinenv.wrappers.cdeg.policy.CDEGConfig` fields."""
    group.add_argument("--cdeg-mode", default="both",
                       choices=("both", "acquisition_only", "reappraisal_only"),
                       help="CDEG interventions (Table 3 ablations; default: both)")
    group.add_argument("--cdeg-coverage-basis", default="edge",
                       choices=("edge", "edge+context"),
                       help="E_{s->t} of Eq. 7: the edge's validated evidence (default), or "
                            "also its context atoms (makes edges of missing evidence only "
                            "retrievable)")
    group.add_argument("--cdeg-max-deferrals", type=count(0), default=None, metavar="N",
                       help="answers deferred per episode (default: 2)")
    for name, paper, what in (("evidence", EVIDENCE_THRESHOLD, "evidence matching"),
                              ("diagnosis", DIAGNOSIS_THRESHOLD, "diagnosis matching")):
        group.add_argument(f"--cdeg-{name}-threshold", type=number(-1.0), default=None,
                           metavar="X", help=f"{what} similarity (default: {paper}; with a "
                                             "lexical --cdeg-similarity 0.9)")
    group.add_argument("--cdeg-coverage-threshold", type=number(0.0), default=None,
                       metavar="X", help="retrieve an edge when its coverage exceeds X "
                                         f"(default: {COVERAGE_THRESHOLD})")
    group.add_argument("--cdeg-global-guidance", action="store_true",
                       help="use the global retrieval when the proposal has no edge "
                            "(acquisition only; see CDEGConfig.global_guidance)")


def cdeg_wrapper(wrapper: Any, similarity: Any) -> Any:
    """``doctor -> CDEGDoctor`` from ``--cdeg GRAPH`` and the options of
    :func:`add_cdeg_run_arguments` (``wrapper``, :class:`~clinenv.cli.doctors.
    WrapperConfig`), the graph loaded now. A graph with no revision edge
    gets one ``warning:`` line on stderr (:func:`empty_graph_warning`). With a lexical
    ``--cdeg-similarity`` the evidence and diagnosis thresholds default to
    :data:`~clinenv.embeddings.lexical.LEXICAL_THRESHOLDS`. Prints one note on stderr
    when the graph was built with an LLM extractor (``--cdeg`` matches with the
    deterministic one) and when, under ``--cdeg-coverage-basis edge``, some edges hold
    only missing evidence (never retrievable there). The wrappers share one
    :class:`~clinenv.wrappers.cdeg.heldout.OverlapWarner`, which prints one ``warning:``
    line on stderr at the first evaluated case that is one of the graph's construction
    cases (the run is then not held out).

    Raises:
        CLIError: the graph cannot be read (a missing file and a folder are named as
            such), its ``construction_cases`` metadata is malformed, or a setting is out
            of range.
    """
    from pydantic import ValidationError

    from clinenv.embeddings.lexical import LEXICAL_THRESHOLDS
    from clinenv.wrappers.cdeg.graph import CDEGraph, GraphFileError
    from clinenv.wrappers.cdeg.heldout import OverlapWarner
    from clinenv.wrappers.cdeg.policy import CDEGConfig, CDEGDoctor
    from clinenv.wrappers.cdeg.retrieval import missing_only_edges

    try:
        graph = CDEGraph.load(wrapper.cdeg)
    except FileNotFoundError:
        raise CLIError(f"--cdeg {wrapper.cdeg}: no such graph file; build one with `clinenv "
                       "cdeg build`") from None
    except IsADirectoryError:
        raise CLIError(f"--cdeg {wrapper.cdeg}: is a folder; give the graph file (from "
                       "`clinenv cdeg build`)") from None
    except (OSError, GraphFileError) as err:
        raise CLIError(f"--cdeg: {err}") from None
    empty = empty_graph_warning(graph, str(wrapper.cdeg))
    if empty is not None:
        print(empty, file=sys.stderr)
    lexical = str(getattr(similarity, "name", "")).startswith("lexical")
    given = {"mode": wrapper.cdeg_mode, "coverage_basis": wrapper.cdeg_coverage_basis,
             "global_guidance": wrapper.cdeg_global_guidance,
             "max_deferrals": wrapper.cdeg_max_deferrals,
             "evidence_threshold": wrapper.cdeg_evidence_threshold,
             "diagnosis_threshold": wrapper.cdeg_diagnosis_threshold,
             "coverage_threshold": wrapper.cdeg_coverage_threshold}
    if lexical:
        for key in ("evidence", "diagnosis"):
            if given[f"{key}_threshold"] is None:
                given[f"{key}_threshold"] = LEXICAL_THRESHOLDS[key]
    try:
        config = CDEGConfig(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as err:
        first = err.errors()[0]
        raise CLIError(f"--cdeg-{str(first['loc'][0]).replace('_', '-')}: "
                       f"{first['msg']}") from None
    extractor = str(graph.metadata.get("extractor", ""))
    if extractor.startswith("llm"):
        print(f"note: {wrapper.cdeg} was built with the extractor {extractor}; --cdeg matches "
              "observations with the deterministic extractor, so atoms may not match",
              file=sys.stderr)
    n = missing_only_edges(graph)
    if n and config.coverage_basis == "edge":
        print(f"note: {n} of {len(graph.revisions)} revision edges in {wrapper.cdeg} carry only "
              "missing evidence: under --cdeg-coverage-basis edge they are retrieved only "
              "once the doctor has acquired that evidence itself, so they never prompt "
              "its acquisition; --cdeg-coverage-basis edge+context makes them retrievable",
              file=sys.stderr)
    try:  # one warner for every wrapper of the run: the overlap warning comes once
        overlap = OverlapWarner(graph, name=str(wrapper.cdeg), emit=lambda message: print(
            f"warning: {message}", file=sys.stderr, flush=True))
    except ValueError as err:
        raise CLIError(f"--cdeg {wrapper.cdeg}: {err}") from None
    return lambda doctor: CDEGDoctor(doctor, graph, similarity=similarity, config=config,
                                     overlap=overlap)
