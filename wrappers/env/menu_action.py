"""A finite doctor action set for classic RL baselines: menu indices and answer slots.

:class:`MenuActionEnv` (``EGIP-<Dataset>-Menu-v0``): ``Discrete(max_exams + Q + S)`` with
the canonical ``action_mask`` (docs/learning.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from clinenv.agents.scripted_doctor import (
    HISTORY_QUESTIONS,
    NO_ANSWER_GUESS,
    evidence_text,
    named_diagnosis,
)
from clinenv.env import EGIPEnv


class MenuActionEnv(gym.Env):
    """EGIP with a Discrete doctor action and ``action_mask`` (docs/learning.md).

    Args:
        env: an :class:`~clinenv.env.EGIPEnv` to drive, bare or wrapped; ``None`` builds
            one from ``env_kwargs``.
        questions: the fixed history questions (Q >= 1 non-empty strings); default the
            scripted doctor's five.
        n_answer_slots: S; default the largest K in the case pool, at least 1.
        **env_kwargs: :class:`~clinenv.env.EGIPEnv` arguments (only without ``env``).

    Raises:
        ValueError: ``env`` with ``env_kwargs``; an ``env`` that is not an ``EGIPEnv``
            underneath or whose wrappers change the observation space; no question or an
            empty one; ``n_answer_slots < 1``.
    """

    metadata = dict(EGIPEnv.metadata)

    def __init__(self, env: gym.Env | None = None, *,
                 questions: Sequence[str] = HISTORY_QUESTIONS,
                 n_answer_slots: int | None = None, **env_kwargs: Any) -> None:
        if env is not None and env_kwargs:
            raise ValueError(f"give either env or EGIPEnv arguments, not both "
                             f"(got {sorted(env_kwargs)})")
        questions = tuple(questions)
        if not questions or any(not isinstance(q, str) or not q.strip() for q in questions):
            raise ValueError("questions must be at least one non-empty string (Q >= 1 keeps "
                             "the acquisition mask from being all zero)")
        self.env = env if env is not None else EGIPEnv(**env_kwargs)
        self.egip = _egip(self.env)
        self.questions = questions
        if n_answer_slots is None:
            n_answer_slots = max([len(c.candidates or ()) for c in self.egip.pool.cases] + [1])
        if isinstance(n_answer_slots, bool) or not isinstance(n_answer_slots, int) \
                or n_answer_slots < 1:
            raise ValueError(f"n_answer_slots must be an int >= 1, got {n_answer_slots!r}")
        self.n_answer_slots = n_answer_slots
        self.max_exams = self.egip.max_exams
        self._first_question = self.max_exams
        self._first_answer = self.max_exams + len(self.questions)
        n = self._first_answer + n_answer_slots
        self.action_space = spaces.Discrete(n)
        self.observation_space = spaces.Dict({
            **self.egip.observation_space.spaces,
            "action_mask": spaces.Box(0, 1, (n,), dtype=np.int8),
        })
        self.render_mode = self.egip.render_mode
        self._exam_mask = np.zeros(self.max_exams, dtype=np.int8)
        self._text = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the inner environment (same seed, same case and options)."""
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options=options)
        return self._wrap(obs, info, utterance=None, source=None)

    def step(self, action: Any):
        """Send the utterance of ``action`` (docs/learning.md); never raises on
        an out-of-range or masked index.

        Raises:
            gymnasium.error.ResetNeeded: no episode yet.
            TypeError: ``action`` is not an integer (a bool, str or float).
        """
        if self.egip.runtime is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        index = self._index(action)
        mask = self.action_mask()
        utterance, source = (self._choose(index) if 0 <= index < mask.size and mask[index]
                             else ("", None))
        obs, reward, terminated, truncated, info = self.env.step(utterance)
        obs, info = self._wrap(obs, info, utterance=utterance, source=source)
        return obs, reward, terminated, truncated, info

    def action_mask(self) -> np.ndarray:
        """The valid actions now, ``int8`` of shape ``(n,)`` (a fresh array)."""
        rt = self.egip.runtime
        mask = np.zeros(self.action_space.n, dtype=np.int8)
        if rt is None or rt.phase == "done":
            return mask
        if rt.phase == "acquire":
            mask[: self.max_exams] = self._exam_mask
            mask[self._first_question:self._first_answer] = 1
            return mask
        k = len(rt.case.candidates) if rt.case.candidates else 1
        mask[self._first_answer:self._first_answer + min(k, self.n_answer_slots)] = 1
        return mask

    def utterance(self, index: int) -> str:
        """The doctor utterance of a valid action ``index`` in the current state."""
        return self._choose(index)[0]

    def _choose(self, index: int) -> tuple[str, str | None]:
        """``(utterance, answer_source)`` of a valid ``index`` (docs/learning.md)."""
        rt = self.egip.runtime
        assert rt is not None
        if index < self._first_question:
            return f"REQUEST TEST: {rt.catalog.entries[index].exam_id}", None
        if index < self._first_answer:
            return self.questions[index - self._first_question], None
        slot = index - self._first_answer
        if rt.case.candidates:
            return f"DIAGNOSIS READY: {rt.case.candidates[slot]}", "candidate"
        named = named_diagnosis(evidence_text(self._text))
        if named:
            return f"DIAGNOSIS READY: {named}", "evidence"
        return f"DIAGNOSIS READY: {NO_ANSWER_GUESS}", "abstain"

    def render(self) -> str | None:
        """The inner environment's render."""
        return self.env.render()

    def close(self) -> None:
        """Close the inner environment."""
        self.env.close()

    def _index(self, action: Any) -> int:
        if isinstance(action, np.ndarray) and action.shape == ():
            action = action.item()
        if isinstance(action, bool) or not isinstance(action, int | np.integer):
            raise TypeError(f"action must be an int index into {self.action_space}, "
                            f"got {action!r}")
        return int(action)

    def _wrap(self, obs: dict[str, Any], info: dict[str, Any], *, utterance: str | None,
              source: str | None):
        self._exam_mask = obs["exam_mask"].copy()
        self._text = obs["text"]
        mask = self.action_mask()
        info["action_mask"] = mask.copy()
        info["utterance"] = utterance
        info["answer_source"] = source
        return {**obs, "action_mask": mask}, info


def _egip(env: gym.Env) -> EGIPEnv:
    """The :class:`EGIPEnv` under ``env``, checking that its wrappers keep the EGIP
    observation (docs/learning.md).

    Raises:
        ValueError: not an EGIPEnv (bare or wrapped), or an observation-changing wrapper.
    """
    inner = getattr(env, "unwrapped", None)
    if not isinstance(inner, EGIPEnv):
        around = "" if inner is env or inner is None else f" around {type(inner).__name__}"
        raise ValueError(f"env must be an EGIPEnv, bare or wrapped (e.g. "
                         f"gym.make('EGIP-MedQA-v0')); got {type(env).__name__}{around}")
    if env.observation_space != inner.observation_space:
        raise ValueError(f"env: its wrappers change the EGIP observation space to "
                         f"{env.observation_space}; MenuActionEnv needs the text and "
                         "exam_mask observation")
    return inner
