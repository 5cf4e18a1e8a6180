"""Case difficulty tables: how hard a case is for a doctor that does not know Y.

Difficulty is ``1 - successes / episodes`` of a sampling scripted doctor; tables are JSON
(:data:`DIFFICULTY_FORMAT`), shipped for :data:`SHIPPED`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from clinenv.config_model import ConfigModel, first_error

__all__ = ["DIFFICULTY_FORMAT", "SHIPPED", "CaseDifficulty", "DifficultyError",
           "DifficultyMethod", "DifficultyTable", "curriculum_key", "load_difficulty",
           "ranked", "shipped_difficulty"]

#: Format tag of a difficulty table.
DIFFICULTY_FORMAT = "clinenv.difficulty/1"
#: Registry names whose tables ship with clinenv (``data/difficulty/<name>.json``).
SHIPPED = ("demo", "medqa", "nejm")


class DifficultyError(ValueError):
    """A difficulty table that cannot be read or does not fit the cases (the file and
    the field or case named)."""


class DifficultyMethod(ConfigModel):
    """How a table is measured (the flags of ``clinenv data difficulty``).

    Attributes:
        episodes: K, seeded episodes per case (1..1000).
        exploration: the scripted doctor's sampling probability (0 < x <= 1).
        exam_budgets: exam budgets cycled over the episodes (each 0..64; 1..16 of them).
        seed: the run seed of the episode seeds (>= 0).
    """

    episodes: int = Field(default=16, ge=1, le=1000)
    exploration: float = Field(default=0.5, gt=0.0, le=1.0)
    exam_budgets: tuple[int, ...] = Field(default=(1, 2, 4, 8), min_length=1,
                                          max_length=16)
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _budgets(self) -> DifficultyMethod:
        bad = [b for b in self.exam_budgets if not 0 <= b <= 64]
        if bad:
            raise ValueError(f"exam_budgets: each must be in 0..64, got {bad}")
        return self


class CaseDifficulty(ConfigModel):
    """One case of a table.

    Attributes:
        case_id, index: the case and its 0-based dataset index.
        successes, episodes: correct episodes of K.
        difficulty: ``1 - successes / episodes``, rounded to 6 decimals.
        n_exams: recorded exams (catalog entries).
        target_in_records: the case flag.
        rank: 0-based position in the curriculum order (0: easiest).
    """

    case_id: str
    index: int = Field(ge=0)
    successes: int = Field(ge=0)
    episodes: int = Field(ge=1)
    difficulty: float = Field(ge=0.0, le=1.0)
    n_exams: int = Field(ge=0)
    target_in_records: bool
    rank: int = Field(ge=0)


class DifficultyTable(ConfigModel):
    """A difficulty table; :meth:`order` sorts case ids by it."""

    format: Literal["clinenv.difficulty/1"] = DIFFICULTY_FORMAT
    dataset: str
    dataset_sha256: str | None = None
    method: DifficultyMethod = DifficultyMethod()
    cases: tuple[CaseDifficulty, ...]

    @model_validator(mode="after")
    def _consistent(self) -> DifficultyTable:
        ids = [c.case_id for c in self.cases]
        if len(set(ids)) != len(ids):
            raise ValueError("cases: a case_id is listed twice")
        if sorted(c.rank for c in self.cases) != list(range(len(self.cases))):
            raise ValueError("cases: the ranks are not 0..n-1")
        return self

    def by_id(self) -> dict[str, CaseDifficulty]:
        """``{case_id: CaseDifficulty}``."""
        return {c.case_id: c for c in self.cases}

    def order(self, case_ids: Iterable[str]) -> list[str]:
        """``case_ids`` in curriculum order (easiest first).

        Raises:
            DifficultyError: an id the table lacks (the first few named).
        """
        table = self.by_id()
        ids = list(case_ids)
        missing = [i for i in ids if i not in table]
        if missing:
            raise DifficultyError(f"the {self.dataset} difficulty table has no case "
                                  f"{', '.join(map(repr, missing[:5]))}"
                                  + (f" (and {len(missing) - 5} more)" if len(missing) > 5
                                     else "") + "; rebuild it with clinenv data difficulty")
        return sorted(ids, key=lambda i: table[i].rank)

    def to_json(self) -> str:
        """The file text: the header fields, then one case per line."""
        head = self.model_dump(mode="json", exclude={"cases"})
        fields = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
        lines = [json.dumps(c.model_dump(mode="json")) for c in self.cases]
        return ("{\n" + "\n".join(fields) + '\n "cases": [\n  ' + ",\n  ".join(lines)
                + "\n ]\n}\n")


def curriculum_key(case: CaseDifficulty) -> tuple[float, bool, int, int]:
    """The sort key of the curriculum order: difficulty, ``target_in_records`` first,
    fewer exams, dataset index."""
    return (case.difficulty, not case.target_in_records, case.n_exams, case.index)


def ranked(cases: Sequence[CaseDifficulty]) -> tuple[CaseDifficulty, ...]:
    """``cases`` (dataset order kept) with ``rank`` set by :func:`curriculum_key`."""
    order = sorted(range(len(cases)), key=lambda i: curriculum_key(cases[i]))
    rank = {i: r for r, i in enumerate(order)}
    return tuple(c.replace(rank=rank[i]) for i, c in enumerate(cases))


def load_difficulty(source: str | Path) -> DifficultyTable:
    """A table: a shipped one by registry name (:data:`SHIPPED`, e.g. ``"medqa"``), or a
    file (a path, or a string that names an existing file or ends in ``.json``).

    Raises:
        DifficultyError: no shipped table of that name (the shipped ones listed), an
            unreadable file, or a field that does not parse (file and field named).
    """
    from clinenv.datasets.registry import normalize_name

    if isinstance(source, Path) or str(source).endswith(".json") or Path(source).is_file():
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise DifficultyError(f"difficulty table {path}: {err}") from None
        return _parse(text, str(path))
    name = normalize_name(str(source))
    if name not in SHIPPED:
        raise DifficultyError(f"no shipped difficulty table for {source!r}; shipped: "
                              f"{', '.join(SHIPPED)}. Build one with clinenv data "
                              "difficulty DATASET --out FILE and pass the file")
    ref = resources.files("clinenv.datasets").joinpath("data", "difficulty", f"{name}.json")
    return _parse(ref.read_text(encoding="utf-8"), f"clinenv's {name}.json")


def shipped_difficulty(records_sha256: str | None) -> DifficultyTable | None:
    """The shipped table measured on the records with this digest, or ``None``."""
    if records_sha256 is None:
        return None
    for name in SHIPPED:
        table = load_difficulty(name)
        if table.dataset_sha256 == records_sha256:
            return table
    return None


def _parse(text: str, where: str) -> DifficultyTable:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DifficultyError(f"difficulty table {where}: not JSON ({err})") from None
    if not isinstance(data, dict) or data.get("format") != DIFFICULTY_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise DifficultyError(f"difficulty table {where}: format must be "
                              f"{DIFFICULTY_FORMAT!r}, got {found!r}")
    try:
        return DifficultyTable.model_validate(data)
    except ValidationError as err:
        field, message = first_error(err, "(table)")
        raise DifficultyError(f"difficulty table {where}: {field}: {message}") from None
