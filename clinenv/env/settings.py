"""The environment's own settings, beside the protocol's.

:class:`EnvSettings` holds what shapes the environment around the protocol: the
observation (format and sizes), the reward (the terminal reward spec and the legacy
per-step shaping) and the render mode. The protocol's
settings are :class:`clinenv.protocol.config.ProtocolConfig` (EGIP) and
:class:`clinenv.protocol.native_config.NativeConfig` (the native loops).
:class:`clinenv.env.EGIPEnv` and :class:`clinenv.multiagent.aec.EGIPAECEnv` take
``settings=EnvSettings(...)`` or the same fields as keyword arguments, which fill one
(:meth:`EnvSettings.resolve`)::

    settings = EnvSettings(observation_format="delta", exam_cost=0.05)
    env = gym.make("EGIP-MedQA-v0", settings=settings)
    # the same environment as gym.make("EGIP-MedQA-v0", observation_format="delta",
    #                                  exam_cost=0.05)

A field without its own constructor keyword (``reward_spec``) is taken from the
constructors' ``**kwargs`` (:func:`split_settings`): ``gym.make(ID, reward_spec="diagagent")``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import MISSING, dataclass, fields
from typing import Any, Literal

from clinenv.env import rewards

__all__ = ["DEFAULT_MAX_EXAMS", "DEFAULT_MAX_TEXT_CHARS", "FIELDS", "OBSERVATION_FORMATS",
           "EnvSettings", "is_default_field", "split_settings"]

#: Default length of the observation's ``exam_mask`` (catalog entries beyond it stay
#: requestable by name).
DEFAULT_MAX_EXAMS = 64
#: Default observation (and action) text limit, in characters.
DEFAULT_MAX_TEXT_CHARS = 65_536
#: ``observation_format`` values: the complete doctor view x_t, or what is new.
OBSERVATION_FORMATS = ("view", "delta")


def _is_default(value: Any, default: Any) -> bool:
    """``value`` is ``default``, or equal to it and of the same kind (``0`` for ``0.0``
    counts, ``1`` for ``True`` does not)."""
    if value is default:
        return True
    if default is None or isinstance(value, bool) != isinstance(default, bool):
        return False
    return bool(value == default)


def _count(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class EnvSettings:
    """Settings of the environment around the protocol; frozen, checked on creation.

    Attributes:
        observation_format: ``"view"`` (the complete doctor view x_t every step, EGIP
            3.2) or ``"delta"`` (only what is new, for policies that keep their own
            chat history).
        max_exams: length of the observation's ``exam_mask``, an integer >= 1 (catalog
            entries beyond it stay requestable by name but have no mask slot).
        max_text_chars: observation and action text limit in characters, an integer
            >= 256; longer observation text is clipped (noted in ``info``).
        invalid_action_penalty: amount subtracted from the reward per invalid action, a
            finite number >= 0 (default :data:`clinenv.env.rewards.INVALID_ACTION_PENALTY`).
        exam_cost: amount subtracted per examination test returned under EGIP (a group
            request costs one per test), per measurement request under a native
            protocol; a finite number >= 0 (default :data:`clinenv.env.rewards.EXAM_COST`).
        render_mode: ``None`` or ``"ansi"`` (the transcript as text).
        reward_spec: the terminal reward (:mod:`clinenv.reward_spec`): a preset name
            (default ``"accuracy"``, today's 1/0), a
            :class:`~clinenv.reward_spec.RewardSpec`, its JSON dict or a JSON file;
            kept as the :class:`~clinenv.reward_spec.RewardSpec` it names.

    Raises:
        ValueError: a field out of range or of the wrong kind (the message names it).
        TypeError: an unknown field.
    """

    observation_format: Literal["view", "delta"] = "view"
    max_exams: int = DEFAULT_MAX_EXAMS
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    invalid_action_penalty: float = rewards.INVALID_ACTION_PENALTY
    exam_cost: float = rewards.EXAM_COST
    render_mode: Literal["ansi"] | None = None
    reward_spec: Any = "accuracy"

    def __post_init__(self) -> None:
        from clinenv.reward_spec import load_reward_spec

        # a RewardSpecError (a ValueError) names the file, the field, the nearest name
        object.__setattr__(self, "reward_spec", load_reward_spec(self.reward_spec))
        if self.observation_format not in OBSERVATION_FORMATS:
            raise ValueError(f"observation_format must be 'view' or 'delta', "
                             f"got {self.observation_format!r}")
        if self.render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {self.render_mode!r}")
        if not (_count(self.max_exams) and self.max_exams >= 1
                and _count(self.max_text_chars) and self.max_text_chars >= 256):
            raise ValueError("max_exams must be >= 1 and max_text_chars >= 256 (integers), "
                             f"got max_exams={self.max_exams!r}, "
                             f"max_text_chars={self.max_text_chars!r}")
        object.__setattr__(self, "max_exams", int(self.max_exams))
        object.__setattr__(self, "max_text_chars", int(self.max_text_chars))
        for name in ("invalid_action_penalty", "exam_cost"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}: "
                                 "invalid_action_penalty and exam_cost are non-negative "
                                 "amounts subtracted from the reward")
            object.__setattr__(self, name, float(value))

    @classmethod
    def resolve(cls, settings: EnvSettings | None, given: dict[str, Any], *,
                caller: str) -> EnvSettings:
        """The settings of one environment construction.

        Args:
            settings: the ``settings=`` passed, or ``None``.
            given: the constructor's keyword arguments for the fields, by name, each at
                its default when not passed.
            caller: the class name, for the messages.

        Returns:
            ``settings``, or new settings filled from ``given``.

        Raises:
            TypeError: ``settings`` together with a keyword that differs from its
                default (the field named), or ``settings`` not an :class:`EnvSettings`.
            ValueError: a bad keyword (as the constructor).
        """
        if settings is None:
            return cls(**given)
        if not isinstance(settings, cls):
            raise TypeError(f"{caller}: settings must be a clinenv.env.settings.EnvSettings, "
                            f"got {type(settings).__name__}")
        for name, value in given.items():
            if name == "reward_spec":
                from clinenv.reward_spec import load_reward_spec

                if load_reward_spec(value) == load_reward_spec(_DEFAULTS[name]):
                    continue
            if not _is_default(value, _DEFAULTS[name]):
                raise TypeError(f"{caller} got both settings= and {name}={value!r}; set "
                                f"{name} in the settings (dataclasses.replace(settings, "
                                f"{name}=...)) or drop one")
        return settings

    def describe(self) -> dict[str, Any]:
        """Every field as a JSON-ready dict; ``reward_spec`` as its canonical JSON dict
        (:meth:`~clinenv.reward_spec.RewardSpec.to_dict`)."""
        fields_ = {f.name: getattr(self, f.name) for f in fields(self)}
        fields_["reward_spec"] = self.reward_spec.to_dict()
        return fields_

    def to_kwargs(self) -> dict[str, Any]:
        """The fields that differ from their defaults, as the constructors' keyword
        arguments (JSON-ready, ``reward_spec`` as its canonical JSON dict), in field
        order: what a run log's ``env_spec`` records for a ``settings=`` keyword
        (:func:`clinenv.runlog.env_spec_dict`), flat in its ``kwargs`` as the keyword
        route records them, so ``gym.make(ID, settings=EnvSettings(reward_spec=
        "diagagent"))`` and ``gym.make(ID, reward_spec="diagagent")`` write the same
        ``env_spec`` and either resumes the other;
        ``EnvSettings(**settings.to_kwargs()) == settings``."""
        kwargs: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if not is_default_field(f.name, value):
                kwargs[f.name] = value.to_dict() if f.name == "reward_spec" else value
        return kwargs


_DEFAULTS = {f.name: f.default for f in fields(EnvSettings) if f.default is not MISSING}
#: Every field name (constructors route these keywords into the settings).
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EnvSettings))


def is_default_field(name: str, value: Any) -> bool:
    """``value`` (as given or as recorded in a run log's ``env_spec``) is the default of
    the field ``name``: for ``reward_spec``, the default spec (``"accuracy"``, its
    :class:`~clinenv.reward_spec.RewardSpec` or its canonical JSON dict); for another
    field, the default (``0`` for ``0.0`` counts, ``True`` for ``1`` does not). A name
    that is no field is never default."""
    if name == "reward_spec":
        from clinenv.reward_spec import DEFAULT_SPEC

        return value is None or value in (DEFAULT_SPEC, DEFAULT_SPEC.name,
                                          DEFAULT_SPEC.to_dict())
    return name in _DEFAULTS and _is_default(value, _DEFAULTS[name])


def split_settings(kwargs: dict[str, Any], explicit: dict[str, Any]) -> dict[str, Any]:
    """The settings keywords of one construction: ``explicit`` (the constructor's own
    field keywords) plus the :data:`FIELDS` found in ``kwargs`` (the constructor's
    ``**kwargs``), which are removed from it, so a new field needs no new keyword."""
    given = dict(explicit)
    for name in FIELDS:
        if name in kwargs and name not in given:
            given[name] = kwargs.pop(name)
    return given
