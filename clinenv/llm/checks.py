"""Checks every backend applies to the choices it got back.

Servers drop sampling parameters (fewer choices than ``n``, identical ones above
temperature 0); these helpers top up, reject or flag such replies alike everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from clinenv.llm.base import Choice, GenerationConfig

#: Backend finish reasons mapped onto :attr:`Choice.finish_reason`'s four values.
_FINISH_REASONS = {
    "stop": "stop", "eos": "stop", "end_turn": "stop", "stop_sequence": "stop",
    "tool_calls": "stop", "function_call": "stop",
    "length": "length", "max_tokens": "length",
    "content_filter": "error", "error": "error", "abort": "error",
}


def finish_reason(value: object) -> str:
    """A backend's finish reason as ``"stop"``, ``"length"``, ``"error"`` or ``"unknown"``.

    ``None`` and unrecognized values give ``"unknown"`` (never a crash). The mapping is
    case-insensitive: ``stop``/``eos``/``end_turn``/``stop_sequence``/``tool_calls`` ->
    stop; ``length``/``max_tokens`` -> length; ``content_filter``/``error``/``abort`` ->
    error.
    """
    if not isinstance(value, str):
        return "unknown"
    return _FINISH_REASONS.get(value.strip().lower(), "unknown")


def identical_choices_warning(choices: Sequence[Choice], config: GenerationConfig) -> str | None:
    """The warning for ``n > 1`` identical choices sampled at a temperature above zero,
    else ``None``.

    Such a reply usually means the server ignored ``n`` or the seed and repeated one
    sample; a majority vote over it would count one sample ``n`` times.
    """
    if len(choices) > 1 and config.temperature > 0 and len({c.text for c in choices}) == 1:
        return (f"all {len(choices)} choices are identical at temperature "
                f"{config.temperature:g}: the backend may be ignoring n or the seed")
    return None


def too_few_choices_message(got: int, wanted: int) -> str:
    """The text of the error raised when a backend cannot collect ``n`` choices."""
    return (f"got {got} of n={wanted} choices; a reply with fewer samples is never "
            "treated as n samples")
