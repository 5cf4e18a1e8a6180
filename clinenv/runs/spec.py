"""What a logged run is, in one object: the only carrier of a run's settings.

:class:`RunSpec` holds the log file, the schedule (seed, episodes or a case list,
repetitions), the resume and fail-fast rules and what every line records (``env_id``,
``paper_settings``). :func:`clinenv.runs.run` / :func:`~clinenv.runs.arun` take one
whatever executes the run (:class:`~clinenv.runs.logged.Serial`,
:class:`~clinenv.runs.concurrent.Concurrent`, :class:`clinenv.distributed.Ray`), so one
spec writes the same lines (apart from ``timing`` and ``llm``) under each;
:func:`clinenv.runs.replay_run` uses its ``out``, ``resume``, ``retry_errors``
and ``max_consecutive_errors``::

    spec = RunSpec(out="runs/demo.jsonl", seed=3, repetitions=2)
    run(make_env, make_doctor, spec)
    run(make_env, make_doctor, dataclasses.replace(spec, resume=True), Concurrent(8))
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from clinenv.case_list import CaseList
from clinenv.runs.fail_fast import DEFAULT_MAX_CONSECUTIVE_ERRORS, check_max_consecutive_errors

__all__ = ["FIELD_DEFAULTS", "RunSpec", "check_spec", "check_unused"]


def _integer(name: str, value: Any, low: int) -> int:
    """``value`` as an ``int`` >= ``low`` (any integral number but a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return int(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


@dataclass(frozen=True)
class RunSpec:
    """The settings of one logged run (module docstring); frozen, checked on creation.

    Derive a variant with :func:`dataclasses.replace` (checked again).

    Attributes:
        out: the run log (JSON Lines) as a :class:`~pathlib.Path` (a ``str`` or
            path-like is converted); new or empty unless ``resume``.
        seed: the run seed, an integer >= 0; episode seeds derive from it
            (:func:`clinenv.seeding.episode_seed`).
        episodes: run the first N cases in dataset order, an integer >= 1 (at most the
            dataset's size, checked when the run is planned:
            :func:`clinenv.runs.logged.plan_episodes`); ``None``: all cases, or those of
            ``cases``.
        repetitions: repetitions per case, an integer >= 1.
        resume: continue an existing log instead of refusing it
            (:func:`clinenv.runs.logged.prepare_run`).
        retry_errors: when resuming, run the episodes whose latest line is an error line
            again (default); ``False`` keeps them.
        env_id: the environment id written to every line; ``None``: ``env.spec.id``.
        max_consecutive_errors: stop the run after this many error episodes in a row, an
            integer >= 1; ``None``: never (:mod:`clinenv.runs.fail_fast`).
        paper_settings: a JSON-ready mapping written into every line as
            ``paper_settings`` (:attr:`clinenv.runlog.RunContext.paper_settings`), kept
            as a JSON copy (later changes to the caller's dict do not reach the spec);
            ``None``: none.
        cases: run only the cases of this :class:`~clinenv.case_list.CaseList`, in
            dataset order with the seeds they have in a full run; not with ``episodes``.

    Raises:
        ValueError: a number or flag out of range or of the wrong kind, or ``episodes``
            with ``cases`` (the message names the field).
        TypeError: ``out`` is not a path, ``paper_settings`` not a JSON-ready mapping,
            ``cases`` not a :class:`~clinenv.case_list.CaseList`, or an unknown field.
    """

    out: Path
    seed: int = 0
    episodes: int | None = None
    repetitions: int = 1
    resume: bool = False
    retry_errors: bool = True
    env_id: str | None = None
    max_consecutive_errors: int | None = DEFAULT_MAX_CONSECUTIVE_ERRORS
    paper_settings: Mapping[str, Any] | None = None
    cases: CaseList | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.out, str | os.PathLike):
            raise TypeError(f"out must be a file path (str or os.PathLike), got {self.out!r}")
        checked: dict[str, Any] = {
            "out": Path(self.out),
            "seed": _integer("seed", self.seed, 0),
            "repetitions": _integer("repetitions", self.repetitions, 1),
            "resume": _flag("resume", self.resume),
            "retry_errors": _flag("retry_errors", self.retry_errors),
            "max_consecutive_errors": check_max_consecutive_errors(
                self.max_consecutive_errors),
        }
        if self.episodes is not None:
            if isinstance(self.episodes, bool) or not isinstance(self.episodes,
                                                                 numbers.Integral) \
                    or self.episodes < 1:
                raise ValueError("episodes must be None (all cases) or an integer >= 1, "
                                 f"got {self.episodes!r}")
            checked["episodes"] = int(self.episodes)
        if self.env_id is not None and not (isinstance(self.env_id, str) and self.env_id):
            raise ValueError(f"env_id must be None or a non-empty string, got {self.env_id!r}")
        if self.paper_settings is not None:
            if not isinstance(self.paper_settings, Mapping):
                raise TypeError("paper_settings must be None or a JSON-ready mapping, got "
                                f"{type(self.paper_settings).__name__}")
            try:
                checked["paper_settings"] = json.loads(json.dumps(dict(self.paper_settings)))
            except (TypeError, ValueError) as err:
                raise TypeError(f"paper_settings must be JSON-ready: {err}") from None
        if self.cases is not None:
            if not isinstance(self.cases, CaseList):
                raise TypeError("cases must be None or a clinenv.case_list.CaseList "
                                f"(read_case_list), got {type(self.cases).__name__}")
            if self.episodes is not None:
                raise ValueError("give either episodes (the first N cases) or a case list, "
                                 "not both")
        for name, value in checked.items():
            object.__setattr__(self, name, value)


#: The default of each :class:`RunSpec` field (``out``: ``None``, i.e. none).
FIELD_DEFAULTS: dict[str, Any] = {
    f.name: None if f.default is MISSING else f.default for f in fields(RunSpec)}


def _is_default(name: str, value: Any) -> bool:
    """``value`` is the default of field ``name``, or equal to it and of the same kind
    (``0`` for ``0.0`` counts, ``1`` for ``True`` does not)."""
    default = FIELD_DEFAULTS[name]
    if value is default:
        return True
    if default is None or isinstance(value, bool) != isinstance(default, bool):
        return False
    return bool(value == default)


def check_spec(spec: Any, *, caller: str) -> RunSpec:
    """``spec``, checked to be a :class:`RunSpec`.

    Raises:
        TypeError: it is not one (``caller`` named).
    """
    if not isinstance(spec, RunSpec):
        raise TypeError(f"{caller}(): spec must be a clinenv.runs.spec.RunSpec, got "
                        f"{type(spec).__name__}")
    return spec


def check_unused(spec: RunSpec, names: tuple[str, ...], *, caller: str, why: str) -> None:
    """Refuse a spec whose fields ``names``, which ``caller`` does not use, are set.

    Raises:
        ValueError: one of them differs from its default (the first one named, with
            ``why``).
    """
    for name in names:
        value = getattr(spec, name)
        if not _is_default(name, value):
            raise ValueError(f"{caller}() {why}, so RunSpec.{name}={value!r} would be "
                             f"ignored; leave it at its default "
                             f"({FIELD_DEFAULTS[name]!r})")
