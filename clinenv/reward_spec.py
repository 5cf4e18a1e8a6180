"""Reward specs: weights over the reward components, an optional gate, the exam costs.

``reward = sum(weight * value)`` (``None`` counts 0); :data:`PRESETS` and the JSON form
(:func:`load_reward_spec`) are in docs/rewards.md.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from clinenv.cases import Case
from clinenv.config_model import ConfigModel
from clinenv.errors import ClinenvError
from clinenv.reward_components import (
    COMPONENTS,
    DEFAULT_EXAM_COSTS,
    TIERS,
    ReadOnlyDict,
    RewardComponents,
    reward_components,
)

__all__ = ["DEFAULT_SPEC", "GATES", "PRESETS", "RewardSpec", "RewardSpecError",
           "load_reward_spec", "spec_of_line"]

#: Components that may gate the other terms (0/1 valued).
GATES: tuple[str, ...] = ("format", "diagnosis")
#: Keys of the JSON form.
KEYS: tuple[str, ...] = ("name", "weights", "gate", "exam_costs", "sha256")
#: The fields that make two specs equal (all but ``source``).
_COMPARED: tuple[str, ...] = KEYS


class RewardSpecError(ClinenvError, ValueError):
    """A reward spec is invalid. The one-line message names the file (when there is
    one), the field and, for a misspelt name, the nearest valid one: ``reward spec
    my.json, field 'weights.workup_f2': unknown component 'workup_f2'; did you mean
    'workup_f1'? (components: ...)``.

    Attributes:
        source: the file, or ``None`` for an in-memory spec.
        field: the dotted field (``"weights.workup_f1"``), or ``None``.
        reason: what is wrong, in words.
    """

    def __init__(self, reason: str, *, source: str | os.PathLike | None = None,
                 field: str | None = None) -> None:
        self.source = None if source is None else str(source)
        self.field = field
        self.reason = reason
        where = "reward spec" if self.source is None else f"reward spec {self.source}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {reason}")


def _nearest(name: Any, choices: tuple[str, ...] | list[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest choice, else ``""``."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def _short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters (a 400-digit integer stays one short line)."""
    text = repr(value)
    if len(text) <= 40:
        return text
    size = (f"{len(str(abs(int(value))))} digits" if isinstance(value, numbers.Integral)
            else f"{len(text)} characters")
    return f"{text[:20]}... ({size})"


