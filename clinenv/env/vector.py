"""Vector environments for the text environments.

:func:`make_vec` turns shared memory off for async envs; importing this module makes
shared memory for a ``UnicodeText`` space fail at construction (it corrupts text).
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
from gymnasium.vector.utils.shared_memory import create_shared_memory

from clinenv.env.spaces import UnicodeText

VectorMode = Literal["sync", "async"]


def make_vec(env_id: str, num_envs: int, *, mode: VectorMode = "sync",
             autoreset_mode: gym.vector.AutoresetMode | str | None = None,
             **kwargs: Any) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` as one vector environment.

    Args:
        env_id: a registered id (``"EGIP-MedQA-v0"``, ``"EGIP-MedQA-Menu-v0"``...).
        num_envs: number of sub-environments (>= 1).
        mode: ``"sync"`` (one process) or ``"async"`` (one worker process per
            sub-environment, always without shared memory).
        autoreset_mode: Gymnasium's autoreset mode (default ``NEXT_STEP``).
        **kwargs: environment arguments, as for ``gym.make``.

    Returns:
        A ``SyncVectorEnv`` or ``AsyncVectorEnv``; text observations and actions are
        tuples of strings.

    Raises:
        ValueError: an unknown ``mode`` or ``autoreset_mode``, or ``num_envs < 1``.
        gymnasium.error.Error: an unknown id.
    """
    if mode not in ("sync", "async"):
        raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    vector_kwargs: dict[str, Any] = {}
    if mode == "async":
        vector_kwargs["shared_memory"] = False
    if autoreset_mode is not None:
        vector_kwargs["autoreset_mode"] = autoreset(autoreset_mode)
    return gym.make_vec(env_id, num_envs, vectorization_mode=mode,
                        vector_kwargs=vector_kwargs, **kwargs)


def autoreset(mode: gym.vector.AutoresetMode | str) -> gym.vector.AutoresetMode:
    """Gymnasium's ``AutoresetMode`` from the enum, its value or its name.

    Args:
        mode: an ``AutoresetMode``, a value (``"NextStep"``, ``"SameStep"``,
            ``"Disabled"``) or a name (``"NEXT_STEP"``, ``"SAME_STEP"``, ``"DISABLED"``);
            strings are matched case-insensitively, ignoring ``_``, ``-`` and spaces.

    Raises:
        ValueError: anything else; the message lists the accepted names.
    """
    if isinstance(mode, gym.vector.AutoresetMode):
        return mode
    if isinstance(mode, str):
        key = "".join(ch for ch in mode.casefold() if ch not in "_- ")
        for member in gym.vector.AutoresetMode:
            if key in (member.name.casefold().replace("_", ""), member.value.casefold()):
                return member
    names = ", ".join(m.name for m in gym.vector.AutoresetMode)
    raise ValueError(f"autoreset_mode must be one of {names} (or their values "
                     f"{[m.value for m in gym.vector.AutoresetMode]}), got {mode!r}")


@create_shared_memory.register(UnicodeText)
def _refuse_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = None) -> Any:
    """Shared memory cannot carry Unicode text: refuse instead of corrupting it."""
    raise TypeError(
        "A UnicodeText observation cannot be placed in AsyncVectorEnv's shared memory "
        "(text would come back corrupted). Use clinenv.env.vector.make_vec(id, n, "
        "mode='async'), or gym.make_vec(..., vectorization_mode='async', "
        "vector_kwargs={'shared_memory': False}), or the sync mode."
    )
