"""A finite doctor action set for classic RL baselines: menu indices and answer slots.

:class:`MenuActionEnv` turns the doctor's text action into ``Discrete(max_exams + Q + S)``
with the canonical ``action_mask`` (gym-pettingzoo-conventions section 1.3). Index
layout (Q >= 1 fixed questions, S >= 1 answer slots):

=========================================  ============================================
index                                      utterance sent to the EGIP environment
=========================================  ============================================
``i`` in ``0 .. max_exams-1``              ``REQUEST TEST: <id of catalog entry i>``
                                           (slot ``i`` is ``exam_mask[i]``)
``max_exams + q``, ``q < Q``               fixed history question ``questions[q]``
``max_exams + Q + k``, ``k < S``           answer slot ``k`` (decision phase)
=========================================  ============================================

Answer slots. With candidate labels K, slot ``k`` answers ``DIAGNOSIS READY: K[k]``
(valid for ``k < len(K)``; ``info["answer_source"] == "candidate"``). Without K there is
one answer action, slot 0, "answer from the evidence": the diagnosis a recorded result
names ("consistent with X", the scripted doctor's
:func:`~clinenv.agents.scripted_doctor.named_diagnosis`; ``answer_source ==
"evidence"``), else the abstention :data:`~clinenv.agents.scripted_doctor.NO_ANSWER_GUESS`
(scored unscored; ``answer_source == "abstain"``). ``answer_source`` is ``None`` in
every step that sends no answer slot.

An ``"evidence"`` answer copies a record that names the diagnosis: report cases with
``case.flags.target_in_records`` apart (docs/environments.md).

Mask. In the acquisition phase the valid actions are the unrequested catalog entries
shown in the mask (all zero when ``show_menu=False``) and the Q questions (always valid,
so the mask has at least one 1); in the decision phase only the valid answer slots (at
least one). Once the episode has ended (``terminated``) the mask is all zero: nothing is
valid until ``reset``. A masked (invalid) action or an index outside the space sends the
empty utterance: interface feedback counted in ``info["invalid_actions"]`` during
acquisition, no answer ("unscored") in the decision phase. It never raises.

The observation is the EGIP Dict plus ``action_mask`` (``Box(0, 1, (n,), int8)``); the
mask is also ``info["action_mask"]`` (a separate array), ``info["utterance"]`` is the
text that was sent and ``info["answer_source"]`` as above. Registered as
``EGIP-<Dataset>-Menu-v0``; this class is a ``gymnasium.Env`` over an inner
:class:`~clinenv.env.EGIPEnv`, not a ``gym.Wrapper``, so that ``gym.make(id).unwrapped``
is the Discrete environment that ``check_env`` must see.
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
    """EGIP with a Discrete doctor action and ``action_mask``; see the module docstring.

    Args:
        env: an existing :class:`~clinenv.env.EGIPEnv` to drive, bare or wrapped (e.g.
            ``gym.make("EGIP-MedQA-v0")``: steps go through its wrappers, the episode
            state is read from ``env.unwrapped``); ``None`` builds one from
            ``env_kwargs``.
        questions: the fixed history questions (Q >= 1 non-empty strings); default the
            scripted doctor's five.
        n_answer_slots: S; default the largest K in the case pool, at least 1.
        **env_kwargs: :class:`~clinenv.env.EGIPEnv` arguments (only without ``env``).

    Raises:
        ValueError: ``env`` together with ``env_kwargs``; an ``env`` whose ``unwrapped``
            is not an ``EGIPEnv`` or whose wrappers change the observation space; no
            question or an empty one; ``n_answer_slots < 1``.
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
        """Send the utterance of ``action`` (see the module docstring); never raises on
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
        """``(utterance, answer_source)`` of a valid ``index`` (module docstring)."""
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
    observation (module docstring).

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
