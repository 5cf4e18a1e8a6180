"""Seeds of scheduled episodes, derived from one run seed."""

from __future__ import annotations

import numpy as np


def episode_seed(seed: int, repetition: int, case_index: int) -> int:
    """The seed of one scheduled episode.

    Derived with :class:`numpy.random.SeedSequence` from the entropy
    ``[seed, repetition, case_index]`` (first 32-bit word of ``generate_state``, masked
    to 31 bits), so seeds of different episodes are statistically independent, the same
    triple always gives the same seed on every platform, and the value fits any API that
    wants a signed 32-bit int.

    Args:
        seed: the run seed (>= 0).
        repetition: 0-based repetition index (>= 0).
        case_index: 0-based index of the case in its dataset (>= 0).

    Returns:
        An int in ``0 .. 2**31 - 1``.

    Raises:
        ValueError: a negative argument.
    """
    if min(seed, repetition, case_index) < 0:
        raise ValueError("seed, repetition and case_index must be >= 0")
    state = np.random.SeedSequence([int(seed), int(repetition), int(case_index)])
    return int(state.generate_state(1, dtype=np.uint32)[0]) & 0x7FFF_FFFF

