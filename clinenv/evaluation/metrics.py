"""Evaluation metrics on run-log records and correctness matrices (EGIP section 4.1, CDEG).

Pure functions, no I/O; :func:`is_unscored` is the one definition of EGIP's U, and the
correctness matrices are those of :mod:`clinenv.evaluation.stats`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol, get_args

import numpy as np

from clinenv.evaluation.stats import as_correctness
from clinenv.runlog import is_error_line
from clinenv.scoring import AnswerStatus, Verdict

__all__ = [
    "ANSWER_STATUSES",
    "VERDICTS",
    "Encoder",
    "HashingEncoder",
    "accuracy",
    "answer_status",
    "correctness_matrix",
    "coverage",
    "embedding_similarity",
    "is_unparsed",
    "is_unscored",
    "mean_sd",
    "mean_turns_exams",
    "per_repetition_accuracy",
    "stratify",
]

#: The verdicts a scored record may carry, in this order: ``("correct", "wrong",
#: "unscored")``, read from :data:`clinenv.scoring.Verdict` so that there is one
#: definition. Import it from here rather than spelling the tuple out again.
VERDICTS: tuple[str, ...] = tuple(get_args(Verdict))
#: The values of a record's ``answer_status`` (:data:`clinenv.scoring.AnswerStatus`).
ANSWER_STATUSES: tuple[str, ...] = tuple(get_args(AnswerStatus))


# ------------------------------------------------------------- unscored outputs (U)
def answer_status(record: Mapping[str, Any] | None) -> str:
    """Whether one scheduled output holds an identifiable final answer, and if not why.

    The one definition behind U, coverage and the run summary, whatever the protocol's
    verdict; an unreadable judge reply does not make an output unscored (:func:`is_unparsed`).

    Args:
        record: a run-log line or episode record, or ``None`` for a scheduled output
            without a record.

    Returns:
        One of :data:`ANSWER_STATUSES`: ``"answer"``, ``"no_answer"``, ``"placeholder"``,
        ``"abstained"``. No record or an error line is ``"no_answer"``; else the record's
        ``answer_status`` (scoring version 2 and later); older records are read from
        ``abstained``, ``answer``, ``verdict`` and ``judge_verdict``.
    """
    if not isinstance(record, Mapping) or is_error_line(record):
        return "no_answer"
    status = record.get("answer_status")
    if status is not None:
        return status if status in ANSWER_STATUSES else "no_answer"
    if record.get("abstained") is True:
        return "abstained"
    answer = record.get("answer")
    if "answer" in record and not (isinstance(answer, str) and answer.strip()):
        return "no_answer"
    verdict = record.get("verdict")
    if verdict == "unscored" and record.get("judge_verdict") != "unparsed":
        return "no_answer"
    if verdict is None and not (isinstance(answer, str) and answer.strip()):
        return "no_answer"
    return "answer"


def is_unscored(record: Mapping[str, Any] | None) -> bool:
    """Whether a scheduled output is unscored (EGIP's U): :func:`answer_status` is not
    ``"answer"`` (no answer, a template placeholder, an abstention, a missing or error
    record)."""
    return answer_status(record) != "answer"


def is_unparsed(record: Mapping[str, Any] | None) -> bool:
    """Whether an output with an identifiable answer got a judge reply that could not be
    read (``judge_verdict == "unparsed"``): counted apart from U, covered, not correct."""
    return (isinstance(record, Mapping) and record.get("judge_verdict") == "unparsed"
            and not is_unscored(record))


# ------------------------------------------------------------------ records → matrix
def correctness_matrix(records: Iterable[Mapping[str, Any]],
                       case_ids: Sequence[Hashable] | None = None,
                       *, n_repetitions: int | None = None) -> tuple[np.ndarray, list[str]]:
    """Build the ``(n_cases, n_repetitions)`` correctness matrix of one run.

    A cell is 1 for verdict ``"correct"``, 0 for ``"wrong"``, ``"unscored"`` or none, NaN
    with no record (``np.nan_to_num`` counts missing episodes as failures).

    Args:
        records: run-log records (``case_id``, ``repetition`` (absent → 0), ``verdict``).
        case_ids: the rows, in order; cases without a record get a NaN row, records of
            other cases are left out. Default: the records' cases, first appearance first.
        n_repetitions: number of columns; default ``1 + max(repetition)``.

    Returns:
        ``(matrix, case_ids)``: a float array of 0/1/NaN and each row's case id.

    Raises:
        ValueError: no rows; a record without ``case_id``; a bad repetition; an unknown
            verdict; two records for the same case and repetition.
    """
    records = list(records)
    cells: dict[tuple[str, int], float] = {}
    order: dict[str, None] = {}
    for i, rec in enumerate(records):
        if "case_id" not in rec:
            raise ValueError(f"record {i} has no case_id")
        case = str(rec["case_id"])
        rep = rec.get("repetition", 0)
        if isinstance(rep, bool) or not isinstance(rep, int | np.integer) or rep < 0:
            raise ValueError(f"record {i} (case {case!r}): repetition must be an integer "
                             f">= 0, got {rep!r}")
        verdict = rec.get("verdict")
        if verdict is not None and verdict not in VERDICTS:
            raise ValueError(f"record {i} (case {case!r}, repetition {rep}): unknown "
                             f"verdict {verdict!r}; expected one of {VERDICTS} or none")
        key = (case, int(rep))
        if key in cells:
            raise ValueError(f"duplicate record for case {case!r}, repetition {rep}")
        cells[key] = 1.0 if verdict == "correct" else 0.0
        order.setdefault(case, None)
    rows = list(order) if case_ids is None else [str(c) for c in case_ids]
    if len(set(rows)) != len(rows):
        raise ValueError("case_ids contains duplicates")
    if not rows:
        raise ValueError("no cases: no records and no case_ids")
    max_rep = max((rep for _, rep in cells), default=-1)
    if n_repetitions is None:
        n_repetitions = max(1, max_rep + 1)
    elif n_repetitions < 1:
        raise ValueError(f"n_repetitions must be >= 1, got {n_repetitions}")
    index = {case: i for i, case in enumerate(rows)}
    out = np.full((len(rows), n_repetitions), np.nan)
    for (case, rep), value in cells.items():
        if case not in index:
            continue
        if rep >= n_repetitions:
            raise ValueError(f"case {case!r} has repetition {rep} but n_repetitions is "
                             f"{n_repetitions}")
        out[index[case], rep] = value
    return out, rows


# -------------------------------------------------------------------------- accuracy
def accuracy(x: Any) -> float:
    """Accuracy in percent: correct outputs over scheduled outputs.

    Args:
        x: correctness matrix ``(n_cases, n_repetitions)`` of 0/1/NaN (1-D: one
            repetition). 0 covers wrong, unscored and non-answers (EGIP section 4.1:
            they stay in the denominator); NaN cells are not scheduled and are left out.

    Returns:
        ``100 * #correct / #non-NaN`` in [0, 100]; NaN when every cell is NaN.

    Raises:
        ValueError: invalid matrix (empty, values outside {0, 1, NaN}).
    """
    arr = as_correctness(x)
    present = ~np.isnan(arr)
    n = int(present.sum())
    return 100.0 * float(arr[present].sum()) / n if n else math.nan


def per_repetition_accuracy(x: Any) -> np.ndarray:
    """Accuracy in percent of each repetition (column).

    Returns:
        float array ``(n_repetitions,)``; NaN for a repetition with no scheduled output.

    Raises:
        ValueError: invalid matrix.
    """
    arr = as_correctness(x)
    present = ~np.isnan(arr)
    n = present.sum(axis=0)
    correct = np.where(present, arr, 0.0).sum(axis=0)
    out = np.full(arr.shape[1], np.nan)
    np.divide(100.0 * correct, n, out=out, where=n > 0)
    return out


def mean_sd(values: Any) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``), as reported "mean ± SD" across
    repetitions (EGIP section 4.1).

    Args:
        values: 1-D numbers, e.g. :func:`per_repetition_accuracy`. NaN entries (a
            repetition with nothing scheduled) are left out.

    Returns:
        ``(mean, sd)``; ``sd`` is NaN with a single value; both NaN when every value is
        NaN.

    Raises:
        ValueError: empty or not 1-D.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D sequence, got shape {v.shape}")
    v = v[~np.isnan(v)]
    if v.size == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan


def _identifiable(item: Any) -> bool:
    if item is None or isinstance(item, Mapping):
        return not is_unscored(item)
    return isinstance(item, str) and bool(item.strip())


def coverage(answers: Iterable[Any]) -> float:
    """Answer coverage in percent: outputs with an identifiable final answer (EGIP 4.1:
    "the percentage of scheduled outputs containing an identifiable final answer").

    Args:
        answers: one item per scheduled output: a record (identifiable unless
            :func:`is_unscored`: the definition of U, so coverage is ``100 * (1 - U /
            scheduled)``; a judge reply that could not be read does not uncover an
            identifiable answer), ``None`` (a scheduled output without a record), or an
            answer string (identifiable when non-empty after stripping). ``clinenv
            run``'s summary (:func:`clinenv.evaluation.summary.summarize`) passes its records whole,
            so both report the same coverage.

    Returns:
        Percent in [0, 100]; NaN for no items.
    """
    flags = [_identifiable(item) for item in answers]
    return 100.0 * sum(flags) / len(flags) if flags else math.nan


# ----------------------------------------------------------------------- similarity
class Encoder(Protocol):
    """Anything with ``encode(texts) -> array (len(texts), dim)``."""

    def encode(self, texts: list[str]) -> Any: ...


class HashingEncoder:
    """A hashing bag-of-words encoder: a *lexical* stand-in, not a clinical encoder.

    Lower-cased word tokens (``\\w+``) are hashed (BLAKE2b, stable across processes)
    into ``dim`` signed buckets (the hashing trick). Texts sharing words get positive
    cosine similarity; synonyms ("MI" vs "myocardial infarction") do not. Use it for tests
    and offline smoke runs; report CDEG-style similarity with a real embedding model
    (e.g. MedEmbed) passed as the ``encoder``.

    Args:
        dim: number of buckets (>= 1).
    """

    _TOKEN = re.compile(r"\w+")

    def __init__(self, dim: int = 256) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = int(dim)

    def _bucket(self, token: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(),
                           "little")
        return (h >> 1) % self.dim, 1.0 if h & 1 else -1.0

    def encode(self, texts: list[str]) -> np.ndarray:
        """Token-count vectors, float array ``(len(texts), dim)`` (not normalized)."""
        out = np.zeros((len(texts), self.dim))
        for i, text in enumerate(texts):
            for token in self._TOKEN.findall(str(text).lower()):
                j, sign = self._bucket(token)
                out[i, j] += sign
        return out


def _normalized(vectors: Any, n: int, what: str) -> np.ndarray:
    v = np.asarray(vectors, dtype=float)
    if v.ndim != 2 or v.shape[0] != n:
        raise ValueError(f"encoder returned shape {v.shape} for {n} {what}; expected "
                         f"({n}, dim)")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def embedding_similarity(predicted: Sequence[str | None], reference: Sequence[str],
                         encoder: Encoder) -> np.ndarray:
    """Cosine similarity between each predicted answer and its reference (CDEG "Sim.").

    A missing or empty prediction, or a zero vector, gets 0.0 and stays in the denominator.

    Args:
        predicted: predicted answers, ``None`` for no answer.
        reference: reference answers, same length, non-empty strings.
        encoder: any object with ``encode(list[str]) -> array (n, dim)`` (e.g. a
            sentence-transformers model, or :class:`HashingEncoder`).

    Returns:
        float array ``(n,)`` of similarities in [-1, 1].

    Raises:
        ValueError: different lengths, an empty reference (index named), or an encoder
            output of the wrong shape.
    """
    if len(predicted) != len(reference):
        raise ValueError(f"predicted has {len(predicted)} answers but reference has "
                         f"{len(reference)}")
    for i, ref in enumerate(reference):
        if not isinstance(ref, str) or not ref.strip():
            raise ValueError(f"reference {i} is empty or not a string: {ref!r}")
    out = np.zeros(len(predicted))
    keep = [i for i, p in enumerate(predicted) if isinstance(p, str) and p.strip()]
    if not keep:
        return out
    pred_vec = _normalized(encoder.encode([predicted[i] for i in keep]), len(keep),
                           "predictions")
    ref_vec = _normalized(encoder.encode([reference[i] for i in keep]), len(keep),
                          "references")
    if pred_vec.shape[1] != ref_vec.shape[1]:
        raise ValueError(f"encoder dimensions differ: {pred_vec.shape[1]} vs "
                         f"{ref_vec.shape[1]}")
    out[keep] = np.clip(np.einsum("ij,ij->i", pred_vec, ref_vec), -1.0, 1.0)
    return out


# --------------------------------------------------------------------- interaction
def mean_turns_exams(records: Iterable[Mapping[str, Any]]) -> dict[str, float | int]:
    """Mean turns and mean exams requested per episode.

    Args:
        records: run-log records; a record without ``turns`` (or ``n_exams_requested``)
            is left out of that mean.

    Returns:
        ``{"mean_turns", "mean_exams", "n_records"}``; a mean is NaN when no record has
        the field.
    """
    records = list(records)
    turns = [float(r["turns"]) for r in records if r.get("turns") is not None]
    exams = [float(r["n_exams_requested"]) for r in records
             if r.get("n_exams_requested") is not None]
    return {
        "mean_turns": float(np.mean(turns)) if turns else math.nan,
        "mean_exams": float(np.mean(exams)) if exams else math.nan,
        "n_records": len(records),
    }


def stratify(records: Iterable[Mapping[str, Any]], key: str
             ) -> dict[str, list[Mapping[str, Any]]]:
    """Group records by the stratum ``record["case_strata"][key]``.

    A list value (e.g. NEJM_Ext ``question_type`` has one or two labels) puts the record
    in each of its labels' strata (once per label), so strata may overlap and their sizes
    may sum to more than the number of records. Records without ``case_strata`` or
    without ``key`` (or with ``None``) belong to no stratum.

    Args:
        records: run-log records.
        key: the stratum name, e.g. ``"question_type"`` or ``"specialty"``.

    Returns:
        ``{label (str): [records, in input order]}``, labels sorted.
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for rec in records:
        value = (rec.get("case_strata") or {}).get(key)
        if value is None:
            continue
        labels = value if isinstance(value, list | tuple | set | frozenset) else [value]
        for label in dict.fromkeys(str(v) for v in labels if v is not None):
            groups.setdefault(label, []).append(rec)
    return {label: groups[label] for label in sorted(groups)}
