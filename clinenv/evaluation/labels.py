"""The method label of a run: the doctor's name, plus the environment variant when the
run did not play plain EGIP.

``scripted@agentclinic``; :func:`with_models` adds ``[<model>]`` (docs/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PLAIN_VARIANTS", "doctor_model", "environment_variant", "method_label",
           "model_tags", "with_models"]

#: Protocol and preset names that mean plain EGIP (no suffix on the label).
PLAIN_VARIANTS = frozenset({"egip"})


def environment_variant(line: Mapping[str, Any]) -> str | None:
    """The protocol or preset a run-log line was played under, or ``None`` for plain EGIP.

    Args:
        line: a run-log line (its ``env_spec.kwargs`` and ``env_id`` are read; a line
            without them is plain EGIP unless its id is a native one).

    Returns:
        ``kwargs["protocol"]`` when it is given and not ``"egip"``; else the preset
        (``kwargs["preset"]``, or the registered preset of a native ``env_id``) when it is
        not ``"egip"``; else ``None``.
    """
    from clinenv.env.registration import NATIVE_IDS

    spec = line.get("env_spec")
    kwargs = spec.get("kwargs") if isinstance(spec, Mapping) else None
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    protocol = kwargs.get("protocol")
    if isinstance(protocol, str) and protocol not in PLAIN_VARIANTS:
        return protocol
    preset = kwargs.get("preset")
    if not isinstance(preset, str):
        native = NATIVE_IDS.get(str(line.get("env_id")))
        preset = native[1] if native else None
    return preset if preset is not None and preset not in PLAIN_VARIANTS else None


def method_label(line: Mapping[str, Any]) -> str:
    """``doctor.name`` of a run-log line, with ``@<variant>`` when
    :func:`environment_variant` names one: ``"scripted"`` for plain EGIP,
    ``"scripted@agentclinic"``, ``"scripted@egip-no-menu"`` (docs/evaluation.md,
    "Method labels").

    Raises:
        KeyError: the line has no ``doctor.name`` (callers check it first).
    """
    name = str(line["doctor"]["name"])
    variant = environment_variant(line)
    return name if variant is None else f"{name}@{variant}"


def doctor_model(doctor: Any) -> str | None:
    """The model name of a run-log line's ``doctor`` (``{"name", "config"}``).

    Returns:
        ``config["model"]`` when it is a non-empty string; else, for a wrapped doctor
        (CDEG and the baselines log ``config = {"wrapper", "inner": {"name", "config"}}``),
        the inner doctor's model; else ``None`` (the scripted and random doctors).
    """
    for _ in range(16):  # wrappers nest; a cycle cannot occur in JSON, this bounds depth
        config = doctor.get("config") if isinstance(doctor, Mapping) else None
        if not isinstance(config, Mapping):
            return None
        model = config.get("model")
        if isinstance(model, str) and model:
            return model
        doctor = config.get("inner")
    return None


def model_tags(models: Sequence[str]) -> dict[str, str]:
    """A short tag for each model name: the part after the last ``/``
    (``"Qwen/Qwen2.5-7B-Instruct"`` -> ``"Qwen2.5-7B-Instruct"``, a local folder
    ``"/models/qwen7b/"`` -> ``"qwen7b"``), or the full names when two different models
    would get the same tag."""
    unique = list(dict.fromkeys(models))
    short = {m: m.rstrip("/").rsplit("/", 1)[-1] or m for m in unique}
    if len(set(short.values())) < len(unique):
        return {m: m for m in unique}
    return short


def with_models(labels: Sequence[str], models: Sequence[str | None]) -> list[str]:
    """``labels`` with ``[<model tag>]`` appended where a label is shared by lines of
    different models.

    Args:
        labels: the default label of each log (:func:`method_label`).
        models: the model of each log (:func:`doctor_model`), same length.

    Returns:
        For every label whose logs name more than one model (on any dataset: the same
        label for two models would read as one method across the table's columns),
        ``label[tag]`` for each of its logs that names a model (:func:`model_tags`); every
        other label unchanged.
    """
    seen: dict[str, list[str]] = {}
    for label, model in zip(labels, models, strict=True):
        if model is not None:
            seen.setdefault(label, []).append(model)
    tags = {label: model_tags(found) for label, found in seen.items()
            if len(set(found)) > 1}
    return [f"{label}[{tags[label][model]}]" if label in tags and model is not None
            else label for label, model in zip(labels, models, strict=True)]
