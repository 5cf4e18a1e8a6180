"""Curricula for trainers: measured case difficulty, and round budgets carried by rows.

:func:`measure_difficulty` measures a difficulty table; :func:`assign_max_rounds` and
:func:`draw_max_rounds` write a ``max_rounds`` budget into each row (docs/training.md,
"TRL", *Curricula*).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clinenv.datasets.difficulty import (
    CaseDifficulty,
    DifficultyMethod,
    DifficultyTable,
    ranked,
)
from clinenv.seeding import keyed_uniform

__all__ = ["assign_max_rounds", "draw_max_rounds", "measure_difficulty"]


def measure_difficulty(dataset: str | Path, method: DifficultyMethod | None = None, *,
                       data_dir: str | Path | None = None,
                       allow_download: bool = False) -> DifficultyTable:
    """The difficulty table of ``dataset`` (a registry name or a case file) under
    ``method`` (default :class:`~clinenv.datasets.difficulty.DifficultyMethod`: K = 16,
    exploration 0.5, exam budgets 1, 2, 4, 8, seed 0), on the EGIP environment with its
    defaults. Deterministic: the same cases and method give the same table.

    Raises:
        clinenv.errors.DatasetNotFoundError: the dataset is not available.
    """
    from clinenv.agents.scripted_doctor import ScriptedDoctor
    from clinenv.env import EGIPEnv, EnvConfig
    from clinenv.runs.episode import run_episode
    from clinenv.seeding import episode_seed

    method = method or DifficultyMethod()
    env = EGIPEnv(env_config=EnvConfig(dataset=str(dataset), data_dir=data_dir,
                                       allow_download=allow_download))
    budgets = method.exam_budgets
    doctors = {b: ScriptedDoctor(exploration=method.exploration, exam_budget=b)
               for b in budgets}
    cases: list[CaseDifficulty] = []
    for index, case in enumerate(env.pool.cases):
        successes = 0
        for k in range(method.episodes):
            record = run_episode(env, doctors[budgets[k % len(budgets)]],
                                 case_id=case.case_id,
                                 seed=episode_seed(method.seed, k, index))
            successes += record.get("correct") is True
        assert env.runtime is not None
        cases.append(CaseDifficulty(
            case_id=case.case_id, index=index, successes=successes,
            episodes=method.episodes,
            difficulty=round(1.0 - successes / method.episodes, 6),
            n_exams=len(env.runtime.catalog),
            target_in_records=case.flags.target_in_records, rank=0))
    return DifficultyTable(dataset=env.pool.cases[0].dataset,
                           dataset_sha256=env.pool.sha256, method=method,
                           cases=ranked(cases))


def assign_max_rounds(rows: Sequence[Mapping[str, Any]], budgets: Sequence[int], *,
                      starts: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Copies of ``rows`` (order kept) with ``max_rounds`` set by position: the rows from
    ``starts[s]`` to the next start get ``budgets[s]`` (a SkyRL row in its ``extra_info``).

    Args:
        rows: task rows; for several passes, repeat them first (``list(rows) * passes``).
        budgets: T per stage, e.g. ``(5, 10, 19)``; ints >= 1, at most the environment's
            ``acquisition_rounds`` (checked at reset).
        starts: where each stage begins: from 0, strictly increasing, each < ``len(rows)``;
            default equal stages.

    Raises:
        ValueError: empty ``budgets`` or ``rows``, a budget that is not an int >= 1, or
            ``starts`` of another length, not from 0, not increasing or past the rows.
    """
    rows = list(rows)
    budgets = list(budgets)
    if not budgets:
        raise ValueError("budgets: give at least one round budget, e.g. (5, 10, 19)")
    if not rows:
        raise ValueError("rows: no rows to assign round budgets to")
    for budget in budgets:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"budgets: each must be an int >= 1, got {budget!r}")
    if starts is None:
        starts = [s * len(rows) // len(budgets) for s in range(len(budgets))]
    starts = list(starts)
    if len(starts) != len(budgets):
        raise ValueError(f"starts: {len(starts)} starts for {len(budgets)} budgets")
    if starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:], strict=False)) \
            or starts[-1] >= len(rows):
        raise ValueError(f"starts must begin at 0, increase strictly and stay below "
                         f"{len(rows)} (the rows), got {starts}")
    out = []
    stage = 0
    for position, row in enumerate(rows):
        while stage + 1 < len(starts) and position >= starts[stage + 1]:
            stage += 1
        out.append(_with_rounds(row, budgets[stage]))
    return out


def draw_max_rounds(rows: Sequence[Mapping[str, Any]], low: int, high: int, *,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Copies of ``rows`` (order kept) with ``max_rounds`` drawn uniformly from
    ``low..high`` (both included) for each row: DoctorAgent-RL's random turn budget (2 to 10
    turns per episode; arXiv 2505.19630). A GRPO group plays one row, so its rollouts share
    the budget.

    The draw is a pure function of ``seed``, the row's position and its ``case_id``
    (:func:`clinenv.seeding.keyed_uniform`): the same rows and seed give the same budgets
    in any process.

    Raises:
        ValueError: empty ``rows``, or ``low``/``high`` not ints with 1 <= low <= high
            (``high`` at most the environment's ``acquisition_rounds``, checked at reset).
    """
    rows = list(rows)
    if not rows:
        raise ValueError("rows: no rows to draw round budgets for")
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if low > high:
        raise ValueError(f"low ({low}) must be at most high ({high})")
    out = []
    for position, row in enumerate(rows):
        info = row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else row
        u = keyed_uniform(seed, "max_rounds", position, str(info.get("case_id")))
        out.append(_with_rounds(row, min(high, low + int(u * (high - low + 1)))))
    return out


def _with_rounds(row: Mapping[str, Any], budget: int) -> dict[str, Any]:
    """A copy of ``row`` with ``max_rounds``; a SkyRL row (``extra_info``) gets it there."""
    new = dict(row)
    if isinstance(new.get("extra_info"), Mapping):
        new["extra_info"] = {**new["extra_info"], "max_rounds": budget}
    else:
        new["max_rounds"] = budget
    return new
