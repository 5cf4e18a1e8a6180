"""The environment config: one settings object for EGIPEnv and the PettingZoo game.

:class:`EnvConfig` holds every value setting (cases, protocol, observation, reward);
seats and case lists stay constructor arguments (docs/environments.md, *Settings*).
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, Literal

from pydantic import PrivateAttr, model_validator

from clinenv.config_model import ConfigModel
from clinenv.datasets.nejm import DISCLOSURES
from clinenv.env import rewards
from clinenv.env.persona import PersonaConfig
from clinenv.protocol.biases import check_bias
from clinenv.protocol.exam_noise import ExamNoiseConfig

__all__ = ["DEFAULT_MAX_EXAMS", "DEFAULT_MAX_TEXT_CHARS", "FIELDS", "OBSERVATION_FORMATS",
           "EnvConfig", "is_default_field"]

#: Default length of the observation's ``exam_mask`` (catalog entries beyond it stay
#: requestable by name).
DEFAULT_MAX_EXAMS = 64
#: Default observation (and action) text limit, in characters.
DEFAULT_MAX_TEXT_CHARS = 65_536
#: ``observation_format`` values: the complete doctor view x_t, or what is new.
OBSERVATION_FORMATS = ("view", "delta")


def _count(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(values: dict[str, Any]) -> dict[str, Any]:
    """The raw field values checked and normalised (the messages name the field)."""
    from clinenv.reward_spec import load_reward_spec

    out = dict(values)
    # a RewardSpecError (a ValueError) names the file, the field, the nearest name
    out["reward_spec"] = load_reward_spec(out.get("reward_spec", "accuracy"))
    if out.get("observation_format", "view") not in OBSERVATION_FORMATS:
        raise ValueError(f"observation_format must be 'view' or 'delta', "
                         f"got {out['observation_format']!r}")
    if out.get("render_mode") not in (None, "ansi"):
        raise ValueError(f"render_mode must be None or 'ansi', got {out['render_mode']!r}")
    exams = out.get("max_exams", DEFAULT_MAX_EXAMS)
    chars = out.get("max_text_chars", DEFAULT_MAX_TEXT_CHARS)
    if not (_count(exams) and exams >= 1 and _count(chars) and chars >= 256):
        raise ValueError("max_exams must be >= 1 and max_text_chars >= 256 (integers), "
                         f"got max_exams={exams!r}, max_text_chars={chars!r}")
    out["max_exams"], out["max_text_chars"] = int(exams), int(chars)
    for name in ("invalid_action_penalty", "exam_cost", "fidelity_weight"):
        if name not in out:
            continue
        value = out[name]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}: "
                             "invalid_action_penalty, exam_cost and fidelity_weight are "
                             "non-negative amounts subtracted from (or weighed into) the "
                             "reward")
        out[name] = float(value)
    steps = out.get("max_steps")
    if steps is not None and not (_count(steps) and steps >= 2):
        raise ValueError(f"max_steps must be None or an int >= 2, got {steps!r}")
    for name in ("allow_download", "verify"):
        if name in out and not isinstance(out[name], bool):
            raise ValueError(f"{name} must be True or False, got {out[name]!r}")
    if out.get("disclosure", "presentation") not in DISCLOSURES:
        raise ValueError(f"disclosure must be one of {DISCLOSURES}, "
                         f"got {out['disclosure']!r}")
    for name in ("dataset", "data_dir"):
        if isinstance(out.get(name), os.PathLike):
            out[name] = os.fspath(out[name])
    out["patient_bias"] = check_bias("patient", out.get("patient_bias"), "patient_bias")
    if not (isinstance(out.get("dataset", "demo"), str) and out.get("dataset", "demo")):
        raise ValueError(f"dataset must be a registry name or a file path, got "
                         f"{out['dataset']!r}")
    return out


class EnvConfig(ConfigModel):
    """Every value setting of an environment; frozen, checked on creation.

    Attributes:
        dataset: a registry name (``"demo"``, ``"medqa"``, ``"nejm"``...) or a case file
            path (ignored when the constructor gets ``cases=``).
        data_dir: folder of the dataset files; ``None``: ``CLINENV_DATA_DIR``, then the
            cache (:mod:`clinenv.datasets`).
        disclosure: NEJM objective disclosure: ``"question"``, ``"presentation"`` or
            ``"vignette"``.
        allow_download: let the loader download a missing public dataset.
        verify: refuse a registry dataset whose records differ from the pinned ones
            (:class:`~clinenv.errors.ChecksumError`); ``False`` warns instead.
        protocol: ``"egip"``, ``"agentclinic"`` or ``"medagentsim"``; ``None``: the
            preset's, else ``"egip"``.
        preset: a name of :data:`clinenv.protocol.presets.PRESETS`, filling what the
            other settings leave unset.
        protocol_options: :class:`~clinenv.protocol.config.ProtocolConfig` fields under
            EGIP (``acquisition_rounds``, ``show_menu``...), or
            :class:`~clinenv.protocol.native_config.NativeConfig` fields under a native
            protocol (``max_turns``...); given flat (``EnvConfig(show_menu=False)``),
            a keyword that is no field lands here, checked by the protocol's class.
        observation_format: ``"view"`` (the complete doctor view x_t every step, EGIP
            3.2) or ``"delta"`` (only what is new).
        max_exams: length of the observation's ``exam_mask``, an integer >= 1.
        max_text_chars: observation and action text limit in characters, >= 256;
            longer observation text is clipped (noted in ``info``).
        invalid_action_penalty: subtracted from the reward per invalid action, >= 0.
        exam_cost: subtracted per examination test returned under EGIP (per measurement
            request under a native protocol), >= 0.
        render_mode: ``None`` or ``"ansi"`` (the transcript as text).
        reward_spec: the terminal reward (:mod:`clinenv.reward_spec`): a preset name
            (default ``"accuracy"``: 1/0), a :class:`~clinenv.reward_spec.RewardSpec`,
            its JSON dict or a JSON file; kept as the ``RewardSpec``.
        fidelity_weight: the PettingZoo game only: weight of the patient seat's
            fidelity reward, >= 0 (:mod:`clinenv.multiagent.fidelity`).
        max_steps: the PettingZoo game only: truncate after this many agent steps
            (>= 2); ``None``: never.
        patient_bias: ``None`` or one of AgentClinic's patient biases
            (:data:`clinenv.protocol.biases.PATIENT_BIASES`), whose text the LLM patient
            gets between its base prompt and the facts. Only with ``patient="llm"`` (or
            a patient object with that ``bias``); the retrieval patient has no prompt,
            so it is refused there.
        patient_persona: the retrieval patient's persona
            (:class:`~clinenv.env.persona.PersonaConfig`): a name of
            :data:`~clinenv.env.persona.PERSONAS` (default ``"cooperative"``: today's
            patient), ``"NAME:P"`` or ``{"name", "p"}``; refused with the LLM patient, a
            patient object or an external patient seat.
        exam_noise: examiner noise of record lookup O
            (:class:`~clinenv.protocol.exam_noise.ExamNoiseConfig`): ``{"unavailable":
            p, "delayed": p}``, probabilities in [0, 1] (default none); EGIP with
            record lookup only.

    Raises:
        pydantic.ValidationError: a field out of range, of the wrong kind or unknown
            (a ``ValueError``; the message names the field).
        clinenv.reward_spec.RewardSpecError: a bad ``reward_spec``.
        ValueError: an unknown preset or protocol.
        pydantic.ValidationError: a bad protocol option (raised by its config class).
    """

    dataset: str = "demo"
    data_dir: str | None = None
    disclosure: str = "presentation"
    allow_download: bool = False
    verify: bool = True
    protocol: str | None = None
    preset: str | None = None
    protocol_options: dict[str, Any] = {}
    observation_format: Literal["view", "delta"] = "view"
    max_exams: int = DEFAULT_MAX_EXAMS
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    invalid_action_penalty: float = rewards.INVALID_ACTION_PENALTY
    exam_cost: float = rewards.EXAM_COST
    render_mode: Literal["ansi"] | None = None
    reward_spec: Any = "accuracy"
    fidelity_weight: float = 0.0
    max_steps: int | None = None
    patient_bias: str | None = None
    patient_persona: PersonaConfig = PersonaConfig()
    exam_noise: ExamNoiseConfig = ExamNoiseConfig()

    _resolved: tuple[str, Any, Any] = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        options = {k: v for k, v in values.items() if k not in cls.model_fields}
        if options:  # flat protocol options, as gym.make takes them
            values = {k: v for k, v in values.items() if k in cls.model_fields}
            values["protocol_options"] = {**values.get("protocol_options", {}), **options}
        return _check(values)

    def __init__(self, **values: Any) -> None:
        from clinenv.protocol.presets import protocol_settings
        from clinenv.reward_spec import load_reward_spec

        if "reward_spec" in values:  # its RewardSpecError reaches the caller as it is
            values["reward_spec"] = load_reward_spec(values["reward_spec"])
        super().__init__(**values)
        # after pydantic's own checks, so that errors of the protocol's config class
        # (pydantic.ValidationError naming it) and of the preset reach the caller as
        # they are
        self._resolved = protocol_settings(self.preset, dict(self.protocol_options),
                                           protocol=self.protocol)

    @property
    def protocol_name(self) -> str:
        """The protocol these settings resolve to (``"egip"`` when none is named)."""
        return self._resolved[0]

    @property
    def protocol_config(self) -> Any:
        """The :class:`~clinenv.protocol.config.ProtocolConfig` (EGIP) or
        :class:`~clinenv.protocol.native_config.NativeConfig` these settings resolve
        to, the preset filling what ``protocol_options`` leaves unset."""
        return self._resolved[1]

    @property
    def preset_examiner(self) -> Any:
        """The examiner the preset names (``"reader"``...), or ``None``."""
        return self._resolved[2]

    @classmethod
    def merge(cls, config: EnvConfig | None, overrides: dict[str, Any], *,
              caller: str) -> EnvConfig:
        """The config of one construction: ``config`` with the constructor's keyword
        ``overrides`` mapped on (a field by its name; any other keyword is a protocol
        option). A keyword at its field's default adds nothing; one that differs fills
        a field the config leaves at its default.

        Raises:
            TypeError: ``config`` is not an :class:`EnvConfig`, or a keyword differs
                from a value the config sets (both named).
            pydantic.ValidationError: a bad value (as :class:`EnvConfig`).
        """
        if config is None:
            return cls(**overrides)
        fields = {k: v for k, v in overrides.items() if k in FIELDS}
        options = {k: v for k, v in overrides.items() if k not in FIELDS}
        if not isinstance(config, cls):
            raise TypeError(f"{caller}: env_config must be a clinenv.env.config.EnvConfig, "
                            f"got {type(config).__name__}")
        changes: dict[str, Any] = {}
        for name, value in fields.items():
            current = getattr(config, name)
            if name == "protocol_options":
                options = {**value, **options}
            elif not _is_default(name, value) and not _same(name, value, current):
                if not _is_default(name, current):
                    raise TypeError(f"{caller} got both env_config= ({name}={current!r}) "
                                    f"and {name}={value!r}; set it in the config "
                                    f"(env_config.replace({name}=...)) or drop one")
                changes[name] = value
        merged = dict(config.protocol_options)
        for name, value in options.items():
            if name in merged and merged[name] != value:
                raise TypeError(f"{caller} got both env_config= ({name}={merged[name]!r}) "
                                f"and {name}={value!r}; set it in the config's "
                                "protocol_options or drop one")
            merged[name] = value
        if merged != config.protocol_options:
            changes["protocol_options"] = merged
        return config.replace(**changes) if changes else config

    def describe(self) -> dict[str, Any]:
        """Every field as a JSON-ready dict; ``reward_spec`` as its canonical JSON dict."""
        out = {name: getattr(self, name) for name in FIELDS}
        out["reward_spec"] = self.reward_spec.to_dict()
        out["patient_persona"] = self.patient_persona.to_value()
        out["exam_noise"] = self.exam_noise.to_dict()
        out["protocol_options"] = dict(self.protocol_options)
        return out

    def to_kwargs(self) -> dict[str, Any]:
        """The fields that differ from their defaults as ``gym.make`` keywords, protocol
        options flat beside them and ``reward_spec`` as its canonical JSON dict: what a
        run log's ``env_spec`` records (:func:`clinenv.runlog.env_spec_dict`), the same
        for ``gym.make(ID, env_config=...)`` and the keyword route, so either resumes
        the other; ``EnvConfig.merge(None, config.to_kwargs(), ...) == config``."""
        kwargs: dict[str, Any] = {}
        for name in FIELDS:
            value = getattr(self, name)
            if name != "protocol_options" and not _is_default(name, value):
                kwargs[name] = _json_value(name, value)
        return {**kwargs, **self.protocol_options}


#: Every field name (constructors route these keywords into the config).
FIELDS: tuple[str, ...] = tuple(EnvConfig.model_fields)
_DEFAULTS = {name: info.default for name, info in EnvConfig.model_fields.items()}


#: Fields held as settings models, and how each reads a keyword's value.
_MODELS = {"patient_persona": PersonaConfig, "exam_noise": ExamNoiseConfig}


def _json_value(name: str, value: Any) -> Any:
    """A field's value as ``gym.make`` takes it and JSON holds it."""
    if name == "reward_spec":
        return value.to_dict()
    if name == "patient_persona":
        return value.to_value()
    if name == "exam_noise":
        return value.to_dict()
    return value