def _number(value: Any, *, what: str, source: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise RewardSpecError(f"{what} must be a number, got {_short(value)}", source=source,
                              field=field)
    try:
        number = float(value)  # an integer beyond the float range overflows here
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise RewardSpecError(f"{what} must be a finite number, got {_short(value)}",
                              source=source, field=field)
    return number


class RewardSpec(ConfigModel):
    """Weights over the components, an optional gate, the exam-cost table; frozen
    (``spec.replace(...)``); ``RewardSpec("mine", {"diagnosis": 1.0})`` by position.

    Attributes:
        name: a label (a preset's name, a file's ``"name"``, else ``"custom"``).
        weights: ``{component: finite float}`` over :data:`~clinenv.reward_components.COMPONENTS`,
            at least one non-zero; read-only (a change is a ``TypeError``).
        gate: ``None``, or one of :data:`GATES`: the other weighted terms count only when it is 1.
        exam_costs: ``{tier: finite float >= 0}`` for every tier of
            :data:`~clinenv.reward_components.TIERS` (missing tiers default); read-only.
        sha256: sha256 of the file the spec was read from, else ``None``.
        source: where it was read from, for messages only (not compared or dumped).

    Equal specs are those of equal content; the hash is that of :meth:`to_json`.

    Raises:
        RewardSpecError: an unknown component, tier or gate, a weight or cost that is not a
            finite number, or no non-zero weight (the field and the nearest name named);
            inside a :class:`pydantic.ValidationError` through ``model_validate``.
        TypeError: an unknown or missing argument.
    """

    name: str
    weights: Mapping[str, float]
    gate: str | None = None
    exam_costs: Mapping[str, float] = Field(
        default_factory=lambda: ReadOnlyDict(DEFAULT_EXAM_COSTS))
    sha256: str | None = None
    source: SkipJsonSchema[str | None] = Field(default=None, repr=False, exclude=True)

    def __init__(self, name: Any, weights: Any, gate: Any = None,
                 exam_costs: Any = DEFAULT_EXAM_COSTS, sha256: Any = None,
                 source: Any = None) -> None:
        try:
            super().__init__(name=name, weights=weights, gate=gate, exam_costs=exam_costs,
                             sha256=sha256, source=source)
        except ValidationError as err:  # the checks' own error, not pydantic's wrapper
            found = err.errors()[0].get("ctx", {}).get("error")
            if isinstance(found, RewardSpecError):
                raise found from None
            raise

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, data: Any) -> Any:
        """The fields checked and normalised (class docstring), the first fault a
        :class:`RewardSpecError`."""
        if not isinstance(data, Mapping) or "name" not in data or "weights" not in data:
            return data  # pydantic names what is missing
        values = dict(data)
        src = values["source"] = None if values.get("source") is None else str(values["source"])
        name, weights, gate = values["name"], values["weights"], values.get("gate")
        exam_costs = values.get("exam_costs", DEFAULT_EXAM_COSTS)
        sha256 = values.get("sha256")
        if not isinstance(name, str) or not name:
            raise RewardSpecError(f"name must be a non-empty string, got {name!r}",
                                  source=src, field="name")
        if not isinstance(weights, Mapping):
            raise RewardSpecError("weights must be an object {component: number}, got "
                                  f"{type(weights).__name__}", source=src,
                                  field="weights")
        checked = {}
        for key, value in weights.items():
            if key not in COMPONENTS:
                raise RewardSpecError(f"unknown component {key!r}{_nearest(key, COMPONENTS)}"
                                      f" (components: {', '.join(COMPONENTS)})", source=src,
                                      field=f"weights.{key}")
            checked[key] = _number(value, what="a weight", source=src,
                                   field=f"weights.{key}")
        if gate is not None and gate not in GATES:
            raise RewardSpecError(f"unknown gate {gate!r}{_nearest(gate, GATES)} "
                                  f"(gates: {', '.join(GATES)}, or null)", source=src,
                                  field="gate")
        if not isinstance(exam_costs, Mapping):
            raise RewardSpecError("exam_costs must be an object {tier: number}, got "
                                  f"{type(exam_costs).__name__}", source=src,
                                  field="exam_costs")
        costs = dict(DEFAULT_EXAM_COSTS)
        for key, value in exam_costs.items():
            if key not in TIERS:
                raise RewardSpecError(f"unknown tier {key!r}{_nearest(key, TIERS)} "
                                      f"(tiers: {', '.join(TIERS)})", source=src,
                                      field=f"exam_costs.{key}")
            cost = _number(value, what="a cost", source=src, field=f"exam_costs.{key}")
            if cost < 0:
                raise RewardSpecError(f"a cost must be >= 0, got {value!r}", source=src,
                                      field=f"exam_costs.{key}")
            costs[key] = cost
        if sha256 is not None and not isinstance(sha256, str):
            raise RewardSpecError(f"sha256 must be a string or null, got {sha256!r}",
                                  source=src, field="sha256")
        if not any(checked.values()):
            raise RewardSpecError("gives no component a non-zero weight, so the reward "
                                  "would always be 0 (e.g. {\"diagnosis\": 1.0})",
                                  source=src, field="weights")
        # read-only copies: a spec (a preset above all) is shared by every environment
        values["weights"] = ReadOnlyDict(checked)
        values["exam_costs"] = ReadOnlyDict({tier: costs[tier] for tier in TIERS})
        return values

    @field_validator("weights", "exam_costs", mode="after")
    @classmethod
    def _read_only(cls, value: Mapping[str, float]) -> ReadOnlyDict:
        """pydantic's ``Mapping`` check returns a plain ``dict``: read-only again."""
        return value if isinstance(value, ReadOnlyDict) else ReadOnlyDict(value)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _COMPARED)

    def __hash__(self) -> int:
        return hash(self.to_json())

    # ------------------------------------------------------------------ use
    def reward(self, components: RewardComponents | Mapping[str, Any]) -> float:
        """``sum(weight * value)`` over the weighted components (``None`` counts 0),
        the gate applied (class docstring); a float."""
        get = components.__getitem__
        open_ = self.gate is None or get(self.gate) == 1
        total = []
        for name, weight in self.weights.items():
            value = get(name)
            if value is None or weight == 0:
                continue
            if not open_ and name not in ("diagnosis", self.gate):
                continue
            total.append(weight * float(value))
        return float(math.fsum(total))

    def components(self, record: Mapping[str, Any], case: Case) -> RewardComponents:
        """:func:`~clinenv.reward_components.reward_components` with this spec's costs."""
        return reward_components(record, case, exam_costs=self.exam_costs)

    def score(self, record: Mapping[str, Any], case: Case) -> float:
        """``self.reward(self.components(record, case))``: the spec reward of a record
        (finished or cut off), without the legacy per-step terms."""
        return self.reward(self.components(record, case))

    # ----------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form: ``name``, ``weights`` (in component order),
        ``gate``, ``exam_costs`` (every tier) and, for a file, ``sha256``."""
        data: dict[str, Any] = {
            "name": self.name,
            "weights": {k: self.weights[k] for k in COMPONENTS if k in self.weights},
            "gate": self.gate,
            "exam_costs": dict(self.exam_costs),
        }
        if self.sha256 is not None:
            data["sha256"] = self.sha256
        return data

    def to_json(self) -> str:
        """:meth:`to_dict` as compact JSON (what ``env_spec`` records)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def describe(self) -> dict[str, Any]:
        """:meth:`to_dict` (what :func:`clinenv.runlog.env_spec_dict` records for a spec
        object given to ``gym.make``)."""
        return self.to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | os.PathLike | None = None,
                  name: str = "custom") -> RewardSpec:
        """A spec from its JSON form (keys :data:`KEYS`, ``weights`` required:
        docs/rewards.md, "Reward specs"); ``name`` when it has none.

        Raises:
            RewardSpecError: an unknown key, a missing ``weights`` or an invalid field.
        """
        src = None if source is None else str(source)
        if not isinstance(data, Mapping):
            raise RewardSpecError(f"must be a JSON object, got {type(data).__name__}",
                                  source=src)
        for key in data:
            if key not in KEYS:
                raise RewardSpecError(f"unknown key {key!r}{_nearest(key, KEYS)} (keys: "
                                      f"{', '.join(KEYS[:4])})", source=src, field=str(key))
        if "weights" not in data:
            raise RewardSpecError("is missing (an object {component: number})",
                                  source=src, field="weights")
        return cls(name=data.get("name", name), weights=data["weights"],
                   gate=data.get("gate"),
                   exam_costs=data.get("exam_costs", DEFAULT_EXAM_COSTS),
                   sha256=data.get("sha256"), source=src)


