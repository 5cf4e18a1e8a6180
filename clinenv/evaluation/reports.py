"""Report tables from runs: the layouts of EGIP Table 1 and EGIP Tables 5/8 + CDEG Table 2.

:func:`accuracy_table` (mean ± SD over repetitions, plus coverage); the paired tables are
in :mod:`clinenv.evaluation.comparison`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clinenv.evaluation.metrics import (
    Encoder,
    accuracy,
    correctness_matrix,
    coverage,
    embedding_similarity,
    is_unparsed,
    is_unscored,
    mean_sd,
    mean_turns_exams,
    per_repetition_accuracy,
    stratify,
)
from clinenv.evaluation.runs import Run, RunsError
from clinenv.evaluation.strata import EPISODE_STRATA
from clinenv.evaluation.table import DASH, Table, _num, _pct

__all__ = ["AccuracyCell", "Table", "accuracy_cells", "accuracy_table", "missing_notes",
           "scoring_notes", "strata_and_flags"]

# ------------------------------------------------------------------------ accuracy
@dataclass(frozen=True)
class AccuracyCell:
    """Accuracy of one method on one dataset (or one stratum of it); percentages in 0..100.

    Attributes:
        label: method label.
        dataset: dataset name.
        stratum: stratum label under ``by`` (``None``: the whole dataset).
        n_cases: cases (rows of :attr:`matrix`).
        n_repetitions: repetitions (columns).
        n_episodes: episodes present in the log.
        n_correct: episodes scored correct.
        n_unscored: episodes without an identifiable answer (U); missing ones are ``n_missing``.
        n_missing: scheduled episodes absent from the log (counted as not correct).
        accuracy: pooled accuracy over the scheduled episodes.
        mean: mean of the per-repetition accuracies, the reported value.
        sd: their sample SD (``ddof=1``; NaN with one repetition).
        per_repetition: accuracy of each repetition.
        coverage: scheduled episodes with an identifiable answer.
        mean_turns: mean turns per episode.
        mean_exams: mean exams requested per episode.
        matrix: the ``(n_cases, n_repetitions)`` correctness matrix (0 for a missing episode;
            NaN for an episode outside an episode stratum).
        schedule_inferred: the schedule was inferred (an old log).
        similarity: mean answer-reference cosine (CDEG "Sim.", non-answers 0), or ``None``.
        n_unparsed: identifiable answers whose judge reply could not be read (not in U).
    """

    label: str
    dataset: str
    stratum: str | None
    n_cases: int
    n_repetitions: int
    n_episodes: int
    n_correct: int
    n_unscored: int
    n_missing: int
    accuracy: float
    mean: float
    sd: float
    per_repetition: tuple[float, ...]
    coverage: float
    mean_turns: float
    mean_exams: float
    matrix: np.ndarray = field(repr=False, compare=False)
    schedule_inferred: bool = False
    similarity: float | None = None
    n_unparsed: int = 0

    @property
    def column(self) -> tuple[str, str | None]:
        """``(dataset, stratum)``: the table column of this cell."""
        return (self.dataset, self.stratum)


def _similarity(records: Sequence[Mapping[str, Any]], n_missing: int,
                encoder: Encoder | None) -> float | None:
    """Mean answer-reference similarity over scheduled episodes (missing ones count 0)."""
    if encoder is None or not records or any(not r.get("target") for r in records):
        return None
    sims = embedding_similarity([None if is_unscored(r) else r.get("scored_answer",
                                                                     r.get("answer"))
                                 for r in records],
                                [r["target"] for r in records], encoder)
    return float(100.0 * sims.sum() / (len(records) + n_missing))


def _cell(run: Run, records: Sequence[Mapping[str, Any]], stratum: str | None,
          encoder: Encoder | None = None, *, episode_level: bool = False) -> AccuracyCell:
    if stratum is None:
        ids = list(run.case_ids)
    else:
        present_ids = {r["case_id"] for r in records}
        ids = [c for c in run.case_ids if c in present_ids]
    if episode_level:  # only the stratum's episodes are its cells; others are NaN (out)
        matrix, _ = correctness_matrix(records, case_ids=ids,
                                       n_repetitions=run.n_repetitions)
        n_missing = 0
    else:  # scheduled cells; a missing episode is 0 (not correct)
        matrix = run.matrix(ids)
        n_missing = matrix.size - len(records)
    per_rep = per_repetition_accuracy(matrix)
    mean, sd = mean_sd(per_rep)
    if episode_level:  # repetitions hold unequal shares of the stratum: pooled, no SD
        mean, sd = accuracy(matrix), math.nan
    interaction = mean_turns_exams(records)
    return AccuracyCell(
        label=run.label, dataset=run.dataset, stratum=stratum, n_cases=len(ids),
        n_repetitions=run.n_repetitions, n_episodes=len(records),
        n_correct=int(np.nansum(matrix)),
        n_unscored=sum(map(is_unscored, records)),
        n_unparsed=sum(map(is_unparsed, records)),
        n_missing=n_missing, accuracy=accuracy(matrix),
        mean=mean, sd=sd, per_repetition=tuple(float(v) for v in per_rep),
        coverage=coverage([*records, *([None] * n_missing)]),
        mean_turns=float(interaction["mean_turns"]),
        mean_exams=float(interaction["mean_exams"]), matrix=matrix,
        schedule_inferred=run.schedule_inferred,
        similarity=_similarity(records, n_missing, encoder),
    )


def accuracy_cells(runs: Sequence[Run], *, by: str | None = None,
                   encoder: Encoder | None = None) -> list[AccuracyCell]:
    """One :class:`AccuracyCell` per run (per run and stratum with ``by``).

    Args:
        runs: runs from :func:`clinenv.evaluation.runs.load_runs`.
        by: a ``case_strata`` key (e.g. ``"question_type"``); a case in several strata
            counts in each, runs without the key contribute nothing. Under an episode
            stratum (:data:`clinenv.evaluation.strata.EPISODE_STRATA`) a stratum's cells
            are its episodes only: no missing ones, the case's other episodes left out.
        encoder: an encoder for answer-reference similarity (see
            :func:`clinenv.evaluation.metrics.embedding_similarity`); ``None`` skips it.

    Raises:
        RunsError: no runs, or ``by`` names a stratum no run has (the message lists the
            strata that exist).
    """
    if not runs:
        raise RunsError("no runs to report", path="<arguments>")
    if by is None:
        return [_cell(run, run.records, None, encoder) for run in runs]
    cells = [_cell(run, records, stratum, encoder, episode_level=by in EPISODE_STRATA)
             for run in runs for stratum, records in stratify(run.records, by).items()]
    if not cells:
        raise missing_stratum(runs, by)
    return cells


def missing_stratum(runs: Sequence[Run], by: str) -> RunsError:
    """The error of a ``--by`` that no case of ``runs`` has (:func:`strata_note`)."""
    return RunsError(f"no case has stratum {by!r}; "
                     + strata_note(runs, "clinenv eval --by takes them too"),
                     path=runs[0].paths[0])


def strata_note(runs: Sequence[Any], flags_hint: str) -> str:
    """``"strata in these logs: ...; case flags in these logs (<flags_hint>): ..."``: what
    a ``--by`` could name instead (:func:`strata_and_flags`)."""
    keys, flags = strata_and_flags(runs)
    return (f"strata in these logs: {', '.join(keys) or 'none'}; case flags in these logs "
            f"({flags_hint}): {', '.join(flags) or 'none'}")


def strata_and_flags(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """What the runs' lines could be stratified by: the ``case_strata`` keys, and the
    true/false case flags (``case_flags``) that some line records, each sorted."""
    keys = sorted({k for run in runs for r in run.records
                   for k in (r.get("case_strata") or {})})
    flags = sorted({k for run in runs for r in run.records
                    for k, v in (r.get("case_flags") or {}).items() if isinstance(v, bool)})
    return keys, flags


def accuracy_table(runs: Sequence[Run], *, by: str | None = None,
                   encoder: Encoder | None = None, similarity_name: str = "similarity"
                   ) -> Table:
    """Accuracy "mean ± SD" (%) of every run: EGIP Table 1, or a per-stratum breakdown.

    Without ``by``: rows are methods, columns datasets, then one coverage column per
    dataset. With ``by``: rows are each dataset's strata, columns the methods. A method
    without a run on a dataset (or stratum) gets "–".

    Args:
        runs: the runs to report.
        by: a ``case_strata`` key to report per stratum (e.g. ``"question_type"``).
        encoder: adds a mean answer-reference similarity column (x100, CDEG "Sim."); the
            logs must record ``target``.
        similarity_name: that column's name.

    Returns:
        A :class:`Table`; its CSV has one row per run (and stratum).

    Raises:
        RunsError: see :func:`accuracy_cells`.
    """
    cells = accuracy_cells(runs, by=by, encoder=encoder)
    labels = list(dict.fromkeys(c.label for c in cells))
    datasets = list(dict.fromkeys(c.dataset for c in cells))
    columns = [(d, s) for d in datasets
               for s in sorted({c.stratum for c in cells if c.dataset == d},
                               key=lambda s: (s is not None, s or ""))]
    grid = {(c.label, c.column): c for c in cells}

    def acc(label: str, col: tuple[str, str | None]) -> str:
        cell = grid.get((label, col))
        return DASH if cell is None else f"{_pct(cell.mean)} ± {_pct(cell.sd)}"

    def cov(label: str, col: tuple[str, str | None]) -> str:
        cell = grid.get((label, col))
        return DASH if cell is None else _pct(cell.coverage)

    def sim(label: str, col: tuple[str, str | None]) -> str:
        cell = grid.get((label, col))
        return DASH if cell is None or cell.similarity is None else _pct(cell.similarity)

    notes = [_ACCURACY_NOTE]
    if by is None:
        header = ("Method", *datasets, *(f"{d} coverage" for d in datasets))
        rows = [(label, *(acc(label, col) for col in columns),
                 *(cov(label, col) for col in columns)) for label in labels]
        if encoder is not None:
            header += tuple(f"{d} {similarity_name}" for d in datasets)
            rows = [(*row, *(sim(label, col) for col in columns))
                    for row, label in zip(rows, labels, strict=True)]
            notes.append(f"{similarity_name}: mean cosine of answer and reference x 100 over "
                         "scheduled outputs (a non-answer counts 0; CDEG 'Sim.'); "
                         f"{DASH} when the log has no reference targets.")
        title = ("Accuracy (%) by method and dataset: mean ± sample SD over repetitions; "
                 "then answer coverage (%)")
        notes.append("Cases × repetitions: " + "; ".join(
            f"{col[0]} {_sizes(cells, col)}" for col in columns) + ".")
    else:
        episode_level = by in EPISODE_STRATA
        cases: dict[tuple[str, str | None], set[str]] = {}
        for run in runs:
            for stratum, records in stratify(run.records, by).items():
                cases.setdefault((run.dataset, stratum), set()).update(
                    r["case_id"] for r in records)
        header = ("Dataset", by, "Cases", *labels)
        rows = [(d, str(s), str(len(cases[(d, s)])), *(acc(label, (d, s)) for label in labels))
                for d, s in columns]
        title = (f"Accuracy (%) by stratum {by!r} and method: mean ± sample SD over "
                 "repetitions")
        reps = {label: "/".join(sorted({str(c.n_repetitions) for c in cells
                                         if c.label == label})) for label in labels}
        notes.append("Cases: distinct cases of the stratum in any run; a case with several "
                     f"{by!r} labels counts in each. Repetitions: "
                     + "; ".join(f"{label} {r}" for label, r in reps.items())
                     + ". Coverage is in the CSV.")
        if episode_level:
            title = (f"Accuracy (%) by episode stratum {by!r} and method: correct / "
                     "episodes of the stratum, pooled")
            notes.append(f"{by!r} is a stratum of episodes: a case's repetitions may fall "
                         "in different strata, so a cell is its episodes pooled (no SD: "
                         f"{DASH} after ±); missing episodes are in no stratum (the overall "
                         "table counts them); runs without exam noise are in none. The "
                         "strata are not like for like: which episodes a result was noised "
                         "in depends on the exams the doctor ordered.")
    if by is None or by not in EPISODE_STRATA:
        notes += missing_notes(runs)
    notes += unparsed_notes(cells)
    notes += scoring_notes(runs)
    if by is not None and any(c.startswith("<case ") for run in runs for c in run.case_ids):
        notes.append("Scheduled cases of which the log holds no line have no known stratum "
                     "and are left out of the per-stratum cells (they are in the overall "
                     "table).")
    if any(c.n_repetitions < 2 for c in cells) and (by is None
                                                     or by not in EPISODE_STRATA):
        notes.append(f"{DASH} after ±: a single repetition has no SD.")
    if len(cells) < len(labels) * len(columns):
        notes.append(f"{DASH}: no run of that method there.")
    return Table(title=title, header=header, rows=tuple(rows), notes=tuple(notes),
                 csv_header=ACCURACY_CSV, csv_rows=tuple(_accuracy_csv(c) for c in cells),
                 data=tuple(cells))


_ACCURACY_NOTE = ("Accuracy: percent of scheduled outputs scored correct; wrong, unscored "
                  "and non-answers stay in the denominator (EGIP 4.1). Mean ± sample SD "
                  "(ddof=1) of the per-repetition accuracies. Coverage: percent of "
                  "scheduled outputs with an identifiable answer; the others (U) are "
                  "outputs with no answer, a template placeholder or an abstention, "
                  "whatever the protocol's verdict (a native episode without a diagnosis "
                  "is AgentClinic's 'wrong' but unscored here), and missing episodes.")


def unparsed_notes(cells: Sequence[AccuracyCell]) -> list[str]:
    """One note listing the cells whose judge replies could not be read (none: ``[]``)."""
    hit = [c for c in cells if c.n_unparsed]
    if not hit:
        return []
    return ["Judge replies that could not be read (covered, not correct, not in U): "
            + "; ".join(f"{c.label} on {c.dataset}"
                        + ("" if c.stratum is None else f" / {c.stratum}")
                        + f" {c.n_unparsed}" for c in hit) + "."]


def scoring_notes(runs: Sequence[Run]) -> list[str]:
    """A note naming the scoring versions when the runs mix them (``--mixed-scoring``;
    see :func:`clinenv.evaluation.runs.load_runs`), else ``[]``."""
    where: dict[int, dict[str, None]] = {}
    for run in runs:
        for version, paths in run.scoring_versions.items():
            where.setdefault(version, {}).update(dict.fromkeys(paths))
    if len(where) < 2:
        return []
    return ["Mixed scoring versions (--mixed-scoring): " + "; ".join(
        f"version {v}: {', '.join(paths)}" for v, paths in sorted(where.items()))
        + ". Verdicts of different versions are not comparable under the same ids."]


def _sizes(cells: Sequence[AccuracyCell], col: tuple[str, str | None]) -> str:
    """``"17 × 3"``, or per method when the runs of a column differ."""
    here = [c for c in cells if c.column == col]
    shapes = {(c.n_cases, c.n_repetitions) for c in here}
    if len(shapes) == 1:
        n, r = shapes.pop()
        return f"{n} × {r}"
    return ", ".join(f"{c.label} {c.n_cases} × {c.n_repetitions}" for c in here)


def missing_notes(runs: Sequence[Run], case_ids: Sequence[Sequence[str]] | None = None
                  ) -> list[str]:
    """The notes on missing episodes and inferred schedules of ``runs``.

    Args:
        runs: the runs (each noted once).
        case_ids: per run, the cases the table uses (default: all scheduled cases).
    """
    notes, seen, inferred = [], set(), set()
    for i, run in enumerate(runs):
        ids = None if case_ids is None else tuple(case_ids[i])
        key = (run.label, run.dataset, ids)
        if key in seen:
            continue
        seen.add(key)
        n = run.n_missing(ids)
        n_cases = run.n_cases_scheduled if ids is None else len(ids)
        if n:
            notes.append(f"{n} scheduled episodes missing from {run.label} (counted as not "
                         f"correct): dataset {run.dataset}, {n_cases} cases × "
                         f"{run.n_repetitions} repetitions scheduled"
                         + ("" if ids is None else " in this comparison") + ".")
        if run.schedule_inferred and (run.label, run.dataset) not in inferred:
            inferred.add((run.label, run.dataset))
            notes.append(f"{run.label} on {run.dataset}: the log does not record its "
                         "schedule (written before n_cases_scheduled / n_repetitions); "
                         f"inferred as the cases seen × (largest repetition + 1) = "
                         f"{run.n_cases_scheduled} × {run.n_repetitions}.")
    return notes


#: CSV columns of :func:`accuracy_table`.
ACCURACY_CSV = ("method", "dataset", "stratum", "n_cases", "n_repetitions", "n_episodes",
                "n_correct", "n_unscored", "n_missing", "accuracy_mean", "accuracy_sd",
                "accuracy_pooled", "per_repetition", "coverage", "mean_turns",
                "mean_exams", "similarity", "n_unparsed")


def _accuracy_csv(c: AccuracyCell) -> tuple[Any, ...]:
    per_rep = ";".join(_num(v) for v in c.per_repetition)
    return (c.label, c.dataset, c.stratum, c.n_cases, c.n_repetitions, c.n_episodes,
            c.n_correct, c.n_unscored, c.n_missing, c.mean, c.sd, c.accuracy, per_rep,
            c.coverage, c.mean_turns, c.mean_exams, c.similarity, c.n_unparsed)
