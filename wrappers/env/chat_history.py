"""The episode as role/content chat messages, for chat-template policies.

:class:`ChatHistory` over a text environment with ``observation_format="delta"``; ``-Menu``
ids are refused (docs/api/wrappers.md).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces

from clinenv.env.spaces import UnicodeText, clip_text

#: Longest role name ("assistant" is 9 characters).
ROLE_CHARS = 16


class ChatHistory(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Observation = the conversation so far as role/content messages (docs/api/wrappers.md).

    Args:
        env: an EGIP Gymnasium environment with ``observation_format="delta"``.
        system_prompt: optional first message with role ``system``.

    Raises:
        ValueError: the environment's actions are not text (a ``-Menu`` id's Discrete
            index), it does not use ``observation_format="delta"``, or it has no
            ``text`` observation.
    """

    def __init__(self, env: gym.Env, system_prompt: str | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, system_prompt=system_prompt)
        gym.Wrapper.__init__(self, env)
        if not isinstance(env.action_space, UnicodeText):
            raise ValueError(
                f"ChatHistory is for text-action environments (EGIP-<Dataset>-v0); this "
                f"one's action space is {env.action_space} (an EGIP-<Dataset>-Menu-v0 "
                "index), and an index is not an assistant message")
        fmt = getattr(env.unwrapped, "observation_format", None)
        if fmt != "delta":
            raise ValueError("ChatHistory needs the environment's observation_format='delta' "
                             f"(got {fmt!r}): with 'view' every user message would repeat "
                             "the whole transcript")
        text_space = getattr(env.observation_space, "spaces", {}).get("text")
        if not isinstance(text_space, UnicodeText):
            raise ValueError("ChatHistory needs a Dict observation with a 'text' UnicodeText")
        self.max_chars = text_space.max_length
        self.system_prompt = system_prompt
        self.observation_space = spaces.Sequence(
            spaces.Dict({"role": UnicodeText(ROLE_CHARS), "content": UnicodeText(self.max_chars)}),
            stack=False,
        )
        self._messages: list[tuple[str, str]] = []
        self._ended = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset; the observation is ``[system], user(first view)``."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._messages = [("system", self._clip(self.system_prompt))] if self.system_prompt \
            else []
        self._messages.append(("user", obs["text"]))
        self._ended = False
        return self._observation(), info

    def step(self, action: Any):
        """Step; appends ``assistant(action)`` and, when there is new text, ``user(text)``;
        after the end of the episode appends nothing (docs/api/wrappers.md)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._ended:
            return self._observation(), reward, terminated, truncated, info
        self._ended = bool(terminated or truncated)
        content = action if isinstance(action, str) else ("" if action is None else str(action))
        self._messages.append(("assistant", self._clip(content)))
        if obs["text"]:
            self._messages.append(("user", obs["text"]))
        return self._observation(), reward, terminated, truncated, info

    def _clip(self, text: str) -> str:
        return clip_text(text, self.max_chars)[0]

    def _observation(self) -> tuple[dict[str, str], ...]:
        return tuple({"role": role, "content": content} for role, content in self._messages)
