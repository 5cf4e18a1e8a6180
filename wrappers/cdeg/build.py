"""CDEG construction from run logs, end to end (CDEG "Counterfactual Diagnostic Evidence
Graph Construction").

:func:`build_graph` runs the stages in order:

1. load trajectories (:mod:`~clinenv.wrappers.cdeg.trajectories`; Eq. 3 outcomes);
2. pair each failed trajectory with its most similar success of the same case
   (:mod:`~clinenv.wrappers.cdeg.pairing`, Eq. 4); pairs whose D_s and D_t fall into
   the same diagnosis node are no revision and are dropped;
3. evidence sets and candidate sets (:mod:`~clinenv.wrappers.cdeg.candidates`, Eq. 5),
   restricted by the Table 3 ablation switches;
4. counterfactual validation (:mod:`~clinenv.wrappers.cdeg.validation`), or with
   ``validate=False`` ("w/o counterfactual validation", Table 3) every candidate kept;
5. consolidation into the graph (:mod:`~clinenv.wrappers.cdeg.consolidate`, Eq. 6).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from clinenv.embeddings.base import Similarity
from clinenv.wrappers.cdeg.candidates import CandidateSets, candidate_sets, evidence_set
from clinenv.wrappers.cdeg.consolidate import (
    DIAGNOSIS_THRESHOLD,
    DiagnosisIndex,
    ValidatedPair,
    consolidate,
)
from clinenv.wrappers.cdeg.extractors import AtomExtractor
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.pairing import PAIR_THRESHOLD, pair_trajectories
from clinenv.wrappers.cdeg.trajectories import load_trajectories, outcome_counts
from clinenv.wrappers.cdeg.validation import VerifierCall, call_counts, validate_pair
from clinenv.wrappers.cdeg.verifier import Verifier


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class BuildConfig:
    """Construction parameters (frozen; a pydantic dataclass, so that the field
    ``validate`` does not shadow a pydantic model method).

    Attributes:
        pair_threshold: keep a pair when its Eq. 4 similarity exceeds this (paper: 0.7).
        diagnosis_threshold: merge diagnoses into one node at this similarity or more
            (paper: 0.65).
        validate: run the counterfactual tests; ``False`` keeps every candidate (Table 3
            "w/o counterfactual validation").
        use_missing, use_ignored, use_blocking: use C_M / C_I / C_B (Table 3 "w/o
            missing / ignored / blocking evidence": a switched-off set is neither tested
            nor kept).
        max_candidates_per_pair: test at most this many candidates of each set per pair,
            in evidence order (``None``: all); bounds verifier calls.
    """

    pair_threshold: float = Field(PAIR_THRESHOLD, ge=-1.0, le=1.0)
    diagnosis_threshold: float = Field(DIAGNOSIS_THRESHOLD, ge=-1.0, le=1.0)
    validate: bool = True
    use_missing: bool = True
    use_ignored: bool = True
    use_blocking: bool = True
    max_candidates_per_pair: int | None = Field(None, ge=1)

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (graph metadata)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BuildResult:
    """Outcome of :func:`build_graph`.

    Attributes:
        graph: the graph (its ``metadata`` records how it was built).
        report: counts for people: ``trajectories`` (by outcome), ``errors_skipped``,
            ``superseded_lines``, ``partial_lines``, ``pairing`` (failed, no_success,
            below_threshold, pairs, same_diagnosis), ``candidates`` and ``validated``
            (by role), ``one_order_only``, ``skipped_by_before``, ``verifier_calls``
            (by test and outcome), ``pairs_promoting``, ``pairs_blocking_only``,
            ``graph`` (node and edge counts).
        calls: every verifier call, in order.
    """

    graph: CDEGraph
    report: dict[str, Any]
    calls: tuple[VerifierCall, ...] = ()


def sha256_file(path: str | Path) -> str:
    """The file's sha256 (hex)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _limit(keys: tuple[str, ...], on: bool, cap: int | None) -> tuple[str, ...]:
    return () if not on else keys[:cap] if cap is not None else keys