#: The presets by name (docs/rewards.md); read-only, like each spec's weights.
PRESETS: Mapping[str, RewardSpec] = MappingProxyType({
    "accuracy": RewardSpec("accuracy", {"diagnosis": 1.0}),
    "diagagent": RewardSpec("diagagent", {"diagnosis": 1.0, "workup_f1": 0.5,
                                          "turns": -0.01}),
    "cost-aware": RewardSpec("cost-aware", {"diagnosis": 1.0, "exam_spend": -0.03}),
})
#: The default spec: ``accuracy``.
DEFAULT_SPEC = PRESETS["accuracy"]


def _read_file(path: Path) -> RewardSpec:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        hint = (f"; did you mean the preset {path.stem!r} (a preset name, without "
                ".json)?" if path.stem in PRESETS else "")
        raise RewardSpecError(f"no such file{hint}", source=path) from None
    except IsADirectoryError:
        raise RewardSpecError("is a folder; give a JSON file", source=path) from None
    except OSError as err:
        raise RewardSpecError(f"cannot be read ({err.strerror or err})", source=path) from None
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise RewardSpecError("is not UTF-8 text", source=path) from None
    except ValueError as err:
        raise RewardSpecError(f"is not valid JSON ({err})", source=path) from None
    spec = RewardSpec.from_dict(data, source=path)  # no "name": "custom", never the stem
    return spec.replace(sha256=hashlib.sha256(raw).hexdigest())


def load_reward_spec(value: Any) -> RewardSpec:
    """The :class:`RewardSpec` named by ``value``.

    Args:
        value: a :class:`RewardSpec` (returned as is), a preset name of
            :data:`PRESETS`, a path to a JSON file (a path-like, or a ``str`` that ends
            in ``.json``, holds a path separator or names an existing path), or the
            JSON form as a dict (``env_spec``'s).

    Raises:
        RewardSpecError: an unknown preset (the nearest named), an empty name, a missing
            file (one named like a preset suggests the preset), an invalid file, or an
            invalid spec (the checks: docs/rewards.md, "Reward specs").
    """
    if isinstance(value, RewardSpec):
        return value
    if isinstance(value, Mapping):
        return RewardSpec.from_dict(value)
    if isinstance(value, os.PathLike):
        return _read_file(Path(value))
    if isinstance(value, str):
        if value in PRESETS:
            return PRESETS[value]
        if not value.strip():
            raise RewardSpecError(f"empty name {value!r}: give a preset "
                                  f"({', '.join(PRESETS)}) or a .json file")
        path = Path(value)
        if value.lower().endswith(".json") or "/" in value or os.sep in value \
                or path.exists():
            return _read_file(path)
        raise RewardSpecError(f"unknown preset {value!r}{_nearest(value, list(PRESETS))} "
                              f"(presets: {', '.join(PRESETS)}; or a .json file)")
    raise RewardSpecError("must be a preset name, a JSON file, a dict or a RewardSpec, "
                          f"got {type(value).__name__}")


def spec_of_line(line: Mapping[str, Any]) -> RewardSpec:
    """The reward spec a run-log line ran under: its ``env_spec.kwargs.reward_spec`` (or,
    in a log written before settings were recorded flat, ``kwargs.settings.reward_spec``;
    for an environment built without ``gym.make``, whose ``env_spec`` is ``None``, the
    line's own ``reward_spec``), else :data:`DEFAULT_SPEC` (logs written before reward
    specs, or without one).

    Raises:
        RewardSpecError: the recorded spec is invalid.
    """
    spec = line.get("env_spec")
    kwargs = spec.get("kwargs") if isinstance(spec, Mapping) else None
    value = None
    if isinstance(kwargs, Mapping):
        value = kwargs.get("reward_spec")
        settings = kwargs.get("settings")
        if value is None and isinstance(settings, Mapping):
            value = settings.get("reward_spec")
    if value is None:
        value = line.get("reward_spec")
    return DEFAULT_SPEC if value is None else load_reward_spec(value)
