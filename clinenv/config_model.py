"""The one style of clinenv's settings objects: frozen pydantic models.

A :class:`ConfigModel` is checked on creation (the error names the field), frozen, refuses
unknown fields, and derives checked variants with :meth:`ConfigModel.replace`.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["ConfigModel", "first_error"]


class ConfigModel(BaseModel):
    """Base of the settings objects: frozen, unknown fields refused, checked on creation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, checked again like a new object (pydantic's
        ``model_copy(update=...)`` skips the checks).

        Raises:
            pydantic.ValidationError: a changed field is invalid or unknown.
        """
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**values, **changes})


def first_error(err: ValidationError, default: str = "") -> tuple[str, str]:
    """``(field, message)`` of a validation error's first error, for one-line messages:
    the field as a dotted path (``"cases.0.successes"``; ``default`` when the error is at
    the top level) and pydantic's message."""
    first = err.errors()[0]
    return ".".join(str(p) for p in first["loc"]) or default, first["msg"]