def build_graph(run_logs: Sequence[str | Path], *, extractor: AtomExtractor,
                verifier: Verifier, similarity: Similarity,
                config: BuildConfig | None = None, progress: bool = False) -> BuildResult:
    """Build a CDEG from run logs (module docstring).

    Args:
        run_logs: ``clinenv run`` logs with K rollouts per case (one file or several).
        extractor: observation -> evidence atoms.
        verifier: compares D_s and D_t on evidence sets. A verifier with a
            ``with_examples(mapping)`` method (e.g.
            :class:`~clinenv.wrappers.cdeg.verifier.LexicalVerifier`) is given the
            observation texts behind every atom (by atom key) first.
        similarity: trajectory pairing (Eq. 4) and diagnosis merging.
        config: :class:`BuildConfig` (default: the paper's values).
        progress: show a tqdm bar over the pairs being validated.

    Returns:
        A :class:`BuildResult`.

    Raises:
        FileNotFoundError: a run log is missing.
        clinenv.runlog.RunLogError: a corrupt line or field (file and line named).
        ValueError: no run log given.
    """
    config = config or BuildConfig()
    if not run_logs:
        raise ValueError("build_graph needs at least one run log")
    loaded = load_trajectories(run_logs)
    pairing = pair_trajectories(loaded.trajectories, similarity,
                                threshold=config.pair_threshold)
    diagnoses = DiagnosisIndex(similarity, config.diagnosis_threshold)
    cache: dict = {}
    prepared = []
    same = 0
    for pair in pairing.pairs:
        source, target = diagnoses.assign(pair.failed.answer), diagnoses.assign(
            pair.success.answer)
        if source == target:
            same += 1
            continue
        e_s = evidence_set(pair.failed, extractor, cache=cache)
        e_t = evidence_set(pair.success, extractor, cache=cache)
        found = candidate_sets(e_s, e_t)
        cap = config.max_candidates_per_pair
        used = CandidateSets(_limit(found.missing, config.use_missing, cap),
                             _limit(found.ignored, config.use_ignored, cap),
                             _limit(found.blocking, config.use_blocking, cap))
        prepared.append((pair, source, target, e_s, e_t, used))
    if config.validate and callable(getattr(verifier, "with_examples", None)):
        texts = {k: m.examples for *_, e_s, e_t, _ in prepared for k, m in {**e_s, **e_t}.items()}
        verifier = verifier.with_examples(texts)
    items: list[ValidatedPair] = []
    calls: list[VerifierCall] = []
    n_one_order = n_skipped = 0
    candidates = dict.fromkeys(("missing", "ignored", "blocking"), 0)
    iterator = prepared
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(prepared, desc="validating pairs", unit="pair")
    for pair, source, target, e_s, e_t, used in iterator:
        for role in candidates:
            candidates[role] += len(getattr(used, role))
        if config.validate:
            result = validate_pair(pair.failed.answer, pair.success.answer, e_s, e_t, used,
                                   verifier)
            calls.extend(result.calls)
            n_one_order += result.n_one_order
            n_skipped += result.n_skipped
            kept = (tuple(result.missing), tuple(result.ignored), tuple(result.blocking))
        else:
            kept = (used.missing, used.ignored, used.blocking)
        items.append(ValidatedPair(pair, source, target, e_s, e_t, *kept))
    sources = [str(p) for p in run_logs]
    metadata = {
        "config": config.as_dict(),
        "similarity": getattr(similarity, "name", type(similarity).__name__),
        "verifier": getattr(verifier, "name", type(verifier).__name__),
        "extractor": getattr(extractor, "name", type(extractor).__name__),
        "sources": [{"path": p, "sha256": sha256_file(p)} for p in sources],
    }
    graph = consolidate(items, diagnoses, metadata=metadata)
    report = {
        "trajectories": outcome_counts(loaded.trajectories),
        "errors_skipped": loaded.n_errors,
        "superseded_lines": loaded.n_superseded,
        "partial_lines": list(loaded.partial_lines),
        "pairing": {"failed": pairing.n_failed, "no_success": pairing.n_no_success,
                    "below_threshold": pairing.n_below_threshold,
                    "pairs": len(pairing.pairs), "same_diagnosis": same},
        "candidates": candidates,
        "validated": {role: sum(len(getattr(i, role)) for i in items)
                      for role in ("missing", "ignored", "blocking")},
        "one_order_only": n_one_order,
        "skipped_by_before": n_skipped,
        "verifier_calls": call_counts(calls),
        "pairs_promoting": sum(i.promoting for i in items),
        "pairs_blocking_only": sum(bool(i.blocking) and not i.promoting for i in items),
        "graph": graph.counts(),
    }
    graph = graph.model_copy(update={"metadata": {**metadata, "counts": report}})
    return BuildResult(graph=graph, report=report, calls=tuple(calls))
