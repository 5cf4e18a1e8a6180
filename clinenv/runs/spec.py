"""What a logged run is, in one object: the only carrier of a run's settings.

:class:`RunSpec`: the log file, the schedule, the resume and fail-fast rules and what
every line records; :func:`clinenv.runs.run` takes it whatever executes the run.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    PlainSerializer,
    PlainValidator,
    ValidationInfo,
    field_validator,
    model_validator,
)

from clinenv.case_list import CaseList
from clinenv.config_model import ConfigModel
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


def _case_list(value: Any) -> CaseList:
    """``value`` if it is a :class:`~clinenv.case_list.CaseList` (taken as is: a dict is
    not turned into one)."""
    if not isinstance(value, CaseList):
        raise ValueError("cases must be None or a clinenv.case_list.CaseList "
                         f"(read_case_list), got {type(value).__name__}")
    return value


class RunSpec(ConfigModel):
    """The settings of one logged run; frozen, checked on creation (``spec.replace(...)``).

    Integers are strict (a bool or ``"3"`` is refused; ``numpy.int64`` is stored as int).

    Attributes:
        out: the run log (JSON Lines) as a :class:`~pathlib.Path`; new or empty unless ``resume``.
        seed: the run seed, >= 0; episode seeds derive from it.
        episodes: the first N cases in dataset order, >= 1 (at most the dataset's size);
            ``None``: all cases, or those of ``cases``.
        repetitions: repetitions per case, >= 1.
        resume: continue an existing log instead of refusing it.
        retry_errors: when resuming, run error lines' episodes again (default ``True``).
        env_id: the environment id written to every line; ``None``: ``env.spec.id``.
        max_consecutive_errors: stop after this many error episodes in a row, >= 1;
            ``None``: never.
        paper_settings: a JSON-ready mapping written into every line (kept as a copy).
        cases: only the cases of this :class:`~clinenv.case_list.CaseList`; not with ``episodes``.

    Raises:
        pydantic.ValidationError: a field out of range, of the wrong kind, missing or
            unknown (the message names it), or ``episodes`` with ``cases``.
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
    cases: Annotated[CaseList, PlainValidator(_case_list),
                     PlainSerializer(dataclasses.asdict)] | None = None

    @field_validator("out", mode="before")
    @classmethod
    def _out(cls, value: Any) -> Path:
        if not isinstance(value, str | os.PathLike):
            raise ValueError(f"out must be a file path (str or os.PathLike), got {value!r}")
        return Path(value)

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: Any) -> int:
        return _integer("seed", value, 0)

    @field_validator("repetitions", mode="before")
    @classmethod
    def _repetitions(cls, value: Any) -> int:
        return _integer("repetitions", value, 1)

    @field_validator("resume", "retry_errors", mode="before")
    @classmethod
    def _flags(cls, value: Any, info: ValidationInfo) -> bool:
        return _flag(str(info.field_name), value)

    @field_validator("max_consecutive_errors", mode="before")
    @classmethod
    def _max_consecutive_errors(cls, value: Any) -> int | None:
        return check_max_consecutive_errors(value)

    @field_validator("episodes", mode="before")
    @classmethod
    def _episodes(cls, value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError("episodes must be None (all cases) or an integer >= 1, "
                             f"got {value!r}")
        return int(value)

    @field_validator("env_id", mode="before")
    @classmethod
    def _env_id(cls, value: Any) -> str | None:
        if value is not None and not (isinstance(value, str) and value):
            raise ValueError(f"env_id must be None or a non-empty string, got {value!r}")
        return value

    @field_validator("paper_settings", mode="before")
    @classmethod
    def _paper_settings(cls, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError("paper_settings must be None or a JSON-ready mapping, got "
                             f"{type(value).__name__}")
        try:
            return json.loads(json.dumps(dict(value)))
        except (TypeError, ValueError) as err:
            raise ValueError(f"paper_settings must be JSON-ready: {err}") from None

    @model_validator(mode="after")
    def _episodes_or_cases(self) -> RunSpec:
        if self.cases is not None and self.episodes is not None:
            raise ValueError("give either episodes (the first N cases) or a case list, "
                             "not both")
        return self


#: The default of each :class:`RunSpec` field (``out``: ``None``, i.e. none).
FIELD_DEFAULTS: dict[str, Any] = {
    name: None if f.is_required() else f.default for name, f in RunSpec.model_fields.items()}


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