def _as_model(name: str, value: Any) -> Any:
    """``value`` read as field ``name``'s model; ``None`` when it cannot be."""
    try:
        return _MODELS[name].model_validate(value)
    except ValueError:
        return None


def _same(name: str, value: Any, current: Any) -> bool:
    if name in _MODELS:
        return _as_model(name, value) == current
    if name == "reward_spec":
        from clinenv.reward_spec import load_reward_spec

        return bool(load_reward_spec(value) == current)
    return _equal(value, current)


def _equal(value: Any, other: Any) -> bool:
    """Equal and of the same kind (``0`` for ``0.0`` counts, ``1`` for ``True`` not)."""
    if value is other:
        return True
    if other is None or value is None or isinstance(value, bool) != isinstance(other, bool):
        return False
    return bool(value == other)


def is_default_field(name: str, value: Any) -> bool:
    """``value`` (as recorded in a run log's ``env_spec``) is the default of field
    ``name``, so a run log may leave it out: for ``reward_spec`` the default spec
    (``"accuracy"``, its :class:`~clinenv.reward_spec.RewardSpec` or its JSON dict). A
    name that is no field, and ``dataset`` (every id names its own), is never default."""
    return name != "dataset" and _is_default(name, value)


def _is_default(name: str, value: Any) -> bool:
    if name == "reward_spec":
        from clinenv.reward_spec import DEFAULT_SPEC

        return value is None or value in (DEFAULT_SPEC, DEFAULT_SPEC.name,
                                          DEFAULT_SPEC.to_dict())
    if name == "protocol_options":
        return not value
    if name in _MODELS:
        return _as_model(name, value) == _DEFAULTS[name]
    return name in _DEFAULTS and _equal(value, _DEFAULTS[name])
