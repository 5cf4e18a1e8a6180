"""CDEG construction from run logs, end to end (CDEG "Counterfactual Diagnostic Evidence
Graph Construction").

:func:`build_graph`: trajectories, pairing, candidates, validation, consolidation.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from clinenv.embeddings.base import Similarity
from clinenv.embeddings.similarity import truncated_texts
from clinenv.scoring import CodeMap
from clinenv.wrappers.cdeg.candidates import CandidateSets, candidate_sets, evidence_set
from clinenv.wrappers.cdeg.consolidate import DiagnosisIndex, ValidatedPair, consolidate
from clinenv.wrappers.cdeg.extractors import AtomExtractor
from clinenv.wrappers.cdeg.graph import CDEGraph
from clinenv.wrappers.cdeg.pairing import pair_trajectories, score_summary
from clinenv.wrappers.cdeg.thresholds import DIAGNOSIS_THRESHOLD, PAIR_THRESHOLD
from clinenv.wrappers.cdeg.trajectories import Trajectory, load_trajectories, outcome_counts
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
        report: counts for people: ``trajectories`` (by outcome),
            ``max_trajectories_per_case``, ``construction_cases``, ``errors_skipped``,
            ``superseded_lines``, ``partial_lines``, ``pairing`` (with ``scores`` and
            ``truncated``), ``candidates`` and ``validated`` (by role), ``st_order_only``,
            ``skipped_by_before``, ``verifier_calls``, ``verifier``, ``pairs_promoting``,
            ``pairs_blocking_only``, ``graph`` (node and edge counts).
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


def construction_cases(trajectories: Sequence[Trajectory]) -> dict[str, list[str]]:
    """The graph's construction cases: ``{dataset: [case_id, ...]}``, every case with a
    trajectory (paired or not), in order of first appearance; the graph metadata's
    ``construction_cases`` (read back by
    :func:`clinenv.wrappers.cdeg.heldout.construction_cases`)."""
    out: dict[str, dict[str, None]] = {}
    for tau in trajectories:
        out.setdefault(tau.dataset, {})[tau.case_id] = None
    return {dataset: list(ids) for dataset, ids in out.items()}


def _limit(keys: tuple[str, ...], on: bool, cap: int | None) -> tuple[str, ...]:
    return () if not on else keys[:cap] if cap is not None else keys


def build_graph(run_logs: Sequence[str | Path], *, extractor: AtomExtractor,
                verifier: Verifier, similarity: Similarity,
                config: BuildConfig | None = None, progress: bool = False,
                pair_similarity: Similarity | None = None,
                icd_map: CodeMap | None = None,
                allow_privileged: bool = False) -> BuildResult:
    """Build a CDEG from run logs (docs/cdeg.md).

    Args:
        run_logs: ``clinenv run`` logs with K rollouts per case (one file or several).
        extractor: observation -> evidence atoms.
        verifier: compares D_s and D_t; one with ``with_examples`` first gets the
            observation texts of every atom key.
        similarity: diagnosis merging (and pairing unless ``pair_similarity``).
        config: :class:`BuildConfig` (default: the paper's values).
        progress: show a tqdm bar over the pairs being validated.
        pair_similarity: Eq. 4 pairing over τ_pre texts (default ``similarity``; use a
            long ``max_length``).
        icd_map: ICD normalization of the outcomes (Eq. 3), recorded in the metadata.
        allow_privileged: build from logs of a privileged doctor too
            (:func:`clinenv.runlog.check_privileged`).

    Raises:
        FileNotFoundError: a run log is missing.
        clinenv.runlog.RunLogError: a corrupt line or field (file and line named).
        ValueError: no run log given.
    """
    config = config or BuildConfig()
    if not run_logs:
        raise ValueError("build_graph needs at least one run log")
    pair_similarity = pair_similarity or similarity
    loaded = load_trajectories(run_logs, icd_map=icd_map, allow_privileged=allow_privileged)
    pairing = pair_trajectories(loaded.trajectories, pair_similarity,
                                threshold=config.pair_threshold)
    diagnoses = DiagnosisIndex(similarity, config.diagnosis_threshold)

    def assign(tau: Trajectory) -> int:
        try:
            return diagnoses.assign(tau.answer)
        except ValueError as err:
            raise tau.error(f"field 'answer' {tau.answer!r}: {err}") from None

    cache: dict = {}
    prepared = []
    same = 0
    for pair in pairing.pairs:
        source, target = assign(pair.failed), assign(pair.success)
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
            n_one_order += result.n_st_order_only
            n_skipped += result.n_skipped
            kept = (tuple(result.missing), tuple(result.ignored), tuple(result.blocking))
        else:
            kept = (used.missing, used.ignored, used.blocking)
        items.append(ValidatedPair(pair, source, target, e_s, e_t, *kept))
    metadata = {
        "config": config.as_dict(),
        "similarity": getattr(similarity, "name", type(similarity).__name__),
        "pair_similarity": getattr(pair_similarity, "name", type(pair_similarity).__name__),
        "verifier": getattr(verifier, "name", type(verifier).__name__),
        "extractor": getattr(extractor, "name", type(extractor).__name__),
        # the file name, not the path given: the same logs give the same graph bytes
        # wherever they lie (the sha256 identifies them)
        "sources": [{"name": Path(p).name, "sha256": sha256_file(p)} for p in run_logs],
        "construction_cases": construction_cases(loaded.trajectories),
    }
    if icd_map is not None:
        metadata["icd_map"] = {"name": Path(str(getattr(icd_map, "name", "icd map"))).name,
                               "codes": len(getattr(icd_map, "codes", ()))}
    graph = consolidate(items, diagnoses, metadata=metadata)
    report = {
        "trajectories": outcome_counts(loaded.trajectories),
        "icd_outcomes": sum(t.by_icd for t in loaded.trajectories),
        "max_trajectories_per_case": max(Counter(
            (t.dataset, t.case_id) for t in loaded.trajectories).values(), default=0),
        "construction_cases": sum(map(len, metadata["construction_cases"].values())),
        "errors_skipped": loaded.n_errors,
        "superseded_lines": loaded.n_superseded,
        "partial_lines": list(loaded.partial_lines),
        "pairing": {"failed": pairing.n_failed, "no_success": pairing.n_no_success,
                    "below_threshold": pairing.n_below_threshold,
                    "pairs": len(pairing.pairs), "same_diagnosis": same,
                    "scores": score_summary(pairing.best_scores),
                    "truncated": truncated_texts(pair_similarity)},
        "candidates": candidates,
        "validated": {role: sum(len(getattr(i, role)) for i in items)
                      for role in ("missing", "ignored", "blocking")},
        "st_order_only": n_one_order,
        "skipped_by_before": n_skipped,
        "verifier_calls": call_counts(calls),
        "verifier": {k: int(getattr(verifier, k)) for k in VERIFIER_COUNTERS
                     if isinstance(getattr(verifier, k, None), int)},
        "pairs_promoting": sum(i.promoting for i in items),
        "pairs_blocking_only": sum(bool(i.blocking) and not i.promoting for i in items),
        "graph": graph.counts(),
    }
    graph = graph.model_copy(update={"metadata": {**metadata, "counts": report}})
    return BuildResult(graph=graph, report=report, calls=tuple(calls))


#: Counters a verifier may keep (:class:`~clinenv.wrappers.cdeg.verifier.LLMVerifier`).
VERIFIER_COUNTERS = ("n_calls", "n_unparsed", "n_backend_errors", "n_truncated")


def failed_verifier_calls(report: dict[str, Any]) -> tuple[int, int]:
    """``(calls without a preference, all calls)`` of a build report's
    ``verifier_calls``."""
    calls = report.get("verifier_calls") or {}
    total = sum(sum(v.values()) for v in calls.values())
    return sum(v.get("none", 0) for v in calls.values()), total


def empty_stage(report: dict[str, Any]) -> str | None:
    """The stage that left a build without revision edges, or ``None`` when the graph
    has some. One of: ``"no trajectories"``, ``"no case with both a success and a
    failure"``, ``"no pair above the pairing threshold"``, ``"every pair has the same
    diagnosis"``, ``"no candidate evidence"``, ``"all candidates skipped by the 'before'
    preference"``, ``"verifier failures"`` (calls without a preference and nothing
    validated), ``"nothing validated"``, ``"only blocking evidence validated"``."""
    if report["graph"]["revisions"]:
        return None
    outcomes, pairing = report["trajectories"], report["pairing"]
    n_candidates = sum(report["candidates"].values())
    if not sum(outcomes.values()):
        return "no trajectories"
    if not pairing["failed"] or pairing["no_success"] == pairing["failed"]:
        return "no case with both a success and a failure"
    if not pairing["pairs"]:
        return "no pair above the pairing threshold"
    if pairing["same_diagnosis"] == pairing["pairs"]:
        return "every pair has the same diagnosis"
    if not n_candidates:
        return "no candidate evidence"
    if report["skipped_by_before"] == n_candidates:
        return "all candidates skipped by the 'before' preference"
    validated = report["validated"]
    if not (validated["missing"] or validated["ignored"]):
        none, _ = failed_verifier_calls(report)
        return "verifier failures" if none else (
            "only blocking evidence validated" if validated["blocking"] else
            "nothing validated")
    return "nothing validated"
