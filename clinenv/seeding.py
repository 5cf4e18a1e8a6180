"""Seeds of scheduled episodes, derived from one run seed."""

from __future__ import annotations

import hashlib

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


def call_seed(seed: int | None, *keys: int | str) -> int | None:
    """The sampling seed of one model call inside an episode.

    Derived from the episode seed and the call's position (e.g. turn and purpose) with
    :class:`numpy.random.SeedSequence`, so every request of a seeded episode carries a
    distinct, reproducible seed. String keys are hashed stably (UTF-8 bytes, not
    Python's salted ``hash``).

    Args:
        seed: the episode seed (>= 0), or ``None`` (then ``None``: no seed is sent).
        *keys: ints >= 0 or strings identifying the call (``turn``, ``"vote"``...).

    Returns:
        An int in ``0 .. 2**31 - 1``, or ``None``.

    Raises:
        ValueError: a negative seed or key.
    """
    if seed is None:
        return None
    entropy = [int(seed)]
    for key in keys:
        if isinstance(key, str):
            entropy.append(int.from_bytes(key.encode("utf-8")[:16].ljust(16, b"\0"), "little"))
        else:
            entropy.append(int(key))
    if min(entropy) < 0:
        raise ValueError("seed and keys must be >= 0")
    state = np.random.SeedSequence(entropy)
    return int(state.generate_state(1, dtype=np.uint32)[0]) & 0x7FFF_FFFF


def keyed_uniform(seed: int, *keys: int | str) -> float:
    """A uniform draw in ``[0, 1)`` that is a pure function of ``seed`` and ``keys``.

    For draws keyed by (episode seed, case, fact): no generator state, so the same keys
    give the same value in any process, order, copy or pickle. BLAKE2b (8 bytes) of the
    keys' text joined by ``\\x1f``, read as an unsigned int and divided by ``2**64``.

    Args:
        seed: an int (the episode's draw seed).
        *keys: ints or strings (a case key, a fact's text, a purpose such as ``"forget"``).
    """
    text = "\x1f".join([str(int(seed)), *(str(k) for k in keys)])
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64
