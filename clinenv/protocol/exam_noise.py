"""Examiner noise: seeded, reproducible faults of record lookup O (issue 34, section 2).

``unavailable`` and ``delayed``, each a probability per requested exam, drawn with
:func:`clinenv.seeding.keyed_uniform`; the defaults (0) change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import field_validator, model_validator

from clinenv.config_model import ConfigModel
from clinenv.seeding import keyed_uniform

__all__ = ["DELAYED_TEXT", "ExamNoise", "ExamNoiseConfig"]

#: Interface note of a delayed result, in the round it was requested (``{}``: its name).
DELAYED_TEXT = "The result of {} is not back yet; it will arrive next round."


class ExamNoiseConfig(ConfigModel):
    """Examiner noise probabilities (frozen; a dict with these keys is accepted).

    Attributes:
        unavailable: probability in [0, 1] that a recorded result comes back unavailable.
        delayed: probability in [0, 1] that a result arrives one round later.

    Raises:
        pydantic.ValidationError: a value outside [0, 1] or an unknown key (named).
    """

    unavailable: float = 0.0
    delayed: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _none(cls, value):
        return {} if value is None else value

    @field_validator("unavailable", "delayed", mode="before")
    @classmethod
    def _probability(cls, value, info):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"exam_noise.{info.field_name} must be a probability in "
                             f"[0, 1], got {value!r}")
        return float(value)

    @property
    def active(self) -> bool:
        """Some noise is on (a probability above 0)."""
        return self.unavailable > 0.0 or self.delayed > 0.0

    def to_dict(self) -> dict[str, float]:
        """The non-zero probabilities, as ``gym.make(..., exam_noise=...)`` takes them."""
        return {k: v for k, v in (("unavailable", self.unavailable),
                                  ("delayed", self.delayed)) if v > 0.0}


@dataclass(frozen=True, slots=True)
class ExamNoise:
    """The noise draws of one episode.

    Args:
        config: the probabilities.
        seed: the episode's draw seed (an int drawn from the environment's generator
            at reset, after the case and the seats).
        case_id: the case's id.
    """

    config: ExamNoiseConfig
    seed: int
    case_id: str

    def unavailable(self, exam_id: str) -> bool:
        """Exam ``exam_id``'s recorded result comes back unavailable."""
        p = self.config.unavailable
        return p > 0.0 and keyed_uniform(self.seed, self.case_id, exam_id, "unavailable") < p

    def delayed(self, exam_id: str) -> bool:
        """Exam ``exam_id``'s result (a group's: the joined ids) arrives a round later."""
        p = self.config.delayed
        return p > 0.0 and keyed_uniform(self.seed, self.case_id, exam_id, "delayed") < p
