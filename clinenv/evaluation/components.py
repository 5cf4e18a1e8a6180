"""Reward components of run-log lines, and their means with case-cluster bootstrap CIs.

Logged components as they are, else computed from the line and its case
(:class:`CaseLookup`); ``clinenv eval --components`` is described in docs/evaluation.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from clinenv.evaluation.metrics import stratify
from clinenv.evaluation.runs import Run, RunsError
from clinenv.evaluation.stats import bootstrap_case_means
from clinenv.evaluation.table import DASH, Table
from clinenv.reward_components import COMPONENTS, DEFAULT_EXAM_COSTS, RewardComponents

__all__ = ["COMPONENTS_CSV", "CaseLookup", "ComponentMean", "ComponentsError",
           "RunComponents", "component_ci", "component_means", "components_table",
           "line_components", "run_components"]

#: Relative tolerance under which a component's defined values count as all equal.
_TOL = 1e-12


class ComponentsError(RunsError):
    """A run-log line whose reward components cannot be had; the one-line message names
    the file, the 1-based line and the case id."""


# ------------------------------------------------------------------------ the case
#: Simulator settings that need nothing to be rebuilt (others are left out: finding a
#: case plays nothing).
_KEEP = {"patient": (None, "retrieval"), "examiner": (None, "lookup", "reader"),
         "judge": (None,)}


class CaseLookup:
    """The case of a run-log line, as its environment played it.

    The line's ``env_id`` is made with its ``env_spec`` kwargs, simulator models left
    out (nothing is played), and its pool gives the case, so a preset or a
    ``target_in_menu`` setting applies as in the run; the dataset file must be the
    run's (``dataset_sha256``). See docs/evaluation.md, "Reward components
    (``--components``)", *Old logs*.

    Environments are made once per distinct ``(env_id, env_spec kwargs)`` (a failure
    too: it is not tried again) and closed at once; their case pools are kept
    (:class:`clinenv.env.case_pool.CasePool`, shared per process).

    Args:
        data_dir: where datasets are found; default the line's ``env_spec`` kwargs, then
            ``CLINENV_DATA_DIR`` and the other places of
            :func:`clinenv.datasets.resolve_dataset`.
    """

    def __init__(self, data_dir: str | None = None) -> None:
        self.data_dir = None if data_dir is None else str(data_dir)
        self._pools: dict[tuple[str, str], Any] = {}

    def _pool(self, line: Mapping[str, Any]) -> Any:
        import gymnasium as gym

        import clinenv  # noqa: F401  (registers the ids)
        from clinenv.errors import ClinenvError

        env_id = line.get("env_id")
        if not isinstance(env_id, str) or not env_id:
            raise LookupError("the line has no env_id")
        spec = line.get("env_spec")
        kwargs = dict(spec.get("kwargs") or {}) if isinstance(spec, Mapping) else {}
        for name in ("patient_model", "examiner_model", "judge_model"):
            kwargs.pop(name, None)
        for name, keep in _KEEP.items():
            if kwargs.get(name) not in keep:
                kwargs.pop(name)
        if self.data_dir is not None:
            kwargs["data_dir"] = self.data_dir
        key = (env_id, json.dumps(kwargs, sort_keys=True, default=str))
        if key not in self._pools:
            try:
                env = gym.make(env_id, disable_env_checker=True, **kwargs)
            except (ClinenvError, gym.error.Error, ValueError, TypeError, OSError) as err:
                self._pools[key] = LookupError(
                    f"cannot make {env_id!r} from the line's env_spec "
                    f"({' '.join(str(err).split())[:300]})")
            else:
                try:
                    self._pools[key] = env.unwrapped.pool
                finally:
                    env.close()
        found = self._pools[key]
        if isinstance(found, LookupError):  # made once: a failure is not tried again
            raise LookupError(*found.args)
        return found

    def case(self, line: Mapping[str, Any]) -> Any:
        """The :class:`~clinenv.cases.Case` of ``line``.

        Raises:
            LookupError: the environment cannot be made, its dataset file is not the
                run's (``dataset_sha256``), or it has no such case; the message says
                which.
        """
        from clinenv.datasets.registry import records_digest_of

        pool = self._pool(line)
        expected = records_digest_of(line.get("dataset_sha256"))
        if expected and pool.sha256 and expected not in (pool.sha256,
                                                         *pool.sha256_aliases):
            raise LookupError(f"dataset {line.get('dataset')!r} resolves to another file "
                              f"than the run used (sha256 {pool.sha256[:12]}..., the "
                              f"line's dataset_sha256 {str(expected)[:12]}...)")
        try:
            return pool.case(str(line.get("case_id")))
        except (KeyError, IndexError) as err:
            reason = err.args[0] if err.args else err
            raise LookupError(f"the dataset has no such case ({reason})") from None


# ------------------------------------------------------------------- one line
def line_components(line: Mapping[str, Any], lookup: CaseLookup, *, path: str,
                    number: int) -> tuple[RewardComponents, bool]:
    """``(components, computed)`` of one run-log line: the logged
    ``reward_components`` (``computed`` false), or, on an older line without them,
    ``spec_of_line(line).components(line, case)`` with the case from ``lookup``
    (``computed`` true; docs/evaluation.md, "Reward components (``--components``)",
    *Old logs*).

    Raises:
        ComponentsError: the logged components are malformed, or the line has none and
            its case cannot be found or does not fit the line (file, line, case id).
    """
    from clinenv.reward_spec import RewardSpecError, spec_of_line

    case_id = line.get("case_id")
    logged = line.get("reward_components")
    if logged is not None:
        try:
            if not isinstance(logged, Mapping):
                raise ValueError(f"must be an object, got {type(logged).__name__}")
            return RewardComponents.from_dict(logged), False
        except ValueError as err:
            raise ComponentsError(f"case {case_id!r}: field 'reward_components': {err}",
                                  path=path, line=number) from None
    try:
        case = lookup.case(line)
    except LookupError as err:
        raise ComponentsError(f"case {case_id!r}: the line has no reward_components and "
                              f"its case cannot be found to compute them: {err}",
                              path=path, line=number) from None
    try:
        return spec_of_line(line).components(line, case), True
    except (RewardSpecError, ValueError) as err:
        raise ComponentsError(f"case {case_id!r}: the line has no reward_components and "
                              f"they cannot be computed: {err}", path=path,
                              line=number) from None


@dataclass(frozen=True)
class RunComponents:
    """The components of every episode of some runs.

    Attributes:
        per_run: per run, per record (in :attr:`Run.records` order), its components, or
            ``None`` for a line left out (``strict=False`` only).
        n_computed: lines whose components were computed (no ``reward_components``).
        failures: the messages of the lines left out (``strict=False``).
    """

    per_run: tuple[tuple[RewardComponents | None, ...], ...]
    n_computed: int = 0
    failures: tuple[str, ...] = ()


def run_components(runs: Sequence[Run], *, lookup: CaseLookup | None = None,
                   strict: bool = True) -> RunComponents:
    """The components of every record of ``runs`` (:func:`line_components`).

    Args:
        runs: runs of :func:`clinenv.evaluation.runs.load_runs`.
        lookup: where cases are found (default a fresh :class:`CaseLookup`).
        strict: raise on the first line without components; ``False`` leaves it out
            (``None``) and records its message in :attr:`RunComponents.failures`.

    Raises:
        ComponentsError: with ``strict``, the first line whose components cannot be had.
    """
    lookup = lookup or CaseLookup()
    per_run, computed, failures = [], 0, []
    for run in runs:
        values: list[RewardComponents | None] = []
        for record, (path, number) in zip(run.records, run.sources, strict=True):
            try:
                components, was_computed = line_components(record, lookup, path=path,
                                                           number=number)
            except ComponentsError as err:
                if strict:
                    raise
                failures.append(str(err))
                values.append(None)
                continue
            computed += was_computed
            values.append(components)
        per_run.append(tuple(values))
    return RunComponents(tuple(per_run), computed, tuple(failures))


# ------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class ComponentMean:
    """The mean of one component of one run (or stratum) with its bootstrap CI.

    Attributes:
        label: method label.
        dataset: dataset name.
        stratum: stratum under ``by`` (``None``: the whole run).
        component: the component's name (:data:`~clinenv.reward_components.COMPONENTS`).
        mean: the mean over the episodes where it is defined (NaN when ``n`` is 0).
        low, high: the percentile interval (NaN for fewer than two cases).
        n: episodes where it is defined (not ``None``).
        n_cases: cases with at least one such episode (the bootstrap's clusters).
        n_episodes: episodes of the run (or stratum) with components.
        n_resamples: bootstrap resamples.
        confidence: nominal coverage.
        degenerate: no sampling spread: a single case (NaN bounds) or all defined
            values equal (``low == high == mean``).
    """

    label: str
    dataset: str
    stratum: str | None
    component: str
    mean: float
    low: float
    high: float
    n: int
    n_cases: int
    n_episodes: int
    n_resamples: int
    confidence: float
    degenerate: bool


def component_ci(values: Sequence[Sequence[float]], *, n_resamples: int = 10_000,
                 confidence: float = 0.95, seed: Any = None
                 ) -> tuple[float, float, float, bool]:
    """``(mean, low, high, degenerate)`` of values grouped by case.

    A case-cluster percentile bootstrap: a resample draws cases with replacement, each
    with all its values, and its statistic is the pooled mean of the drawn values
    (docs/evaluation.md, "Reward components (``--components``)", *The CI*).

    Args:
        values: per case, its defined values (cases without one are left out here).
        n_resamples: bootstrap resamples.
        confidence: nominal coverage, strictly between 0 and 1.
        seed: anything :func:`numpy.random.default_rng` accepts.

    Returns:
        The pooled mean over all values and its percentile interval
        (``numpy.quantile`` at ``(1 -/+ confidence) / 2`` of the resampled pooled means,
        cases drawn with :func:`~clinenv.evaluation.stats.bootstrap_case_means`); NaN
        everywhere without a value; NaN bounds for a single case; ``low == high ==
        mean`` when every value is equal.

    Raises:
        ValueError: ``confidence`` not in (0, 1) or ``n_resamples < 1``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    groups = [[float(v) for v in group] for group in values if len(group)]
    flat = [v for group in groups for v in group]
    if not flat:
        return math.nan, math.nan, math.nan, True
    mean = math.fsum(flat) / len(flat)
    if len(groups) < 2:
        return mean, math.nan, math.nan, True
    if max(flat) - min(flat) <= _TOL * max(1.0, abs(mean)):
        return mean, mean, mean, True
    per_case = np.array([[math.fsum(group), len(group)] for group in groups])
    drawn = bootstrap_case_means(per_case, int(n_resamples), np.random.default_rng(seed))
    means = drawn[:, 0] / drawn[:, 1]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return mean, float(low), float(high), False


def _by_case(records: Sequence[Mapping[str, Any]],
             components: Sequence[RewardComponents | None], name: str
             ) -> list[list[float]]:
    """Per case (in order of first appearance), the defined values of ``name``."""
    cases: dict[str, list[float]] = {}
    for record, values in zip(records, components, strict=True):
        if values is None:
            continue
        value = values[name]
        group = cases.setdefault(str(record["case_id"]), [])
        if value is not None:
            group.append(float(value))
    return list(cases.values())


def component_means(runs: Sequence[Run], components: RunComponents | None = None, *,
                    by: str | None = None, n_resamples: int = 10_000, seed: int | None = 0,
                    confidence: float = 0.95, lookup: CaseLookup | None = None
                    ) -> list[ComponentMean]:
    """One :class:`ComponentMean` per run (and stratum with ``by``) and component.

    Args:
        runs: runs of :func:`clinenv.evaluation.runs.load_runs`.
        components: their components (default :func:`run_components` with ``lookup``,
            strict).
        by: a ``case_strata`` key; a record in several strata counts in each, a record
            without the key in none.
        n_resamples: bootstrap resamples.
        confidence: the interval's level, in (0, 1).
        seed: base seed; each (method, dataset, stratum, component) draws from its own
            stream derived from it and those names; ``None``: fresh entropy.
        lookup: where cases are found when ``components`` is not given.

    Raises:
        ComponentsError: a line whose components cannot be had (``components`` not
            given).
        RunsError: no runs, or ``by`` names a stratum no run has.
    """
    from clinenv.evaluation.comparison import _seed_for

    if not runs:
        raise RunsError("no runs to report", path="<arguments>")
    if components is None:
        components = run_components(runs, lookup=lookup)
    out: list[ComponentMean] = []
    for run, values in zip(runs, components.per_run, strict=True):
        of = {id(r): v for r, v in zip(run.records, values, strict=True)}
        groups = ({None: list(run.records)} if by is None
                  else stratify(run.records, by))
        for stratum, records in groups.items():
            mine = [of[id(r)] for r in records]
            n_episodes = sum(v is not None for v in mine)
            for name in COMPONENTS:
                cases = _by_case(records, mine, name)
                ci_seed = None if seed is None else _seed_for(
                    seed, run.label, run.dataset, stratum or "", name)
                mean, low, high, degenerate = component_ci(
                    cases, n_resamples=n_resamples, confidence=confidence, seed=ci_seed)
                out.append(ComponentMean(
                    label=run.label, dataset=run.dataset, stratum=stratum, component=name,
                    mean=mean, low=low, high=high, n=sum(map(len, cases)),
                    n_cases=sum(1 for c in cases if c), n_episodes=n_episodes,
                    n_resamples=int(n_resamples), confidence=float(confidence),
                    degenerate=degenerate))
    if by is not None and not out:
        from clinenv.evaluation.reports import missing_stratum

        raise missing_stratum(runs, by)
    return out


# ------------------------------------------------------------------------ the table
#: CSV columns of :func:`components_table`.
COMPONENTS_CSV = ("method", "dataset", "stratum", "component", "mean", "ci_low", "ci_high",
                  "n", "n_cases", "n_episodes", "confidence", "n_resamples", "degenerate")


def _value(x: float) -> str:
    return DASH if x is None or math.isnan(x) else f"{x:.3f}"


def _interval(c: ComponentMean) -> str:
    if math.isnan(c.low) or math.isnan(c.high):
        return DASH
    return f"[{c.low:.3f}, {c.high:.3f}]"


def components_table(runs: Sequence[Run], components: RunComponents | None = None, *,
                     by: str | None = None, n_resamples: int = 10_000,
                     seed: int | None = 0, confidence: float = 0.95,
                     lookup: CaseLookup | None = None) -> Table:
    """The mean of each reward component with its case-cluster bootstrap CI, per method
    and dataset (and stratum with ``by``): ``clinenv eval --components``.

    Args:
        runs: as :func:`component_means`.
        components: as :func:`component_means`.
        by: as :func:`component_means`.
        n_resamples: as :func:`component_means`.
        seed: as :func:`component_means`.
        confidence: as :func:`component_means`.
        lookup: as :func:`component_means`.

    Returns:
        A :class:`~clinenv.evaluation.table.Table`, one row per method, dataset (stratum)
        and component; its CSV is :data:`COMPONENTS_CSV`, full precision.

    Raises:
        ComponentsError, RunsError: as :func:`component_means`.
    """
    if components is None:
        components = run_components(runs, lookup=lookup)
    cells = component_means(runs, components, by=by, n_resamples=n_resamples, seed=seed,
                            confidence=confidence)
    pct = f"{round(100 * confidence)}% CI"
    if by is None:
        header = ("Method", "Dataset", "Component", "Mean", pct, "n")
        rows = [(c.label, c.dataset, c.component, _value(c.mean), _interval(c), str(c.n))
                for c in cells]
        title = ("Reward components by method and dataset: mean over the episodes where "
                 "each is defined, with a case-cluster bootstrap CI")
    else:
        header = ("Dataset", by, "Method", "Component", "Mean", pct, "n")
        order = sorted(range(len(cells)), key=lambda i: (
            cells[i].dataset, cells[i].stratum or "", i))
        rows = [(c.dataset, str(c.stratum), c.label, c.component, _value(c.mean),
                 _interval(c), str(c.n)) for c in (cells[i] for i in order)]
        title = (f"Reward components by stratum {by!r} and method: mean over the episodes "
                 "where each is defined, with a case-cluster bootstrap CI")
    notes = [
        "Components (docs/rewards.md): diagnosis and format 0/1; workup_recall, "
        "workup_precision, workup_f1 in [0, 1] (with the menu shown every menu pick is "
        "recorded, so precision is 1 by construction and recall is the share of the menu "
        "ordered); exam_spend in the spec's cost units; turns and invalid_actions counts.",
        "Mean over the episodes where the component is defined; n counts them. Undefined "
        "values (None: no recorded exam, native protocols) are left out, never counted "
        "as 0. Error and cut-off lines count under the unfinished rule (diagnosis 0, "
        "format 0); scheduled episodes missing from a log have no components.",
        f"{pct}: case-cluster percentile bootstrap ({n_resamples} resamples, seed {seed}):"
        " cases drawn with replacement with all their repetitions, the statistic the "
        f"pooled mean of the drawn episodes. {DASH}: a single case or no defined value; "
        "equal values give a zero-width interval.",
    ]
    if components.n_computed:
        notes.append(f"{components.n_computed} episode(s) from logs written before "
                     "reward_components: computed from the line and its case "
                     "(spec_of_line(line).components(line, case)), not re-run.")
    costs = sorted({spec_name for run in runs for spec_name in _custom_costs(run)})
    if costs:
        notes.append("exam_spend under the cost table of each run's reward spec; "
                     f"non-default tables: {', '.join(costs)}.")
    if components.failures:
        notes.append(f"{len(components.failures)} episode(s) without components, left "
                     f"out; first: {components.failures[0]}")
    csv_rows = tuple((c.label, c.dataset, c.stratum, c.component, c.mean, c.low, c.high,
                      c.n, c.n_cases, c.n_episodes, c.confidence, c.n_resamples,
                      c.degenerate) for c in cells)
    return Table(title=title, header=header, rows=tuple(rows), notes=tuple(notes),
                 csv_header=COMPONENTS_CSV, csv_rows=csv_rows, data=tuple(cells))


def _custom_costs(run: Run) -> set[str]:
    """Names of the reward specs with a non-default cost table among the run's lines."""
    from clinenv.reward_spec import RewardSpecError, spec_of_line

    names = set()
    for record in run.records:
        try:
            spec = spec_of_line(record)
        except RewardSpecError:
            continue
        if dict(spec.exam_costs) != dict(DEFAULT_EXAM_COSTS):
            names.add(spec.name)
    return names
